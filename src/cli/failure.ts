/**
 * How the command fails: a refused invocation (`Usage`, exit code 2) or a run-time failure (exit code 1),
 * each rendered once, at the edge, as one plain sentence on stderr; the cause in full only with `--verbose`.
 *
 * @since 0.1.0
 */
import type * as HelpDoc from "@effect/cli/HelpDoc"
import type * as Span from "@effect/cli/HelpDoc/Span"
import * as ValidationError from "@effect/cli/ValidationError"
import * as Cause from "effect/Cause"
import * as Data from "effect/Data"
import * as Option from "effect/Option"
import { ApiError } from "../client/ApiError.js"

/** A failure of the command the user can act on: what went wrong and what to do, in one sentence. */
export class CliFailure extends Data.TaggedError("CliFailure")<{
  /** `Usage`: the invocation was refused (exit code 2); `Failed`: it ran and failed (exit code 1). */
  readonly kind: "Usage" | "Failed"
  /** The sentence shown. */
  readonly sentence: string
}> {
  override get message(): string {
    return this.sentence
  }
}

/** A refused invocation (exit code 2). */
export const usage = (sentence: string) => new CliFailure({ kind: "Usage", sentence })

/** A run-time failure (exit code 1). */
export const failed = (sentence: string) => new CliFailure({ kind: "Failed", sentence })

/** What to do after an `ApiError`, by its reason; `undefined` when the sentence says enough. */
const hint = (error: ApiError): string | undefined => {
  switch (error.reason) {
    case "Unauthorized":
      return "check WANDB_API_KEY (for the embedded backend: the key `effect-rl serve` printed)"
    case "Transport":
    case "Timeout":
      return "check the service URL (EFFECT_RL_TRAINING_URL, EFFECT_RL_INFERENCE_URL) and that it is up"
    case "RateLimited":
    case "ServerError":
      return "try again later"
    default:
      return undefined
  }
}

/** An `ApiError` as a sentence: the call, the status, what the service said, what to do. */
export const describeApiError = (error: ApiError): string => {
  const status = error.status === undefined ? "" : ` (${error.status})`
  const what = hint(error)
  return `${error.method} ${error.path} failed${status}: ${error.description}${what === undefined ? "" : `; ${what}`}`
}

/** The message of anything else that failed (`ServeError`, `PlatformError`, `ConfigError`, an `Error`). */
const messageOf = (error: unknown): string => {
  if (error instanceof Error) {
    const cause = (error as { readonly cause?: unknown }).cause
    const inner = cause instanceof Error && cause.message !== "" && !error.message.includes(cause.message)
    return inner ? `${error.message}: ${cause.message}` : error.message
  }
  return String(error)
}

const spanText = (span: Span.Span): string => {
  switch (span._tag) {
    case "Text":
    case "URI":
      return span.value
    case "Sequence":
      return spanText(span.left) + spanText(span.right)
    default:
      return spanText(span.value)
  }
}

/** A help document's words, without styling, on one line. */
export const textOf = (doc: HelpDoc.HelpDoc): string => {
  switch (doc._tag) {
    case "Empty":
      return ""
    case "Header":
    case "Paragraph":
      return spanText(doc.value)
    case "DescriptionList":
      return doc.definitions.map(([span, inner]) => `${spanText(span)}: ${textOf(inner)}`).join("; ")
    case "Enumeration":
      return doc.elements.map(textOf).join("; ")
    case "Sequence":
      return [textOf(doc.left), textOf(doc.right)].filter((text) => text !== "").join(" ")
  }
}

/** @effect/cli's wording of a refused invocation, where it has a plainer one here. */
const REWORDED: ReadonlyArray<readonly [RegExp, string]> = [
  [/^Expected to find option: '(.+)'$/, "$1 is required"],
  [/^Received unknown argument: '(.*)'$/, "unexpected argument '$1'"],
  [/^Path '(.*)' must exist$/, "'$1' does not exist"],
  [/^Expected path '(.*)' to be a (file|directory)$/, "'$1' is not a $2"],
  [/^Missing argument (<.+>)$/, "$1 is required"]
]

/** What @effect/cli said when it refused the invocation, as one line (without the help it may append). */
export const parserMessage = (error: ValidationError.ValidationError): string => {
  const text = textOf(error.error).replace(/\s+/g, " ").trim()
  const [pattern, replacement] = REWORDED.find(([pattern]) => pattern.test(text)) ?? []
  return pattern === undefined ? text : text.replace(pattern, replacement!)
}

/** The exit code and the sentence of a command's failure (`undefined` for an interruption: Ctrl-C is no error). */
export const render = (
  command: string,
  cause: Cause.Cause<unknown>
): { readonly exitCode: number; readonly sentence: string | undefined } => {
  if (Cause.isInterruptedOnly(cause)) return { exitCode: 130, sentence: undefined }
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) {
    const error = failure.value
    // An invocation @effect/cli refused (which it does not print: see main.ts).
    if (ValidationError.isValidationError(error))
      return { exitCode: 2, sentence: `${command}: ${parserMessage(error)}` }
    if (error instanceof CliFailure) {
      return { exitCode: error.kind === "Usage" ? 2 : 1, sentence: `${command}: ${error.sentence}` }
    }
    if (error instanceof ApiError) return { exitCode: 1, sentence: `${command}: ${describeApiError(error)}` }
    return { exitCode: 1, sentence: `${command}: ${messageOf(error)}` }
  }
  const defect = Cause.dieOption(cause)
  const message = Option.isSome(defect) ? messageOf(defect.value) : "failed"
  return { exitCode: 1, sentence: `${command}: internal error: ${message} (run again with --verbose for details)` }
}
