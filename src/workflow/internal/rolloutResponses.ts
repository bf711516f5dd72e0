/**
 * The Responses API of a running rollout, translated onto its recorded chat completions (filled in by the
 * Responses work; until then every Responses route answers 404).
 */
import type { RouteContext } from "./rolloutHttp.js"
import { errorResponse } from "./rolloutHttp.js"

/** Answers a Responses-API route (`/responses`, `/responses/{id}`, `/responses/{id}/input_items`). */
export const responsesRoute = async (
  _context: RouteContext,
  method: string,
  route: string,
  _body: unknown,
  _signal: AbortSignal | undefined
): Promise<Response> => errorResponse(404, `${method} ${route} is not served yet`, "not_found_error")
