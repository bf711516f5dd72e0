/**
 * Tool calls on the embedded backend through the `openai` SDK, used unchanged (issue 12): every `tool_choice`,
 * `n > 1`, `parallel_tool_calls: false`, a streamed answer assembled by the SDK's own stream helper into the
 * same calls, a second turn with the tool results, the JSON Schemas zod 4 writes (numeric bounds included),
 * and the 400s the SDK surfaces as `BadRequestError`. The
 * model is the fresh base model, so what it calls is chance; what is checked is that every call it makes is
 * one of the tools with arguments that fit the tool's schema.
 */
import { describe, expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import OpenAI from "openai"
import type { ChatCompletionTool } from "openai/resources/chat/completions"
import { z } from "zod"
import type { JsonValue } from "../../src/api/Json.js"
import * as LocalBackend from "../../src/LocalBackend.js"
import { LONG_CONTEXT_MODEL } from "../../src/local/server/internal/baseModels.js"
import { BASE_MODEL } from "../../src/local/server/internal/inference.js"
import { API_KEY } from "../support/clients.js"
import { validates } from "../support/schemas.js"
import { Backend } from "./support.js"

const sdk = Effect.map(
  LocalBackend.LocalBackend,
  ({ url }) => new OpenAI({ apiKey: API_KEY, baseURL: `${url}/v1`, maxRetries: 0 })
)
const run = <A>(f: () => Promise<A>) => Effect.tryPromise({ try: f, catch: (error) => error })

const tools: Array<ChatCompletionTool> = [
  {
    type: "function",
    function: {
      name: "add",
      parameters: {
        type: "object",
        properties: { a: { type: "integer" }, b: { type: "integer" } },
        required: ["a", "b"]
      }
    }
  },
  {
    type: "function",
    function: {
      name: "lookup",
      parameters: { type: "object", properties: { key: { type: "string", maxLength: 6 } }, required: ["key"] }
    }
  }
]
const ask = {
  model: BASE_MODEL,
  messages: [{ role: "user" as const, content: "1 + 2?" }],
  tools,
  max_completion_tokens: 100
}

type Message = OpenAI.Chat.Completions.ChatCompletionMessage

/** Every call of a message names a tool and fits its schema; the calls as `[name, arguments]`. */
const checkedCalls = (message: Message): Array<[string, string]> =>
  (message.tool_calls ?? []).map((call) => {
    if (call.type !== "function") throw new Error(`unexpected call type ${call.type}`)
    const tool = tools.find((t) => t.type === "function" && t.function.name === call.function.name)
    expect(tool).toBeDefined()
    const parameters = tool?.type === "function" ? tool.function.parameters : undefined
    expect(validates(parameters as JsonValue, JSON.parse(call.function.arguments))).toBe(true)
    expect(call.id).toMatch(/^call_/)
    return [call.function.name, call.function.arguments]
  })

describe("tool calls through the openai SDK", () => {
  layer(Backend, { excludeTestServices: true })((it) => {
    it.effect("required: every choice of n = 4 calls a tool with fitting arguments, finish_reason tool_calls", () =>
      Effect.gen(function* () {
        const client = yield* sdk
        const completion = yield* run(() =>
          client.chat.completions.create({ ...ask, tool_choice: "required", n: 4, seed: 1 })
        )
        expect(completion.choices).toHaveLength(4)
        for (const choice of completion.choices) {
          expect(choice.finish_reason).toBe("tool_calls")
          expect(checkedCalls(choice.message).length).toBeGreaterThanOrEqual(1)
          expect(choice.message.content).toBeNull()
        }
      })
    )

    it.effect("a named tool: that tool, once; parallel_tool_calls: false: one call at most", () =>
      Effect.gen(function* () {
        const client = yield* sdk
        const named = yield* run(() =>
          client.chat.completions.create({
            ...ask,
            tool_choice: { type: "function", function: { name: "lookup" } },
            n: 3,
            seed: 2
          })
        )
        for (const choice of named.choices)
          expect(checkedCalls(choice.message).map(([name]) => name)).toEqual(["lookup"])
        for (let seed = 0; seed < 5; seed++) {
          const single = yield* run(() =>
            client.chat.completions.create({ ...ask, tool_choice: "required", parallel_tool_calls: false, seed })
          )
          expect(checkedCalls(single.choices[0]!.message)).toHaveLength(1)
        }
      })
    )

    it.effect("auto (the default with tools) and none answer; none never calls", () =>
      Effect.gen(function* () {
        const client = yield* sdk
        for (const tool_choice of ["auto", undefined] as const) {
          const completion = yield* run(() =>
            client.chat.completions.create({
              ...ask,
              ...(tool_choice === undefined ? {} : { tool_choice }),
              n: 3,
              seed: 3
            })
          )
          for (const choice of completion.choices) {
            checkedCalls(choice.message)
            expect(["stop", "length", "tool_calls"]).toContain(choice.finish_reason)
          }
        }
        const none = yield* run(() => client.chat.completions.create({ ...ask, tool_choice: "none", n: 3, seed: 3 }))
        for (const choice of none.choices) expect(choice.message.tool_calls).toBeUndefined()
      })
    )

    it.effect("streamed: the SDK's stream helper assembles the same calls as the whole answer", () =>
      Effect.gen(function* () {
        const client = yield* sdk
        const request = { ...ask, tool_choice: "required" as const, seed: 11 }
        const whole = yield* run(() => client.chat.completions.create(request))
        const streamed = yield* run(() => client.chat.completions.stream(request).finalChatCompletion())
        expect(streamed.choices[0]?.finish_reason).toBe("tool_calls")
        expect(checkedCalls(streamed.choices[0]!.message)).toEqual(checkedCalls(whole.choices[0]!.message))
      })
    )

    it.effect("a second turn with the calls and their results is answered", () =>
      Effect.gen(function* () {
        const client = yield* sdk
        const first = yield* run(() => client.chat.completions.create({ ...ask, tool_choice: "required", seed: 5 }))
        const message = first.choices[0]!.message
        const results = (message.tool_calls ?? []).map((call) => ({
          role: "tool" as const,
          tool_call_id: call.id,
          content: "3"
        }))
        expect(results.length).toBeGreaterThan(0)
        const second = yield* run(() =>
          client.chat.completions.create({
            ...ask,
            messages: [...ask.messages, message, ...results],
            tool_choice: "none",
            max_completion_tokens: 8,
            seed: 5
          })
        )
        expect(second.choices[0]?.message.role).toBe("assistant")
        expect(second.usage!.prompt_tokens).toBeGreaterThan(first.usage!.prompt_tokens)
      })
    )

    it.effect("zod 4's JSON Schemas, with the bounds it writes (the safe-integer range of .int()), are served", () =>
      Effect.gen(function* () {
        const client = yield* sdk
        // What z.toJSONSchema writes: the engine refused its minimum and maximum before (issue 12).
        const parameters = z.toJSONSchema(
          z.object({ n: z.number().int(), p: z.number().min(0).max(1), k: z.number().int().positive().lt(100) })
        ) as Record<string, unknown>
        expect(JSON.stringify(parameters)).toContain('"minimum":-9007199254740991')
        const completion = yield* run(() =>
          client.chat.completions.create({
            ...ask,
            model: LONG_CONTEXT_MODEL,
            tools: [{ type: "function", function: { name: "rate", parameters } }],
            tool_choice: "required",
            n: 4,
            seed: 7
          })
        )
        for (const choice of completion.choices) {
          const calls = choice.message.tool_calls ?? []
          expect(calls.length).toBeGreaterThan(0)
          for (const call of calls) {
            if (call.type !== "function") throw new Error(`unexpected call type ${call.type}`)
            const args: unknown = JSON.parse(call.function.arguments)
            expect(validates(parameters as JsonValue, args), call.function.arguments).toBe(true)
          }
        }
      })
    )

    it.effect("a named tool not in tools, and required without tools, are 400s naming tool_choice", () =>
      Effect.gen(function* () {
        const client = yield* sdk
        const unknown = yield* Effect.flip(
          run(() =>
            client.chat.completions.create({ ...ask, tool_choice: { type: "function", function: { name: "sub" } } })
          )
        )
        expect(unknown).toBeInstanceOf(OpenAI.BadRequestError)
        expect((unknown as InstanceType<typeof OpenAI.BadRequestError>).param).toBe("tool_choice")
        expect((unknown as Error).message).toContain('"sub", which is not in tools')
        const required = yield* Effect.flip(
          run(() =>
            client.chat.completions.create({ model: BASE_MODEL, messages: ask.messages, tool_choice: "required" })
          )
        )
        expect(required).toBeInstanceOf(OpenAI.BadRequestError)
        expect((required as InstanceType<typeof OpenAI.BadRequestError>).param).toBe("tool_choice")
      })
    )
  })
})
