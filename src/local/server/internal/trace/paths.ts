/**
 * The paths of the trace surface (every endpoint of `TraceApi`, served or not yet), for the edge to know which
 * requests may authenticate with HTTP Basic as the trace service's SDKs do.
 */
import { TraceApi } from "../../../../api/TraceApi.js"
import { routes } from "../validate.js"

const patterns = routes(TraceApi).map((route) => route.pattern)

/** Whether a request path belongs to the trace surface. */
export const isTracePath = (pathname: string): boolean => patterns.some((pattern) => pattern.test(pathname))
