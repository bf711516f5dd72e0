/**
 * The OpenAI Agents SDK (`@openai/agents`), used unchanged against the embedded backend (issue 12): an
 * `Agent` whose model is an `OpenAIChatCompletionsModel` over an `OpenAI` client pointed at the backend (the
 * chat-completions API, not the Responses API), with a zod-declared `tool(...)`, run by a `Runner` with
 * tracing disabled. The SDK sends its tools' JSON schemas and `tool_choice`, parses each call's arguments
 * and validates them with the zod schema (a call that fails is reported to the model as an error, so the
 * test also counts the tool's own runs), runs the tool and sends the call and its output back turn after
 * turn. Every request the SDK sent is recorded by the client's `fetch`, to check it was accepted. The model
 * is the 2,048-token base model (`effect-rl/tiny-2k`); its text is noise, so what is checked is the protocol.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Agent, type FunctionToolResult, OpenAIChatCompletionsModel, Runner, tool } from "@openai/agents"
import * as Effect from "effect/Effect"
import OpenAI from "openai"
import { z } from "zod"
import * as LocalBackend from "../../src/LocalBackend.js"
import { LONG_CONTEXT_MODEL } from "../../src/local/server/internal/baseModels.js"
import { API_KEY } from "../support/clients.js"
import { Backend } from "./support.js"

/** A request the SDK sent, as the backend saw it. */
interface Sent {
  readonly path: string
  readonly body: {
    readonly messages: ReadonlyArray<{
      readonly role: string
      readonly tool_call_id?: string
      readonly tool_calls?: ReadonlyArray<{ readonly id: string; readonly function: { readonly arguments: string } }>
    }>
    readonly [key: string]: unknown
  }
  readonly status: number
}

const Add = z.object({ a: z.number().int(), b: z.number().int() })

/** A model over an `OpenAI` client against the backend whose requests are recorded in `sent`; the tool. */
const setup = Effect.map(LocalBackend.LocalBackend, ({ url }) => {
  const sent: Array<Sent> = []
  const client = new OpenAI({
    apiKey: API_KEY,
    baseURL: `${url}/v1`,
    maxRetries: 0,
    fetch: async (input: string | URL | Request, init?: RequestInit) => {
      const response = await fetch(input, init)
      const path = new URL(input instanceof Request ? input.url : input).pathname
      sent.push({ path, body: JSON.parse(String(init?.body ?? "{}")), status: response.status })
      return response
    }
  })
  const added: Array<z.infer<typeof Add>> = []
  const add = tool({
    name: "add",
    description: "Adds two integers",
    parameters: Add,
    execute: async (input) => {
      added.push(input)
      return String(input.a + input.b)
    }
  })
  const model = new OpenAIChatCompletionsModel(client, LONG_CONTEXT_MODEL)
  return { model, add, added, sent, runner: new Runner({ tracingDisabled: true }) }
})

/** Every call the SDK sent back fits the tool's schema, and each is answered by a tool message of its id. */
const checkHistory = (request: Sent) => {
  const calls = request.body.messages.flatMap((message) => message.tool_calls ?? [])
  for (const call of calls) expect(Add.safeParse(JSON.parse(call.function.arguments)).success).toBe(true)
  const answered = request.body.messages.filter((m) => m.role === "tool").map((m) => m.tool_call_id)
  expect(answered).toEqual(calls.map((call) => call.id))
  return calls.length
}

describe("the OpenAI Agents SDK against the embedded backend", () => {
  layer(Backend, { excludeTestServices: true })((it) => {
    it.effect("run(): tool_choice required for three turns, each turn's calls run and sent back", () =>
      Effect.gen(function* () {
        const { model, add, added, sent, runner } = yield* setup
        let turns = 0
        const agent = new Agent({
          name: "adder",
          instructions: "Add numbers with the add tool.",
          model,
          tools: [add],
          modelSettings: { toolChoice: "required", maxTokens: 80, providerData: { seed: 3 } },
          resetToolChoice: false,
          // The run ends after the third turn of tool calls, with the last tool output as its answer.
          toolUseBehavior: (_context, results: Array<FunctionToolResult>) => {
            turns++
            const last = results.at(-1)
            return turns < 3 || last?.type !== "function_output"
              ? { isFinalOutput: false, isInterrupted: undefined }
              : { isFinalOutput: true, isInterrupted: undefined, finalOutput: String(last.output) }
          }
        })
        const result = yield* Effect.promise(() => runner.run(agent, "What is 2 + 3, then plus 4?", { maxTurns: 5 }))
        expect(turns).toBe(3)
        expect(sent.map(({ path, status }) => [path, status])).toEqual(
          Array.from({ length: 3 }, () => ["/v1/chat/completions", 200])
        )
        for (const request of sent) {
          expect(request.body).toMatchObject({ model: LONG_CONTEXT_MODEL, tool_choice: "required", seed: 3 })
          expect(request.body.messages[0]).toEqual({ role: "system", content: "Add numbers with the add tool." })
        }
        // Every call validated and ran (none came back as a tool error), and each turn carried the earlier ones.
        expect(checkHistory(sent[1]!)).toBeGreaterThan(0)
        expect(checkHistory(sent[2]!)).toBeGreaterThan(checkHistory(sent[1]!))
        const calls = result.newItems.filter((item) => item.type === "tool_call_item")
        const outputs = result.newItems.filter((item) => item.type === "tool_call_output_item")
        expect(calls.length).toBe(added.length)
        expect(outputs.length).toBe(added.length)
        expect(result.finalOutput).toBe(String(added.at(-1)!.a + added.at(-1)!.b))
      })
    )

    it.effect("the SDK's default: required once, then auto (resetToolChoice); streamed the same way", () =>
      Effect.gen(function* () {
        for (const stream of [false, true]) {
          const { model, add, added, sent, runner } = yield* setup
          const agent = new Agent({
            name: "adder",
            model,
            tools: [add],
            modelSettings: { toolChoice: "add", maxTokens: 80, providerData: { seed: 5 } }
          })
          const outcome = yield* Effect.promise(async () => {
            try {
              if (!stream) return (await runner.run(agent, "2 + 3?", { maxTurns: 4 })).finalOutput
              const result = await runner.run(agent, "2 + 3?", { maxTurns: 4, stream: true })
              for await (const _ of result.toStream()) {
                // Events are consumed; the run's outcome is read below.
              }
              await result.completed
              if (result.error !== null && result.error !== undefined) throw result.error
              return result.finalOutput
            } catch (error) {
              // The fresh model may go on calling under auto until the turn limit: a protocol-level outcome.
              if (error instanceof Error && error.name === "MaxTurnsExceededError") return error
              throw error
            }
          })
          expect(sent.every(({ status }) => status === 200)).toBe(true)
          expect(sent[0]!.body.tool_choice).toEqual({ type: "function", function: { name: "add" } })
          expect(sent[0]!.body.stream).toBe(stream)
          if (stream) expect(sent[0]!.body.stream_options).toEqual({ include_usage: true })
          expect(added.length).toBeGreaterThan(0)
          expect(sent.length).toBeGreaterThan(1)
          // After a tool ran, the SDK resets tool_choice so the model may answer.
          for (const request of sent.slice(1)) expect(request.body.tool_choice ?? "auto").toBe("auto")
          checkHistory(sent.at(-1)!)
          if (typeof outcome === "string") expect(sent.length).toBeLessThanOrEqual(4)
          else expect(outcome).toBeInstanceOf(Error)
        }
      })
    )
  })
})
