/**
 * The one error of the local engine's sampler and chat template: a request it cannot serve, told apart by
 * `kind`, naming the request field at fault in `param`. Every kind is a client error: the HTTP layer maps
 * it to status 400 with the body `{error: {message, type, param, code}}` of the convention (see
 * `errorBody`).
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"

/**
 * Why a request was refused:
 * - `BadRequest`: a field's value or a combination of fields is invalid (the template failed to render,
 *   `priority` without priority scheduling, an out-of-vocabulary token id, ...);
 * - `ContextOverflow`: the prompt and the completion do not fit in the model's context (the message contains
 *   "maximum context length", as the convention words it);
 * - `Unsupported`: a field this engine cannot honour was set (`use_beam_search`, `structured_outputs.grammar`,
 *   `logits_processors`, ...); it is refused rather than silently ignored.
 */
export type EngineErrorKind = "BadRequest" | "ContextOverflow" | "Unsupported"

/** A request the local engine refuses. */
export class EngineError extends Data.TaggedError("EngineError")<{
  /** Why it was refused. */
  readonly kind: EngineErrorKind
  /** The request field at fault (`structured_outputs.grammar`, `messages`, ...), or null. */
  readonly param: string | null
  /** A message for the caller, naming the field. */
  readonly message: string
}> {}

/** A `BadRequest` error about `param`. */
export const badRequest = (param: string | null, message: string): EngineError =>
  new EngineError({ kind: "BadRequest", param, message })

/** An `Unsupported` error: `param` was set to something this engine cannot honour. */
export const unsupported = (param: string, detail?: string): EngineError =>
  new EngineError({
    kind: "Unsupported",
    param,
    message: `${param} is not supported by this engine${detail === undefined ? "" : `: ${detail}`}`
  })

/** The error body of the convention for an engine error: status 400, type `BadRequestError`. */
export const errorBody = (
  error: EngineError
): { readonly error: { message: string; type: string; param: string | null; code: number } } => ({
  error: { message: error.message, type: "BadRequestError", param: error.param, code: 400 }
})
