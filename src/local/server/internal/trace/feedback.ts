/**
 * The feedback of the trace surface (create, query, purge, replace). Being built: every operation answers 404
 * until then.
 */
import * as Effect from "effect/Effect"
import { NotFound } from "../../../../api/TraceError.js"

const notYet = Effect.fail(new NotFound({ reason: "Feedback is not served by this backend yet" }))

/** `POST /feedback/create` */
export const feedbackCreate = () => notYet
/** `POST /feedback/query` */
export const feedbackQuery = () => notYet
/** `POST /feedback/purge` */
export const feedbackPurge = () => notYet
/** `POST /feedback/replace` */
export const feedbackReplace = () => notYet
