/**
 * LangChain's `ChatOpenAI` (`@langchain/openai` over `@langchain/core`), in its chat-completions mode, used
 * unchanged against the embedded backend (issue 12), as against a hosted OpenAI-compatible engine: tools
 * bound with `bindTools` (a zod tool and a tool in OpenAI's JSON-schema form), `tool_choice` required and
 * named, `parallel_tool_calls`, `strict`, a streamed answer assembled from its chunks, and a tool loop that
 * sends the calls and the tools' `ToolMessage`s back turn after turn. LangChain parses every call's arguments
 * (a call it cannot parse lands in `invalid_tool_calls`); the test checks each parsed call against its
 * tool's schema. Every request LangChain sent is recorded by the client's `fetch`, to check it went to
 * `/chat/completions` and was accepted. The model is the 2,048-token base model (`effect-rl/tiny-2k`).
 */

import { describe, expect, layer } from "@effect/vitest"
import type { AIMessage, AIMessageChunk, BaseMessage, UsageMetadata } from "@langchain/core/messages"
import { HumanMessage } from "@langchain/core/messages"
import { tool } from "@langchain/core/tools"
import { ChatOpenAI, type ChatOpenAICallOptions } from "@langchain/openai"
import * as Effect from "effect/Effect"
import { z } from "zod"
import type { JsonValue } from "../../src/api/Json.js"
import * as LocalBackend from "../../src/LocalBackend.js"
import { LONG_CONTEXT_MODEL } from "../../src/local/server/internal/baseModels.js"
import { API_KEY } from "../support/clients.js"
import { validates } from "../support/schemas.js"
import { Backend } from "./support.js"

const added: Array<{ a: number; b: number }> = []
const add = tool(
  async ({ a, b }) => {
    added.push({ a, b })
    return String(a + b)
  },
  {
    name: "add",
    description: "Adds two integers",
    schema: z.object({ a: z.number().int(), b: z.number().int() })
  }
)
const lookupParameters = {
  type: "object",
  properties: { key: { type: "string", maxLength: 6 }, exact: { type: "boolean" } },
  required: ["key"],
  additionalProperties: false
} as const
const lookup = {
  type: "function" as const,
  function: { name: "lookup", description: "Looks a key up", parameters: lookupParameters }
}

/** A request LangChain sent, as the backend saw it. */
interface Sent {
  readonly path: string
  readonly body: Record<string, unknown>
  readonly status: number
}

/** A `ChatOpenAI` against the backend whose requests are recorded in `sent`. */
const chatModel = (options: { readonly seed: number; readonly maxTokens?: number }) =>
  Effect.map(LocalBackend.LocalBackend, ({ url }) => {
    const sent: Array<Sent> = []
    const model = new ChatOpenAI({
      model: LONG_CONTEXT_MODEL,
      apiKey: API_KEY,
      configuration: {
        baseURL: `${url}/v1`,
        fetch: async (input: string | URL | Request, init?: RequestInit) => {
          const response = await fetch(input, init)
          const path = new URL(input instanceof Request ? input.url : input).pathname
          sent.push({ path, body: JSON.parse(String(init?.body ?? "{}")), status: response.status })
          return response
        }
      },
      maxRetries: 0,
      maxTokens: options.maxTokens ?? 96
    })
    /** The model with tools bound, and the seed in every request. */
    const bind = (tools: Parameters<typeof model.bindTools>[0], kwargs: Partial<ChatOpenAICallOptions>) =>
      model.bindTools(tools, { seed: options.seed, ...kwargs })
    return { bind, sent }
  })

/** The parsed calls of an answer, each checked against its tool's schema; none failed to parse. */
const checkedCalls = (message: AIMessage | AIMessageChunk) => {
  expect(message.invalid_tool_calls ?? []).toEqual([])
  const calls = message.tool_calls ?? []
  for (const call of calls) {
    expect(call.id).toMatch(/^call_/)
    if (call.name === "add") expect(add.schema.safeParse(call.args).success).toBe(true)
    else {
      expect(call.name).toBe("lookup")
      expect(validates(lookupParameters as unknown as JsonValue, call.args)).toBe(true)
    }
  }
  return calls
}

describe("LangChain's ChatOpenAI against the embedded backend", () => {
  layer(Backend, { excludeTestServices: true })((it) => {
    it.effect("bindTools, tool_choice required: calls parsed by LangChain that fit their tools' schemas", () =>
      Effect.gen(function* () {
        const { bind, sent } = yield* chatModel({ seed: 1 })
        const bound = bind([add, lookup], { tool_choice: "required" })
        const answer = yield* Effect.promise(() => bound.invoke("1 + 2?"))
        expect(checkedCalls(answer).length).toBeGreaterThan(0)
        expect(answer.response_metadata.finish_reason).toBe("tool_calls")
        expect(sent.map(({ path, status }) => [path, status])).toEqual([["/v1/chat/completions", 200]])
        const body = sent[0]!.body
        expect(body).toMatchObject({ model: LONG_CONTEXT_MODEL, tool_choice: "required", seed: 1, max_tokens: 96 })
        expect((body.tools as Array<{ function: { name: string } }>).map((t) => t.function.name)).toEqual([
          "add",
          "lookup"
        ])
      })
    )

    it.effect("a named tool_choice, strict, parallel_tool_calls false: that tool, once", () =>
      Effect.gen(function* () {
        for (const seed of [2, 3, 4]) {
          const { bind, sent } = yield* chatModel({ seed })
          const bound = bind([add, lookup], {
            tool_choice: "lookup",
            strict: true,
            parallel_tool_calls: false
          })
          const answer = yield* Effect.promise(() => bound.invoke("Find abc."))
          expect(checkedCalls(answer).map((call) => call.name)).toEqual(["lookup"])
          expect(sent[0]!.body.tool_choice).toEqual({ type: "function", function: { name: "lookup" } })
          expect(sent[0]!.body.parallel_tool_calls).toBe(false)
          expect(sent[0]!.status).toBe(200)
        }
      })
    )

    it.effect("streamed: the chunks concatenate to the same calls as the whole answer", () =>
      Effect.gen(function* () {
        const { bind, sent } = yield* chatModel({ seed: 5 })
        const bound = bind([add, lookup], { tool_choice: "required" })
        const whole = yield* Effect.promise(() => bound.invoke("1 + 2?"))
        const streamed = yield* Effect.promise(async () => {
          let message: AIMessageChunk | undefined
          for await (const chunk of await bound.stream("1 + 2?"))
            message = message === undefined ? chunk : message.concat(chunk)
          return message!
        })
        expect(sent[1]!.body.stream).toBe(true)
        expect(sent[1]!.status).toBe(200)
        const strip = (calls: ReadonlyArray<{ name: string; args: unknown; id?: string | undefined }>) =>
          calls.map(({ name, args }) => ({ name, args }))
        expect(strip(checkedCalls(streamed))).toEqual(strip(checkedCalls(whole)))
        // The stream's usage chunk (LangChain asks for it with stream_options.include_usage) was read too.
        const usage = (message: AIMessage | AIMessageChunk) =>
          (message as { usage_metadata?: UsageMetadata | undefined }).usage_metadata
        expect(sent[1]!.body.stream_options).toEqual({ include_usage: true })
        expect(usage(streamed)?.input_tokens).toBeGreaterThan(0)
        expect(usage(streamed)?.input_tokens).toBe(usage(whole)?.input_tokens)
      })
    )

    it.effect("a tool loop: calls run, ToolMessages sent back, three turns, then an answer without tools", () =>
      Effect.gen(function* () {
        const { bind, sent } = yield* chatModel({ seed: 6, maxTokens: 80 })
        const bound = bind([add], { tool_choice: "required" })
        const messages: Array<BaseMessage> = [new HumanMessage("What is 2 + 3, then plus 4?")]
        added.length = 0
        let calls = 0
        for (let turn = 0; turn < 3; turn++) {
          const answer = yield* Effect.promise(() => bound.invoke(messages))
          messages.push(answer)
          for (const call of checkedCalls(answer)) {
            messages.push(yield* Effect.promise(() => add.invoke(call)))
            calls++
          }
        }
        expect(added).toHaveLength(calls)
        const last = yield* Effect.promise(() => bind([add], { tool_choice: "none" }).invoke(messages))
        expect(last.tool_calls ?? []).toEqual([])
        expect(sent.map(({ status }) => status)).toEqual([200, 200, 200, 200])
        // Each turn carried the earlier calls and results: the prompts grew, and the tool messages went back
        // with the ids of the calls they answer.
        const prompts = sent.map(({ body }) => (body.messages as Array<unknown>).length)
        expect(prompts[1]!).toBeGreaterThan(prompts[0]!)
        expect(prompts[3]!).toBeGreaterThan(prompts[2]!)
        const wire = sent[3]!.body.messages as Array<{
          role: string
          tool_call_id?: string
          tool_calls?: Array<{ id: string }>
        }>
        const ids = wire.flatMap((message) => message.tool_calls?.map((call) => call.id) ?? [])
        expect(wire.filter((message) => message.role === "tool").map((message) => message.tool_call_id)).toEqual(ids)
      })
    )
  })
})
