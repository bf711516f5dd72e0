/**
 * A fast decoder of the chat-completions response, which every completion crosses twice (the server encodes it,
 * the client decodes it): it builds the value `ChatCompletion` in ../ChatCompletion.ts gives (keys in the schema's
 * order, keys it does not name dropped, the usage counts' defaults applied when decoding), in one pass, and
 * declines on anything it is not sure of, which then goes to the schema (see `withFastCodec`), so that every
 * failure is the schema's own. It takes every field but `annotations`, `audio` and `prompt_logprobs` (taken when
 * null). Token ids and logprob entries are kept as given, as their schemas' fast paths keep them.
 *
 * Mirrors `ChatCompletion`, `Choice`, `ResponseMessage`, `ResponseToolCall`, `ChoiceLogprobs` and `Usage`: keep
 * them in step (property tests compare the two).
 *
 * @internal
 */
import { functionCall, nullishFunctionCall } from "./chatRequestFastPath.js"
import {
  DECLINED,
  type Declinable,
  type Decoder,
  decodeArray,
  has,
  isInt,
  isIntArray,
  isJsonObject,
  isNullableString,
  isNullish,
  isRecord,
  isString,
  isTokenLogprobArray,
  nullishOr,
  nullishOrDecode,
  optional,
  optionalDecoded,
  type Record_,
  undefinedOr
} from "./fastPath.js"

const responseToolCall: Decoder = (u) => {
  if (!isRecord(u)) return DECLINED
  const out: Record_ = {}
  if (!optional(u, out, "id", undefinedOr(isString)) || u.type !== "function") return DECLINED
  out.type = "function"
  const f = functionCall(u.function)
  if (f === DECLINED) return DECLINED
  out.function = f
  return out
}

/** A response message's `tool_calls`: nullish, or the calls. */
const responseToolCalls: Decoder = nullishOrDecode((c) => decodeArray(c, responseToolCall))

const responseMessage = (u: unknown): Declinable<Record_> => {
  if (!isRecord(u) || typeof u.role !== "string") return DECLINED
  const out: Record_ = { role: u.role }
  if (
    !optional(u, out, "content", isNullableString) ||
    !optional(u, out, "refusal", isNullableString) ||
    !optional(u, out, "annotations", isNullish) ||
    !optional(u, out, "audio", isNullish) ||
    !optionalDecoded(u, out, "function_call", nullishFunctionCall) ||
    !optionalDecoded(u, out, "tool_calls", responseToolCalls) ||
    !optional(u, out, "reasoning", isNullableString) ||
    !optional(u, out, "reasoning_content", isNullableString)
  ) {
    return DECLINED
  }
  return out
}

const isNullableLogprobs = nullishOr((u) => isTokenLogprobArray(u))

/** `ChoiceLogprobs`, or null or undefined (a whole completion's choices and a chunk's share it). */
export const choiceLogprobs: Decoder = nullishOrDecode((u) => {
  if (!isRecord(u)) return DECLINED
  const out: Record_ = {}
  return optional(u, out, "content", isNullableLogprobs) && optional(u, out, "refusal", isNullableLogprobs)
    ? out
    : DECLINED
})

/** A `Choice` (shared with the trajectories' entries, `entry` in ./trajectoryFastPath.ts). */
export const choice: Decoder = (u) => {
  if (!isRecord(u) || !isInt(u.index)) return DECLINED
  const m = responseMessage(u.message)
  if (m === DECLINED) return DECLINED
  const out: Record_ = { index: u.index, message: m }
  if (!optionalDecoded(u, out, "logprobs", choiceLogprobs)) return DECLINED
  // Required, and null is a value.
  if (u.finish_reason !== null && typeof u.finish_reason !== "string") return DECLINED
  out.finish_reason = u.finish_reason
  if (
    !optional(
      u,
      out,
      "stop_reason",
      nullishOr((s) => isInt(s) || typeof s === "string")
    ) ||
    !optional(u, out, "token_ids", nullishOr(isIntArray))
  ) {
    return DECLINED
  }
  return out
}

/**
 * A usage count. Decoding, absent, `null` and `undefined` read as 0 (`optionalWith(Int, { default, nullable })`);
 * encoding, the count is there.
 */
const count = (u: Record_, key: string, decoding: boolean): number | typeof DECLINED => {
  const value = u[key]
  if (decoding && (value === null || value === undefined || !has(u, key))) return 0
  return isInt(value) ? (value as number) : DECLINED
}

/**
 * `Usage` as it decodes (`decoding`: the counts default to 0) or encodes; a whole completion's and a chunk's
 * (which may be null or absent too).
 */
export const usage = (u: unknown, decoding: boolean): Declinable<Record_> => {
  if (!isRecord(u)) return DECLINED
  const prompt = count(u, "prompt_tokens", decoding)
  const completion = count(u, "completion_tokens", decoding)
  const total = count(u, "total_tokens", decoding)
  if (prompt === DECLINED || completion === DECLINED || total === DECLINED) return DECLINED
  const out: Record_ = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: total }
  if (has(u, "prompt_tokens_details")) {
    const details = u.prompt_tokens_details
    if (details === null || details === undefined) out.prompt_tokens_details = details
    else {
      if (!isRecord(details)) return DECLINED
      const d: Record_ = {}
      if (!optional(details, d, "cached_tokens", nullishOr(isInt))) return DECLINED
      out.prompt_tokens_details = d
    }
  }
  return out
}

const isServiceTier = (u: unknown): boolean =>
  u === "auto" || u === "default" || u === "flex" || u === "scale" || u === "priority"

/**
 * The completion as `ChatCompletion` decodes (`decoding`: from the wire, usage counts defaulting to 0) or
 * encodes (from its type, every count there) it, or `undefined` when this decoder is not sure.
 */
export const chatCompletion = (u: unknown, decoding: boolean): Record_ | undefined => {
  if (!isRecord(u)) return undefined
  const out: Record_ = {}
  if (
    !optional(u, out, "id", undefinedOr(isString)) ||
    !optional(
      u,
      out,
      "object",
      undefinedOr((o) => o === "chat.completion")
    ) ||
    !optional(u, out, "created", undefinedOr(isInt)) ||
    typeof u.model !== "string"
  ) {
    return undefined
  }
  out.model = u.model
  const choices = decodeArray(u.choices, choice)
  if (choices === DECLINED) return undefined
  out.choices = choices
  const used = usage(u.usage, decoding)
  if (used === DECLINED) return undefined
  out.usage = used
  if (
    !optional(u, out, "service_tier", nullishOr(isServiceTier)) ||
    !optional(u, out, "system_fingerprint", isNullableString) ||
    !optional(u, out, "prompt_logprobs", isNullish) ||
    !optional(u, out, "prompt_token_ids", nullishOr(isIntArray)) ||
    !optional(u, out, "kv_transfer_params", nullishOr(isJsonObject))
  ) {
    return undefined
  }
  return out
}
