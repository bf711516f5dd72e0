/**
 * The Vercel AI SDK (`ai` with `@ai-sdk/openai` in its chat-completions mode, `openai.chat(...)`), used
 * unchanged against the embedded backend (issue 12): `generateText` with zod-declared tools in a multi-step
 * loop, as against a hosted OpenAI-compatible engine. The SDK sends its tools' JSON schemas and `tool_choice`,
 * parses and validates the calls against the zod schemas, runs the tools and sends the calls and results
 * back; every step must come back as valid calls. With `toolChoice: "required"` the fresh model calls a tool
 * at every step, so the loop runs until its step limit. The model is the 2,048-token base model
 * (`effect-rl/tiny-2k`): three steps of calls and results do not fit the default model's 512 tokens.
 */
import { createOpenAI } from "@ai-sdk/openai"
import { describe, expect, layer } from "@effect/vitest"
import { generateText, stepCountIs, tool } from "ai"
import * as Effect from "effect/Effect"
import { z } from "zod"
import * as LocalBackend from "../../src/LocalBackend.js"
import { LONG_CONTEXT_MODEL } from "../../src/local/server/internal/baseModels.js"
import { BASE_MODEL } from "../../src/local/server/internal/inference.js"
import { API_KEY } from "../support/clients.js"
import { Backend } from "./support.js"

const provider = Effect.map(LocalBackend.LocalBackend, ({ url }) =>
  createOpenAI({ baseURL: `${url}/v1`, apiKey: API_KEY })
)

describe("the AI SDK against the embedded backend", () => {
  layer(Backend, { excludeTestServices: true })((it) => {
    it.effect("generateText with tools: calls validated by zod, run, and sent back, step after step", () =>
      Effect.gen(function* () {
        const openai = yield* provider
        const executed: Array<{ a: number; b: number }> = []
        const add = tool({
          description: "Adds two numbers",
          inputSchema: z.object({ a: z.number().int(), b: z.number().int() }),
          execute: async (input) => {
            executed.push(input)
            return input.a + input.b
          }
        })
        const result = yield* Effect.promise(() =>
          generateText({
            model: openai.chat(LONG_CONTEXT_MODEL),
            prompt: "2 + 3?",
            tools: { add },
            toolChoice: "required",
            stopWhen: stepCountIs(3),
            maxOutputTokens: 72,
            maxRetries: 0,
            seed: 4
          })
        )
        expect(result.steps).toHaveLength(3)
        for (const step of result.steps) {
          expect(step.finishReason).toBe("tool-calls")
          expect(step.toolCalls.length).toBeGreaterThan(0)
          for (const call of step.toolCalls) {
            expect(call.toolName).toBe("add")
            expect("invalid" in call && call.invalid === true).toBe(false)
          }
          expect(step.toolResults.length).toBe(step.toolCalls.length)
        }
        expect(executed.length).toBe(result.steps.reduce((n, step) => n + step.toolCalls.length, 0))
        // Later steps carried the earlier calls and results: their prompts grew.
        const prompts = result.steps.map((step) => step.usage.inputTokens ?? 0)
        expect(prompts[1]!).toBeGreaterThan(prompts[0]!)
        expect(prompts[2]!).toBeGreaterThan(prompts[1]!)
      })
    )

    it.effect("with the SDK's default tool choice (auto) a text answer ends the loop", () =>
      Effect.gen(function* () {
        const openai = yield* provider
        const result = yield* Effect.promise(() =>
          generateText({
            model: openai.chat(BASE_MODEL),
            prompt: "Say hi.",
            tools: { add: tool({ inputSchema: z.object({ a: z.number(), b: z.number() }), execute: async () => 0 }) },
            stopWhen: stepCountIs(3),
            maxOutputTokens: 20,
            maxRetries: 0,
            seed: 1
          })
        )
        // Whatever the model chose, each step is a well-formed answer: text, or calls that validated.
        for (const step of result.steps) {
          expect(["stop", "length", "tool-calls"]).toContain(step.finishReason)
          for (const call of step.toolCalls) expect("invalid" in call && call.invalid === true).toBe(false)
        }
        expect(result.steps.at(-1)?.finishReason).not.toBe("error")
      })
    )
  })
})
