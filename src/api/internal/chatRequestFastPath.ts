/**
 * A fast decoder of the chat-completions request, which every completion crosses twice (the client encodes it,
 * the server decodes it): it builds the value `RequestFields` in ../ChatCompletion.ts gives (keys in the schema's
 * order, keys it does not name dropped), in one pass, and declines on anything it is not sure of, which then goes
 * to the schema (see `withFastCodec`), so that every failure is the schema's own. It takes messages of the
 * system, developer, user, assistant and tool roles (string or text-part content, function tool calls) and every
 * field but `logit_bias`, `documents` and `vllm_xargs` (taken when null) and `response_format` of type
 * `structural_tag`. Arrays of strings and integers and JSON objects are kept as given, as their schemas' fast
 * paths keep them.
 *
 * Mirrors `RequestFields` (without its checks across fields, which the caller applies), `Message` and its
 * members, `Tool`, `ToolChoice`, `ResponseFormat` and `StructuredOutputs`: keep them in step (property tests
 * compare the two).
 *
 * @internal
 */
import {
  DECLINED,
  type Declinable,
  type Decoder,
  decodeArray,
  has,
  isBoolean,
  isFiniteNumber,
  isInt,
  isIntArray,
  isJsonObject,
  isNullableString,
  isNullish,
  isRecord,
  isString,
  isStringArray,
  keepIf,
  nullishOr,
  nullishOrDecode,
  optional,
  optionalDecoded,
  type Record_,
  undefinedOr,
  undefinedOrDecode
} from "./fastPath.js"

/** A function call `{name, arguments}` (`FunctionCall` in ../ChatMessage.ts). */
export const functionCall: Decoder = (u) =>
  isRecord(u) && typeof u.name === "string" && typeof u.arguments === "string"
    ? { name: u.name, arguments: u.arguments }
    : DECLINED

// ---------------------------------------------------------------------------------------------------------
// messages
// ---------------------------------------------------------------------------------------------------------

/** A text part, or a refusal part when `refusal` (assistant content). */
const part =
  (refusal: boolean): Decoder =>
  (u) => {
    if (!isRecord(u)) return DECLINED
    if (u.type === "text" && typeof u.text === "string") return { type: "text", text: u.text }
    if (refusal && u.type === "refusal" && typeof u.refusal === "string") return { type: "refusal", refusal: u.refusal }
    return DECLINED
  }
const textPart = part(false)
const assistantPart = part(true)

/** `TextContent` (and the user's content, text parts only): a string, or text parts. */
const textContent: Decoder = (u) => (typeof u === "string" ? u : decodeArray(u, textPart))

/** A function tool call of an assistant message (`FunctionToolCall`). */
const functionToolCall: Decoder = (u) => {
  if (!isRecord(u) || typeof u.id !== "string" || u.type !== "function") return DECLINED
  const f = functionCall(u.function)
  return f === DECLINED ? DECLINED : { id: u.id, type: "function", function: f }
}

/** A system, developer or user message: `{role, content, name?}`. */
/** A message's `function_call`: nullish, or the call (shared with the response's message). */
export const nullishFunctionCall: Decoder = nullishOrDecode(functionCall)
/** A request message's `tool_calls`: `optional(Array)`, so undefined is kept and null declined. */
const functionToolCalls: Decoder = undefinedOrDecode((c) => decodeArray(c, functionToolCall))

const textMessage = (u: Record_, role: string): Declinable<Record_> => {
  const content = textContent(u.content)
  if (content === DECLINED) return DECLINED
  const out: Record_ = { role, content }
  return optional(u, out, "name", undefinedOr(isString)) ? out : DECLINED
}

const assistantMessage = (u: Record_): Declinable<Record_> => {
  const out: Record_ = { role: "assistant" }
  if (has(u, "content")) {
    const content = u.content
    if (content === undefined || content === null || typeof content === "string") out.content = content
    else {
      const parts = decodeArray(content, assistantPart)
      if (parts === DECLINED) return DECLINED
      out.content = parts
    }
  }
  if (
    !optional(u, out, "name", undefinedOr(isString)) ||
    !optional(u, out, "refusal", isNullableString) ||
    !optional(u, out, "audio", isNullish) ||
    !optionalDecoded(u, out, "function_call", nullishFunctionCall) ||
    !optionalDecoded(u, out, "tool_calls", functionToolCalls) ||
    !optional(u, out, "reasoning", isNullableString) ||
    !optional(u, out, "reasoning_content", isNullableString)
  ) {
    return DECLINED
  }
  return out
}

/**
 * A message of a role the `Message` union tries first (its member with that role literal): when that member
 * takes it, the union's result is that member's. Other roles, and messages that member refuses (which the union
 * then hands to its other members), are declined.
 */
export const message: Decoder = (u) => {
  if (!isRecord(u)) return DECLINED
  switch (u.role) {
    case "system":
    case "developer":
    case "user":
      return textMessage(u, u.role)
    case "assistant":
      return assistantMessage(u)
    case "tool": {
      const content = textContent(u.content)
      if (content === DECLINED || typeof u.tool_call_id !== "string") return DECLINED
      return { role: "tool", content, tool_call_id: u.tool_call_id }
    }
    default:
      return DECLINED
  }
}

// ---------------------------------------------------------------------------------------------------------
// request fields
// ---------------------------------------------------------------------------------------------------------

/** `FunctionDefinition`. */
const functionDefinition: Decoder = (u) => {
  if (!isRecord(u) || typeof u.name !== "string") return DECLINED
  const out: Record_ = { name: u.name }
  return optional(u, out, "description", isNullableString) &&
    optional(u, out, "parameters", nullishOr(isJsonObject)) &&
    optional(u, out, "strict", nullishOr(isBoolean))
    ? out
    : DECLINED
}

/** `Tool`: `{type: "function", function}`. */
const tool: Decoder = (u) => {
  if (!isRecord(u) || u.type !== "function") return DECLINED
  const f = functionDefinition(u.function)
  return f === DECLINED ? DECLINED : { type: "function", function: f }
}

/** `ToolChoice`: one of its literals, or a named tool. */
const toolChoice: Decoder = (u) => {
  if (u === "none" || u === "auto" || u === "required") return u
  if (!isRecord(u) || !isRecord(u.function) || typeof u.function.name !== "string") return DECLINED
  const out: Record_ = {}
  if (
    !optional(
      u,
      out,
      "type",
      undefinedOr((t) => t === "function")
    )
  )
    return DECLINED
  out.function = { name: u.function.name }
  return out
}

/** `response_format.json_schema`: `{name, description?, schema?, strict?}`. */
const jsonSchemaFormat: Decoder = (u) => {
  if (!isRecord(u) || typeof u.name !== "string") return DECLINED
  const out: Record_ = { name: u.name }
  return optional(u, out, "description", isNullableString) &&
    optional(u, out, "schema", nullishOr(isJsonObject)) &&
    optional(u, out, "strict", nullishOr(isBoolean))
    ? out
    : DECLINED
}

/** `ResponseFormat` (the union's first member); `structural_tag` is declined. */
const nullishJsonSchemaFormat: Decoder = nullishOrDecode(jsonSchemaFormat)

const responseFormat: Decoder = (u) => {
  if (!isRecord(u) || (u.type !== "text" && u.type !== "json_object" && u.type !== "json_schema")) return DECLINED
  const out: Record_ = { type: u.type }
  return optionalDecoded(u, out, "json_schema", nullishJsonSchemaFormat) ? out : DECLINED
}

const streamOptions: Decoder = (u) => {
  if (!isRecord(u)) return DECLINED
  const out: Record_ = {}
  return optional(u, out, "include_usage", nullishOr(isBoolean)) &&
    optional(u, out, "continuous_usage_stats", nullishOr(isBoolean))
    ? out
    : DECLINED
}

/** `StructuredOutputs`: its keys, in its order, with what each takes. */
const STRUCTURED_OUTPUTS: ReadonlyArray<readonly [string, (u: unknown) => boolean]> = [
  ["json", nullishOr((j) => typeof j === "string" || isJsonObject(j))],
  ["regex", isNullableString],
  ["choice", nullishOr(isStringArray)],
  ["grammar", isNullableString],
  ["json_object", nullishOr(isBoolean)],
  ["disable_fallback", undefinedOr(isBoolean)],
  ["disable_any_whitespace", undefinedOr(isBoolean)],
  ["disable_additional_properties", undefinedOr(isBoolean)],
  ["whitespace_pattern", isNullableString],
  ["structural_tag", isNullableString],
  ["_backend", isNullableString],
  ["_backend_was_auto", undefinedOr(isBoolean)]
]

const structuredOutputs: Decoder = (u) => {
  if (!isRecord(u)) return DECLINED
  const out: Record_ = {}
  for (let i = 0; i < STRUCTURED_OUTPUTS.length; i++) {
    const [key, check] = STRUCTURED_OUTPUTS[i]!
    if (!optional(u, out, key, check)) return DECLINED
  }
  return out
}

const nullableKeep = (check: (u: unknown) => boolean): Decoder => keepIf(nullishOr(check))
const optKeep = (check: (u: unknown) => boolean): Decoder => keepIf(undefinedOr(check))
/** A key taken only when it is `null` or `undefined` (its values are left to the schema). */
const onlyNull: Decoder = keepIf(isNullish)

/**
 * The optional keys of `RequestFields` after `messages`, in its order, each with its decoder. Every key of the
 * schema is here (a property test checks it), so that a key the fast path does not decode is declined, not
 * dropped.
 */
const REQUEST_FIELDS: ReadonlyArray<readonly [string, Decoder]> = [
  ["model", nullableKeep(isString)],
  ["frequency_penalty", nullableKeep(isFiniteNumber)],
  ["logit_bias", onlyNull],
  ["logprobs", nullableKeep(isBoolean)],
  ["top_logprobs", nullableKeep(isInt)],
  ["max_tokens", nullableKeep(isInt)],
  ["max_completion_tokens", nullableKeep(isInt)],
  ["n", nullableKeep((n) => isInt(n) && (n as number) >= 1)],
  ["presence_penalty", nullableKeep(isFiniteNumber)],
  ["response_format", nullishOrDecode(responseFormat)],
  // Every safe integer is within the seed's int64 bounds.
  ["seed", nullableKeep(isInt)],
  ["stop", nullableKeep((s) => typeof s === "string" || isStringArray(s))],
  ["stream", nullableKeep(isBoolean)],
  ["stream_options", nullishOrDecode(streamOptions)],
  ["temperature", nullableKeep(isFiniteNumber)],
  ["top_p", nullableKeep(isFiniteNumber)],
  ["tools", nullishOrDecode((u) => decodeArray(u, tool))],
  ["tool_choice", nullishOrDecode(toolChoice)],
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
  ["structured_outputs", nullishOrDecode(structuredOutputs)],
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
  const messages = decodeArray(u.messages, message)
  if (messages === DECLINED) return undefined
  const out: Record_ = { messages }
  for (let i = 0; i < REQUEST_FIELDS.length; i++) {
    const [key, field] = REQUEST_FIELDS[i]!
    if (!has(u, key)) continue
    const value = field(u[key])
    if (value === DECLINED) return undefined
    out[key] = value
  }
  return out
}
