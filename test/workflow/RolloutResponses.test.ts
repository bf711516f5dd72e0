/**
 * Agents that speak the Responses API, recorded by a rollout over a backend that serves chat completions only
 * (`chatOnly.ts`: the hosted service's shape): the `openai` SDK's `responses.create`, `stream` and `parse`
 * through `RolloutOpenAI.client`, the rollout's `fetch` (`RolloutFetch`) under the AI SDK's default provider,
 * the OpenAI Agents SDK's default model, `@effect/ai-openai`'s `OpenAiLanguageModel` and LangChain with
 * `useResponsesApi`. What a rollout records is the chat completions its policy sampled, with token ids and
 * logprobs; for the same conversation, what `Rollout.chat` records.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import OpenAI from "openai"
import type { FunctionTool, ResponseStreamEvent } from "openai/resources/responses/responses"
import { isChoice, type MessageOrChoice } from "../../src/api/Trajectory.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as Rollout from "../../src/workflow/Rollout.js"
import * as RolloutOpenAI from "../../src/workflow/RolloutOpenAI.js"
import { ChatOnlyBackend, refusedPaths } from "./chatOnly.js"
import { entryKinds, normalized, toolTurnsByHand } from "./support.js"

const MODEL = "effect-rl/tiny-2k"

const parameters = {
  type: "object",
  properties: { a: { type: "number" }, b: { type: "number" } },
  required: ["a", "b"],
  additionalProperties: false
}
const add: FunctionTool = { type: "function", name: "add", description: "Adds two numbers", parameters, strict: null }
const SYSTEM = "You add numbers with the add tool."
const QUESTION = "What is 2 + 3?"
/** `seed` is the backend's extension (not in the SDK's types); the rollout passes it on to the chat request. */
const settings = { max_output_tokens: 120, seed: 5 } as { max_output_tokens: number }

/** A two-turn tool agent on the Responses API: the call, its output (continuing by id), an answer. */
const agent = async (openai: OpenAI, stream: boolean) => {
  const request = {
    model: "any",
    instructions: SYSTEM,
    input: QUESTION,
    tools: [add],
    tool_choice: "required" as const,
    ...settings
  }
  const first = stream ? await openai.responses.stream(request).finalResponse() : await openai.responses.create(request)
  const call = first.output.find((item) => item.type === "function_call")
  if (call?.type !== "function_call") throw new Error("expected a function call")
  const { a, b } = JSON.parse(call.arguments) as { a: number; b: number }
  const second = await openai.responses.create({
    model: "any",
    instructions: SYSTEM,
    previous_response_id: first.id,
    input: [{ type: "function_call_output", call_id: call.call_id, output: String(a + b) }],
    tools: [add],
    tool_choice: "none",
    ...settings
  })
  return { sum: a + b, arguments: call.arguments, answer: second.output_text, first, second }
}

const choices = (entries: ReadonlyArray<MessageOrChoice>) => entries.filter(isChoice)

describe("Responses-API agents recorded by a rollout over a chat-completions-only backend", () => {
  it.layer(ChatOnlyBackend, { timeout: 120_000 })((it) => {
    it.effect("openai SDK responses.create and stream: recorded as Rollout.chat records the same conversation", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "responses", name: "agent", base_model: MODEL })
        const byHand = yield* toolTurnsByHand(policy, {
          system: SYSTEM,
          question: QUESTION,
          tools: [{ type: "function", function: { name: "add", description: "Adds two numbers", parameters } }],
          request: { max_completion_tokens: 120, seed: 5 },
          result: "<sum>"
        })
        for (const stream of [false, true]) {
          const viaResponses = yield* Rollout.run(
            policy,
            Effect.flatMap(RolloutOpenAI.client(), (openai) => Effect.promise(() => agent(openai, stream)))
          )
          const { value, trajectory } = viaResponses
          expect(entryKinds(trajectory.messages_and_choices)).toEqual(["system", "user", "choice", "tool", "choice"])
          // The same turns as by hand (ids aside, and the tool's result, which depends on the sampled call).
          const expected = byHand.trajectory.messages_and_choices.map(normalized)
          const got = trajectory.messages_and_choices.map(normalized)
          expect(got.slice(0, 3)).toEqual(expected.slice(0, 3))
          expect(got[3]).toEqual({ role: "tool", tool_call_id: "<id>", content: String(value.sum) })
          // Recorded as sampled: token ids and logprobs, one per token.
          for (const choice of choices(trajectory.messages_and_choices)) {
            expect(choice.token_ids?.length).toBeGreaterThan(0)
            expect(choice.logprobs?.content?.length).toBe(choice.token_ids?.length)
          }
          // The Response the agent saw is the recorded choice: its call, its id.
          const recorded = choices(trajectory.messages_and_choices)[0]!.message.tool_calls![0]!
          expect(recorded).toMatchObject({ type: "function", function: { name: "add", arguments: value.arguments } })
          expect(value.first.output.find((item) => item.type === "function_call")).toMatchObject({
            call_id: recorded.id
          })
          expect(value.second.previous_response_id).toBe(value.first.id)
          expect(value.answer).toBe(choices(trajectory.messages_and_choices)[1]!.message.content ?? "")
          expect(trajectory.tools?.map((tool) => tool.function.name)).toEqual(["add"])
          // Beside the chat turns it trains on, the exchanges as the agent had them: each request as it was sent
          // (the second continuing the first by id) and the Response it got, the streamed one joined.
          const exchanges = (
            trajectory.exchanges as unknown as {
              responses: Array<{ request: Record<string, unknown>; response: OpenAI.Responses.Response }>
            }
          ).responses
          expect(exchanges.map((exchange) => exchange.response.id)).toEqual([value.first.id, value.second.id])
          expect(exchanges[0]!.request).toMatchObject({
            instructions: SYSTEM,
            input: QUESTION,
            tool_choice: "required"
          })
          expect(exchanges[1]!.request).toMatchObject({ previous_response_id: value.first.id, tool_choice: "none" })
          // (The SDK adds its own fields to what it got, `parsed_arguments`.)
          expect(value.first.output).toMatchObject(exchanges[0]!.response.output)
          const answer = exchanges[1]!.response.output.find((item) => item.type === "message")
          expect(answer?.type === "message" ? answer.content[0] : undefined).toMatchObject({ text: value.answer })
        }
        expect(refusedPaths).toEqual([])
      })
    )

    it.effect("streamed events in order; parse with json_schema; stored reads; 400s naming the field", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "responses", name: "shapes", base_model: MODEL })
        const finished = yield* Rollout.run(
          policy,
          Effect.flatMap(RolloutOpenAI.client(), (openai) =>
            Effect.promise(async () => {
              const events: Array<ResponseStreamEvent> = []
              const stream = openai.responses.stream({ model: "x", input: "hi", max_output_tokens: 6 })
              for await (const event of stream) events.push(event)
              const streamed = await stream.finalResponse()
              const parsed = await openai.responses.parse({
                model: "x",
                input: "A fruit?",
                max_output_tokens: 64,
                text: {
                  format: {
                    type: "json_schema",
                    name: "fruit",
                    strict: true,
                    schema: {
                      type: "object",
                      properties: { fruit: { type: "string", enum: ["apple", "pear"] } },
                      required: ["fruit"],
                      additionalProperties: false
                    }
                  }
                }
              })
              const read = await openai.responses.retrieve(streamed.id)
              const items = await openai.responses.inputItems.list(streamed.id)
              const deleted = await openai.responses.delete(streamed.id)
              const gone = await openai.responses.retrieve(streamed.id).catch((error: unknown) => error)
              const refused = await openai.responses
                .create({ model: "x", input: "hi", tools: [{ type: "web_search" }] })
                .catch((error: unknown) => error)
              return { events, streamed, parsed, read, items, deleted, gone, refused }
            })
          )
        )
        const { events, streamed, parsed, read, items, deleted, gone, refused } = finished.value
        expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i))
        // The policy's chunks relayed as they came: one delta per streamed chunk of text (6 tokens here), which
        // joined are the text.
        const deltas = events.filter((e) => e.type === "response.output_text.delta")
        expect(deltas.length).toBeGreaterThan(1)
        expect(deltas.map((e) => e.delta).join("")).toBe(streamed.output_text)
        expect(events.map((e) => e.type)).toEqual([
          "response.created",
          "response.in_progress",
          "response.output_item.added",
          "response.content_part.added",
          ...deltas.map(() => "response.output_text.delta"),
          "response.output_text.done",
          "response.content_part.done",
          "response.output_item.done",
          streamed.status === "incomplete" ? "response.incomplete" : "response.completed"
        ])
        expect((parsed.output_parsed as { fruit: string } | null)?.fruit).toMatch(/^(apple|pear)$/)
        expect(read.id).toBe(streamed.id)
        expect(read.output_text).toBe(streamed.output_text)
        expect(items.data.map((item) => item.type)).toEqual(["message"])
        expect(deleted).toMatchObject({ id: streamed.id, deleted: true })
        expect(gone).toBeInstanceOf(OpenAI.NotFoundError)
        expect(refused).toBeInstanceOf(OpenAI.BadRequestError)
        expect((refused as InstanceType<typeof OpenAI.BadRequestError>).param).toBe("tools[0].type")
        // Two completions sampled and recorded (the streamed one and the parsed one), in two histories.
        expect(finished.trajectory.metrics?.completions).toBe(2)
        expect(refusedPaths).toEqual([])
      })
    )
  })
})
