/**
 * Example: the tool agent of `tools.ts` (call the right tool for the right city, answer with its result),
 * written with the Vercel AI SDK on its default provider, `openai(id)`, which speaks the Responses API, and
 * trained unchanged: `RolloutFetch.fetch()` is the rollout's `fetch`, so every request the SDK makes is a
 * recorded turn of the rollout's policy (a Responses request is translated onto the chat completion the
 * policy samples). The same world, question and reward as `tools.ts`, and its base model (on the
 * embedded backend the pretrained `effect-rl/base-2k`).
 *
 * Needs `ai`, `@ai-sdk/openai` and `zod` (`npm install ai @ai-sdk/openai zod`).
 *
 * Run: `npx tsx examples/tools-ai-sdk.ts [--steps n]`.
 */
import { createOpenAI } from "@ai-sdk/openai"
import { generateText, Output, stepCountIs, tool } from "ai"
import { Effect } from "effect"
import { Example, RolloutFetch } from "effect-rl"
import { z } from "zod"
import { ANSWERS, CITIES, exampleOf, type Played, question, type Scenario } from "./tools.js"

/** The agent, as AI SDK code: one step that must call a tool, then an answer as a constrained object. */
export const agent = async (fetch: typeof globalThis.fetch, scenario: Scenario): Promise<Played> => {
  const openai = createOpenAI({ apiKey: "rollout", fetch })
  const city = z.object({ city: z.enum(CITIES) })
  const tools = {
    weather: tool({
      description: "Weather in a city",
      inputSchema: city,
      execute: async (i) => scenario.weather[i.city]
    }),
    clock: tool({ description: "Time in a city", inputSchema: city, execute: async (i) => scenario.time[i.city] })
  }
  const first = await generateText({
    model: openai("policy"), // the rollout's policy answers, whatever the name
    prompt: question(scenario),
    tools,
    toolChoice: "required",
    stopWhen: stepCountIs(1),
    maxOutputTokens: 80
  })
  const answer = await generateText({
    model: openai("policy"),
    messages: [{ role: "user", content: question(scenario) }, ...first.response.messages],
    tools,
    toolChoice: "none",
    output: Output.object({ schema: z.object({ answer: z.enum(ANSWERS) }) }),
    maxOutputTokens: 40
  }).then(
    (result) => result.output.answer,
    () => null // an answer that does not parse scores 0
  )
  const call = first.toolCalls[0]
  return { tool: call?.toolName, city: (call?.input as { city?: string } | undefined)?.city, answer }
}

/** One rollout: the agent, given the rollout's `fetch`. */
export const play = (scenario: Scenario) =>
  Effect.flatMap(RolloutFetch.fetch(), (fetch) =>
    Effect.tryPromise({
      try: () => agent(fetch, scenario),
      catch: (cause) => cause as Error // the agent's own error leads a failed run's message
    })
  )

/** The example: as `tools.ts`, with the agent written with the AI SDK on the Responses API. */
export const example: Example.Example = exampleOf(
  "tools-ai-sdk",
  "The tool agent of `tools`, written with the AI SDK on the Responses API and trained unchanged.",
  play
)

Example.main(example, import.meta.url)
