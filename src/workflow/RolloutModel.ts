/**
 * Agents written with `@effect/ai`, trained unchanged: a layer providing `@effect/ai`'s `LanguageModel`
 * backed by the running rollout's policy, every generation recorded into its trajectory.
 *
 * Code written with `LanguageModel.generateText({ prompt, toolkit })`, `generateObject` or `Chat` runs as it
 * is; each generation is a {@link Rollout.chat} (logprobs and token ids asked for, the choice recorded, the
 * prompt's messages not yet recorded added as context), so text, tool calls, tool results and structured
 * output all land in `messages_and_choices`. The prompt is sent as chat-completions messages, which the
 * hosted training service serves. (`@effect/ai-openai`'s `OpenAiLanguageModel`, which speaks the Responses
 * API, works in a rollout too, over `RolloutFetch.fetch()`.) A tool call goes back to the model with its
 * arguments exactly as it wrote them, so the next turn continues the recorded conversation.
 *
 * ```ts
 * import { LanguageModel } from "@effect/ai"
 * const agent = LanguageModel.generateText({ prompt: "What is 2 + 3?", toolkit: MathToolkit })
 * const finished = yield* Rollout.run(
 *   policy,
 *   agent.pipe(Effect.provide([RolloutModel.layer({ request: { max_completion_tokens: 256 } }), MathHandlers]))
 * )
 * ```
 *
 * Needs `@effect/ai` (an optional peer dependency); this module is a subpath export only
 * (`effect-rl/RolloutModel`), so the package's root never loads it.
 *
 * @since 0.1.0
 */
import * as AiError from "@effect/ai/AiError"
import * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Prompt from "@effect/ai/Prompt"
import type * as Response from "@effect/ai/Response"
import * as Tool from "@effect/ai/Tool"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import type { ChatCompletion, ToolChoice } from "../api/ChatCompletion.js"
import type { AssistantMessage, Message, Tool as WireTool } from "../api/ChatMessage.js"
import type { Request } from "./Policy.js"
import * as Rollout from "./Rollout.js"
import { parametersOf } from "./Tools.js"

/** Options of {@link layer}. */
export interface Options {
  /**
   * Request fields for every generation: `max_completion_tokens`, `temperature`, `seed`, ... (`messages`,
   * `tools`, `tool_choice` and `response_format` come from what `@effect/ai` asks for).
   */
  readonly request?: Partial<Omit<Request, "messages" | "tools" | "tool_choice" | "response_format">> | undefined
}

const MODULE = "RolloutModel"

const malformedInput = (method: string, description: string) =>
  new AiError.MalformedInput({ module: MODULE, method, description })

const resultText = (result: unknown): string => (typeof result === "string" ? result : (JSON.stringify(result) ?? ""))

const userContent = (
  parts: ReadonlyArray<Prompt.UserMessagePart>,
  method: string
): Effect.Effect<string | ReadonlyArray<Record<string, unknown>>, AiError.MalformedInput> => {
  if (parts.every((part) => part.type === "text")) return Effect.succeed(parts.map((part) => part.text).join(""))
  return Effect.forEach(parts, (part): Effect.Effect<Record<string, unknown>, AiError.MalformedInput> => {
    if (part.type === "text") return Effect.succeed({ type: "text", text: part.text })
    if (part.mediaType.startsWith("image/")) {
      const url =
        part.data instanceof URL
          ? part.data.toString()
          : `data:${part.mediaType};base64,${typeof part.data === "string" ? part.data : Buffer.from(part.data).toString("base64")}`
      return Effect.succeed({ type: "image_url", image_url: { url } })
    }
    return Effect.fail(
      malformedInput(method, `a user file part of media type ${part.mediaType} has no chat-completions form`)
    )
  })
}

/** The chat-completions messages of a prompt; tool calls keep the arguments the model wrote (`written`). */
const messagesOf = (
  prompt: Prompt.Prompt,
  written: ReadonlyMap<string, string>,
  method: string
): Effect.Effect<ReadonlyArray<Message>, AiError.MalformedInput> =>
  Effect.map(
    Effect.forEach(prompt.content, (message): Effect.Effect<ReadonlyArray<Message>, AiError.MalformedInput> => {
      switch (message.role) {
        case "system":
          return Effect.succeed([{ role: "system", content: message.content }])
        case "user":
          return Effect.map(userContent(message.content, method), (content) => [{ role: "user", content } as Message])
        case "assistant": {
          const text = message.content.flatMap((part) => (part.type === "text" ? [part.text] : [])).join("")
          const calls = message.content.flatMap((part) =>
            part.type === "tool-call" && !part.providerExecuted
              ? [
                  {
                    id: part.id,
                    type: "function" as const,
                    function: { name: part.name, arguments: written.get(part.id) ?? JSON.stringify(part.params) }
                  }
                ]
              : []
          )
          const assistant: AssistantMessage = {
            role: "assistant",
            content: text === "" && calls.length > 0 ? null : text,
            ...(calls.length > 0 ? { tool_calls: calls } : {})
          }
          return Effect.succeed([assistant])
        }
        case "tool":
          return Effect.succeed(
            message.content.map(
              (part): Message => ({ role: "tool", tool_call_id: part.id, content: resultText(part.result) })
            )
          )
      }
    }),
    (lists) => lists.flat()
  )

const toolsOf = (
  tools: ReadonlyArray<Tool.Any>,
  method: string
): Effect.Effect<ReadonlyArray<WireTool>, AiError.MalformedInput> =>
  Effect.forEach(tools, (tool) => {
    if (!Tool.isUserDefined(tool)) {
      return Effect.fail(
        malformedInput(method, `the provider-defined tool ${tool.name} is not served by chat completions`)
      )
    }
    const description = Tool.getDescription(tool as Parameters<typeof Tool.getDescription>[0])
    return Effect.succeed<WireTool>({
      type: "function",
      function: {
        name: tool.name,
        ...(description === undefined ? {} : { description }),
        parameters: parametersOf(tool.parametersSchema)
      }
    })
  })

const toolChoiceOf = (choice: LanguageModel.ProviderOptions["toolChoice"]): ToolChoice => {
  if (typeof choice === "string") return choice
  if ("tool" in choice) return { type: "function", function: { name: choice.tool } }
  // `oneOf`: @effect/ai already left only those tools in the request.
  return choice.mode ?? "auto"
}

const finishReason = (reason: string | null | undefined): Response.FinishReason => {
  switch (reason) {
    case "stop":
      return "stop"
    case "length":
      return "length"
    case "tool_calls":
    case "function_call":
      return "tool-calls"
    case "content_filter":
      return "content-filter"
    default:
      return "unknown"
  }
}

/** The response parts of a completion's first choice, remembering each call's arguments as written. */
const partsOf = (
  completion: ChatCompletion,
  written: Map<string, string>,
  method: string
): Effect.Effect<Array<Response.PartEncoded>, AiError.MalformedOutput> =>
  Effect.gen(function* () {
    const choice = completion.choices[0]!
    const parts: Array<Response.PartEncoded> = [
      {
        type: "response-metadata",
        id: completion.id,
        modelId: completion.model,
        ...(completion.created === undefined ? {} : { timestamp: new Date(completion.created * 1000).toISOString() })
      }
    ]
    const text = choice.message.content
    if (text != null && text !== "") parts.push({ type: "text", text })
    for (const [i, call] of (choice.message.tool_calls ?? []).entries()) {
      const id = call.id ?? `call_${completion.id}_${i}`
      const params = yield* Effect.try({
        try: () => JSON.parse(call.function.arguments) as unknown,
        catch: (cause) =>
          new AiError.MalformedOutput({
            module: MODULE,
            method,
            description: `the arguments of the call ${id} of ${call.function.name} are not JSON`,
            cause
          })
      })
      written.set(id, call.function.arguments)
      parts.push({ type: "tool-call", id, name: call.function.name, params })
    }
    parts.push({
      type: "finish",
      reason: finishReason(choice.finish_reason),
      usage: {
        inputTokens: completion.usage?.prompt_tokens,
        outputTokens: completion.usage?.completion_tokens,
        totalTokens: completion.usage?.total_tokens
      }
    })
    return parts
  })

/** The stream parts of a finished generation: its text as one delta, each call whole. */
const streamPartsOf = (parts: ReadonlyArray<Response.PartEncoded>): Array<Response.StreamPartEncoded> =>
  parts.flatMap((part): Array<Response.StreamPartEncoded> => {
    switch (part.type) {
      case "text":
        return [
          { type: "text-start", id: "text" },
          { type: "text-delta", id: "text", delta: part.text },
          { type: "text-end", id: "text" }
        ]
      case "tool-call":
        return [
          { type: "tool-params-start", id: part.id, name: part.name },
          { type: "tool-params-delta", id: part.id, delta: JSON.stringify(part.params) },
          { type: "tool-params-end", id: part.id },
          part
        ]
      default:
        return [part as Response.StreamPartEncoded]
    }
  })

/**
 * An `@effect/ai` `LanguageModel` over the running rollout: each generation is a recorded chat completion of
 * the rollout's policy. Made once per rollout (it belongs to the rollout that provides it).
 */
export const make = (options: Options = {}): Effect.Effect<LanguageModel.Service, never, Rollout.Current> =>
  Effect.gen(function* () {
    const current = yield* Rollout.Current
    // The arguments of each call as the model wrote them (`1.50` stays `1.50` when the prompt sends it back).
    const written = new Map<string, string>()
    const generate = (provider: LanguageModel.ProviderOptions, method: string) =>
      Effect.gen(function* () {
        const messages = yield* messagesOf(provider.prompt, written, method)
        const tools = yield* toolsOf(provider.tools, method)
        const format = provider.responseFormat
        const completion = yield* Rollout.chat({
          ...options.request,
          messages,
          ...(tools.length > 0 ? { tools, tool_choice: toolChoiceOf(provider.toolChoice) } : {}),
          ...(format.type === "json"
            ? {
                response_format: {
                  type: "json_schema",
                  json_schema: { name: format.objectName, schema: parametersOf(format.schema), strict: true }
                }
              }
            : {})
        }).pipe(
          Effect.provideService(Rollout.Current, current),
          Effect.catchTags({
            ApiError: (error) =>
              Effect.fail(
                new AiError.UnknownError({ module: MODULE, method, description: error.message, cause: error })
              ),
            InvalidTurn: (error) => Effect.fail(malformedInput(method, error.message))
          })
        )
        return yield* partsOf(completion, written, method)
      })
    return yield* LanguageModel.make({
      generateText: (provider) => generate(provider, "generateText"),
      streamText: (provider) =>
        Stream.flatMap(Stream.fromEffect(generate(provider, "streamText")), (parts) =>
          Stream.fromIterable(streamPartsOf(parts))
        )
    })
  })

/**
 * The `@effect/ai` `LanguageModel` of the running rollout (see {@link make}): provide it inside
 * `Rollout.run` (or a `Gather` rollout), where `Rollout.Current` is.
 */
export const layer = (options: Options = {}): Layer.Layer<LanguageModel.LanguageModel, never, Rollout.Current> =>
  Layer.effect(LanguageModel.LanguageModel, make(options))
