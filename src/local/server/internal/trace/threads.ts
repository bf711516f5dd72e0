/**
 * The threads of the trace surface (`/threads/stream_query`). Being built: answers 404 until then.
 */
import * as Effect from "effect/Effect"
import { NotFound } from "../../../../api/TraceError.js"

/** `POST /threads/stream_query` */
export const threadsStreamQuery = () =>
  Effect.fail(new NotFound({ reason: "Threads are not served by this backend yet" }))
