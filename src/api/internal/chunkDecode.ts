/**
 * A fast decoder of `ChatCompletionChunk` (../ChatCompletion.ts), the schema a streamed completion decodes once
 * per event: it builds the same value the schema gives (its keys in the schema's order, keys it does not name
 * dropped, the usage counts' defaults applied), in one pass, and declines (`undefined`) on anything it is not
 * sure of, which the caller then hands to the schema, so that every failure is the schema's own. Mirrors the
 * schemas `ChatCompletionChunk`, `ChunkChoice`, `Delta`, `DeltaToolCall`, `ChoiceLogprobs` and `Usage`: keep
 * them in step (a property test compares the two).
 *
 * @internal
 */
import type { ChatCompletionChunk } from "../ChatCompletion.js"
import {
  has,
  isIntArray,
  isNullableInt,
  isNullableString,
  isRecord,
  isTokenLogprobArray,
  optional,
  type Record_
} from "./fastPath.js"

/** Declined: the value is left to the schema. */
const NO: unique symbol = Symbol("declined")
type Out<A> = A | typeof NO

const toolFunction = (u: unknown): Out<unknown> => {
  if (u === null || u === undefined) return u
  if (!isRecord(u)) return NO
  const out: Record_ = {}
  if (!optional(u, out, "name", isNullableString) || !optional(u, out, "arguments", isNullableString)) return NO
  return out
}

const toolCall = (u: unknown): Out<Record_> => {
  if (!isRecord(u) || !Number.isSafeInteger(u.index)) return NO
  const out: Record_ = { index: u.index }
  if (!optional(u, out, "id", isNullableString)) return NO
  if (!optional(u, out, "type", (t) => t === null || t === undefined || t === "function")) return NO
  if (has(u, "function")) {
    const f = toolFunction(u.function)
    if (f === NO) return NO
    out.function = f
  }
  return out
}

const delta = (u: unknown): Out<Record_> => {
  if (!isRecord(u)) return NO
  const out: Record_ = {}
  if (
    !optional(u, out, "role", isNullableString) ||
    !optional(u, out, "content", isNullableString) ||
    !optional(u, out, "reasoning", isNullableString) ||
    !optional(u, out, "reasoning_content", isNullableString)
  ) {
    return NO
  }
  if (has(u, "tool_calls")) {
    const calls = u.tool_calls
    if (calls === undefined) out.tool_calls = undefined
    else {
      if (!Array.isArray(calls)) return NO
      const decoded: Array<Record_> = []
      for (let i = 0; i < calls.length; i++) {
        const call = toolCall(calls[i])
        if (call === NO) return NO
        decoded.push(call)
      }
      out.tool_calls = decoded
    }
  }
  return out
}

const isNullableLogprobs = (u: unknown) => u === null || u === undefined || isTokenLogprobArray(u)

const logprobs = (u: unknown): Out<unknown> => {
  if (u === null || u === undefined) return u
  if (!isRecord(u)) return NO
  const out: Record_ = {}
  if (!optional(u, out, "content", isNullableLogprobs) || !optional(u, out, "refusal", isNullableLogprobs)) return NO
  return out
}

const choice = (u: unknown): Out<Record_> => {
  if (!isRecord(u) || !Number.isSafeInteger(u.index)) return NO
  const d = delta(u.delta)
  if (d === NO) return NO
  const out: Record_ = { index: u.index, delta: d }
  if (has(u, "logprobs")) {
    const l = logprobs(u.logprobs)
    if (l === NO) return NO
    out.logprobs = l
  }
  if (!optional(u, out, "finish_reason", isNullableString)) return NO
  if (!optional(u, out, "stop_reason", (s) => isNullableInt(s) || typeof s === "string")) return NO
  if (!optional(u, out, "token_ids", (t) => t === null || t === undefined || isIntArray(t))) return NO
  return out
}

/** A usage count: absent or null reads as 0 (`optionalWith(Int, { default, nullable })`). */
const count = (u: Record_, key: string): number | typeof NO => {
  if (!has(u, key) || u[key] === null) return 0
  const value = u[key]
  return Number.isSafeInteger(value) ? (value as number) : NO
}

const usage = (u: unknown): Out<unknown> => {
  if (u === null || u === undefined) return u
  if (!isRecord(u)) return NO
  const prompt = count(u, "prompt_tokens")
  const completion = count(u, "completion_tokens")
  const total = count(u, "total_tokens")
  if (prompt === NO || completion === NO || total === NO) return NO
  const out: Record_ = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: total }
  if (has(u, "prompt_tokens_details")) {
    const details = u.prompt_tokens_details
    if (details === null || details === undefined) out.prompt_tokens_details = details
    else {
      if (!isRecord(details)) return NO
      const d: Record_ = {}
      if (!optional(details, d, "cached_tokens", isNullableInt)) return NO
      out.prompt_tokens_details = d
    }
  }
  return out
}

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
  const choices: Array<Record_> = []
  for (let i = 0; i < u.choices.length; i++) {
    const c = choice(u.choices[i])
    if (c === NO) return undefined
    choices.push(c)
  }
  const out: Record_ = { id: u.id, object: u.object, created: u.created, model: u.model, choices }
  if (has(u, "usage")) {
    const decoded = usage(u.usage)
    if (decoded === NO) return undefined
    out.usage = decoded
  }
  if (!optional(u, out, "prompt_token_ids", (t) => t === null || t === undefined || isIntArray(t))) return undefined
  return out as unknown as ChatCompletionChunk
}
