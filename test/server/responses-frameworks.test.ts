/**
 * Four libraries in their default mode, the Responses API, unchanged against the embedded backend's
 * `/v1/responses` (they got a 404 before it was served): the AI SDK's `openai(id)`, the OpenAI Agents SDK's
 * default model, `@effect/ai-openai`'s `OpenAiLanguageModel` and LangChain with `useResponsesApi`. Each runs a
 * tool agent (see `test/support/frameworkAgents.ts`); what is checked is the protocol: every request reached
 * `/v1/responses` and was answered 200, the calls the backend answered are the calls each library ran (with
 * the arguments it sent), their results went back, and the text a library returns is the text the backend
 * answered. The model is the 2,048-token base model, whose text is noise.
 */
import { describe, expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as LocalBackend from "../../src/LocalBackend.js"
import { LONG_CONTEXT_MODEL } from "../../src/local/server/internal/baseModels.js"
import { API_KEY } from "../support/clients.js"
import {
  aiSdk,
  type Connection,
  callArguments,
  effectAi,
  langChain,
  openAiAgents,
  outputText,
  SYSTEM
} from "../support/frameworkAgents.js"
import { Backend } from "./support.js"

/** What an answer says it was asked: the settings of the request it answers, as the backend read them. */
const asked = (toolChoice: unknown, instructions: string | null = null) => ({
  instructions,
  max_output_tokens: 96,
  tool_choice: toolChoice,
  tools: [expect.objectContaining({ type: "function", name: "add" })]
})

const connection = Effect.map(
  LocalBackend.LocalBackend,
  ({ url }): Connection => ({ baseURL: `${url}/v1`, apiKey: API_KEY, model: LONG_CONTEXT_MODEL })
)

describe("Responses-API libraries against the embedded backend, unchanged", () => {
  layer(Backend, { excludeTestServices: true })((it) => {
    it.effect("the AI SDK's default provider: generateText with a tool over two steps", () =>
      Effect.gen(function* () {
        const result = yield* Effect.flatMap(connection, (c) => Effect.promise(() => aiSdk(c)))
        expect(result.sent).toEqual([
          ["/v1/responses", 200],
          ["/v1/responses", 200]
        ])
        expect(result.steps.map((step) => step.finishReason)).toEqual(["tool-calls", "tool-calls"])
        for (const step of result.steps) {
          expect(step.calls).toBeGreaterThan(0)
          expect(step.invalid).toBe(0)
          expect(step.results).toBe(step.calls)
        }
        expect(result.executed.length).toBe(result.steps.reduce((n, step) => n + step.calls, 0))
        expect(result.executed).toEqual(result.answers.flatMap(callArguments))
        // The AI SDK sends its system prompt as an input message, not as instructions.
        for (const answer of result.answers) expect(answer).toMatchObject(asked("required"))
      })
    )

    it.effect("the OpenAI Agents SDK's default model: a required call, its output, then an answer", () =>
      Effect.gen(function* () {
        const result = yield* Effect.flatMap(connection, (c) => Effect.promise(() => openAiAgents(c)))
        expect(result.sent.length).toBeGreaterThanOrEqual(2)
        for (const [path, status] of result.sent) expect([path, status]).toEqual(["/v1/responses", 200])
        expect(result.items.slice(0, 2)).toEqual(["tool_call_item", "tool_call_output_item"])
        expect(result.executed.length).toBe(result.items.filter((item) => item === "tool_call_item").length)
        // The calls run are those answered, with their arguments; the final output is the last answer's text,
        // an answer without calls (one with calls would have been run and answered again).
        expect(result.answers.length).toBe(result.sent.length)
        expect(result.executed).toEqual(result.answers.flatMap(callArguments))
        expect(callArguments(result.answers.at(-1))).toEqual([])
        expect(result.answers.at(-1)?.output?.map((item) => item.type)).toEqual(["message"])
        expect(result.finalOutput).toBe(outputText(result.answers.at(-1)))
        expect(result.answers[0]).toMatchObject(asked("required", SYSTEM))
        for (const answer of result.answers.slice(1)) expect(answer).toMatchObject(asked("auto", SYSTEM))
      })
    )

    it.effect("@effect/ai-openai's OpenAiLanguageModel: generateText with a Toolkit, generateObject", () =>
      Effect.gen(function* () {
        const result = yield* Effect.flatMap(connection, effectAi)
        expect(result.sent).toEqual([
          ["/v1/responses", 200],
          ["/v1/responses", 200]
        ])
        // The calls answered first, each run with its arguments: the sum of its a and b.
        const params = callArguments(result.answers[0]) as Array<{ a: number; b: number }>
        expect(params.length).toBeGreaterThan(0)
        expect(result.calls).toEqual(params.map(() => "add"))
        expect(result.params).toEqual(params)
        expect(result.results).toEqual(params.map(({ a, b }) => a + b))
        expect(result.answers[0]).toMatchObject(asked("required"))
        // The object is the second answer's text, decoded.
        expect(["apple", "pear"]).toContain(result.fruit)
        expect(JSON.parse(outputText(result.answers[1]))).toEqual({ fruit: result.fruit })
      })
    )

    it.effect("LangChain with useResponsesApi: a named call, its ToolMessage, a next turn", () =>
      Effect.gen(function* () {
        const result = yield* Effect.flatMap(connection, (c) => Effect.promise(() => langChain(c)))
        expect(result.sent).toEqual([
          ["/v1/responses", 200],
          ["/v1/responses", 200]
        ])
        expect(result.call).toBe("add")
        expect(Number.isInteger(result.args.a) && Number.isInteger(result.args.b)).toBe(true)
        // The call is the first answer's, the next turn the second answer: its text and its calls.
        expect(callArguments(result.answers[0])).toEqual([result.args])
        expect(result.answers[0]).toMatchObject(asked({ type: "function", name: "add" }))
        expect(result.answers[1]).toMatchObject(asked("auto"))
        expect(result.second).toEqual({
          text: outputText(result.answers[1]),
          calls: callArguments(result.answers[1]).length
        })
      })
    )
  })
})
