/**
 * The judge's long implementation (see `Reward.judge`): the prompt built from a group's trajectories (their
 * longest common prefix sent once, each trajectory's rest labelled `trajectory <i>`), the JSON schema of the
 * answer (an object keyed by those labels, so a schema-constrained decoder writes every id exactly once, in
 * order), and the parsing and validation of an answer into one verdict per trajectory.
 *
 * The schema keeps to the JSON-Schema subset the embedded engine can constrain (`type`, `properties`,
 * `required`, `enum`, `maxLength`, annotations): it has no `minimum`/`maximum`, so the score's range is said in
 * a `description` and checked here (a score outside it makes the answer malformed, and the judge asks again).
 */
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type { ResponseFormat } from "../../api/ChatCompletion.js"
import type { Message } from "../../api/ChatMessage.js"
import { contentText } from "../../api/ChatMessage.js"
import type { JsonObject } from "../../api/Json.js"
import type { MessageOrChoice } from "../../api/Trajectory.js"
import { isChoice } from "../../api/Trajectory.js"

/** What the answer must look like. */
export interface Shape {
  /** The labels of the trajectories, in order (`trajectory 1`, ...). */
  readonly labels: ReadonlyArray<string>
  /** The lowest and highest score allowed. */
  readonly min: number
  readonly max: number
  /** The only scores allowed, when the scale is discrete. */
  readonly levels: ReadonlyArray<number> | undefined
  /** Whether each verdict carries an explanation (written before its score). */
  readonly explain: boolean
  /** The longest explanation allowed, if bounded. */
  readonly maxExplanationLength: number | undefined
}

/** The judge's verdict on one trajectory. */
export interface Verdict {
  readonly label: string
  readonly score: number
  readonly explanation: string | undefined
}

/** The label of the trajectory at `index` (0-based) of a group. */
export const label = (index: number): string => `trajectory ${index + 1}`

type ToolCallLike = {
  readonly id?: unknown
  readonly function?: { readonly name?: unknown; readonly arguments?: unknown } | undefined
  readonly custom?: { readonly name?: unknown; readonly input?: unknown } | undefined
}

const toolCalls = (calls: unknown): string =>
  Array.isArray(calls)
    ? (calls as ReadonlyArray<ToolCallLike>)
        .map((call) => {
          const name = call.function?.name ?? call.custom?.name ?? "?"
          const args = call.function?.arguments ?? call.custom?.input ?? ""
          return `\n(calls ${String(name)} with ${String(args)})`
        })
        .join("")
    : ""

/** One entry of `messages_and_choices` as the judge reads it: `role: text`, tool calls after the text. */
export const render = (entry: MessageOrChoice): string => {
  if (isChoice(entry)) {
    const message = entry.message
    const text = message.content ?? message.refusal ?? ""
    return `assistant: ${text}${toolCalls(message.tool_calls)}`
  }
  const message = entry as {
    readonly role: string
    readonly content?: unknown
    readonly name?: unknown
    readonly tool_call_id?: unknown
    readonly tool_calls?: unknown
  }
  const who =
    message.role === "tool" && typeof message.tool_call_id === "string"
      ? `tool (${message.tool_call_id})`
      : typeof message.name === "string" && message.role !== "assistant"
        ? `${message.role} (${message.name})`
        : message.role
  return `${who}: ${contentText(message.content)}${toolCalls(message.tool_calls)}`
}

/**
 * The rendered conversations of a group split into the longest prefix they all share and each one's rest.
 * A group of one has no shared prefix (its whole conversation is its rest).
 */
export const split = (
  conversations: ReadonlyArray<ReadonlyArray<MessageOrChoice>>
): { readonly prefix: ReadonlyArray<string>; readonly rests: ReadonlyArray<ReadonlyArray<string>> } => {
  const rendered = conversations.map((entries) => entries.map(render))
  let shared = 0
  if (rendered.length > 1) {
    const first = rendered[0]!
    const shortest = Math.min(...rendered.map((r) => r.length))
    while (shared < shortest && rendered.every((r) => r[shared] === first[shared])) shared++
  }
  return { prefix: rendered[0]?.slice(0, shared) ?? [], rests: rendered.map((r) => r.slice(shared)) }
}

const scale = (shape: Shape): string =>
  shape.levels === undefined
    ? `from ${shape.min} to ${shape.max}`
    : `with one of ${shape.levels.map((level) => String(level)).join(", ")}`

/** The judge's messages: the rubric and the task (system), then the shared context and the labelled rests. */
export const prompt = (
  rubric: string,
  conversations: ReadonlyArray<ReadonlyArray<MessageOrChoice>>,
  shape: Shape
): ReadonlyArray<Message> => {
  const { prefix, rests } = split(conversations)
  const example = JSON.stringify({
    [label(0)]: shape.explain ? { explanation: "...", score: shape.levels?.[0] ?? shape.min } : { score: shape.min }
  })
  const system = [
    `Score each trajectory by the rubric, ${scale(shape)} (higher is better).`,
    `Rubric: ${rubric}`,
    `Answer in JSON, one entry per trajectory: ${example.slice(0, -1)}, ...}`
  ].join("\n")
  const blocks: Array<string> = []
  if (prefix.length > 0) blocks.push(`Shared context of all trajectories:\n${prefix.join("\n")}`)
  rests.forEach((rest, i) => {
    blocks.push(`${label(i)}:\n${rest.length === 0 ? "(nothing after the shared context)" : rest.join("\n")}`)
  })
  return [
    { role: "system", content: system },
    { role: "user", content: blocks.join("\n\n") }
  ]
}

/** The `response_format` asking for one verdict per label. */
export const responseFormat = (shape: Shape): ResponseFormat => {
  const score: JsonObject =
    shape.levels === undefined
      ? { type: "number", description: `from ${shape.min} to ${shape.max}` }
      : { type: "number", enum: [...shape.levels] }
  const explanation: JsonObject = {
    type: "string",
    ...(shape.maxExplanationLength === undefined ? {} : { maxLength: shape.maxExplanationLength })
  }
  const verdict: JsonObject = {
    type: "object",
    properties: shape.explain ? { explanation, score } : { score },
    required: shape.explain ? ["explanation", "score"] : ["score"],
    additionalProperties: false
  }
  return {
    type: "json_schema",
    json_schema: {
      name: "judgement",
      schema: {
        type: "object",
        properties: Object.fromEntries(shape.labels.map((l) => [l, verdict])),
        required: [...shape.labels],
        additionalProperties: false
      },
      strict: true
    }
  }
}

const VerdictFields = Schema.Struct({ explanation: Schema.optional(Schema.String), score: Schema.Finite })

const answerSchema = (labels: ReadonlyArray<string>) =>
  Schema.Struct(Object.fromEntries(labels.map((l) => [l, VerdictFields])) as Record<string, typeof VerdictFields>)

/** Removes a Markdown code fence around an answer, as chat models sometimes add. */
const unfence = (text: string): string => {
  const fenced = /^```[a-zA-Z]*\s*\n([\s\S]*?)\n?```\s*$/.exec(text.trim())
  return fenced === null ? text.trim() : fenced[1]!
}

/**
 * Parses and checks an answer: JSON, an object with exactly one `{explanation?, score}` per label (no other
 * key), every score finite and within the range (and one of the levels, if any). The verdicts in label order,
 * or what is wrong with the answer.
 */
export const parse = (text: string, shape: Shape): Either.Either<ReadonlyArray<Verdict>, string> => {
  let json: unknown
  try {
    json = JSON.parse(unfence(text))
  } catch (cause) {
    return Either.left(`the answer is not JSON (${cause instanceof Error ? cause.message : String(cause)})`)
  }
  if (json === null || typeof json !== "object" || Array.isArray(json)) {
    return Either.left(`the answer is not a JSON object with one entry per trajectory`)
  }
  const decoded = Schema.decodeUnknownEither(answerSchema(shape.labels), { errors: "all", onExcessProperty: "error" })(
    json
  )
  if (Either.isLeft(decoded)) {
    const issues = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)
    return Either.left(
      issues
        .map((issue) => `${issue.path.length === 0 ? "" : `${issue.path.map(String).join(".")}: `}${issue.message}`)
        .join("; ")
    )
  }
  const problems: Array<string> = []
  const verdicts = shape.labels.map((l): Verdict => {
    const fields = decoded.right[l]!
    if (shape.levels !== undefined) {
      if (!shape.levels.includes(fields.score)) {
        problems.push(`${l}: the score ${fields.score} is not one of ${shape.levels.join(", ")}`)
      }
    } else if (fields.score < shape.min || fields.score > shape.max) {
      problems.push(`${l}: the score ${fields.score} is not within ${shape.min} to ${shape.max}`)
    }
    return { label: l, score: fields.score, explanation: fields.explanation }
  })
  return problems.length === 0 ? Either.right(verdicts) : Either.left(problems.join("; "))
}
