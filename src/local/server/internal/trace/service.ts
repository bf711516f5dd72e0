/**
 * The trace surface's `/health` and `/server_info`. Being built: answers 404 until then.
 */
import * as Effect from "effect/Effect"
import { NotFound } from "../../../../api/TraceError.js"

const notYet = Effect.fail(new NotFound({ reason: "Not served by this backend yet" }))

/** `GET /health` */
export const traceHealth = () => notYet
/** `GET /server_info` */
export const serverInfo = () => notYet
