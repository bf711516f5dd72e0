/**
 * The completions of the trace surface (`/completions/create`, `/completions/create_stream`). Being built:
 * answers 404 until then.
 */
import * as Effect from "effect/Effect"
import { NotFound } from "../../../../api/TraceError.js"

const notYet = Effect.fail(new NotFound({ reason: "Completions are not served by this backend yet" }))

/** `POST /completions/create` */
export const completionsCreate = () => notYet
/** `POST /completions/create_stream` */
export const completionsCreateStream = () => notYet
