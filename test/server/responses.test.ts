/**
 * The Responses API of the embedded backend against an independent client, the `openai` npm package unchanged
 * (only its `baseURL` points at the local server): `responses.create`, `responses.stream` and
 * `responses.parse`; text, logprobs, the streamed events in order with their sequence numbers, function tools
 * under every `tool_choice`, the `function_call_output` turn, `json_schema` output, `previous_response_id`,
 * retrieve, delete and the input items, and the 400s naming the field. The one sampler path is checked by a
 * seeded response equal to the seeded chat completion of the same conversation. Live clock: the SDK's timers
 * and the server's timestamps are real.
 */
import { describe, expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import OpenAI from "openai"
import type {
  ResponseCreateParamsNonStreaming,
  ResponseInputItem,
  ResponseStreamEvent
} from "openai/resources/responses/responses"
import * as LocalBackend from "../../src/LocalBackend.js"
import { LONG_CONTEXT_MODEL } from "../../src/local/server/internal/baseModels.js"
import { API_KEY } from "../support/clients.js"
import { Backend } from "./support.js"

const sdk = Effect.map(
  LocalBackend.LocalBackend,
  ({ url }) => new OpenAI({ apiKey: API_KEY, baseURL: `${url}/v1`, maxRetries: 0 })
)

const run = <A>(f: () => Promise<A>) => Effect.tryPromise({ try: f, catch: (error) => error })

const caught = (promise: Promise<unknown>) =>
  promise.then(
    () => undefined,
    (error: unknown) => error as InstanceType<typeof OpenAI.APIError>
  )

const MODEL = LONG_CONTEXT_MODEL

/** `seed` is an extension of the embedded backend (as vLLM's), not in the SDK's types. */
const seeded = (seed: number): Record<never, never> => ({ seed })

const lookup = {
  type: "function" as const,
  name: "lookup_price",
  description: "The price of an item",
  parameters: {
    type: "object",
    properties: { item: { type: "string", enum: ["apple", "pear"] } },
    required: ["item"],
    additionalProperties: false
  },
  strict: true
}

describe("the Responses API of the embedded backend, through the openai SDK", () => {
  layer(Backend, { excludeTestServices: true })((it) => {
    it.effect("create: a message with output_text, usage, and logprobs when included; the same sampler as chat", () =>
      Effect.gen(function* () {
        const client = yield* sdk
        const response = yield* run(() =>
          client.responses.create({
            model: MODEL,
            instructions: "Answer briefly.",
            input: "hello there",
            max_output_tokens: 12,
            include: ["message.output_text.logprobs"],
            top_logprobs: 2,
            ...seeded(11)
          })
        )
        expect(response.id).toMatch(/^resp_[0-9a-f]{48}$/)
        expect(response.object).toBe("response")
        expect(response.model).toBe(MODEL)
        expect(["completed", "incomplete"]).toContain(response.status)
        expect(response.output).toHaveLength(1)
        const message = response.output[0]!
        if (message.type !== "message") throw new Error(`expected a message, got ${message.type}`)
        const text = message.content[0]!
        if (text.type !== "output_text") throw new Error("expected output_text")
        expect(text.annotations).toEqual([])
        expect(response.output_text).toBe(text.text)
        const usage = response.usage!
        expect(usage.total_tokens).toBe(usage.input_tokens + usage.output_tokens)
        expect(text.logprobs?.length).toBe(usage.output_tokens)
        for (const entry of text.logprobs ?? []) {
          expect(entry.logprob).toBeLessThanOrEqual(0)
          expect(entry.top_logprobs.length).toBe(2)
        }
        // One sampler path: the chat completion of the same conversation, seeded alike, is the same text.
        const chat = yield* run(() =>
          client.chat.completions.create({
            model: MODEL,
            messages: [
              { role: "system", content: "Answer briefly." },
              { role: "user", content: "hello there" }
            ],
            max_completion_tokens: 12,
            logprobs: true,
            seed: 11
          })
        )
        expect(chat.choices[0]!.message.content).toBe(text.text)
        expect(chat.choices[0]!.logprobs?.content?.map((e) => e.logprob)).toEqual(text.logprobs?.map((e) => e.logprob))
        expect(response.status).toBe(chat.choices[0]!.finish_reason === "length" ? "incomplete" : "completed")
      })
    )

    it.effect("max_output_tokens reached: status incomplete with incomplete_details.reason", () =>
      Effect.gen(function* () {
        const client = yield* sdk
        const response = yield* run(() =>
          client.responses.create({ model: MODEL, input: "tell me a long story", max_output_tokens: 1, ...seeded(1) })
        )
        expect(response.status).toBe("incomplete")
        expect(response.incomplete_details).toEqual({ reason: "max_output_tokens" })
        expect(response.usage?.output_tokens).toBe(1)
      })
    )

    it.effect("stream: the documented events in order, numbered from 0, ending with the response", () =>
      Effect.gen(function* () {
        const client = yield* sdk
        const { events, final } = yield* run(async () => {
          const stream = client.responses.stream({ model: MODEL, input: "hello", max_output_tokens: 8, ...seeded(5) })
          const events: Array<ResponseStreamEvent> = []
          for await (const event of stream) events.push(event)
          return { events, final: await stream.finalResponse() }
        })
        expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i))
        const types = events.map((e) => e.type)
        expect(types.slice(0, 4)).toEqual([
          "response.created",
          "response.in_progress",
          "response.output_item.added",
          "response.content_part.added"
        ])
        const deltas = events.flatMap((e) => (e.type === "response.output_text.delta" ? [e.delta] : []))
        expect(deltas.length).toBeGreaterThan(0)
        expect(types.slice(4, 4 + deltas.length).every((t) => t === "response.output_text.delta")).toBe(true)
        expect(types.slice(4 + deltas.length)).toEqual([
          "response.output_text.done",
          "response.content_part.done",
          "response.output_item.done",
          final.status === "incomplete" ? "response.incomplete" : "response.completed"
        ])
        expect(final.output_text).toBe(deltas.join(""))
        const last = events.at(-1)
        if (last?.type !== "response.completed" && last?.type !== "response.incomplete") throw new Error("no end")
        expect(last.response.id).toBe(final.id)
        // The streamed response is stored once complete: it reads back the same.
        const read = yield* run(() => client.responses.retrieve(final.id))
        expect(read.output.map((item) => item.id)).toEqual(final.output.map((item) => item.id))
        expect(read.output_text).toBe(final.output_text)
        // The same request unstreamed samples the same output.
        const whole = yield* run(() =>
          client.responses.create({ model: MODEL, input: "hello", max_output_tokens: 8, ...seeded(5) })
        )
        expect(whole.output_text).toBe(final.output_text)
      })
    )

    it.effect("function tools under every tool_choice, and the function_call_output turn", () =>
      Effect.gen(function* () {
        const client = yield* sdk
        const ask = (tool_choice: NonNullable<ResponseCreateParamsNonStreaming["tool_choice"]>, seed: number) =>
          run(() =>
            client.responses.create({
              model: MODEL,
              input: [{ role: "user", content: [{ type: "input_text", text: "How much is an apple?" }] }],
              tools: [lookup],
              tool_choice,
              max_output_tokens: 160,
              ...seeded(seed)
            })
          )
        const required = yield* ask("required", 1)
        const calls = required.output.filter((item) => item.type === "function_call")
        expect(calls.length).toBeGreaterThan(0)
        const call = calls[0]!
        if (call.type !== "function_call") throw new Error("expected a call")
        expect(call.name).toBe("lookup_price")
        expect(call.id).toMatch(/^fc_/)
        expect(call.call_id.length).toBeGreaterThan(0)
        expect(["apple", "pear"]).toContain((JSON.parse(call.arguments) as { item: string }).item)
        const named = yield* ask({ type: "function", name: "lookup_price" }, 2)
        expect(named.output.filter((item) => item.type === "function_call").map((c) => c.type)).toEqual([
          "function_call"
        ])
        const none = yield* ask("none", 3)
        expect(none.output.map((item) => item.type)).toEqual(["message"])
        const auto = yield* ask("auto", 4)
        expect(auto.output.length).toBeGreaterThan(0)
        // The tool's result, continuing the response that called it.
        const answered = yield* run(() =>
          client.responses.create({
            model: MODEL,
            previous_response_id: required.id,
            input: [{ type: "function_call_output", call_id: call.call_id, output: '{"price": 3}' }],
            tools: [lookup],
            tool_choice: "none",
            max_output_tokens: 8,
            ...seeded(6)
          })
        )
        expect(answered.previous_response_id).toBe(required.id)
        expect(answered.output.map((item) => item.type)).toEqual(["message"])
        // The conversation it continued is in its prompt: more input tokens than the call's turn alone.
        expect(answered.usage!.input_tokens).toBeGreaterThan(required.usage!.input_tokens)
      })
    )

    it.effect("stream with a required call: function_call_arguments deltas and done, the call in the response", () =>
      Effect.gen(function* () {
        const client = yield* sdk
        const { events, final } = yield* run(async () => {
          const stream = client.responses.stream({
            model: MODEL,
            input: "How much is a pear?",
            tools: [lookup],
            tool_choice: "required",
            max_output_tokens: 160,
            ...seeded(8)
          })
          const events: Array<ResponseStreamEvent> = []
          for await (const event of stream) events.push(event)
          return { events, final: await stream.finalResponse() }
        })
        expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i))
        const calls = final.output.filter((item) => item.type === "function_call")
        expect(calls.length).toBeGreaterThan(0)
        for (const call of calls) {
          if (call.type !== "function_call") continue
          const deltas = events.flatMap((e) =>
            e.type === "response.function_call_arguments.delta" && e.item_id === call.id ? [e.delta] : []
          )
          expect(deltas.join("")).toBe(call.arguments)
          const done = events.find((e) => e.type === "response.function_call_arguments.done" && e.item_id === call.id)
          expect(done).toMatchObject({ name: "lookup_price", arguments: call.arguments })
          const added = events.find((e) => e.type === "response.output_item.added" && e.item.id === call.id)
          expect(added).toMatchObject({ item: { type: "function_call", status: "in_progress", call_id: call.call_id } })
        }
        expect(events.at(-1)?.type).toBe("response.completed")
      })
    )

    it.effect("parse: json_schema output, constrained, parses", () =>
      Effect.gen(function* () {
        const client = yield* sdk
        const parsed = yield* run(() =>
          client.responses.parse({
            model: MODEL,
            input: "Give a fruit and a count.",
            max_output_tokens: 96,
            text: {
              format: {
                type: "json_schema",
                name: "fruit",
                strict: true,
                schema: {
                  type: "object",
                  properties: { fruit: { type: "string", enum: ["apple", "pear"] }, count: { type: "integer" } },
                  required: ["fruit", "count"],
                  additionalProperties: false
                }
              }
            },
            ...seeded(7)
          })
        )
        const value = parsed.output_parsed as { fruit: string; count: number } | null
        expect(value).not.toBeNull()
        expect(["apple", "pear"]).toContain(value!.fruit)
        expect(Number.isInteger(value!.count)).toBe(true)
        expect(parsed.text?.format).toMatchObject({ type: "json_schema", name: "fruit" })
      })
    )

    it.effect("stored responses: previous_response_id, retrieve, input_items, delete; store: false is not kept", () =>
      Effect.gen(function* () {
        const client = yield* sdk
        const first = yield* run(() =>
          client.responses.create({ model: MODEL, input: "one", max_output_tokens: 4, metadata: { run: "a" } })
        )
        expect(first.metadata).toEqual({ run: "a" })
        const second = yield* run(() =>
          client.responses.create({
            model: MODEL,
            previous_response_id: first.id,
            input: [
              { role: "user", content: "two" },
              { role: "user", content: [{ type: "input_text", text: "three" }] }
            ],
            max_output_tokens: 4
          })
        )
        expect(second.usage!.input_tokens).toBeGreaterThan(first.usage!.input_tokens)
        const read = yield* run(() => client.responses.retrieve(first.id))
        expect(read).toMatchObject({ id: first.id, output: first.output, status: first.status })
        const items = yield* run(() => client.responses.inputItems.list(second.id, { order: "asc" }))
        expect(items.data.map((item) => (item.type === "message" ? item.content : null))).toEqual([
          [{ type: "input_text", text: "two" }],
          [{ type: "input_text", text: "three" }]
        ])
        const desc = yield* run(() => client.responses.inputItems.list(second.id, { limit: 1 }))
        expect(desc.data.map((item) => item.id)).toEqual([items.data[1]!.id])
        expect(desc.has_more).toBe(true)
        // An output item referred to by id in a later request is what the model gets in its place: the same
        // input and (seeded) the same answer as with the item written out, and stored as the item it names.
        const around = (item: ResponseInputItem) =>
          run(() =>
            client.responses.create({
              model: MODEL,
              input: [{ role: "user", content: "one" }, item, { role: "user", content: "again" }],
              max_output_tokens: 4,
              ...seeded(3)
            })
          )
        const referenced = first.output[0]!
        if (referenced.type !== "message") throw new Error("expected a message")
        const reference = yield* around({ type: "item_reference", id: referenced.id })
        const written = yield* around({ role: "assistant", content: first.output_text })
        expect(reference.usage!.input_tokens).toBe(written.usage!.input_tokens)
        expect(reference.output_text).toBe(written.output_text)
        const referenceItems = yield* run(() => client.responses.inputItems.list(reference.id, { order: "asc" }))
        expect(referenceItems.data[1]).toMatchObject({
          type: "message",
          id: referenced.id,
          role: "assistant",
          content: referenced.content
        })
        const deleted = yield* run(() => client.responses.delete(first.id))
        expect(deleted).toMatchObject({ id: first.id, deleted: true })
        expect(yield* Effect.promise(() => caught(client.responses.retrieve(first.id)))).toBeInstanceOf(
          OpenAI.NotFoundError
        )
        const continued = yield* Effect.promise(() =>
          caught(client.responses.create({ model: MODEL, previous_response_id: first.id, input: "x" }))
        )
        expect(continued).toBeInstanceOf(OpenAI.BadRequestError)
        expect(continued?.param).toBe("previous_response_id")
        const unstored = yield* run(() =>
          client.responses.create({ model: MODEL, input: "x", store: false, max_output_tokens: 2 })
        )
        expect(yield* Effect.promise(() => caught(client.responses.retrieve(unstored.id)))).toBeInstanceOf(
          OpenAI.NotFoundError
        )
      })
    )

    it.effect("what the engine cannot serve is a 400 naming the field; hosted-only tuning is accepted", () =>
      Effect.gen(function* () {
        const client = yield* sdk
        const refused = async (body: Record<string, unknown>) =>
          caught(client.responses.create({ model: MODEL, input: "hi", ...body } as ResponseCreateParamsNonStreaming))
        const cases: ReadonlyArray<readonly [Record<string, unknown>, string]> = [
          [{ tools: [{ type: "web_search" }] }, "tools[0].type"],
          [{ background: true }, "background"],
          [{ truncation: "auto" }, "truncation"],
          [
            { input: [{ role: "user", content: [{ type: "input_image", image_url: "https://x/y.png" }] }] },
            "input[0].content[0].type"
          ],
          [{ input: [{ type: "web_search_call", id: "ws_1", status: "completed" }] }, "input[0].type"],
          [{ temperature: "hot" }, "temperature"],
          [{ tool_choice: "required" }, "tool_choice"],
          [{ input: [{ type: "item_reference", id: "msg_00_1" }] }, "input[0].id"]
        ]
        const answers = yield* Effect.promise(() => Promise.all(cases.map(([body]) => refused(body))))
        for (const [i, [, param]] of cases.entries()) {
          const error = answers[i]
          expect(error, param).toBeInstanceOf(OpenAI.BadRequestError)
          expect(error?.param, JSON.stringify(cases[i]![0])).toBe(param)
          expect(error?.message.length).toBeGreaterThan(10)
        }
        const tuned = yield* run(() =>
          client.responses.create({
            model: MODEL,
            input: "hi",
            max_output_tokens: 2,
            reasoning: { effort: "low" },
            service_tier: "auto",
            user: "someone",
            prompt_cache_key: "k",
            truncation: "disabled"
          })
        )
        expect(tuned.output.length).toBe(1)
        const unknown = yield* Effect.promise(() => caught(client.responses.create({ model: "no/such", input: "hi" })))
        expect(unknown).toBeInstanceOf(OpenAI.NotFoundError)
      })
    )
  })
})
