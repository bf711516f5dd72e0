/**
 * Example: the tool agent of `tools.ts` (call the right tool for the right city, answer with its result),
 * written as plain Promise-based code with the `openai` SDK and trained unchanged: `RolloutOpenAI.client()`
 * is an `OpenAI` instance whose chat completions are the rollout's, recorded in its trajectory. The same
 * world, question and reward as `tools.ts`, and its base model (on the
 * embedded backend the pretrained `effect-rl/base-2k`).
 *
 * Needs `openai` (`npm install openai`, an optional peer dependency of effect-rl).
 *
 * Run: `npx tsx examples/tools-openai.ts [--steps n]`.
 */
import { Effect } from "effect"
import { Example } from "effect-rl"
import * as RolloutOpenAI from "effect-rl/RolloutOpenAI"
import type OpenAI from "openai"
import { ANSWERS, CITIES, type City, exampleOf, type Played, question, type Scenario } from "./tools.js"

const city = {
  type: "object",
  properties: { city: { type: "string", enum: [...CITIES] } },
  required: ["city"],
  additionalProperties: false
}
const tools: Array<OpenAI.ChatCompletionTool> = [
  { type: "function", function: { name: "weather", description: "Weather in a city", parameters: city } },
  { type: "function", function: { name: "clock", description: "Time in a city", parameters: city } }
]

/** The agent, as Promise-based code: call a tool, send its result, answer as constrained JSON. */
export const agent = async (openai: OpenAI, scenario: Scenario): Promise<Played> => {
  const messages: Array<OpenAI.ChatCompletionMessageParam> = [{ role: "user", content: question(scenario) }]
  const first = await openai.chat.completions.create({
    model: "policy", // the rollout's policy answers, whatever the name
    messages,
    tools,
    tool_choice: "required",
    max_completion_tokens: 80
  })
  const message = first.choices[0]!.message
  messages.push(message)
  const calls = (message.tool_calls ?? []).flatMap((call) =>
    call.type === "function"
      ? [{ id: call.id, name: call.function.name, city: (JSON.parse(call.function.arguments) as { city: City }).city }]
      : []
  )
  for (const { id, name, city } of calls) {
    const result = name === "weather" ? scenario.weather[city] : scenario.time[city]
    messages.push({ role: "tool", tool_call_id: id, content: result })
  }
  const second = await openai.chat.completions.create({
    model: "policy",
    messages,
    tools,
    tool_choice: "none",
    max_completion_tokens: 40,
    response_format: {
      type: "json_schema",
      json_schema: {
        name: "answer",
        strict: true,
        schema: { type: "object", properties: { answer: { enum: [...ANSWERS] } }, required: ["answer"] }
      }
    }
  })
  return {
    tool: calls[0]?.name,
    city: calls[0]?.city,
    answer: (JSON.parse(second.choices[0]!.message.content ?? "{}") as { answer?: string }).answer ?? null
  }
}

/** One rollout: the agent, given the rollout's recorded client. */
export const play = (scenario: Scenario) =>
  Effect.flatMap(RolloutOpenAI.client(), (openai) =>
    Effect.tryPromise({
      try: () => agent(openai, scenario),
      catch: (cause) => cause as Error // the agent's own error ("context too long") leads a failed run's message
    })
  )

/** The example: as `tools.ts`, with the agent written with the openai SDK. */
export const example: Example.Example = exampleOf(
  "tools-openai",
  "The tool agent of `tools`, written with the openai SDK and trained unchanged.",
  play
)

Example.main(example, import.meta.url)
