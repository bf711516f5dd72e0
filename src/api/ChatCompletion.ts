/**
 * The chat-completions request and response, the streaming chunk, and the
 * choice, message, logprobs and usage objects inside them. The request carries every field of 4.3 and
 * checks its constraints, so a bad request fails before it is sent, naming the field.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { FunctionCall, Message, Tool } from "./ChatMessage.js"
import { chatCompletion } from "./internal/chatCompletionFastPath.js"
import { requestFields } from "./internal/chatRequestFastPath.js"
import { isTokenLogprobArray, withFastCodec, withFastPath } from "./internal/fastPath.js"
import { JsonObject, JsonValue } from "./Json.js"

/** A `top_logprobs` entry: an alternative token and its log-probability. */
export const TopLogprob = Schema.Struct({
  token: Schema.String,
  logprob: Schema.Finite,
  bytes: Schema.optional(Schema.NullOr(Schema.Array(Schema.Int)))
}).annotations({ identifier: "TopLogprob" })
/** @see {@link TopLogprob} */
export type TopLogprob = typeof TopLogprob.Type

/** The log-probability of one sampled token, with its bytes and the most likely alternatives. */
export const TokenLogprob = Schema.Struct({
  token: Schema.String,
  logprob: Schema.Finite,
  bytes: Schema.optional(Schema.NullOr(Schema.Array(Schema.Int))),
  top_logprobs: Schema.optional(Schema.Array(TopLogprob))
}).annotations({ identifier: "TokenLogprob" })
/** @see {@link TokenLogprob} */
export type TokenLogprob = typeof TokenLogprob.Type

/**
 * The logprob entries of a choice: `Schema.Array(TokenLogprob)`, with a fast path for valid input (the bulk of
 * an RL job body; see src/api/internal/fastPath.ts). Invalid input fails exactly as the plain array would.
 */
export const TokenLogprobs: Schema.Schema<ReadonlyArray<TokenLogprob>> = withFastPath(
  Schema.Array(TokenLogprob),
  isTokenLogprobArray<TokenLogprob>
)

/** A choice's logprobs: one entry per sampled token of `content` (and of `refusal`, if any). */
export const ChoiceLogprobs = Schema.Struct({
  content: Schema.optional(Schema.NullOr(TokenLogprobs)),
  refusal: Schema.optional(Schema.NullOr(TokenLogprobs))
}).annotations({ identifier: "ChoiceLogprobs" })
/** @see {@link ChoiceLogprobs} */
export type ChoiceLogprobs = typeof ChoiceLogprobs.Type

/** A URL citation annotation. */
export const Annotation = Schema.Struct({
  type: Schema.Literal("url_citation"),
  url_citation: Schema.Struct({
    end_index: Schema.Int,
    start_index: Schema.Int,
    title: Schema.String,
    url: Schema.String
  })
}).annotations({ identifier: "Annotation" })
/** @see {@link Annotation} */
export type Annotation = typeof Annotation.Type

/** Audio output of a message. */
export const MessageAudio = Schema.Struct({
  id: Schema.String,
  data: Schema.String,
  expires_at: Schema.Int,
  transcript: Schema.String
}).annotations({ identifier: "MessageAudio" })
/** @see {@link MessageAudio} */
export type MessageAudio = typeof MessageAudio.Type

/** A tool call in a response message (`type` is `function`). */
export const ResponseToolCall = Schema.Struct({
  id: Schema.optional(Schema.String),
  type: Schema.Literal("function"),
  function: FunctionCall
}).annotations({ identifier: "ResponseToolCall" })
/** @see {@link ResponseToolCall} */
export type ResponseToolCall = typeof ResponseToolCall.Type

/** The message of a response choice. */
export const ResponseMessage = Schema.Struct({
  role: Schema.String,
  content: Schema.optional(Schema.NullOr(Schema.String)),
  refusal: Schema.optional(Schema.NullOr(Schema.String)),
  annotations: Schema.optional(Schema.NullOr(Schema.Union(Annotation, Schema.Array(Annotation)))),
  audio: Schema.optional(Schema.NullOr(MessageAudio)),
  function_call: Schema.optional(Schema.NullOr(FunctionCall)),
  tool_calls: Schema.optional(Schema.NullOr(Schema.Array(ResponseToolCall))),
  reasoning: Schema.optional(Schema.NullOr(Schema.String)),
  reasoning_content: Schema.optional(Schema.NullOr(Schema.String))
}).annotations({ identifier: "ResponseMessage" })
/** @see {@link ResponseMessage} */
export type ResponseMessage = typeof ResponseMessage.Type

/**
 * A choice: one sampled completion. `finish_reason` is `stop` or `length` (or the convention's other
 * values); `stop_reason` is the matched stop string or token id; `token_ids` the sampled ids when asked for.
 * Choices also appear verbatim in trajectories, as the trainable assistant turns.
 */
export const Choice = Schema.Struct({
  index: Schema.Int,
  message: ResponseMessage,
  logprobs: Schema.optional(Schema.NullOr(ChoiceLogprobs)),
  finish_reason: Schema.NullOr(Schema.String),
  stop_reason: Schema.optional(Schema.NullOr(Schema.Union(Schema.Int, Schema.String))),
  token_ids: Schema.optional(Schema.NullOr(Schema.Array(Schema.Int)))
}).annotations({ identifier: "Choice" })
/** @see {@link Choice} */
export type Choice = typeof Choice.Type

const countDefault = { default: () => 0, nullable: true } as const

/** Token usage of a completion. */
export const Usage = Schema.Struct({
  prompt_tokens: Schema.optionalWith(Schema.Int, countDefault),
  completion_tokens: Schema.optionalWith(Schema.Int, countDefault),
  total_tokens: Schema.optionalWith(Schema.Int, countDefault),
  prompt_tokens_details: Schema.optional(
    Schema.NullOr(Schema.Struct({ cached_tokens: Schema.optional(Schema.NullOr(Schema.Int)) }))
  )
}).annotations({ identifier: "Usage" })
/** @see {@link Usage} */
export type Usage = typeof Usage.Type

/** A prompt token's log-probability entry, keyed by token id in `prompt_logprobs`. */
export const PromptLogprob = Schema.Struct({
  logprob: Schema.Finite,
  rank: Schema.optional(Schema.NullOr(Schema.Int)),
  decoded_token: Schema.optional(Schema.NullOr(Schema.String))
}).annotations({ identifier: "PromptLogprob" })
/** @see {@link PromptLogprob} */
export type PromptLogprob = typeof PromptLogprob.Type

/** The service tiers of the convention. */
export const ServiceTier = Schema.Literal("auto", "default", "flex", "scale", "priority")

/** The fields of the response (without the fast path of {@link ChatCompletion}). */
const ChatCompletionFields = Schema.Struct({
  id: Schema.optional(Schema.String),
  object: Schema.optional(Schema.Literal("chat.completion")),
  created: Schema.optional(Schema.Int),
  model: Schema.String,
  choices: Schema.Array(Choice),
  usage: Usage,
  service_tier: Schema.optional(Schema.NullOr(ServiceTier)),
  system_fingerprint: Schema.optional(Schema.NullOr(Schema.String)),
  prompt_logprobs: Schema.optional(
    Schema.NullOr(Schema.Array(Schema.NullOr(Schema.Record({ key: Schema.String, value: PromptLogprob }))))
  ),
  prompt_token_ids: Schema.optional(Schema.NullOr(Schema.Array(Schema.Int))),
  kv_transfer_params: Schema.optional(Schema.NullOr(JsonObject))
}).annotations({ identifier: "ChatCompletion" })

/**
 * The chat completion response. A response as the engine sends it is decoded (and encoded) in one pass by
 * src/api/internal/chatCompletionFastPath.ts, which gives exactly what the plain struct gives; anything it does not take
 * goes to the struct, so every failure is the struct's own. `fields` are the struct's, as `Schema.Struct` has them.
 */
export const ChatCompletion: Schema.Schema<typeof ChatCompletionFields.Type, typeof ChatCompletionFields.Encoded> & {
  readonly fields: typeof ChatCompletionFields.fields
} = Object.assign(
  withFastCodec(ChatCompletionFields, {
    decode: (u) => chatCompletion(u, true) as typeof ChatCompletionFields.Type | undefined,
    encode: (u) => chatCompletion(u, false) as typeof ChatCompletionFields.Encoded | undefined
  }),
  { fields: ChatCompletionFields.fields }
)
/** @see {@link ChatCompletion} */
export type ChatCompletion = typeof ChatCompletion.Type

/** A named tool choice: the model must call this function (`type` defaults to `function`). */
export const NamedToolChoice = Schema.Struct({
  type: Schema.optional(Schema.Literal("function")),
  function: Schema.Struct({ name: Schema.String })
}).annotations({ identifier: "NamedToolChoice" })
/** @see {@link NamedToolChoice} */
export type NamedToolChoice = typeof NamedToolChoice.Type

/**
 * Whether and which tools the model calls: `none` (never; the default without `tools`), `auto` (text or
 * calls, as the model chooses; the default with `tools`), `required` (at least one call), or a named tool
 * (exactly that one).
 */
export const ToolChoice = Schema.Union(Schema.Literal("none", "auto", "required"), NamedToolChoice).annotations({
  identifier: "ToolChoice"
})
/** @see {@link ToolChoice} */
export type ToolChoice = typeof ToolChoice.Type

/** A tool-call fragment in a streamed delta. */
export const DeltaToolCall = Schema.Struct({
  index: Schema.Int,
  id: Schema.optional(Schema.NullOr(Schema.String)),
  type: Schema.optional(Schema.NullOr(Schema.Literal("function"))),
  function: Schema.optional(
    Schema.NullOr(
      Schema.Struct({
        name: Schema.optional(Schema.NullOr(Schema.String)),
        arguments: Schema.optional(Schema.NullOr(Schema.String))
      })
    )
  )
}).annotations({ identifier: "DeltaToolCall" })
/** @see {@link DeltaToolCall} */
export type DeltaToolCall = typeof DeltaToolCall.Type

/** The increment of a streamed choice: fragments of its text, refusal, reasoning and tool calls, each appended. */
export const Delta = Schema.Struct({
  role: Schema.optional(Schema.NullOr(Schema.String)),
  content: Schema.optional(Schema.NullOr(Schema.String)),
  refusal: Schema.optional(Schema.NullOr(Schema.String)),
  reasoning: Schema.optional(Schema.NullOr(Schema.String)),
  reasoning_content: Schema.optional(Schema.NullOr(Schema.String)),
  tool_calls: Schema.optional(Schema.Array(DeltaToolCall))
}).annotations({ identifier: "Delta" })
/** @see {@link Delta} */
export type Delta = typeof Delta.Type

/** A streamed choice: its index, delta, logprobs of the delta's tokens, and `finish_reason` on its last chunk. */
export const ChunkChoice = Schema.Struct({
  index: Schema.Int,
  delta: Delta,
  logprobs: Schema.optional(Schema.NullOr(ChoiceLogprobs)),
  finish_reason: Schema.optional(Schema.NullOr(Schema.String)),
  stop_reason: Schema.optional(Schema.NullOr(Schema.Union(Schema.Int, Schema.String))),
  token_ids: Schema.optional(Schema.NullOr(Schema.Array(Schema.Int)))
}).annotations({ identifier: "ChunkChoice" })
/** @see {@link ChunkChoice} */
export type ChunkChoice = typeof ChunkChoice.Type

/** One server-sent event of a streamed chat completion. */
export const ChatCompletionChunk = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("chat.completion.chunk"),
  created: Schema.Int,
  model: Schema.String,
  choices: Schema.Array(ChunkChoice),
  usage: Schema.optional(Schema.NullOr(Usage)),
  prompt_token_ids: Schema.optional(Schema.NullOr(Schema.Array(Schema.Int)))
}).annotations({ identifier: "ChatCompletionChunk" })
/** @see {@link ChatCompletionChunk} */
export type ChatCompletionChunk = typeof ChatCompletionChunk.Type

/** `structured_outputs`: constraints on decoding so that the output always matches. */
export const StructuredOutputs = Schema.Struct({
  json: Schema.optional(Schema.NullOr(Schema.Union(Schema.String, JsonObject))),
  regex: Schema.optional(Schema.NullOr(Schema.String)),
  choice: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))),
  grammar: Schema.optional(Schema.NullOr(Schema.String)),
  json_object: Schema.optional(Schema.NullOr(Schema.Boolean)),
  disable_fallback: Schema.optional(Schema.Boolean),
  disable_any_whitespace: Schema.optional(Schema.Boolean),
  disable_additional_properties: Schema.optional(Schema.Boolean),
  whitespace_pattern: Schema.optional(Schema.NullOr(Schema.String)),
  structural_tag: Schema.optional(Schema.NullOr(Schema.String)),
  _backend: Schema.optional(Schema.NullOr(Schema.String)),
  _backend_was_auto: Schema.optional(Schema.Boolean)
}).annotations({ identifier: "StructuredOutputs" })
/** @see {@link StructuredOutputs} */
export type StructuredOutputs = typeof StructuredOutputs.Type

/** `response_format`: plain text, any JSON object, or JSON matching `json_schema.schema`. */
export const ResponseFormat = Schema.Struct({
  type: Schema.Literal("text", "json_object", "json_schema"),
  json_schema: Schema.optional(
    Schema.NullOr(
      Schema.Struct({
        name: Schema.String,
        description: Schema.optional(Schema.NullOr(Schema.String)),
        schema: Schema.optional(Schema.NullOr(JsonObject)),
        strict: Schema.optional(Schema.NullOr(Schema.Boolean))
      })
    )
  )
}).annotations({ identifier: "ResponseFormat" })
/** @see {@link ResponseFormat} */
export type ResponseFormat = typeof ResponseFormat.Type

/** `response_format` of type `structural_tag` (newer form with `format`, legacy form with `structures`). */
export const StructuralTagResponseFormat = Schema.Struct({
  type: Schema.Literal("structural_tag"),
  format: Schema.optional(JsonObject),
  structures: Schema.optional(
    Schema.Array(
      Schema.Struct({ begin: Schema.String, end: Schema.String, schema: Schema.optional(Schema.NullOr(JsonObject)) })
    )
  ),
  triggers: Schema.optional(Schema.Array(Schema.String))
}).annotations({ identifier: "StructuralTagResponseFormat" })
/** @see {@link StructuralTagResponseFormat} */
export type StructuralTagResponseFormat = typeof StructuralTagResponseFormat.Type

/** A logits processor given by constructor: qualified name and arguments. */
export const LogitsProcessorConstructor = Schema.Struct({
  qualname: Schema.String,
  args: Schema.optional(Schema.NullOr(Schema.Array(JsonValue))),
  kwargs: Schema.optional(Schema.NullOr(JsonObject))
}).annotations({ identifier: "LogitsProcessorConstructor" })
/** @see {@link LogitsProcessorConstructor} */
export type LogitsProcessorConstructor = typeof LogitsProcessorConstructor.Type

/** The bounds of `seed`, as the engine states them. */
export const SEED_MIN = -9223372036854776000
/** @see {@link SEED_MIN} */
export const SEED_MAX = 9223372036854776000

/**
 * `seed`: an integer within the engine's bounds. `Schema.Int` admits only safe integers (beyond 2^53 a JS
 * number does not reach the wire exactly), so the arbitrary draws from that range (`fc.integer` with the
 * int64 bounds never returns).
 */
const Seed = Schema.Int.pipe(Schema.between(SEED_MIN, SEED_MAX)).annotations({
  arbitrary: () => (fc) => fc.maxSafeInteger()
})

const XargValue = Schema.Union(Schema.String, Schema.Finite)

/** The fields of the request, before the checks across fields. */
const RequestFields = Schema.Struct({
  messages: Schema.Array(Message),
  model: Schema.optional(Schema.NullOr(Schema.String)),
  frequency_penalty: Schema.optional(Schema.NullOr(Schema.Finite)),
  logit_bias: Schema.optional(Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Finite }))),
  logprobs: Schema.optional(Schema.NullOr(Schema.Boolean)),
  top_logprobs: Schema.optional(Schema.NullOr(Schema.Int)),
  max_tokens: Schema.optional(Schema.NullOr(Schema.Int)),
  max_completion_tokens: Schema.optional(Schema.NullOr(Schema.Int)),
  n: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.greaterThanOrEqualTo(1)))),
  presence_penalty: Schema.optional(Schema.NullOr(Schema.Finite)),
  response_format: Schema.optional(Schema.NullOr(Schema.Union(ResponseFormat, StructuralTagResponseFormat))),
  seed: Schema.optional(Schema.NullOr(Seed)),
  stop: Schema.optional(Schema.NullOr(Schema.Union(Schema.String, Schema.Array(Schema.String)))),
  stream: Schema.optional(Schema.NullOr(Schema.Boolean)),
  stream_options: Schema.optional(
    Schema.NullOr(
      Schema.Struct({
        include_usage: Schema.optional(Schema.NullOr(Schema.Boolean)),
        continuous_usage_stats: Schema.optional(Schema.NullOr(Schema.Boolean))
      })
    )
  ),
  temperature: Schema.optional(Schema.NullOr(Schema.Finite)),
  top_p: Schema.optional(Schema.NullOr(Schema.Finite)),
  tools: Schema.optional(Schema.NullOr(Schema.Array(Tool))),
  tool_choice: Schema.optional(Schema.NullOr(ToolChoice)),
  reasoning_effort: Schema.optional(Schema.NullOr(Schema.Literal("low", "medium", "high"))),
  include_reasoning: Schema.optional(Schema.Boolean),
  parallel_tool_calls: Schema.optional(Schema.NullOr(Schema.Boolean)),
  user: Schema.optional(Schema.NullOr(Schema.String)),
  use_beam_search: Schema.optional(Schema.Boolean),
  top_k: Schema.optional(Schema.NullOr(Schema.Int)),
  min_p: Schema.optional(Schema.NullOr(Schema.Finite)),
  repetition_penalty: Schema.optional(Schema.NullOr(Schema.Finite)),
  length_penalty: Schema.optional(Schema.Finite),
  stop_token_ids: Schema.optional(Schema.NullOr(Schema.Array(Schema.Int))),
  include_stop_str_in_output: Schema.optional(Schema.Boolean),
  ignore_eos: Schema.optional(Schema.Boolean),
  min_tokens: Schema.optional(Schema.Int),
  skip_special_tokens: Schema.optional(Schema.Boolean),
  spaces_between_special_tokens: Schema.optional(Schema.Boolean),
  truncate_prompt_tokens: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.greaterThanOrEqualTo(-1)))),
  prompt_logprobs: Schema.optional(Schema.NullOr(Schema.Int)),
  allowed_token_ids: Schema.optional(Schema.NullOr(Schema.Array(Schema.Int))),
  bad_words: Schema.optional(Schema.Array(Schema.String)),
  echo: Schema.optional(Schema.Boolean),
  add_generation_prompt: Schema.optional(Schema.Boolean),
  continue_final_message: Schema.optional(Schema.Boolean),
  add_special_tokens: Schema.optional(Schema.Boolean),
  documents: Schema.optional(Schema.NullOr(Schema.Array(Schema.Record({ key: Schema.String, value: Schema.String })))),
  chat_template: Schema.optional(Schema.NullOr(Schema.String)),
  chat_template_kwargs: Schema.optional(Schema.NullOr(JsonObject)),
  mm_processor_kwargs: Schema.optional(Schema.NullOr(JsonObject)),
  structured_outputs: Schema.optional(Schema.NullOr(StructuredOutputs)),
  priority: Schema.optional(Schema.Int),
  request_id: Schema.optional(Schema.String),
  logits_processors: Schema.optional(
    Schema.NullOr(Schema.Array(Schema.Union(Schema.String, LogitsProcessorConstructor)))
  ),
  return_tokens_as_token_ids: Schema.optional(Schema.NullOr(Schema.Boolean)),
  return_token_ids: Schema.optional(Schema.NullOr(Schema.Boolean)),
  cache_salt: Schema.optional(Schema.NullOr(Schema.String)),
  kv_transfer_params: Schema.optional(Schema.NullOr(JsonObject)),
  vllm_xargs: Schema.optional(
    Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Union(XargValue, Schema.Array(XargValue)) }))
  )
})

/** The checks across fields of {@link ChatCompletionRequest}, as issues at the fields they are about. */
const requestIssues = (request: typeof RequestFields.Type): Array<Schema.FilterIssue> => {
  const issues: Array<Schema.FilterIssue> = []
  if (request.continue_final_message === true && request.add_generation_prompt !== false) {
    issues.push({
      path: ["continue_final_message"],
      message:
        "continue_final_message cannot be combined with add_generation_prompt (which defaults to true): set add_generation_prompt to false"
    })
  }
  if (typeof request.top_logprobs === "number" && request.top_logprobs > 0 && request.logprobs !== true) {
    issues.push({ path: ["top_logprobs"], message: "top_logprobs needs logprobs set to true" })
  }
  if (request.stream_options != null && request.stream !== true) {
    issues.push({ path: ["stream_options"], message: "stream_options is only allowed when stream is true" })
  }
  if (request.prompt_logprobs != null && request.stream === true) {
    issues.push({ path: ["prompt_logprobs"], message: "prompt_logprobs is not available when stream is true" })
  }
  const tools = request.tools ?? []
  const choice = request.tool_choice
  if (choice === "required" && tools.length === 0) {
    issues.push({ path: ["tool_choice"], message: 'tool_choice "required" needs tools' })
  }
  if (typeof choice === "object" && choice !== null && !tools.some((t) => t.function.name === choice.function.name)) {
    issues.push({
      path: ["tool_choice"],
      message: `tool_choice names the function ${JSON.stringify(choice.function.name)}, which is not in tools`
    })
  }
  return issues
}

/** The request with its checks across fields, without the fast path of {@link ChatCompletionRequest}. */
const FullRequest = RequestFields.pipe(Schema.filter(requestIssues)).annotations({
  identifier: "ChatCompletionRequest"
})

/**
 * A request the fast decoder takes, with the checks across fields passed, as `FullRequest` gives it; or
 * `undefined` (the schema then decides). The request's two sides are the same, so this serves both directions.
 */
const fastRequest = (u: unknown): typeof RequestFields.Type | undefined => {
  const request = requestFields(u) as typeof RequestFields.Type | undefined
  return request !== undefined && requestIssues(request).length === 0 ? request : undefined
}

/**
 * The chat completion request with every field, and the checks across fields the engine makes:
 * `continue_final_message` needs `add_generation_prompt: false` (it defaults to true), `top_logprobs > 0`
 * needs `logprobs: true`, `stream_options` and `prompt_logprobs` go only with and without `stream`,
 * `tool_choice: "required"` needs `tools`, and a named `tool_choice` must name one of `tools`.
 *
 * A request of the common shapes is decoded (and encoded) in one pass by src/api/internal/chatRequestFastPath.ts, which
 * gives exactly what the plain schema gives; anything it does not take goes to the plain schema, so every failure
 * is its own. `from` is the request's fields, as `Schema.filter` exposes them.
 */
export const ChatCompletionRequest: Schema.Schema<typeof RequestFields.Type> & { readonly from: typeof RequestFields } =
  Object.assign(withFastCodec(FullRequest, { decode: fastRequest, encode: fastRequest }), { from: RequestFields })
/** @see {@link ChatCompletionRequest} */
export type ChatCompletionRequest = typeof ChatCompletionRequest.Type
