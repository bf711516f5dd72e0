/**
 * Tool agents written with four third-party libraries in their default mode, the Responses API, exactly as
 * their users write them: the Vercel AI SDK's default provider (`openai(id)`), the OpenAI Agents SDK's default
 * model (its `OpenAIProvider`), `@effect/ai-openai`'s `OpenAiLanguageModel`, and LangChain's `ChatOpenAI` with
 * `useResponsesApi: true`. Each is given a connection (a base URL, a key and optionally a `fetch`), so the
 * same agent runs against the embedded backend's `/v1/responses` and inside a rollout (`RolloutFetch`). Every
 * request an agent sends is counted by path and status, to check what reached which endpoint.
 */

import { createOpenAI } from "@ai-sdk/openai"
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import { OpenAiClient, OpenAiLanguageModel } from "@effect/ai-openai"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { HumanMessage, SystemMessage, ToolMessage } from "@langchain/core/messages"
import { ChatOpenAI } from "@langchain/openai"
import { Agent, tool as agentsTool, OpenAIProvider, Runner } from "@openai/agents"
import { generateText, stepCountIs, tool } from "ai"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import OpenAI from "openai"
import { z } from "zod"

/** Where an agent sends its requests. */
export interface Connection {
  readonly baseURL: string
  readonly apiKey: string
  readonly model: string
  /** The `fetch` to send with (default: the global one). */
  readonly fetch?: typeof globalThis.fetch | undefined
}

/** A request an agent sent: its path and the status it got. */
export type Sent = readonly [path: string, status: number]

/** A `fetch` that records each request's path and status in `sent`, and each JSON answer's body in `answers`. */
export const counting = (
  sent: Array<Sent>,
  inner: typeof globalThis.fetch = globalThis.fetch,
  answers: Array<Answer> = []
): typeof globalThis.fetch =>
  (async (input: string | URL | Request, init?: RequestInit) => {
    const response = await inner(input, init)
    const url = input instanceof Request ? input.url : String(input)
    sent.push([new URL(url).pathname, response.status])
    if ((response.headers.get("content-type") ?? "").startsWith("application/json")) {
      answers.push((await response.clone().json()) as Answer)
    }
    return response
  }) as typeof globalThis.fetch

/** A JSON answer an agent got (a `Response` of the Responses API, or an error), as sent. */
export interface Answer {
  readonly output?: ReadonlyArray<{
    readonly type: string
    readonly content?: ReadonlyArray<{ readonly type: string; readonly text?: string }>
    readonly arguments?: string
  }>
}

/** An answer's output text: its messages' `output_text` parts, joined. */
export const outputText = (answer: Answer | undefined): string =>
  (answer?.output ?? [])
    .flatMap((item) => (item.type === "message" ? (item.content ?? []) : []))
    .map((part) => (part.type === "output_text" ? (part.text ?? "") : ""))
    .join("")

/** An answer's function calls' arguments, parsed. */
export const callArguments = (answer: Answer | undefined): Array<unknown> =>
  (answer?.output ?? []).flatMap((item) =>
    item.type === "function_call" ? [JSON.parse(item.arguments ?? "null") as unknown] : []
  )

/** The system prompt of every agent. */
export const SYSTEM = "You add numbers with the add tool."
/** The question of every agent. */
export const QUESTION = "What is 2 + 3?"

const Add = z.object({ a: z.number().int(), b: z.number().int() })

/**
 * The AI SDK's default provider: `generateText` with a zod tool, the call required, two steps (a call, its
 * result sent back, a second call).
 */
export const aiSdk = async (connection: Connection) => {
  const sent: Array<Sent> = []
  const answers: Array<Answer> = []
  const openai = createOpenAI({
    baseURL: connection.baseURL,
    apiKey: connection.apiKey,
    fetch: counting(sent, connection.fetch, answers)
  })
  const executed: Array<z.infer<typeof Add>> = []
  const add = tool({
    description: "Adds two integers",
    inputSchema: Add,
    execute: async (input) => {
      executed.push(input)
      return input.a + input.b
    }
  })
  const result = await generateText({
    model: openai(connection.model),
    system: SYSTEM,
    prompt: QUESTION,
    tools: { add },
    toolChoice: "required",
    stopWhen: stepCountIs(2),
    maxOutputTokens: 96,
    maxRetries: 0
  })
  return {
    sent,
    answers,
    executed,
    steps: result.steps.map((step) => ({
      finishReason: step.finishReason,
      calls: step.toolCalls.length,
      invalid: step.toolCalls.filter((call) => "invalid" in call && call.invalid === true).length,
      results: step.toolResults.length
    }))
  }
}

/**
 * The OpenAI Agents SDK's default model (Responses, through its `OpenAIProvider`): an agent with a zod tool,
 * the call required on the first turn, then `auto` (the SDK's `resetToolChoice`) until it answers.
 */
export const openAiAgents = async (connection: Connection) => {
  const sent: Array<Sent> = []
  const answers: Array<Answer> = []
  const client = new OpenAI({
    baseURL: connection.baseURL,
    apiKey: connection.apiKey,
    maxRetries: 0,
    fetch: counting(sent, connection.fetch, answers)
  })
  const executed: Array<z.infer<typeof Add>> = []
  const add = agentsTool({
    name: "add",
    description: "Adds two integers",
    parameters: Add,
    execute: async (input) => {
      executed.push(input)
      return String(input.a + input.b)
    }
  })
  const agent = new Agent({
    name: "adder",
    instructions: SYSTEM,
    model: connection.model,
    tools: [add],
    modelSettings: { toolChoice: "required", maxTokens: 96 }
  })
  const runner = new Runner({ modelProvider: new OpenAIProvider({ openAIClient: client }), tracingDisabled: true })
  const result = await runner.run(agent, QUESTION, { maxTurns: 6 })
  return {
    sent,
    answers,
    executed,
    items: result.newItems.map((item) => item.type),
    finalOutput: result.finalOutput
  }
}

const AddTool = Tool.make("add", {
  description: "Adds two numbers",
  parameters: { a: Schema.Number, b: Schema.Number },
  success: Schema.Number
})
const MathToolkit = Toolkit.make(AddTool)
const MathHandlers = MathToolkit.toLayer({ add: ({ a, b }) => Effect.succeed(a + b) })
const Fruit = Schema.Struct({ fruit: Schema.Literal("apple", "pear") })

/**
 * `@effect/ai-openai`'s `OpenAiLanguageModel`: `generateText` with a system prompt and a `Toolkit` (the call
 * required), then `generateObject` with a Schema.
 */
export const effectAi = (connection: Connection) => {
  const sent: Array<Sent> = []
  const answers: Array<Answer> = []
  return Effect.gen(function* () {
    const text = yield* LanguageModel.generateText({
      prompt: [
        { role: "system", content: SYSTEM },
        { role: "user", content: QUESTION }
      ],
      toolkit: MathToolkit,
      toolChoice: "required"
    })
    const object = yield* LanguageModel.generateObject({ prompt: "A fruit?", schema: Fruit, objectName: "fruit" })
    return {
      sent,
      answers,
      calls: text.toolCalls.map((call) => call.name),
      params: text.toolCalls.map((call) => call.params),
      results: text.toolResults.map((result) => result.result),
      fruit: object.value.fruit
    }
  }).pipe(
    Effect.provide(
      OpenAiLanguageModel.layer({ model: connection.model, config: { max_output_tokens: 96 } }).pipe(
        Layer.provideMerge(MathHandlers),
        Layer.provide(OpenAiClient.layer({ apiKey: Redacted.make(connection.apiKey), apiUrl: connection.baseURL })),
        Layer.provide(
          FetchHttpClient.layer.pipe(
            Layer.provide(Layer.succeed(FetchHttpClient.Fetch, counting(sent, connection.fetch, answers)))
          )
        )
      )
    )
  )
}

const addSchema = {
  type: "object",
  properties: { a: { type: "integer" }, b: { type: "integer" } },
  required: ["a", "b"],
  additionalProperties: false
}

/**
 * LangChain's `ChatOpenAI` on the Responses API: a call of the named tool, its result as a `ToolMessage`, a
 * next turn. (On this API @langchain/openai 1.5 sends a named `tool_choice` but drops the strings `required`,
 * `auto` and `none`: the second turn goes with the service's default, `auto`.)
 */
export const langChain = async (connection: Connection) => {
  const sent: Array<Sent> = []
  const answers: Array<Answer> = []
  const model = new ChatOpenAI({
    model: connection.model,
    apiKey: connection.apiKey,
    useResponsesApi: true,
    maxTokens: 96,
    maxRetries: 0,
    configuration: { baseURL: connection.baseURL, fetch: counting(sent, connection.fetch, answers) }
  })
  const tools = [
    { type: "function" as const, function: { name: "add", description: "Adds two integers", parameters: addSchema } }
  ]
  const messages = [new SystemMessage(SYSTEM), new HumanMessage(QUESTION)]
  const first = await model.bindTools(tools, { tool_choice: "add" }).invoke(messages)
  const call = first.tool_calls?.[0]
  if (call === undefined) throw new Error("LangChain's first answer has no tool call")
  const args = call.args as { a: number; b: number }
  const second = await model
    .bindTools(tools)
    .invoke([...messages, first, new ToolMessage({ tool_call_id: call.id ?? "", content: String(args.a + args.b) })])
  return {
    sent,
    answers,
    call: call.name,
    args,
    second: { text: second.text, calls: second.tool_calls?.length ?? 0 }
  }
}
