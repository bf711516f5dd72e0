/**
 * The Responses API's translation onto chat completions, as pure functions: a request's items and settings
 * as chat messages and fields (and what it refuses, by field), a completion's choice as a `Response`, and a
 * streamed completion's chunks as the documented events, whose last response equals the whole one.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import type { ChatCompletion } from "../../src/api/ChatCompletion.js"
import { Response, ResponseCreateRequest } from "../../src/api/Responses.js"
import {
  chatRequestOf,
  inputItemsPage,
  itemId,
  ResponseEvents,
  responseIdOfItem,
  responseOf,
  responsesParamOf,
  storedInputItemsOf
} from "../../src/api/ResponsesChat.js"
import { chunksOf } from "../../src/workflow/internal/rolloutHttp.js"

const decode = Schema.decodeUnknownSync(ResponseCreateRequest)

const meta = { id: "resp_00ff", createdAt: 1_700_000_000, model: "m", store: true }

const completion = (
  message: ChatCompletion["choices"][number]["message"],
  finish = "stop",
  logprobs: ReadonlyArray<{ token: string; logprob: number }> = []
): ChatCompletion => ({
  id: "chatcmpl-1",
  object: "chat.completion",
  created: 1,
  model: "m",
  choices: [{ index: 0, message, finish_reason: finish, logprobs: { content: logprobs }, token_ids: [1, 2, 3] }],
  usage: { prompt_tokens: 10, completion_tokens: 3, total_tokens: 13, prompt_tokens_details: { cached_tokens: 4 } }
})

describe("ResponsesChat.chatRequestOf", () => {
  it("instructions, messages, calls after a message, their outputs, settings", () => {
    const request = decode({
      instructions: "Be brief.",
      input: [
        {
          role: "user",
          content: [
            { type: "input_text", text: "a" },
            { type: "input_text", text: "b" }
          ]
        },
        { type: "message", role: "assistant", content: [{ type: "output_text", text: "let me look" }] },
        { type: "function_call", call_id: "c1", name: "f", arguments: "{}" },
        { type: "function_call", call_id: "c2", name: "g", arguments: '{"x":1}' },
        { type: "function_call_output", call_id: "c1", output: "one" },
        { type: "function_call_output", call_id: "c2", output: [{ type: "input_text", text: "two" }] },
        { type: "reasoning", id: "rs_1", summary: [] },
        { role: "developer", content: "dev" }
      ],
      max_output_tokens: 50,
      temperature: 0.5,
      top_p: 0.9,
      parallel_tool_calls: false,
      tools: [{ type: "function", name: "f", parameters: { type: "object" }, strict: true }],
      tool_choice: { type: "function", name: "f" },
      text: { format: { type: "json_schema", name: "out", schema: { type: "object" }, strict: true } },
      include: ["message.output_text.logprobs"],
      top_logprobs: 3
    })
    const chat = Either.getOrThrow(chatRequestOf(request))
    expect(chat.messages).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: "ab" },
      {
        role: "assistant",
        content: "let me look",
        tool_calls: [
          { id: "c1", type: "function", function: { name: "f", arguments: "{}" } },
          { id: "c2", type: "function", function: { name: "g", arguments: '{"x":1}' } }
        ]
      },
      { role: "tool", tool_call_id: "c1", content: "one" },
      { role: "tool", tool_call_id: "c2", content: "two" },
      { role: "developer", content: "dev" }
    ])
    expect(chat).toMatchObject({
      max_completion_tokens: 50,
      temperature: 0.5,
      top_p: 0.9,
      parallel_tool_calls: false,
      tools: [{ type: "function", function: { name: "f", parameters: { type: "object" }, strict: true } }],
      tool_choice: { type: "function", function: { name: "f" } },
      response_format: { type: "json_schema", json_schema: { name: "out", schema: { type: "object" }, strict: true } },
      logprobs: true,
      top_logprobs: 3
    })
  })

  it("a string input is one user message; json_object; no logprobs unless asked", () => {
    const chat = Either.getOrThrow(chatRequestOf(decode({ input: "hi", text: { format: { type: "json_object" } } })))
    expect(chat.messages).toEqual([{ role: "user", content: "hi" }])
    expect(chat.response_format).toEqual({ type: "json_object" })
    expect(chat.logprobs).toBeUndefined()
  })

  it("history first (previous responses' items), and item references resolved", () => {
    const history = [
      { type: "message", id: "msg_1_i0", role: "user", content: [{ type: "input_text", text: "q" }] },
      { type: "function_call", id: "fc_1_0", call_id: "c", name: "f", arguments: "{}" }
    ]
    const request = decode({
      input: [
        { type: "function_call_output", call_id: "c", output: "r" },
        { type: "item_reference", id: "x" }
      ]
    })
    const resolve = (id: string) => (id === "x" ? { type: "message", role: "user", content: "again" } : undefined)
    const chat = Either.getOrThrow(chatRequestOf(request, { history, resolve }))
    expect(chat.messages).toEqual([
      { role: "user", content: "q" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "{}" } }]
      },
      { role: "tool", tool_call_id: "c", content: "r" },
      { role: "user", content: "again" }
    ])
  })

  it("refuses what a chat engine cannot serve, naming the field", () => {
    const refused = (body: unknown) => Either.flip(chatRequestOf(decode(body))).pipe(Either.getOrThrow)
    expect(refused({ input: "x", tools: [{ type: "file_search", vector_store_ids: [] }] }).param).toBe("tools[0].type")
    expect(refused({ input: "x", background: true }).param).toBe("background")
    expect(refused({ input: "x", conversation: "conv_1" }).param).toBe("conversation")
    expect(refused({ input: "x", prompt: { id: "p" } }).param).toBe("prompt")
    expect(refused({ input: "x", truncation: "auto" }).param).toBe("truncation")
    expect(refused({ input: "x", tool_choice: { type: "web_search_preview" } }).param).toBe("tool_choice")
    expect(refused({ input: [{ role: "user", content: [{ type: "input_file", file_id: "f" }] }] }).param).toBe(
      "input[0].content[0].type"
    )
    expect(refused({ input: [{ type: "computer_call_output", call_id: "c", output: {} }] }).param).toBe("input[0].type")
    const missing = refused({ input: [{ type: "item_reference", id: "msg_9_0" }] })
    expect([missing.param, missing.reason]).toEqual(["input[0].id", "NotFound"])
    expect(refused({ input: [] }).param).toBe("input")
  })

  it("chat field names in errors become the Responses request's", () => {
    expect(responsesParamOf("max_completion_tokens")).toBe("max_output_tokens")
    expect(responsesParamOf("response_format.json_schema.schema")).toBe("text.format.schema")
    expect(responsesParamOf("tools.0.function.parameters")).toBe("tools[0].parameters")
    expect(responsesParamOf("messages.3.content")).toBe("input.content")
    expect(responsesParamOf("tool_choice")).toBe("tool_choice")
  })
})

describe("ResponsesChat.responseOf", () => {
  it("text a message, calls function_call items, usage, ids that name the response", () => {
    const response = responseOf(
      completion({
        role: "assistant",
        content: "hi",
        tool_calls: [{ id: "call_a", type: "function", function: { name: "f", arguments: "{}" } }]
      }),
      decode({ input: "x", metadata: { k: "v" } }),
      meta
    )
    expect(Schema.is(Response)(response)).toBe(true)
    expect(response.status).toBe("completed")
    expect(response.output).toEqual([
      {
        type: "message",
        id: "msg_00ff_0",
        role: "assistant",
        status: "completed",
        content: [{ type: "output_text", text: "hi", annotations: [] }]
      },
      { type: "function_call", id: "fc_00ff_1", call_id: "call_a", name: "f", arguments: "{}", status: "completed" }
    ])
    expect(response.usage).toEqual({
      input_tokens: 10,
      input_tokens_details: { cached_tokens: 4 },
      output_tokens: 3,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 13
    })
    expect(response.metadata).toEqual({ k: "v" })
    expect(responseIdOfItem(response.output[1]!.id)).toBe(meta.id)
    expect(responseIdOfItem(itemId(meta.id, "msg", "i3"))).toBe(meta.id)
    expect(responseIdOfItem("msg_nothex_0")).toBeUndefined()
  })

  it("length is incomplete (max_output_tokens); logprobs only when included; calls alone have no message", () => {
    const lp = [{ token: "h", logprob: -0.5 }]
    const cut = responseOf(completion({ role: "assistant", content: "h" }, "length", lp), decode({ input: "x" }), meta)
    expect([cut.status, cut.incomplete_details]).toEqual(["incomplete", { reason: "max_output_tokens" }])
    expect(cut.output[0]).toMatchObject({ status: "incomplete", content: [{ text: "h" }] })
    expect(JSON.stringify(cut.output[0])).not.toContain("logprobs")
    const asked = responseOf(
      completion({ role: "assistant", content: "h" }, "stop", lp),
      decode({ input: "x", include: ["message.output_text.logprobs"] }),
      meta
    )
    expect(asked.output[0]).toMatchObject({
      content: [{ logprobs: [{ token: "h", logprob: -0.5, bytes: [], top_logprobs: [] }] }]
    })
    const calls = responseOf(
      completion({
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "{}" } }]
      }),
      decode({ input: "x" }),
      meta
    )
    expect(calls.output.map((item) => item.type)).toEqual(["function_call"])
  })
})

describe("ResponsesChat.ResponseEvents", () => {
  it("a streamed completion's events, numbered, end with responseOf's response", () => {
    for (const message of [
      { role: "assistant", content: "hello" },
      {
        role: "assistant",
        content: "see",
        tool_calls: [{ id: "c1", type: "function" as const, function: { name: "f", arguments: '{"a":1}' } }]
      },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "c1", type: "function" as const, function: { name: "f", arguments: "{}" } },
          { id: "c2", type: "function" as const, function: { name: "g", arguments: "{}" } }
        ]
      },
      { role: "assistant", content: "" }
    ]) {
      const whole = completion(message)
      const request = decode({ input: "x" })
      const events = new ResponseEvents(request, meta)
      const all = [...events.start(), ...chunksOf(whole, true).flatMap((chunk) => events.push(chunk)), ...events.end()]
      expect(all.map((e) => e.sequence_number)).toEqual(all.map((_, i) => i))
      const last = all.at(-1)!
      expect(last.type).toBe("response.completed")
      expect("response" in last ? last.response : undefined).toEqual(responseOf(whole, request, meta))
      const types = all.map((e) => e.type)
      expect(types.slice(0, 2)).toEqual(["response.created", "response.in_progress"])
      const added = all.filter((e) => e.type === "response.output_item.added").length
      expect(all.filter((e) => e.type === "response.output_item.done").length).toBe(added)
      expect(added).toBe(responseOf(whole, request, meta).output.length)
      for (const call of message.tool_calls ?? []) {
        const done = all.find(
          (e) => e.type === "response.function_call_arguments.done" && e.name === call.function.name
        )
        expect(done).toMatchObject({ arguments: call.function.arguments })
      }
    }
  })
})

describe("ResponsesChat stored items", () => {
  it("input items get ids; the page is ordered, limited and continued after an id", () => {
    const request = decode({
      input: [
        { role: "user", content: "a" },
        { type: "function_call_output", call_id: "c", output: "o" }
      ]
    })
    const items = storedInputItemsOf(request, meta.id)
    expect(items).toEqual([
      {
        type: "message",
        id: "msg_00ff_i0",
        role: "user",
        status: "completed",
        content: [{ type: "input_text", text: "a" }]
      },
      { type: "function_call_output", id: "fco_00ff_i1", call_id: "c", output: "o", status: "completed" }
    ])
    const desc = Either.getOrThrow(inputItemsPage(items, { limit: "1" }))
    expect([desc.data.map((i) => i.id), desc.has_more]).toEqual([["fco_00ff_i1"], true])
    const next = Either.getOrThrow(inputItemsPage(items, { after: "fco_00ff_i1" }))
    expect([next.data.map((i) => i.id), next.has_more]).toEqual([["msg_00ff_i0"], false])
    expect(Either.flip(inputItemsPage(items, { limit: "0" })).pipe(Either.getOrThrow).param).toBe("limit")
    expect(Either.flip(inputItemsPage(items, { order: "up" })).pipe(Either.getOrThrow).param).toBe("order")
  })
})
