/**
 * The trace service's error bodies (`{"reason": ...}`, see `TraceError`) as responses. The api's builder
 * encodes every endpoint's failure with one union of all the api's error schemas, where the training
 * surface's all-optional `HTTPValidationError` would take a trace error first (and answer it as 422 `{}`);
 * so the error middleware answers these itself, with their own status.
 */
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Schema from "effect/Schema"
import { InvalidField, InvalidRequest, NotFound, TooLarge } from "../../../../api/TraceError.js"

/** The response of a trace error, or undefined when the failure is not one. */
export const traceErrorResponse = (error: unknown): HttpServerResponse.HttpServerResponse | undefined => {
  if (error instanceof InvalidRequest)
    return HttpServerResponse.unsafeJson(Schema.encodeSync(InvalidRequest)(error), { status: 400 })
  if (error instanceof InvalidField)
    return HttpServerResponse.unsafeJson(Schema.encodeSync(InvalidField)(error), { status: 403 })
  if (error instanceof NotFound)
    return HttpServerResponse.unsafeJson(Schema.encodeSync(NotFound)(error), { status: 404 })
  if (error instanceof TooLarge)
    return HttpServerResponse.unsafeJson(Schema.encodeSync(TooLarge)(error), { status: 413 })
  return undefined
}
