/**
 * Four libraries in their default mode, the Responses API, unchanged against the embedded backend's
 * `/v1/responses` (they got a 404 before it was served): the AI SDK's `openai(id)`, the OpenAI Agents SDK's
 * default model, `@effect/ai-openai`'s `OpenAiLanguageModel` and LangChain with `useResponsesApi`. Each runs a
 * tool agent (see `test/support/frameworkAgents.ts`); what is checked is the protocol: every request reached
 * `/v1/responses` and was answered 200, the calls parsed against the tools' schemas, ran, and went back. The
 * model is the 2,048-token base model, whose text is noise.
 */
import { describe, expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as LocalBackend from "../../src/LocalBackend.js"
import { LONG_CONTEXT_MODEL } from "../../src/local/server/internal/baseModels.js"
import { API_KEY } from "../support/clients.js"
import { aiSdk, type Connection, effectAi, langChain, openAiAgents } from "../support/frameworkAgents.js"
import { Backend } from "./support.js"

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
      })
    )

    it.effect("the OpenAI Agents SDK's default model: a required call, its output, then an answer", () =>
      Effect.gen(function* () {
        const result = yield* Effect.flatMap(connection, (c) => Effect.promise(() => openAiAgents(c)))
        expect(result.sent.length).toBeGreaterThanOrEqual(2)
        for (const [path, status] of result.sent) expect([path, status]).toEqual(["/v1/responses", 200])
        expect(result.items.slice(0, 2)).toEqual(["tool_call_item", "tool_call_output_item"])
        expect(result.executed.length).toBe(result.items.filter((item) => item === "tool_call_item").length)
        expect(typeof result.finalOutput).toBe("string")
      })
    )

    it.effect("@effect/ai-openai's OpenAiLanguageModel: generateText with a Toolkit, generateObject", () =>
      Effect.gen(function* () {
        const result = yield* Effect.flatMap(connection, effectAi)
        expect(result.calls.length).toBeGreaterThan(0)
        expect(result.calls.every((name) => name === "add")).toBe(true)
        expect(result.results.every((value) => typeof value === "number")).toBe(true)
        expect(["apple", "pear"]).toContain(result.fruit)
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
        expect(typeof result.second.text).toBe("string")
      })
    )
  })
})
