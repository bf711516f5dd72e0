/**
 * A fast decoder of `ChatCompletionChunk` (../ChatCompletion.ts), the schema a streamed completion decodes once
 * per event: it builds the same value the schema gives (its keys in the schema's order, keys it does not name
 * dropped, the usage counts' defaults applied), in one pass, and declines (`undefined`) on anything it is not
 * sure of, which the caller then hands to the schema, so that every failure is the schema's own. Mirrors the
 * schemas `ChatCompletionChunk`, `ChunkChoice`, `Delta` and `DeltaToolCall`: keep them in step (a property test
 * compares the two). `ChoiceLogprobs` and `Usage` are the whole completion's decoders (chatCompletionFastPath.ts).
 *
 * @internal
 */
import type { ChatCompletionChunk } from "../ChatCompletion.js"
import { choiceLogprobs, usage } from "./chatCompletionFastPath.js"
import {
  DECLINED,
  type Declinable,
  decodeArray,
  isIntArray,
  isNullableInt,
  isNullableString,
  isRecord,
  nullishOrDecode,
  optional,
  optionalDecoded,
  type Record_,
  undefinedOrDecode
} from "./fastPath.js"

const toolFunction = nullishOrDecode((u) => {
  if (!isRecord(u)) return DECLINED
  const out: Record_ = {}
  if (!optional(u, out, "name", isNullableString) || !optional(u, out, "arguments", isNullableString)) {
    return DECLINED
  }
  return out
})

const toolCall = (u: unknown): Declinable<Record_> => {
  if (!isRecord(u) || !Number.isSafeInteger(u.index)) return DECLINED
  const out: Record_ = { index: u.index }
  if (!optional(u, out, "id", isNullableString)) return DECLINED
  if (!optional(u, out, "type", (t) => t === null || t === undefined || t === "function")) return DECLINED
  return optionalDecoded(u, out, "function", toolFunction) ? out : DECLINED
}

/** A delta's `tool_calls`: `optional(Array)`, so undefined is kept and null declined. */
const toolCalls = undefinedOrDecode((c) => decodeArray(c, toolCall))

const delta = (u: unknown): Declinable<Record_> => {
  if (!isRecord(u)) return DECLINED
  const out: Record_ = {}
  if (
    !optional(u, out, "role", isNullableString) ||
    !optional(u, out, "content", isNullableString) ||
    !optional(u, out, "refusal", isNullableString) ||
    !optional(u, out, "reasoning", isNullableString) ||
    !optional(u, out, "reasoning_content", isNullableString)
  ) {
    return DECLINED
  }
  return optionalDecoded(u, out, "tool_calls", toolCalls) ? out : DECLINED
}

const choice = (u: unknown): Declinable<Record_> => {
  if (!isRecord(u) || !Number.isSafeInteger(u.index)) return DECLINED
  const d = delta(u.delta)
  if (d === DECLINED) return DECLINED
  const out: Record_ = { index: u.index, delta: d }
  if (!optionalDecoded(u, out, "logprobs", choiceLogprobs)) return DECLINED
  if (!optional(u, out, "finish_reason", isNullableString)) return DECLINED
  if (!optional(u, out, "stop_reason", (s) => isNullableInt(s) || typeof s === "string")) return DECLINED
  if (!optional(u, out, "token_ids", (t) => t === null || t === undefined || isIntArray(t))) return DECLINED
  return out
}

/** A chunk's `usage`: null, undefined, or the usage as it decodes. */
const chunkUsage = nullishOrDecode((u) => usage(u, true))

/**
 * The chunk the schema would decode `u` to, or `undefined` when this decoder is not sure (the schema then
 * decides, and reports any issue).
 */
export const decodeChunk = (u: unknown): ChatCompletionChunk | undefined => {
  if (
    !isRecord(u) ||
    typeof u.id !== "string" ||
    u.object !== "chat.completion.chunk" ||
    !Number.isSafeInteger(u.created) ||
    typeof u.model !== "string" ||
    !Array.isArray(u.choices)
  ) {
    return undefined
  }
  const choices = decodeArray(u.choices, choice)
  if (choices === DECLINED) return undefined
  const out: Record_ = { id: u.id, object: u.object, created: u.created, model: u.model, choices }
  if (!optionalDecoded(u, out, "usage", chunkUsage)) return undefined
  if (!optional(u, out, "prompt_token_ids", (t) => t === null || t === undefined || isIntArray(t))) return undefined
  return out as unknown as ChatCompletionChunk
}
