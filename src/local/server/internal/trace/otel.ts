/**
 * The OpenTelemetry export of the trace surface (`/otel/v1/traces`, `/otel/v1/trace`). Being built: answers 404
 * until then.
 */
import * as Effect from "effect/Effect"
import { NotFound } from "../../../../api/TraceError.js"

/** `POST /otel/v1/traces` and `POST /otel/v1/trace` */
export const otelExport = () => Effect.fail(new NotFound({ reason: "OTel export is not served by this backend yet" }))
