/**
 * Fast decoders of the chat-completions wire, the schemas every completion crosses four times (the client
 * encodes the request, the server decodes it; the server encodes the response, the client decodes it): each
 * builds the value its schema in ../ChatCompletion.ts gives (keys in the schema's order, keys it does not name
 * dropped, the usage counts' defaults applied when decoding), in one pass, and declines (`undefined`) on
 * anything it is not sure of, which then goes to the schema (see `withFastCodec`), so that every failure is the
 * schema's own. What they take: requests with messages of the system, developer, user, assistant and tool
 * roles (string or text-part content, function tool calls) and every field but `logit_bias`, `documents`,
 * `vllm_xargs` (taken when null) and `response_format` of type `structural_tag`; responses but
 * `annotations`, `audio` and `prompt_logprobs` (taken when null). Arrays of strings and integers, logprob
 * entries and JSON objects are kept as given, as their schemas' fast paths keep them.
 *
 * Mirrors `RequestFields` (without its cross-field check, which the caller applies), `Message` and its members,
 * `Tool`, `ToolChoice`, `ResponseFormat`, `StructuredOutputs`, `ChatCompletion`, `Choice`, `ResponseMessage`,
 * `ChoiceLogprobs` and `Usage`: keep them in step (a property test compares the two).
 *
 * @internal
 */
import { has, isIntArray, isJsonObject, isRecord, isTokenLogprobArray, optional, type Record_ } from "./fastPath.js"

/** Declined: the value is left to the schema. */
const NO: unique symbol = Symbol("declined")
type Out<A> = A | typeof NO

/** A decoder of one present value: what the schema gives for it, or {@link NO}. */
type Field = (u: unknown) => unknown

// ---------------------------------------------------------------------------------------------------------
// values (each is given a present value; `optional` keys also admit `undefined`, handled by the callers)
// ---------------------------------------------------------------------------------------------------------

const isString = (u: unknown): boolean => typeof u === "string"
const isBoolean = (u: unknown): boolean => typeof u === "boolean"
const isFiniteNumber = (u: unknown): boolean => Number.isFinite(u)
const isInt = (u: unknown): boolean => Number.isSafeInteger(u)

const isStringArray = (u: unknown): boolean => {
  if (!Array.isArray(u)) return false
  for (let i = 0; i < u.length; i++) if (typeof u[i] !== "string") return false
  return true
}

/** `Schema.optional(S)`: `undefined` or what `check` takes. */
const opt =
  (check: (u: unknown) => boolean) =>
  (u: unknown): boolean =>
    u === undefined || check(u)

/** `Schema.optional(Schema.NullOr(S))`: `undefined`, `null` or what `check` takes. */
const nullable =
  (check: (u: unknown) => boolean) =>
  (u: unknown): boolean =>
    u === undefined || u === null || check(u)

/** A decoder that keeps what `check` takes as it is. */
const keep =
  (check: (u: unknown) => boolean): Field =>
  (u) =>
    check(u) ? u : NO

/** A decoder of `Schema.optional(Schema.NullOr(S))` that builds non-null values with `build`. */
const nullableOf =
  (build: Field): Field =>
  (u) =>
    u === undefined || u === null ? u : build(u)

/** `Schema.Array(S)`: a new array of what `build` gives for each element. */
const arrayOf = (u: unknown, build: Field): Out<Array<unknown>> => {
  if (!Array.isArray(u)) return NO
  const out: Array<unknown> = new Array(u.length)
  for (let i = 0; i < u.length; i++) {
    const value = build(u[i])
    if (value === NO) return NO
    out[i] = value
  }
  return out
}

/** A function call `{name, arguments}`. */
const functionCall: Field = (u) =>
  isRecord(u) && typeof u.name === "string" && typeof u.arguments === "string"
    ? { name: u.name, arguments: u.arguments }
    : NO

// ---------------------------------------------------------------------------------------------------------
// messages
// ---------------------------------------------------------------------------------------------------------

/** A text part, or a refusal part when `refusal` (assistant content). */
const part =
  (refusal: boolean): Field =>
  (u) => {
    if (!isRecord(u)) return NO
    if (u.type === "text" && typeof u.text === "string") return { type: "text", text: u.text }
    if (refusal && u.type === "refusal" && typeof u.refusal === "string") return { type: "refusal", refusal: u.refusal }
    return NO
  }
const textPart = part(false)
const assistantPart = part(true)

/** `TextContent` (and the user's content, text parts only): a string, or text parts. */
const textContent: Field = (u) => (typeof u === "string" ? u : arrayOf(u, textPart))

/** A function tool call of an assistant message (`FunctionToolCall`). */
const functionToolCall: Field = (u) => {
  if (!isRecord(u) || typeof u.id !== "string" || u.type !== "function") return NO
  const f = functionCall(u.function)
  return f === NO ? NO : { id: u.id, type: "function", function: f }
}

const isNullableString = nullable(isString)

/** A system, developer or user message: `{role, content, name?}`. */
const textMessage = (u: Record_, role: string): Out<Record_> => {
  const content = textContent(u.content)
  if (content === NO) return NO
  const out: Record_ = { role, content }
  return optional(u, out, "name", opt(isString)) ? out : NO
}

const assistantMessage = (u: Record_): Out<Record_> => {
  const out: Record_ = { role: "assistant" }
  if (has(u, "content")) {
    const content = u.content
    if (content === undefined || content === null || typeof content === "string") out.content = content
    else {
      const parts = arrayOf(content, assistantPart)
      if (parts === NO) return NO
      out.content = parts
    }
  }
  if (
    !optional(u, out, "name", opt(isString)) ||
    !optional(u, out, "refusal", isNullableString) ||
    !optional(
      u,
      out,
      "audio",
      nullable(() => false)
    )
  ) {
    return NO
  }
  if (has(u, "function_call")) {
    const call = nullableOf(functionCall)(u.function_call)
    if (call === NO) return NO
    out.function_call = call
  }
  if (has(u, "tool_calls")) {
    const calls = u.tool_calls === undefined ? undefined : arrayOf(u.tool_calls, functionToolCall)
    if (calls === NO) return NO
    out.tool_calls = calls
  }
  if (!optional(u, out, "reasoning", isNullableString) || !optional(u, out, "reasoning_content", isNullableString)) {
    return NO
  }
  return out
}

/**
 * A message of a role the `Message` union tries first (its member with that role literal): when that member
 * takes it, the union's result is that member's. Other roles, and messages that member refuses (which the union
 * then hands to its other members), are declined.
 */
const message: Field = (u) => {
  if (!isRecord(u)) return NO
  switch (u.role) {
    case "system":
    case "developer":
    case "user":
      return textMessage(u, u.role)
    case "assistant":
      return assistantMessage(u)
    case "tool": {
      const content = textContent(u.content)
      if (content === NO || typeof u.tool_call_id !== "string") return NO
      return { role: "tool", content, tool_call_id: u.tool_call_id }
    }
    default:
      return NO
  }
}

// ---------------------------------------------------------------------------------------------------------
// request fields
// ---------------------------------------------------------------------------------------------------------

/** `FunctionDefinition`. */
const functionDefinition: Field = (u) => {
  if (!isRecord(u) || typeof u.name !== "string") return NO
  const out: Record_ = { name: u.name }
  return optional(u, out, "description", isNullableString) &&
    optional(u, out, "parameters", nullable(isJsonObject)) &&
    optional(u, out, "strict", nullable(isBoolean))
    ? out
    : NO
}

/** `Tool`: `{type: "function", function}`. */
const tool: Field = (u) => {
  if (!isRecord(u) || u.type !== "function") return NO
  const f = functionDefinition(u.function)
  return f === NO ? NO : { type: "function", function: f }
}

/** `ToolChoice`: one of its literals, or a named tool. */
const toolChoice: Field = (u) => {
  if (u === "none" || u === "auto" || u === "required") return u
  if (!isRecord(u) || !isRecord(u.function) || typeof u.function.name !== "string") return NO
  const out: Record_ = {}
  if (
    !optional(
      u,
      out,
      "type",
      opt((t) => t === "function")
    )
  )
    return NO
  out.function = { name: u.function.name }
  return out
}

/** `response_format.json_schema`: `{name, description?, schema?, strict?}`. */
const jsonSchemaFormat: Field = (u) => {
  if (!isRecord(u) || typeof u.name !== "string") return NO
  const out: Record_ = { name: u.name }
  return optional(u, out, "description", isNullableString) &&
    optional(u, out, "schema", nullable(isJsonObject)) &&
    optional(u, out, "strict", nullable(isBoolean))
    ? out
    : NO
}

/** `ResponseFormat` (the union's first member); `structural_tag` is declined. */
const responseFormat: Field = (u) => {
  if (!isRecord(u) || (u.type !== "text" && u.type !== "json_object" && u.type !== "json_schema")) return NO
  const out: Record_ = { type: u.type }
  if (has(u, "json_schema")) {
    const schema = nullableOf(jsonSchemaFormat)(u.json_schema)
    if (schema === NO) return NO
    out.json_schema = schema
  }
  return out
}

const streamOptions: Field = (u) => {
  if (!isRecord(u)) return NO
  const out: Record_ = {}
  return optional(u, out, "include_usage", nullable(isBoolean)) &&
    optional(u, out, "continuous_usage_stats", nullable(isBoolean))
    ? out
    : NO
}

/** `StructuredOutputs`: its keys, in its order, with what each takes. */
const STRUCTURED_OUTPUTS: ReadonlyArray<readonly [string, (u: unknown) => boolean]> = [
  ["json", nullable((j) => typeof j === "string" || isJsonObject(j))],
  ["regex", isNullableString],
  ["choice", nullable(isStringArray)],
  ["grammar", isNullableString],
  ["json_object", nullable(isBoolean)],
  ["disable_fallback", opt(isBoolean)],
  ["disable_any_whitespace", opt(isBoolean)],
  ["disable_additional_properties", opt(isBoolean)],
  ["whitespace_pattern", isNullableString],
  ["structural_tag", isNullableString],
  ["_backend", isNullableString],
  ["_backend_was_auto", opt(isBoolean)]
]

const structuredOutputs: Field = (u) => {
  if (!isRecord(u)) return NO
  const out: Record_ = {}
  for (let i = 0; i < STRUCTURED_OUTPUTS.length; i++) {
    const [key, check] = STRUCTURED_OUTPUTS[i]!
    if (!optional(u, out, key, check)) return NO
  }
  return out
}

const nullableKeep = (check: (u: unknown) => boolean): Field => keep(nullable(check))
const optKeep = (check: (u: unknown) => boolean): Field => keep(opt(check))
/** A key taken only when it is `null` or `undefined` (its values are left to the schema). */
const onlyNull: Field = keep(nullable(() => false))

/**
 * The optional keys of `RequestFields` after `messages`, in its order, each with its decoder. Every key of the
 * schema is here (a property test checks it), so that a key the fast path does not decode is declined, not
 * dropped.
 */
const REQUEST_FIELDS: ReadonlyArray<readonly [string, Field]> = [
  ["model", nullableKeep(isString)],
  ["frequency_penalty", nullableKeep(isFiniteNumber)],
  ["logit_bias", onlyNull],
  ["logprobs", nullableKeep(isBoolean)],
  ["top_logprobs", nullableKeep(isInt)],
  ["max_tokens", nullableKeep(isInt)],
  ["max_completion_tokens", nullableKeep(isInt)],
  ["n", nullableKeep((n) => isInt(n) && (n as number) >= 1)],
  ["presence_penalty", nullableKeep(isFiniteNumber)],
  ["response_format", nullableOf(responseFormat)],
  // Every safe integer is within the seed's int64 bounds.
  ["seed", nullableKeep(isInt)],
  ["stop", nullableKeep((s) => typeof s === "string" || isStringArray(s))],
  ["stream", nullableKeep(isBoolean)],
  ["stream_options", nullableOf(streamOptions)],
  ["temperature", nullableKeep(isFiniteNumber)],
  ["top_p", nullableKeep(isFiniteNumber)],
  ["tools", nullableOf((u) => arrayOf(u, tool))],
  ["tool_choice", nullableOf(toolChoice)],
  ["reasoning_effort", nullableKeep((r) => r === "low" || r === "medium" || r === "high")],
  ["include_reasoning", optKeep(isBoolean)],
  ["parallel_tool_calls", nullableKeep(isBoolean)],
  ["user", nullableKeep(isString)],
  ["use_beam_search", optKeep(isBoolean)],
  ["top_k", nullableKeep(isInt)],
  ["min_p", nullableKeep(isFiniteNumber)],
  ["repetition_penalty", nullableKeep(isFiniteNumber)],
  ["length_penalty", optKeep(isFiniteNumber)],
  ["stop_token_ids", nullableKeep(isIntArray)],
  ["include_stop_str_in_output", optKeep(isBoolean)],
  ["ignore_eos", optKeep(isBoolean)],
  ["min_tokens", optKeep(isInt)],
  ["skip_special_tokens", optKeep(isBoolean)],
  ["spaces_between_special_tokens", optKeep(isBoolean)],
  ["truncate_prompt_tokens", nullableKeep((t) => isInt(t) && (t as number) >= -1)],
  ["prompt_logprobs", nullableKeep(isInt)],
  ["allowed_token_ids", nullableKeep(isIntArray)],
  ["bad_words", optKeep(isStringArray)],
  ["echo", optKeep(isBoolean)],
  ["add_generation_prompt", optKeep(isBoolean)],
  ["continue_final_message", optKeep(isBoolean)],
  ["add_special_tokens", optKeep(isBoolean)],
  ["documents", onlyNull],
  ["chat_template", nullableKeep(isString)],
  ["chat_template_kwargs", nullableKeep(isJsonObject)],
  ["mm_processor_kwargs", nullableKeep(isJsonObject)],
  ["structured_outputs", nullableOf(structuredOutputs)],
  ["priority", optKeep(isInt)],
  ["request_id", optKeep(isString)],
  ["logits_processors", nullableKeep(isStringArray)],
  ["return_tokens_as_token_ids", nullableKeep(isBoolean)],
  ["return_token_ids", nullableKeep(isBoolean)],
  ["cache_salt", nullableKeep(isString)],
  ["kv_transfer_params", nullableKeep(isJsonObject)],
  ["vllm_xargs", onlyNull]
]

/** The keys {@link requestFields} decodes, in the schema's order (for the test that they are all of its keys). */
export const requestKeys: ReadonlyArray<string> = ["messages", ...REQUEST_FIELDS.map(([key]) => key)]

/**
 * The request's fields as `RequestFields` decodes (and encodes: its two sides are the same) them, or `undefined`
 * when this decoder is not sure; the checks across fields are the caller's.
 */
export const requestFields = (u: unknown): Record_ | undefined => {
  if (!isRecord(u)) return undefined
  const messages = arrayOf(u.messages, message)
  if (messages === NO) return undefined
  const out: Record_ = { messages }
  for (let i = 0; i < REQUEST_FIELDS.length; i++) {
    const [key, field] = REQUEST_FIELDS[i]!
    if (!has(u, key)) continue
    const value = field(u[key])
    if (value === NO) return undefined
    out[key] = value
  }
  return out
}

// ---------------------------------------------------------------------------------------------------------
// the response
// ---------------------------------------------------------------------------------------------------------

const responseToolCall: Field = (u) => {
  if (!isRecord(u)) return NO
  const out: Record_ = {}
  if (!optional(u, out, "id", opt(isString)) || u.type !== "function") return NO
  out.type = "function"
  const f = functionCall(u.function)
  if (f === NO) return NO
  out.function = f
  return out
}

const responseMessage = (u: unknown): Out<Record_> => {
  if (!isRecord(u) || typeof u.role !== "string") return NO
  const out: Record_ = { role: u.role }
  if (
    !optional(u, out, "content", isNullableString) ||
    !optional(u, out, "refusal", isNullableString) ||
    !optional(
      u,
      out,
      "annotations",
      nullable(() => false)
    ) ||
    !optional(
      u,
      out,
      "audio",
      nullable(() => false)
    )
  ) {
    return NO
  }
  if (has(u, "function_call")) {
    const call = nullableOf(functionCall)(u.function_call)
    if (call === NO) return NO
    out.function_call = call
  }
  if (has(u, "tool_calls")) {
    const calls = nullableOf((c) => arrayOf(c, responseToolCall))(u.tool_calls)
    if (calls === NO) return NO
    out.tool_calls = calls
  }
  if (!optional(u, out, "reasoning", isNullableString) || !optional(u, out, "reasoning_content", isNullableString)) {
    return NO
  }
  return out
}

const isNullableLogprobs = nullable((u) => isTokenLogprobArray(u))

/** `ChoiceLogprobs`, or null or undefined. */
const choiceLogprobs: Field = nullableOf((u) => {
  if (!isRecord(u)) return NO
  const out: Record_ = {}
  return optional(u, out, "content", isNullableLogprobs) && optional(u, out, "refusal", isNullableLogprobs) ? out : NO
})

const choice: Field = (u) => {
  if (!isRecord(u) || !isInt(u.index)) return NO
  const m = responseMessage(u.message)
  if (m === NO) return NO
  const out: Record_ = { index: u.index, message: m }
  if (has(u, "logprobs")) {
    const logprobs = choiceLogprobs(u.logprobs)
    if (logprobs === NO) return NO
    out.logprobs = logprobs
  }
  // Required, and null is a value.
  if (u.finish_reason !== null && typeof u.finish_reason !== "string") return NO
  out.finish_reason = u.finish_reason
  if (
    !optional(
      u,
      out,
      "stop_reason",
      nullable((s) => isInt(s) || typeof s === "string")
    ) ||
    !optional(u, out, "token_ids", nullable(isIntArray))
  ) {
    return NO
  }
  return out
}

/**
 * A usage count. Decoding, absent, `null` and `undefined` read as 0 (`optionalWith(Int, { default, nullable })`);
 * encoding, the count is there.
 */
const count = (u: Record_, key: string, decoding: boolean): number | typeof NO => {
  const value = u[key]
  if (decoding && (value === null || value === undefined || !has(u, key))) return 0
  return isInt(value) ? (value as number) : NO
}

const usage = (u: unknown, decoding: boolean): Out<Record_> => {
  if (!isRecord(u)) return NO
  const prompt = count(u, "prompt_tokens", decoding)
  const completion = count(u, "completion_tokens", decoding)
  const total = count(u, "total_tokens", decoding)
  if (prompt === NO || completion === NO || total === NO) return NO
  const out: Record_ = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: total }
  if (has(u, "prompt_tokens_details")) {
    const details = u.prompt_tokens_details
    if (details === null || details === undefined) out.prompt_tokens_details = details
    else {
      if (!isRecord(details)) return NO
      const d: Record_ = {}
      if (!optional(details, d, "cached_tokens", nullable(isInt))) return NO
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
    !optional(u, out, "id", opt(isString)) ||
    !optional(
      u,
      out,
      "object",
      opt((o) => o === "chat.completion")
    ) ||
    !optional(u, out, "created", opt(isInt)) ||
    typeof u.model !== "string"
  ) {
    return undefined
  }
  out.model = u.model
  const choices = arrayOf(u.choices, choice)
  if (choices === NO) return undefined
  out.choices = choices
  const used = usage(u.usage, decoding)
  if (used === NO) return undefined
  out.usage = used
  if (
    !optional(u, out, "service_tier", nullable(isServiceTier)) ||
    !optional(u, out, "system_fingerprint", isNullableString) ||
    !optional(
      u,
      out,
      "prompt_logprobs",
      nullable(() => false)
    ) ||
    !optional(u, out, "prompt_token_ids", nullable(isIntArray)) ||
    !optional(u, out, "kv_transfer_params", nullable(isJsonObject))
  ) {
    return undefined
  }
  return out
}
