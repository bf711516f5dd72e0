/**
 * The Responses API as a translation onto chat completions, both ways, as pure functions: the embedded
 * backend serves `/v1/responses` with them over its one chat-completions sampler, and a rollout records an
 * agent that speaks the Responses API as the chat completions its policy sampled.
 *
 * - {@link chatRequestOf}: a `ResponseCreateRequest` (with the items of the responses it continues) as the
 *   fields of a chat-completions request: `instructions` a system message first; messages with their text;
 *   an assistant message and the function calls after it one assistant message with `tool_calls`; a
 *   `function_call_output` a `tool` message; function tools, `tool_choice`, `text.format` as
 *   `response_format`, `max_output_tokens` as `max_completion_tokens`, logprobs when `include` asks for them.
 *   What a chat engine cannot serve is a {@link ResponsesRequestError} naming the field.
 * - {@link responseOf}: a chat completion's first choice as a `Response`: its text an output message, its
 *   tool calls `function_call` items, `length` an `incomplete` status.
 * - {@link ResponseEvents}: the chunks of a streamed chat completion as the Responses API's events, in order,
 *   numbered, ending with the same `Response` {@link responseOf} gives.
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionRequest,
  Choice,
  TokenLogprob
} from "./ChatCompletion.js"
import type { Message, Tool } from "./ChatMessage.js"
import {
  type DeltaLogprob,
  INCLUDE_LOGPROBS,
  type InputItemList,
  type Logprob,
  type OutputFunctionCall,
  type OutputItem,
  type OutputMessage,
  type Response,
  type ResponseCreateRequest,
  type ResponseStreamEvent,
  type ResponseUsage,
  type StoredInputItem
} from "./Responses.js"

/** A request the translation cannot serve: the field (`param`, e.g. `tools[0].type`) and why. */
export class ResponsesRequestError extends Data.TaggedError("ResponsesRequestError")<{
  /** The request field at fault, as OpenAI's errors name it (`input[2].content[0].type`). */
  readonly param: string | null
  /** What was wrong, in words. */
  readonly description: string
  /** `NotFound`: an id it names (a previous response, an item) is not known; `Invalid`: anything else. */
  readonly reason: "Invalid" | "NotFound"
}> {
  override get message(): string {
    return this.description
  }
}

const invalid = (param: string | null, description: string) =>
  new ResponsesRequestError({ param, description, reason: "Invalid" })

/** The chat-completions request a Responses request becomes (without `model` and the stream settings). */
export type ChatRequest = Omit<ChatCompletionRequest, "model" | "stream" | "stream_options">

/** An item of a conversation: a request's input item, or a stored response's input or output item. */
export type AnyItem = { readonly type?: string | undefined } & Record<string, unknown>

/** What {@link chatRequestOf} needs beside the request. */
export interface Context {
  /**
   * The items of the responses this one continues (`previous_response_id`), oldest first: each response's
   * input items, then its output items.
   */
  readonly history?: ReadonlyArray<AnyItem> | undefined
  /** An item of a stored response by its id, for `item_reference` inputs. */
  readonly resolve?: ((id: string) => AnyItem | undefined) | undefined
}

/** The request's `input` as items (a string is one user message). */
export const inputItemsOf = (request: ResponseCreateRequest): ReadonlyArray<AnyItem> =>
  request.input === undefined
    ? []
    : typeof request.input === "string"
      ? [{ type: "message", role: "user", content: request.input }]
      : (request.input as ReadonlyArray<AnyItem>)

const textOf = (
  content: unknown,
  param: string,
  allowRefusal: boolean
): Either.Either<{ readonly text: string; readonly refusal: string | undefined }, ResponsesRequestError> => {
  if (typeof content === "string") return Either.right({ text: content, refusal: undefined })
  if (!Array.isArray(content)) return Either.left(invalid(param, `${param} must be a string or an array of parts`))
  let text = ""
  let refusal: string | undefined
  for (const [j, part] of (content as ReadonlyArray<Record<string, unknown>>).entries()) {
    const type = part.type
    if ((type === "input_text" || type === "output_text" || type === "text") && typeof part.text === "string") {
      text += part.text
    } else if (type === "refusal" && allowRefusal && typeof part.refusal === "string") {
      refusal = (refusal ?? "") + part.refusal
    } else {
      return Either.left(
        invalid(
          `${param}[${j}].type`,
          `${param}[${j}] is a part of type ${JSON.stringify(type)}, which this engine does not take (it reads text: input_text and output_text parts)`
        )
      )
    }
  }
  return Either.right({ text, refusal })
}

interface PendingAssistant {
  content: string | null
  refusal: string | undefined
  readonly calls: Array<{
    readonly id: string
    readonly type: "function"
    readonly function: { name: string; arguments: string }
  }>
}

/** The messages of a sequence of items (see the module); `where` names the items for errors. */
/** Whether `text` is a JSON text. */
const isJson = (text: string): boolean => {
  try {
    JSON.parse(text)
    return true
  } catch {
    return false
  }
}

const messagesOf = (
  items: ReadonlyArray<{ readonly item: AnyItem; readonly param: string }>,
  resolve: ((id: string) => AnyItem | undefined) | undefined
): Either.Either<Array<Message>, ResponsesRequestError> => {
  const messages: Array<Message> = []
  let pending: PendingAssistant | undefined
  // The calls of the conversation so far: a tool output must answer one of them.
  const calls = new Set<string>()
  const flush = () => {
    if (pending === undefined) return
    messages.push({
      role: "assistant",
      content: pending.content,
      ...(pending.refusal === undefined ? {} : { refusal: pending.refusal }),
      ...(pending.calls.length > 0 ? { tool_calls: pending.calls } : {})
    } as Message)
    pending = undefined
  }
  const visit = (item: AnyItem, param: string): ResponsesRequestError | undefined => {
    const type = item.type ?? "message"
    switch (type) {
      case "message": {
        const role = item.role
        if (role !== "user" && role !== "assistant" && role !== "system" && role !== "developer") {
          return invalid(
            `${param}.role`,
            `${param} has role ${JSON.stringify(role)}; a message's role is user, assistant, system or developer`
          )
        }
        const text = textOf(item.content, `${param}.content`, role === "assistant")
        if (Either.isLeft(text)) return text.left
        if (role === "assistant") {
          // Two assistant messages in a row, or text after calls: a new turn.
          if (pending !== undefined && (pending.calls.length > 0 || pending.content !== null)) flush()
          pending ??= { content: null, refusal: undefined, calls: [] }
          pending.content = text.right.text
          pending.refusal = text.right.refusal
          return undefined
        }
        flush()
        messages.push({ role, content: text.right.text } as Message)
        return undefined
      }
      case "function_call": {
        if (typeof item.call_id !== "string" || typeof item.name !== "string" || typeof item.arguments !== "string") {
          return invalid(param, `${param} must have call_id, name and arguments (strings)`)
        }
        if (!isJson(item.arguments)) {
          return invalid(`${param}.arguments`, `${param}.arguments must be JSON (the call's arguments as a JSON text)`)
        }
        calls.add(item.call_id)
        pending ??= { content: null, refusal: undefined, calls: [] }
        pending.calls.push({
          id: item.call_id,
          type: "function",
          function: { name: item.name, arguments: item.arguments }
        })
        return undefined
      }
      case "function_call_output": {
        if (typeof item.call_id !== "string") return invalid(`${param}.call_id`, `${param} must have a call_id`)
        const text = textOf(item.output, `${param}.output`, false)
        if (Either.isLeft(text)) return text.left
        if (!calls.has(item.call_id)) {
          return invalid(
            `${param}.call_id`,
            `No tool call found for function call output with call_id ${item.call_id} (${param} answers no function_call of the conversation)`
          )
        }
        flush()
        messages.push({ role: "tool", tool_call_id: item.call_id, content: text.right.text } as Message)
        return undefined
      }
      case "item_reference": {
        const id = item.id
        const found = typeof id === "string" && resolve !== undefined ? resolve(id) : undefined
        if (found === undefined || found.type === "item_reference") {
          return new ResponsesRequestError({
            param: `${param}.id`,
            description: `${param} refers to item ${JSON.stringify(id)}, which is not an item of a stored response`,
            reason: "NotFound"
          })
        }
        return visit(found, param)
      }
      case "reasoning":
        // Models here do not reason: a client's reasoning item carries nothing for the model.
        return undefined
      default:
        return invalid(
          `${param}.type`,
          `${param} is an item of type ${JSON.stringify(type)}, which this engine does not take (it takes messages, function_call, function_call_output and item_reference)`
        )
    }
  }
  for (const { item, param } of items) {
    const error = visit(item, param)
    if (error !== undefined) return Either.left(error)
  }
  flush()
  return Either.right(messages)
}

const toolsOf = (request: ResponseCreateRequest): Either.Either<Array<Tool> | undefined, ResponsesRequestError> => {
  if (request.tools == null || request.tools.length === 0) return Either.right(undefined)
  const tools: Array<Tool> = []
  for (const [i, tool] of request.tools.entries()) {
    if (tool.type !== "function" || typeof (tool as { name?: unknown }).name !== "string") {
      return Either.left(
        invalid(
          `tools[${i}].type`,
          `tools[${i}] is a tool of type ${JSON.stringify(tool.type)}: built-in tools are not run by this engine; only function tools are served`
        )
      )
    }
    const fn = tool as {
      readonly name: string
      readonly description?: string | null
      readonly parameters?: unknown
      readonly strict?: boolean | null
    }
    tools.push({
      type: "function",
      function: {
        name: fn.name,
        ...(fn.description == null ? {} : { description: fn.description }),
        ...(fn.parameters == null ? {} : { parameters: fn.parameters as Tool["function"]["parameters"] }),
        ...(fn.strict == null ? {} : { strict: fn.strict })
      }
    })
  }
  return Either.right(tools)
}

const toolChoiceOf = (
  choice: ResponseCreateRequest["tool_choice"]
): Either.Either<ChatRequest["tool_choice"], ResponsesRequestError> => {
  if (choice == null) return Either.right(undefined)
  if (typeof choice === "string") return Either.right(choice)
  if (choice.type === "function" && typeof (choice as { name?: unknown }).name === "string") {
    return Either.right({ type: "function", function: { name: (choice as { name: string }).name } })
  }
  return Either.left(
    invalid(
      "tool_choice",
      `tool_choice of type ${JSON.stringify(choice.type)} is not served (none, auto, required or {type: "function", name})`
    )
  )
}

const CHAT_FIELDS: ReadonlyArray<readonly [RegExp, string]> = [
  [/^max_(completion_)?tokens/, "max_output_tokens"],
  [/^(response_format|structured_outputs)(\.json_schema)?/, "text.format"],
  [/^messages(\.\d+|\[\d+\])?/, "input"],
  [/^tools(\.|\[)(\d+)\]?\.function/, "tools[$2]"]
]

/**
 * A chat-completions field named in an error (`max_completion_tokens`, `response_format.json_schema.schema`,
 * `tools.0.function.parameters`) as the Responses request names it (`max_output_tokens`, `text.format.schema`,
 * `tools[0].parameters`); other names are the same in both.
 */
export const responsesParamOf = (param: string | null): string | null => {
  if (param === null) return null
  for (const [pattern, name] of CHAT_FIELDS) if (pattern.test(param)) return param.replace(pattern, name)
  return param
}

/** An error message about a chat-completions request, in the Responses request's words. */
export const responsesMessageOf = (message: string): string =>
  message.replace(/\bmax_completion_tokens\b/g, "max_output_tokens").replace(/\bresponse_format\b/g, "text.format")

/** Whether the request asks for the output text's logprobs. */
export const wantsLogprobs = (request: ResponseCreateRequest): boolean =>
  (request.include ?? []).includes(INCLUDE_LOGPROBS) || (request.top_logprobs ?? 0) > 0

/** The fields a chat engine cannot serve, refused by name (`undefined` when none is set). */
const unsupported = (request: ResponseCreateRequest): ResponsesRequestError | undefined => {
  if (request.background === true) {
    return invalid("background", "background responses are not served: this engine answers while the request waits")
  }
  if (request.conversation != null) {
    return invalid("conversation", "conversations are not served; continue a response with previous_response_id")
  }
  if (request.prompt != null) return invalid("prompt", "prompt templates are not served; send the input itself")
  if (request.context_management != null) {
    return invalid("context_management", "context management (compaction) is not served")
  }
  if (request.truncation === "auto") {
    return invalid("truncation", 'truncation "auto" is not served: a prompt over the context is refused ("disabled")')
  }
  return undefined
}

/**
 * A Responses request as the fields of a chat-completions request (see the module), given the items of the
 * responses it continues and a way to resolve item references.
 */
export const chatRequestOf = (
  request: ResponseCreateRequest,
  context: Context = {}
): Either.Either<ChatRequest, ResponsesRequestError> => {
  const refused = unsupported(request)
  if (refused !== undefined) return Either.left(refused)
  const items = [
    ...(context.history ?? []).map((item, i) => ({ item, param: `previous_response_id (item ${i})` })),
    ...inputItemsOf(request).map((item, i) => ({
      item,
      param: typeof request.input === "string" ? "input" : `input[${i}]`
    }))
  ]
  return Either.gen(function* () {
    const messages = yield* messagesOf(items, context.resolve)
    if (request.instructions != null && request.instructions !== "") {
      messages.unshift({ role: "system", content: request.instructions } as Message)
    }
    if (messages.length === 0) return yield* Either.left(invalid("input", "input is empty: send at least one message"))
    const tools = yield* toolsOf(request)
    const toolChoice = yield* toolChoiceOf(request.tool_choice)
    const format = request.text?.format
    const logprobs = wantsLogprobs(request)
    const chat: ChatRequest = {
      messages,
      ...(tools === undefined ? {} : { tools }),
      ...(toolChoice === undefined ? {} : { tool_choice: toolChoice }),
      ...(request.parallel_tool_calls == null ? {} : { parallel_tool_calls: request.parallel_tool_calls }),
      ...(request.max_output_tokens == null ? {} : { max_completion_tokens: request.max_output_tokens }),
      ...(request.temperature == null ? {} : { temperature: request.temperature }),
      ...(request.top_p == null ? {} : { top_p: request.top_p }),
      ...(request.seed == null ? {} : { seed: request.seed }),
      ...(logprobs
        ? { logprobs: true, ...(request.top_logprobs == null ? {} : { top_logprobs: request.top_logprobs }) }
        : {}),
      ...(format == null || format.type === "text"
        ? {}
        : format.type === "json_object"
          ? { response_format: { type: "json_object" as const } }
          : {
              response_format: {
                type: "json_schema" as const,
                json_schema: {
                  name: format.name,
                  schema: format.schema,
                  ...(format.description == null ? {} : { description: format.description }),
                  ...(format.strict == null ? {} : { strict: format.strict })
                }
              }
            })
    } as ChatRequest
    return chat
  })
}

// ---------------------------------------------------------------------------------------------------------------
// Responses out of completions
// ---------------------------------------------------------------------------------------------------------------

/** What a response carries beside its output: its id, time, model, and whether it is stored. */
export interface ResponseMeta {
  /** The response's id (`resp_...`; see {@link newResponseId}). */
  readonly id: string
  /** Unix seconds. */
  readonly createdAt: number
  /** The model that answered. */
  readonly model: string
  /** Whether the response is stored (for `previous_response_id` and the reads). */
  readonly store: boolean
}

const hex = (bytes: number): string => {
  const buffer = new Uint8Array(bytes)
  globalThis.crypto.getRandomValues(buffer)
  return Array.from(buffer, (b) => b.toString(16).padStart(2, "0")).join("")
}

/** A new response id: `resp_` and 24 random bytes in hex. */
export const newResponseId = (): string => `resp_${hex(24)}`

const suffixOf = (responseId: string) => responseId.replace(/^resp_/, "")

/**
 * The id of a response's output item (`msg_<suffix>_<n>` or `fc_<suffix>_<n>`), or of its `n`th stored input
 * item (`<kind>_<suffix>_i<n>`): an item's id names its response, so a reference to it is found by it.
 */
export const itemId = (responseId: string, kind: "msg" | "fc" | "fco", index: number | string): string =>
  `${kind}_${suffixOf(responseId)}_${index}`

/** The response id an item id (see {@link itemId}) belongs to, if it is one. */
export const responseIdOfItem = (id: string): string | undefined => {
  const match = /^(?:msg|fc|fco)_([0-9a-f]+)_i?\d+$/.exec(id)
  return match === null ? undefined : `resp_${match[1]}`
}

const logprobOf = (entry: TokenLogprob): Logprob => ({
  token: entry.token,
  logprob: entry.logprob,
  bytes: entry.bytes ?? [],
  top_logprobs: (entry.top_logprobs ?? []).map((top) => ({
    token: top.token,
    logprob: top.logprob,
    bytes: top.bytes ?? []
  }))
})

const deltaLogprobOf = (entry: TokenLogprob): DeltaLogprob => ({
  token: entry.token,
  logprob: entry.logprob,
  top_logprobs: (entry.top_logprobs ?? []).map((top) => ({ token: top.token, logprob: top.logprob }))
})

const usageOf = (usage: ChatCompletion["usage"] | null | undefined): ResponseUsage | null =>
  usage == null
    ? null
    : {
        input_tokens: usage.prompt_tokens,
        input_tokens_details: { cached_tokens: usage.prompt_tokens_details?.cached_tokens ?? 0 },
        output_tokens: usage.completion_tokens,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: usage.total_tokens
      }

const incompleteReason = (finish: string | null | undefined) =>
  finish === "length"
    ? ("max_output_tokens" as const)
    : finish === "content_filter"
      ? ("content_filter" as const)
      : undefined

const messageItem = (
  id: string,
  text: string,
  refusal: string | null | undefined,
  logprobs: ReadonlyArray<Logprob> | undefined,
  status: OutputMessage["status"]
): OutputMessage => ({
  type: "message",
  id,
  role: "assistant",
  status,
  content: [
    ...(text !== "" || refusal == null
      ? [{ type: "output_text" as const, text, annotations: [], ...(logprobs === undefined ? {} : { logprobs }) }]
      : []),
    ...(refusal == null ? [] : [{ type: "refusal" as const, refusal }])
  ]
})

/** The response around its output items (see {@link responseOf}); `status` from the finish. */
const envelope = (
  request: ResponseCreateRequest,
  meta: ResponseMeta,
  output: ReadonlyArray<OutputItem>,
  finish: { readonly status: Response["status"]; readonly reason: "max_output_tokens" | "content_filter" | undefined },
  usage: ResponseUsage | null
): Response => ({
  id: meta.id,
  object: "response",
  created_at: meta.createdAt,
  status: finish.status,
  completed_at: finish.status === "in_progress" ? null : meta.createdAt,
  error: null,
  incomplete_details: finish.reason === undefined ? null : { reason: finish.reason },
  instructions: request.instructions ?? null,
  max_output_tokens: request.max_output_tokens ?? null,
  metadata: request.metadata ?? {},
  model: meta.model,
  output,
  parallel_tool_calls: request.parallel_tool_calls ?? true,
  previous_response_id: request.previous_response_id ?? null,
  temperature: request.temperature ?? null,
  top_p: request.top_p ?? null,
  top_logprobs: request.top_logprobs ?? null,
  text: { format: request.text?.format ?? { type: "text" } },
  tool_choice: request.tool_choice ?? "auto",
  tools: (request.tools ?? []).filter((tool): tool is Response["tools"][number] => tool.type === "function"),
  truncation: "disabled",
  store: meta.store,
  background: false,
  reasoning: null,
  service_tier: "default",
  user: request.user ?? null,
  usage
})

/** The output items of a choice: its text (unless empty beside calls) a message, its tool calls function calls. */
const outputOf = (choice: Choice, responseId: string, logprobs: boolean): Array<OutputItem> => {
  const output: Array<OutputItem> = []
  const text = choice.message.content ?? ""
  const calls = choice.message.tool_calls ?? []
  const reason = incompleteReason(choice.finish_reason)
  if (text !== "" || choice.message.refusal != null || calls.length === 0) {
    output.push(
      messageItem(
        itemId(responseId, "msg", output.length),
        text,
        choice.message.refusal,
        logprobs ? (choice.logprobs?.content ?? []).map(logprobOf) : undefined,
        reason === undefined ? "completed" : "incomplete"
      )
    )
  }
  for (const [i, call] of calls.entries()) {
    output.push({
      type: "function_call",
      id: itemId(responseId, "fc", output.length),
      call_id: call.id ?? `call_${suffixOf(responseId).slice(0, 16)}_${i}`,
      name: call.function.name,
      arguments: call.function.arguments,
      status: "completed"
    })
  }
  return output
}

/** A chat completion's first choice as a `Response` to the request (see the module). */
export const responseOf = (
  completion: ChatCompletion,
  request: ResponseCreateRequest,
  meta: ResponseMeta
): Response => {
  const choice = completion.choices[0]
  const reason = incompleteReason(choice?.finish_reason)
  return envelope(
    request,
    meta,
    choice === undefined ? [] : outputOf(choice, meta.id, wantsLogprobs(request)),
    { status: reason === undefined ? "completed" : "incomplete", reason },
    usageOf(completion.usage)
  )
}

/**
 * A request's input as stored items, each with an id (`GET /v1/responses/{id}/input_items` lists them): a
 * string input is one user message with an `input_text` part; item references stay as the items they name.
 */
export const storedInputItemsOf = (
  request: ResponseCreateRequest,
  responseId: string,
  resolve?: ((id: string) => AnyItem | undefined) | undefined
): Array<StoredInputItem> => {
  const out: Array<StoredInputItem> = []
  for (const [i, raw] of inputItemsOf(request).entries()) {
    const item = raw.type === "item_reference" && typeof raw.id === "string" ? (resolve?.(raw.id) ?? raw) : raw
    const type = item.type ?? "message"
    if (type === "message") {
      const content =
        typeof item.content === "string"
          ? [
              {
                type: item.role === "assistant" ? ("output_text" as const) : ("input_text" as const),
                text: item.content,
                ...(item.role === "assistant" ? { annotations: [] } : {})
              }
            ]
          : item.content
      out.push({
        type: "message",
        id: typeof item.id === "string" ? item.id : itemId(responseId, "msg", `i${i}`),
        role: item.role as "user",
        status: "completed",
        content: content as Extract<StoredInputItem, { type: "message" }>["content"]
      })
    } else if (type === "function_call") {
      out.push({
        type: "function_call",
        id: typeof item.id === "string" ? item.id : itemId(responseId, "fc", `i${i}`),
        call_id: String(item.call_id),
        name: String(item.name),
        arguments: String(item.arguments),
        status: "completed"
      })
    } else if (type === "function_call_output") {
      out.push({
        type: "function_call_output",
        id: typeof item.id === "string" ? item.id : itemId(responseId, "fco", `i${i}`),
        call_id: String(item.call_id),
        output: item.output as string,
        status: "completed"
      })
    }
  }
  return out
}

/** A stored response (the backend's store, a rollout's): the response, its input items, what it continued. */
export interface StoredResponse {
  /** The response as it was answered. */
  readonly response: Response
  /** Its input items, each with an id. */
  readonly inputItems: ReadonlyArray<StoredInputItem>
  /** The response it continued, if any. */
  readonly previousResponseId: string | null
}

/** A stored response's items: its input items, then its output items. */
export const itemsOf = (stored: StoredResponse): ReadonlyArray<AnyItem> =>
  [...stored.inputItems, ...stored.response.output] as ReadonlyArray<AnyItem>

/**
 * The items a request continuing a chain of responses starts from (`Context.history`): `chain` newest first
 * (as a `previous_response_id` walk finds it), the items oldest first.
 */
export const historyItemsOf = (chain: ReadonlyArray<StoredResponse>): Array<AnyItem> =>
  [...chain].reverse().flatMap(itemsOf)

/** The first field a schema's failure names, as a dotted path (`input.0.content`), or null for the whole. */
export const firstField = (error: ParseResult.ParseError): string | null => {
  const issue = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
  return issue === undefined || issue.path.length === 0 ? null : issue.path.join(".")
}

/** The query of a stored response's input items page, as the URL gives it. */
export interface InputItemsQuery {
  readonly after?: string | undefined
  readonly limit?: string | undefined
  readonly order?: string | undefined
}

/**
 * A page of a stored response's input items (`limit` 1 to 100, default 20; `order` `desc` by default; `after`
 * an item id), or the error naming the parameter at fault.
 */
export const inputItemsPage = (
  items: ReadonlyArray<StoredInputItem>,
  query: InputItemsQuery
): Either.Either<InputItemList, ResponsesRequestError> => {
  const limit = query.limit === undefined ? 20 : Number(query.limit)
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) {
    return Either.left(invalid("limit", `limit must be a whole number from 1 to 100, got '${query.limit}'`))
  }
  const order = query.order ?? "desc"
  if (order !== "asc" && order !== "desc")
    return Either.left(invalid("order", `order must be asc or desc, got '${order}'`))
  const all = order === "desc" ? [...items].reverse() : [...items]
  let from = 0
  if (query.after !== undefined) {
    const at = all.findIndex((item) => item.id === query.after)
    if (at === -1) return Either.left(invalid("after", `after names no input item of this response: '${query.after}'`))
    from = at + 1
  }
  const data = all.slice(from, from + limit)
  return Either.right({
    object: "list",
    data,
    first_id: data[0]?.id ?? null,
    last_id: data.at(-1)?.id ?? null,
    has_more: from + limit < all.length
  })
}

// ---------------------------------------------------------------------------------------------------------------
// Streaming
// ---------------------------------------------------------------------------------------------------------------

/** A server-sent event of a streamed response as it is sent: `event: <type>` and `data: <json>`. */
export const sseOf = (event: ResponseStreamEvent): string => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`

/** An event before it is numbered. */
type Unnumbered = ResponseStreamEvent extends infer E ? (E extends unknown ? Omit<E, "sequence_number"> : never) : never

interface OpenText {
  readonly kind: "text"
  readonly index: number
  readonly id: string
  text: string
  readonly logprobs: Array<TokenLogprob>
}

interface OpenCall {
  readonly kind: "call"
  readonly index: number
  readonly id: string
  readonly chatIndex: number
  callId: string
  name: string
  arguments: string
}

/**
 * The chunks of a streamed chat completion (its first choice) as the Responses API's events (see
 * `ResponseStreamEvent` for the order). Feed it with {@link ResponseEvents.start}, then
 * {@link ResponseEvents.push} per chunk, then {@link ResponseEvents.end}; each returns the events to send,
 * numbered from 0. The last event carries the whole `Response`, equal to {@link responseOf} of the same
 * completion.
 */
export class ResponseEvents {
  private sequence = 0
  private readonly output: Array<OutputItem> = []
  private open: OpenText | OpenCall | undefined
  private readonly calls = new Map<number, OpenCall>()
  private finish: string | null | undefined
  private usage: ResponseUsage | null = null
  private readonly logprobs: boolean

  constructor(
    private readonly request: ResponseCreateRequest,
    private readonly meta: ResponseMeta
  ) {
    this.logprobs = wantsLogprobs(request)
  }

  private event(event: Unnumbered): ResponseStreamEvent {
    return { ...event, sequence_number: this.sequence++ } as ResponseStreamEvent
  }

  private response(status: Response["status"]): Response {
    const reason = status === "in_progress" ? undefined : incompleteReason(this.finish)
    return envelope(
      this.request,
      this.meta,
      status === "in_progress" ? [] : this.output,
      { status: reason === undefined ? status : "incomplete", reason },
      status === "in_progress" ? null : this.usage
    )
  }

  /** The first two events: `response.created` and `response.in_progress`. */
  start(): Array<ResponseStreamEvent> {
    const response = this.response("in_progress")
    return [this.event({ type: "response.created", response }), this.event({ type: "response.in_progress", response })]
  }

  private close(events: Array<ResponseStreamEvent>): void {
    const open = this.open
    if (open === undefined) return
    this.open = undefined
    if (open.kind === "text") {
      const status = incompleteReason(this.finish) === undefined ? "completed" : "incomplete"
      const logprobs = this.logprobs ? open.logprobs.map(logprobOf) : undefined
      const deltas = this.logprobs ? open.logprobs.map(deltaLogprobOf) : []
      const item = messageItem(open.id, open.text, undefined, logprobs, status)
      const part = item.content[0]!
      events.push(
        this.event({
          type: "response.output_text.done",
          item_id: open.id,
          output_index: open.index,
          content_index: 0,
          text: open.text,
          logprobs: deltas
        }),
        this.event({
          type: "response.content_part.done",
          item_id: open.id,
          output_index: open.index,
          content_index: 0,
          part
        }),
        this.event({ type: "response.output_item.done", output_index: open.index, item })
      )
      this.output.push(item)
    } else {
      const item: OutputFunctionCall = {
        type: "function_call",
        id: open.id,
        call_id: open.callId,
        name: open.name,
        arguments: open.arguments,
        status: "completed"
      }
      events.push(
        this.event({
          type: "response.function_call_arguments.done",
          item_id: open.id,
          output_index: open.index,
          name: open.name,
          arguments: open.arguments
        }),
        this.event({ type: "response.output_item.done", output_index: open.index, item })
      )
      this.output.push(item)
    }
  }

  /** Opens a message item (closing the open one): its `output_item.added` and `content_part.added`. */
  private openText(events: Array<ResponseStreamEvent>): void {
    this.close(events)
    const index = this.nextIndex()
    const open: OpenText = { kind: "text", index, id: itemId(this.meta.id, "msg", index), text: "", logprobs: [] }
    this.open = open
    events.push(
      this.event({
        type: "response.output_item.added",
        output_index: index,
        item: { type: "message", id: open.id, role: "assistant", status: "in_progress", content: [] }
      }),
      this.event({
        type: "response.content_part.added",
        item_id: open.id,
        output_index: index,
        content_index: 0,
        part: { type: "output_text", text: "", annotations: [] }
      })
    )
  }

  private nextIndex(): number {
    return this.output.length + (this.open === undefined ? 0 : 1)
  }

  /** The events of one chunk (only its first choice counts). */
  push(chunk: ChatCompletionChunk): Array<ResponseStreamEvent> {
    const events: Array<ResponseStreamEvent> = []
    if (chunk.usage != null) this.usage = usageOf(chunk.usage)
    const choice = chunk.choices.find((c) => c.index === 0)
    if (choice === undefined) return events
    const content = choice.delta.content
    const logprobs = choice.logprobs?.content ?? []
    if ((content != null && content !== "") || (logprobs.length > 0 && this.open?.kind === "text")) {
      if (this.open?.kind !== "text") this.openText(events)
      const open = this.open as OpenText
      open.text += content ?? ""
      open.logprobs.push(...logprobs)
      events.push(
        this.event({
          type: "response.output_text.delta",
          item_id: open.id,
          output_index: open.index,
          content_index: 0,
          delta: content ?? "",
          logprobs: this.logprobs ? logprobs.map(deltaLogprobOf) : []
        })
      )
    }
    for (const call of choice.delta.tool_calls ?? []) {
      let open = this.calls.get(call.index)
      if (open === undefined) {
        this.close(events)
        const index = this.nextIndex()
        open = {
          kind: "call",
          index,
          id: itemId(this.meta.id, "fc", index),
          chatIndex: call.index,
          callId: call.id ?? `call_${suffixOf(this.meta.id).slice(0, 16)}_${call.index}`,
          name: call.function?.name ?? "",
          arguments: ""
        }
        this.calls.set(call.index, open)
        this.open = open
        events.push(
          this.event({
            type: "response.output_item.added",
            output_index: index,
            item: {
              type: "function_call",
              id: open.id,
              call_id: open.callId,
              name: open.name,
              arguments: "",
              status: "in_progress"
            }
          })
        )
      } else if (this.open !== open) {
        // A later fragment of a call that is no longer the open item: the engines here never send one.
        continue
      }
      if (call.id != null) open.callId = call.id
      if (call.function?.name != null && open.name === "") open.name = call.function.name
      const fragment = call.function?.arguments ?? ""
      if (fragment !== "") {
        open.arguments += fragment
        events.push(
          this.event({
            type: "response.function_call_arguments.delta",
            item_id: open.id,
            output_index: open.index,
            delta: fragment
          })
        )
      }
    }
    if (choice.finish_reason != null) this.finish = choice.finish_reason
    return events
  }

  /** The last events: the open item closed, then `response.completed` (or `response.incomplete`). */
  end(): Array<ResponseStreamEvent> {
    const events: Array<ResponseStreamEvent> = []
    if (this.output.length === 0 && this.open === undefined) {
      // Nothing streamed: an empty message, as responseOf gives for an empty choice.
      this.openText(events)
    }
    this.close(events)
    const response = this.response("completed")
    events.push(
      this.event({ type: response.status === "incomplete" ? "response.incomplete" : "response.completed", response })
    )
    return events
  }

  /** An `error` event (the stream failed after it began). */
  error(message: string, code: string | null = null, param: string | null = null): ResponseStreamEvent {
    return this.event({ type: "error", code, message, param })
  }
}
