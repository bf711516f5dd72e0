/**
 * The costs of the trace surface (create, query, purge). Being built: every operation answers 404 until then.
 */
import * as Effect from "effect/Effect"
import { NotFound } from "../../../../api/TraceError.js"

const notYet = Effect.fail(new NotFound({ reason: "Costs are not served by this backend yet" }))

/** `POST /cost/create` */
export const costCreate = () => notYet
/** `POST /cost/query` */
export const costQuery = () => notYet
/** `POST /cost/purge` */
export const costPurge = () => notYet
