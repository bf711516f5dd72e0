/**
 * The Responses API (`POST /v1/responses`) on the wire: the request, its input items, the `Response` with its
 * output items and usage, the stored-response reads, and every server-sent event of a streamed response, as
 * the `openai` package's `openai/resources/responses` types spell them (snake_case, verbatim).
 *
 * The schemas take what a text-only chat engine can serve: function tools, messages with text parts, function
 * calls and their outputs, item references; the fields that only tune a hosted model (`reasoning`,
 * `service_tier`, `user`, `prompt_cache_key`, `safety_identifier`, `truncation: "disabled"`) are taken and
 * ignored, as vLLM does. What the engine cannot do (built-in tools, `background`, `conversation`, prompt
 * templates, image or file inputs) is refused by the translation (`ResponsesChat`), naming the field. The
 * translation onto chat completions, both ways, is in `ResponsesChat`.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { JsonObject } from "./Json.js"

// ---------------------------------------------------------------------------------------------------------------
// Content parts and items
// ---------------------------------------------------------------------------------------------------------------

/** A text part of an input message: `{type: "input_text", text}`. */
export const InputText = Schema.Struct({ type: Schema.Literal("input_text"), text: Schema.String }).annotations({
  identifier: "ResponsesInputText"
})
/** @see {@link InputText} */
export type InputText = typeof InputText.Type

/** A top alternative of an output token. */
export const TopLogprob = Schema.Struct({
  token: Schema.String,
  logprob: Schema.Number,
  bytes: Schema.optional(Schema.Array(Schema.Int))
}).annotations({ identifier: "ResponsesTopLogprob" })
/** @see {@link TopLogprob} */
export type TopLogprob = typeof TopLogprob.Type

/** The log-probability of one output token, with its bytes and top alternatives. */
export const Logprob = Schema.Struct({
  token: Schema.String,
  logprob: Schema.Number,
  bytes: Schema.optional(Schema.Array(Schema.Int)),
  top_logprobs: Schema.optional(Schema.Array(TopLogprob))
}).annotations({ identifier: "ResponsesLogprob" })
/** @see {@link Logprob} */
export type Logprob = typeof Logprob.Type

/** Model text: `{type: "output_text", text, annotations, logprobs?}` (logprobs when asked with `include`). */
export const OutputText = Schema.Struct({
  type: Schema.Literal("output_text"),
  text: Schema.String,
  annotations: Schema.optionalWith(Schema.Array(JsonObject), { default: () => [] }),
  logprobs: Schema.optional(Schema.Array(Logprob))
}).annotations({ identifier: "ResponsesOutputText" })
/** @see {@link OutputText} */
export type OutputText = typeof OutputText.Type

/** A refusal: `{type: "refusal", refusal}`. */
export const Refusal = Schema.Struct({ type: Schema.Literal("refusal"), refusal: Schema.String }).annotations({
  identifier: "ResponsesRefusal"
})
/** @see {@link Refusal} */
export type Refusal = typeof Refusal.Type

/**
 * Any other content part (`input_image`, `input_file`, `input_audio`, ...): taken by the schema so that the
 * translation can refuse it by name.
 */
export const OtherPart = Schema.Struct({ type: Schema.String }, { key: Schema.String, value: Schema.Unknown })
/** @see {@link OtherPart} */
export type OtherPart = typeof OtherPart.Type

/** A part of a message's content. */
export const ContentPart = Schema.Union(InputText, OutputText, Refusal, OtherPart)
/** @see {@link ContentPart} */
export type ContentPart = typeof ContentPart.Type

const ItemStatus = Schema.Literal("in_progress", "completed", "incomplete")

/**
 * A message item: input (`user`, `system`, `developer`; content a string or parts) or a model's earlier
 * output (`assistant`, `output_text` and `refusal` parts). `type` may be left out (the "easy" form).
 */
export const MessageItem = Schema.Struct({
  type: Schema.optional(Schema.Literal("message")),
  id: Schema.optional(Schema.NullOr(Schema.String)),
  role: Schema.Literal("user", "assistant", "system", "developer"),
  content: Schema.Union(Schema.String, Schema.Array(ContentPart)),
  status: Schema.optional(Schema.NullOr(ItemStatus)),
  phase: Schema.optional(Schema.NullOr(Schema.String))
}).annotations({ identifier: "ResponsesMessageItem" })
/** @see {@link MessageItem} */
export type MessageItem = typeof MessageItem.Type

/** A function call the model made: `call_id`, `name`, JSON `arguments`. */
export const FunctionCallItem = Schema.Struct({
  type: Schema.Literal("function_call"),
  id: Schema.optional(Schema.NullOr(Schema.String)),
  call_id: Schema.String,
  name: Schema.String,
  arguments: Schema.String,
  status: Schema.optional(Schema.NullOr(ItemStatus))
}).annotations({ identifier: "ResponsesFunctionCallItem" })
/** @see {@link FunctionCallItem} */
export type FunctionCallItem = typeof FunctionCallItem.Type

/** A function call's result, answering `call_id`: a string or text parts. */
export const FunctionCallOutputItem = Schema.Struct({
  type: Schema.Literal("function_call_output"),
  id: Schema.optional(Schema.NullOr(Schema.String)),
  call_id: Schema.String,
  output: Schema.Union(Schema.String, Schema.Array(ContentPart)),
  status: Schema.optional(Schema.NullOr(ItemStatus))
}).annotations({ identifier: "ResponsesFunctionCallOutputItem" })
/** @see {@link FunctionCallOutputItem} */
export type FunctionCallOutputItem = typeof FunctionCallOutputItem.Type

/** A reference to an item of a stored response, by its id. */
export const ItemReference = Schema.Struct({
  type: Schema.Literal("item_reference"),
  id: Schema.String
}).annotations({ identifier: "ResponsesItemReference" })
/** @see {@link ItemReference} */
export type ItemReference = typeof ItemReference.Type

/**
 * A reasoning item sent back by a client (models here do not reason, so none is ever produced): taken and
 * left out of the conversation.
 */
export const ReasoningItem = Schema.Struct(
  { type: Schema.Literal("reasoning") },
  { key: Schema.String, value: Schema.Unknown }
).annotations({ identifier: "ResponsesReasoningItem" })
/** @see {@link ReasoningItem} */
export type ReasoningItem = typeof ReasoningItem.Type

/** Any other item type (a built-in tool's call or output): taken by the schema, refused by name. */
export const OtherItem = Schema.Struct({ type: Schema.String }, { key: Schema.String, value: Schema.Unknown })
/** @see {@link OtherItem} */
export type OtherItem = typeof OtherItem.Type

/** An item of a request's `input`. */
export const InputItem = Schema.Union(
  MessageItem,
  FunctionCallItem,
  FunctionCallOutputItem,
  ItemReference,
  ReasoningItem,
  OtherItem
).annotations({ identifier: "ResponsesInputItem" })
/** @see {@link InputItem} */
export type InputItem = typeof InputItem.Type

// ---------------------------------------------------------------------------------------------------------------
// The request
// ---------------------------------------------------------------------------------------------------------------

/** A function tool: `{type: "function", name, description?, parameters, strict}`. */
export const FunctionTool = Schema.Struct({
  type: Schema.Literal("function"),
  name: Schema.String,
  description: Schema.optional(Schema.NullOr(Schema.String)),
  parameters: Schema.optional(Schema.NullOr(JsonObject)),
  strict: Schema.optional(Schema.NullOr(Schema.Boolean))
}).annotations({ identifier: "ResponsesFunctionTool" })
/** @see {@link FunctionTool} */
export type FunctionTool = typeof FunctionTool.Type

/** Any other tool (`web_search`, `file_search`, `mcp`, ...): taken by the schema, refused by name. */
export const OtherTool = Schema.Struct({ type: Schema.String }, { key: Schema.String, value: Schema.Unknown })
/** @see {@link OtherTool} */
export type OtherTool = typeof OtherTool.Type

/** A tool of the request. */
export const RequestTool = Schema.Union(FunctionTool, OtherTool)
/** @see {@link RequestTool} */
export type RequestTool = typeof RequestTool.Type

/** `tool_choice`: `none`, `auto`, `required`, a named function, or another form (refused by name). */
export const ToolChoice = Schema.Union(
  Schema.Literal("none", "auto", "required"),
  Schema.Struct({ type: Schema.Literal("function"), name: Schema.String }),
  Schema.Struct({ type: Schema.String }, { key: Schema.String, value: Schema.Unknown })
).annotations({ identifier: "ResponsesToolChoice" })
/** @see {@link ToolChoice} */
export type ToolChoice = typeof ToolChoice.Type

/** `text.format`: plain text, any JSON object, or JSON matching a schema (constrained while decoding). */
export const TextFormat = Schema.Union(
  Schema.Struct({ type: Schema.Literal("text") }),
  Schema.Struct({ type: Schema.Literal("json_object") }),
  Schema.Struct({
    type: Schema.Literal("json_schema"),
    name: Schema.String,
    schema: JsonObject,
    description: Schema.optional(Schema.NullOr(Schema.String)),
    strict: Schema.optional(Schema.NullOr(Schema.Boolean))
  })
).annotations({ identifier: "ResponsesTextFormat" })
/** @see {@link TextFormat} */
export type TextFormat = typeof TextFormat.Type

/** `text`: the output's format (and a verbosity, ignored). */
export const TextConfig = Schema.Struct({
  format: Schema.optional(Schema.NullOr(TextFormat)),
  verbosity: Schema.optional(Schema.NullOr(Schema.String))
}).annotations({ identifier: "ResponsesTextConfig" })
/** @see {@link TextConfig} */
export type TextConfig = typeof TextConfig.Type

/** The `include` value that asks for the output text's logprobs. */
export const INCLUDE_LOGPROBS = "message.output_text.logprobs"

/** The values `include` takes, as OpenAI's API documents them (only {@link INCLUDE_LOGPROBS} changes an answer here). */
export const Includable = Schema.Literal(
  "file_search_call.results",
  "web_search_call.results",
  "web_search_call.action.sources",
  "message.input_image.image_url",
  "computer_call_output.output.image_url",
  "code_interpreter_call.outputs",
  "reasoning.encrypted_content",
  INCLUDE_LOGPROBS
)

/**
 * A request's `metadata`, within OpenAI's limits: at most 16 pairs, keys of at most 64 characters, values of at
 * most 512.
 */
export const Metadata = Schema.Record({ key: Schema.String, value: Schema.String.pipe(Schema.maxLength(512)) }).pipe(
  Schema.filter((metadata) => {
    const keys = Object.keys(metadata)
    if (keys.length > 16) return `metadata takes at most 16 key-value pairs, got ${keys.length}`
    const long = keys.find((key) => key.length > 64)
    return long === undefined || `a metadata key is at most 64 characters, got ${long.length}`
  }),
  Schema.annotations({ identifier: "ResponsesMetadata" })
)

/** The request of `POST /v1/responses`. */
export const ResponseCreateRequest = Schema.Struct({
  model: Schema.optional(Schema.NullOr(Schema.String)),
  input: Schema.optional(Schema.Union(Schema.String, Schema.Array(InputItem))),
  instructions: Schema.optional(Schema.NullOr(Schema.String)),
  max_output_tokens: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.greaterThanOrEqualTo(1)))),
  temperature: Schema.optional(Schema.NullOr(Schema.Finite.pipe(Schema.between(0, 2)))),
  top_p: Schema.optional(Schema.NullOr(Schema.Finite.pipe(Schema.between(0, 1)))),
  top_logprobs: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.between(0, 20)))),
  tools: Schema.optional(Schema.NullOr(Schema.Array(RequestTool))),
  tool_choice: Schema.optional(Schema.NullOr(ToolChoice)),
  parallel_tool_calls: Schema.optional(Schema.NullOr(Schema.Boolean)),
  text: Schema.optional(Schema.NullOr(TextConfig)),
  store: Schema.optional(Schema.NullOr(Schema.Boolean)),
  previous_response_id: Schema.optional(Schema.NullOr(Schema.String)),
  metadata: Schema.optional(Schema.NullOr(Metadata)),
  include: Schema.optional(Schema.NullOr(Schema.Array(Includable))),
  stream: Schema.optional(Schema.NullOr(Schema.Boolean)),
  stream_options: Schema.optional(
    Schema.NullOr(Schema.Struct({ include_obfuscation: Schema.optional(Schema.Boolean) }))
  ),
  truncation: Schema.optional(Schema.NullOr(Schema.Literal("auto", "disabled"))),
  background: Schema.optional(Schema.NullOr(Schema.Boolean)),
  conversation: Schema.optional(Schema.NullOr(Schema.Unknown)),
  prompt: Schema.optional(Schema.NullOr(Schema.Unknown)),
  context_management: Schema.optional(Schema.NullOr(Schema.Unknown)),
  // Taken and ignored: they tune a hosted model.
  reasoning: Schema.optional(Schema.NullOr(Schema.Unknown)),
  service_tier: Schema.optional(Schema.NullOr(Schema.String)),
  user: Schema.optional(Schema.NullOr(Schema.String)),
  safety_identifier: Schema.optional(Schema.NullOr(Schema.String)),
  prompt_cache_key: Schema.optional(Schema.NullOr(Schema.String)),
  prompt_cache_retention: Schema.optional(Schema.NullOr(Schema.String)),
  // An extension, as vLLM takes it: sampling seeded for reproducible responses.
  seed: Schema.optional(Schema.NullOr(Schema.Int))
}).annotations({ identifier: "ResponseCreateRequest" })
/** @see {@link ResponseCreateRequest} */
export type ResponseCreateRequest = typeof ResponseCreateRequest.Type

// ---------------------------------------------------------------------------------------------------------------
// The response
// ---------------------------------------------------------------------------------------------------------------

/** An assistant message of a response's output. */
export const OutputMessage = Schema.Struct({
  type: Schema.Literal("message"),
  id: Schema.String,
  role: Schema.Literal("assistant"),
  status: ItemStatus,
  content: Schema.Array(Schema.Union(OutputText, Refusal))
}).annotations({ identifier: "ResponsesOutputMessage" })
/** @see {@link OutputMessage} */
export type OutputMessage = typeof OutputMessage.Type

/** A function call of a response's output (`id` the item's, `call_id` the one its output answers). */
export const OutputFunctionCall = Schema.Struct({
  type: Schema.Literal("function_call"),
  id: Schema.String,
  call_id: Schema.String,
  name: Schema.String,
  arguments: Schema.String,
  status: ItemStatus
}).annotations({ identifier: "ResponsesOutputFunctionCall" })
/** @see {@link OutputFunctionCall} */
export type OutputFunctionCall = typeof OutputFunctionCall.Type

/** An item of a response's `output`. */
export const OutputItem = Schema.Union(OutputMessage, OutputFunctionCall).annotations({
  identifier: "ResponsesOutputItem"
})
/** @see {@link OutputItem} */
export type OutputItem = typeof OutputItem.Type

/** Token usage of a response. */
export const ResponseUsage = Schema.Struct({
  input_tokens: Schema.Int,
  input_tokens_details: Schema.Struct({ cached_tokens: Schema.Int }),
  output_tokens: Schema.Int,
  output_tokens_details: Schema.Struct({ reasoning_tokens: Schema.Int }),
  total_tokens: Schema.Int
}).annotations({ identifier: "ResponseUsage" })
/** @see {@link ResponseUsage} */
export type ResponseUsage = typeof ResponseUsage.Type

/** The status of a response: `completed`, or `incomplete` (with `incomplete_details.reason`). */
export const ResponseStatus = Schema.Literal("completed", "incomplete", "in_progress", "failed", "cancelled", "queued")
/** @see {@link ResponseStatus} */
export type ResponseStatus = typeof ResponseStatus.Type

/** A response: its output items, status, usage, and the request's settings echoed. */
export const Response = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("response"),
  created_at: Schema.Int,
  status: ResponseStatus,
  completed_at: Schema.optional(Schema.NullOr(Schema.Int)),
  error: Schema.NullOr(Schema.Struct({ code: Schema.String, message: Schema.String })),
  incomplete_details: Schema.NullOr(Schema.Struct({ reason: Schema.Literal("max_output_tokens", "content_filter") })),
  instructions: Schema.NullOr(Schema.String),
  max_output_tokens: Schema.NullOr(Schema.Int),
  metadata: Schema.Record({ key: Schema.String, value: Schema.String }),
  model: Schema.String,
  output: Schema.Array(OutputItem),
  parallel_tool_calls: Schema.Boolean,
  previous_response_id: Schema.NullOr(Schema.String),
  temperature: Schema.NullOr(Schema.Number),
  top_p: Schema.NullOr(Schema.Number),
  top_logprobs: Schema.optional(Schema.NullOr(Schema.Int)),
  text: TextConfig,
  tool_choice: ToolChoice,
  tools: Schema.Array(FunctionTool),
  truncation: Schema.Literal("auto", "disabled"),
  store: Schema.Boolean,
  background: Schema.Boolean,
  reasoning: Schema.NullOr(Schema.Unknown),
  service_tier: Schema.NullOr(Schema.String),
  user: Schema.NullOr(Schema.String),
  usage: Schema.NullOr(ResponseUsage)
}).annotations({ identifier: "Response" })
/** @see {@link Response} */
export type Response = typeof Response.Type

/** `DELETE /v1/responses/{id}`'s answer. */
export const ResponseDeleted = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("response"),
  deleted: Schema.Literal(true)
}).annotations({ identifier: "ResponseDeleted" })
/** @see {@link ResponseDeleted} */
export type ResponseDeleted = typeof ResponseDeleted.Type

/** A stored input item, as `GET /v1/responses/{id}/input_items` lists it (each with an `id`). */
export const StoredInputItem = Schema.Union(
  Schema.Struct({
    type: Schema.Literal("message"),
    id: Schema.String,
    role: Schema.Literal("user", "assistant", "system", "developer"),
    status: ItemStatus,
    content: Schema.Array(ContentPart)
  }),
  OutputFunctionCall,
  Schema.Struct({
    type: Schema.Literal("function_call_output"),
    id: Schema.String,
    call_id: Schema.String,
    output: Schema.Union(Schema.String, Schema.Array(ContentPart)),
    status: ItemStatus
  })
).annotations({ identifier: "ResponsesStoredInputItem" })
/** @see {@link StoredInputItem} */
export type StoredInputItem = typeof StoredInputItem.Type

/** A page of a stored response's input items. */
export const InputItemList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(StoredInputItem),
  first_id: Schema.NullOr(Schema.String),
  last_id: Schema.NullOr(Schema.String),
  has_more: Schema.Boolean
}).annotations({ identifier: "ResponsesInputItemList" })
/** @see {@link InputItemList} */
export type InputItemList = typeof InputItemList.Type

// ---------------------------------------------------------------------------------------------------------------
// Stream events
// ---------------------------------------------------------------------------------------------------------------

/** A streamed delta's logprob (without bytes, as the events carry them). */
export interface DeltaLogprob {
  readonly token: string
  readonly logprob: number
  readonly top_logprobs?: ReadonlyArray<{ readonly token: string; readonly logprob: number }> | undefined
}

/**
 * A server-sent event of a streamed response, in the documented order: `response.created`,
 * `response.in_progress`; per output item `response.output_item.added`, then for a message
 * `response.content_part.added`, `response.output_text.delta`..., `response.output_text.done`,
 * `response.content_part.done`, and for a function call `response.function_call_arguments.delta`...,
 * `response.function_call_arguments.done`; `response.output_item.done`; and last `response.completed` (or
 * `response.incomplete`), or an `error` event. Each carries its `sequence_number`, from 0.
 */
export type ResponseStreamEvent =
  | {
      readonly type: "response.created" | "response.in_progress" | "response.completed" | "response.incomplete"
      readonly sequence_number: number
      readonly response: Response
    }
  | {
      readonly type: "response.output_item.added" | "response.output_item.done"
      readonly sequence_number: number
      readonly output_index: number
      readonly item: OutputItem
    }
  | {
      readonly type: "response.content_part.added" | "response.content_part.done"
      readonly sequence_number: number
      readonly item_id: string
      readonly output_index: number
      readonly content_index: number
      readonly part: OutputText | Refusal
    }
  | {
      readonly type: "response.output_text.delta"
      readonly sequence_number: number
      readonly item_id: string
      readonly output_index: number
      readonly content_index: number
      readonly delta: string
      readonly logprobs: ReadonlyArray<DeltaLogprob>
    }
  | {
      readonly type: "response.output_text.done"
      readonly sequence_number: number
      readonly item_id: string
      readonly output_index: number
      readonly content_index: number
      readonly text: string
      readonly logprobs: ReadonlyArray<DeltaLogprob>
    }
  | {
      readonly type: "response.function_call_arguments.delta"
      readonly sequence_number: number
      readonly item_id: string
      readonly output_index: number
      readonly delta: string
    }
  | {
      readonly type: "response.function_call_arguments.done"
      readonly sequence_number: number
      readonly item_id: string
      readonly output_index: number
      readonly name: string
      readonly arguments: string
    }
  | {
      readonly type: "error"
      readonly sequence_number: number
      readonly code: string | null
      readonly message: string
      readonly param: string | null
    }
