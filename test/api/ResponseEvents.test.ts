/**
 * The chunks of a streamed chat completion as the Responses API's events (`ResponsesChat.ResponseEvents`),
 * against chunks written by hand: every event in order, numbered, with its ids and indexes; text with its
 * logprobs, calls in fragments, what a stream leaves out (a name, an id, the usage again); the last event's
 * response equal to `responseOf` of the whole completion.
 */
import { describe, expect, it } from "@effect/vitest"
import type { ChatCompletionChunk } from "../../src/api/ChatCompletion.js"
import { ResponseEvents, responseOf, sseOf } from "../../src/api/ResponsesChat.js"
import { chunk, completion, decode, meta, streamOf } from "./responsesFixtures.js"

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
      const all = [...events.start(), ...streamOf(whole).flatMap((c) => events.push(c)), ...events.end()]
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

describe("ResponsesChat.ResponseEvents, event by event", () => {
  /** The events, numbered from 0 as a stream sends them. */
  const numbered = (events: ReadonlyArray<Record<string, unknown>>) =>
    events.map((event, sequence_number) => ({ ...event, sequence_number }))
  const inProgress = (request: ReturnType<typeof decode>) => ({
    ...responseOf(completion({ role: "assistant", content: "" }), request, meta),
    status: "in_progress",
    completed_at: null,
    output: [],
    usage: null
  })

  it("text a token at a time with its logprobs, cut by the length: every event, and the incomplete response", () => {
    const request = decode({ input: "x", include: ["message.output_text.logprobs"] })
    const events = new ResponseEvents(request, meta)
    const lp = [
      { token: "he", logprob: -1 },
      { token: "llo", logprob: -2, top_logprobs: [{ token: "LLO", logprob: -3, bytes: [76] }] },
      { token: "!", logprob: -4, bytes: [33] }
    ]
    const all = [
      ...events.start(),
      ...[
        chunk({ role: "assistant", content: "" }),
        chunk({ content: "he" }, { logprobs: { content: [lp[0]] } }),
        chunk({ content: "llo" }, { logprobs: { content: [lp[1]] } }),
        chunk({}, { logprobs: { content: [lp[2]] }, finish_reason: "length" }),
        chunk({ content: "ignored" }, {}, 1),
        {
          ...chunk({}),
          choices: [],
          usage: {
            prompt_tokens: 10,
            completion_tokens: 3,
            total_tokens: 13,
            prompt_tokens_details: { cached_tokens: 4 }
          }
        } as ChatCompletionChunk
      ].flatMap((c) => events.push(c)),
      ...events.end()
    ]
    const id = "msg_00ff_0"
    const deltas = [
      { token: "he", logprob: -1, top_logprobs: [] },
      { token: "llo", logprob: -2, top_logprobs: [{ token: "LLO", logprob: -3 }] },
      { token: "!", logprob: -4, top_logprobs: [] }
    ]
    const part = {
      type: "output_text",
      text: "hello",
      annotations: [],
      logprobs: [
        { token: "he", logprob: -1, bytes: [], top_logprobs: [] },
        { token: "llo", logprob: -2, bytes: [], top_logprobs: [{ token: "LLO", logprob: -3, bytes: [76] }] },
        { token: "!", logprob: -4, bytes: [33], top_logprobs: [] }
      ]
    }
    const item = { type: "message", id, role: "assistant", status: "incomplete", content: [part] }
    const whole = responseOf(completion({ role: "assistant", content: "hello" }, "length", lp), request, meta)
    expect(all).toStrictEqual(
      numbered([
        { type: "response.created", response: inProgress(request) },
        { type: "response.in_progress", response: inProgress(request) },
        {
          type: "response.output_item.added",
          output_index: 0,
          item: { type: "message", id, role: "assistant", status: "in_progress", content: [] }
        },
        {
          type: "response.content_part.added",
          item_id: id,
          output_index: 0,
          content_index: 0,
          part: { type: "output_text", text: "", annotations: [] }
        },
        ...["he", "llo", ""].map((delta, i) => ({
          type: "response.output_text.delta",
          item_id: id,
          output_index: 0,
          content_index: 0,
          delta,
          logprobs: [deltas[i]]
        })),
        {
          type: "response.output_text.done",
          item_id: id,
          output_index: 0,
          content_index: 0,
          text: "hello",
          logprobs: deltas
        },
        { type: "response.content_part.done", item_id: id, output_index: 0, content_index: 0, part },
        { type: "response.output_item.done", output_index: 0, item },
        { type: "response.incomplete", response: whole }
      ])
    )
    expect(whole).toMatchObject({ status: "incomplete", incomplete_details: { reason: "max_output_tokens" } })
    expect(events.error("boom")).toStrictEqual({
      type: "error",
      code: null,
      message: "boom",
      param: null,
      sequence_number: 11
    })
    expect(events.error("bad", "c", "p")).toStrictEqual({
      type: "error",
      code: "c",
      message: "bad",
      param: "p",
      sequence_number: 12
    })
    expect(sseOf(all[0]!)).toBe(`event: response.created\ndata: ${JSON.stringify(all[0])}\n\n`)
  })

  it("text, then calls in fragments: every event, ids naming the response, late fragments dropped", () => {
    const request = decode({ input: "x" })
    const events = new ResponseEvents(request, meta)
    const all = [
      ...events.start(),
      ...[
        chunk({ content: "see" }, { logprobs: { content: [{ token: "see", logprob: -1 }] } }),
        chunk({ tool_calls: [{ index: 0, id: "c1", type: "function", function: { name: "f", arguments: "" } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '{"a"' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: ":1}" } }] }),
        chunk({ tool_calls: [{ index: 1, function: { name: "g", arguments: "{}" } }] }),
        chunk({ tool_calls: [{ index: 1, id: "c2", function: { name: "h" } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: "late" } }] }),
        chunk({ content: "" }, { finish_reason: "tool_calls" })
      ].flatMap((c) => events.push(c)),
      ...events.end()
    ]
    const message = {
      type: "message",
      id: "msg_00ff_0",
      role: "assistant",
      status: "completed",
      content: [{ type: "output_text", text: "see", annotations: [] }]
    }
    const f = { type: "function_call", id: "fc_00ff_1", call_id: "c1", name: "f", arguments: '{"a":1}' }
    const g = { type: "function_call", id: "fc_00ff_2", call_id: "c2", name: "g", arguments: "{}" }
    const whole = completion({
      role: "assistant",
      content: "see",
      tool_calls: [
        { id: "c1", type: "function", function: { name: "f", arguments: '{"a":1}' } },
        { id: "c2", type: "function", function: { name: "g", arguments: "{}" } }
      ]
    })
    expect(all).toStrictEqual(
      numbered([
        { type: "response.created", response: inProgress(request) },
        { type: "response.in_progress", response: inProgress(request) },
        {
          type: "response.output_item.added",
          output_index: 0,
          item: { ...message, status: "in_progress", content: [] }
        },
        {
          type: "response.content_part.added",
          item_id: "msg_00ff_0",
          output_index: 0,
          content_index: 0,
          part: { type: "output_text", text: "", annotations: [] }
        },
        {
          type: "response.output_text.delta",
          item_id: "msg_00ff_0",
          output_index: 0,
          content_index: 0,
          delta: "see",
          logprobs: []
        },
        {
          type: "response.output_text.done",
          item_id: "msg_00ff_0",
          output_index: 0,
          content_index: 0,
          text: "see",
          logprobs: []
        },
        {
          type: "response.content_part.done",
          item_id: "msg_00ff_0",
          output_index: 0,
          content_index: 0,
          part: message.content[0]
        },
        { type: "response.output_item.done", output_index: 0, item: message },
        {
          type: "response.output_item.added",
          output_index: 1,
          item: { ...f, arguments: "", status: "in_progress" }
        },
        { type: "response.function_call_arguments.delta", item_id: f.id, output_index: 1, delta: '{"a"' },
        { type: "response.function_call_arguments.delta", item_id: f.id, output_index: 1, delta: ":1}" },
        {
          type: "response.function_call_arguments.done",
          item_id: f.id,
          output_index: 1,
          name: "f",
          arguments: '{"a":1}'
        },
        { type: "response.output_item.done", output_index: 1, item: { ...f, status: "completed" } },
        {
          type: "response.output_item.added",
          output_index: 2,
          item: { ...g, call_id: "call_00ff_1", arguments: "", status: "in_progress" }
        },
        { type: "response.function_call_arguments.delta", item_id: g.id, output_index: 2, delta: "{}" },
        { type: "response.function_call_arguments.done", item_id: g.id, output_index: 2, name: "g", arguments: "{}" },
        { type: "response.output_item.done", output_index: 2, item: { ...g, status: "completed" } },
        {
          type: "response.completed",
          response: { ...responseOf(whole, request, meta), usage: null }
        }
      ])
    )
  })

  it("a call's name in a later fragment; calls alone; nothing streamed at all", () => {
    const request = decode({ input: "x" })
    const named = new ResponseEvents(request, meta)
    const all = [
      ...named.start(),
      ...named.push(chunk({ tool_calls: [{ index: 0, function: { arguments: "{" } }] })),
      ...named.push(chunk({ tool_calls: [{ index: 0, function: { name: "late", arguments: "}" } }] })),
      ...named.push(chunk({ tool_calls: [{ index: 0, function: { name: "later" } }] })),
      ...named.end()
    ]
    expect(all.find((e) => e.type === "response.output_item.added")).toMatchObject({
      output_index: 0,
      item: { id: "fc_00ff_0", call_id: "call_00ff_0", name: "" }
    })
    expect(all.at(-1)).toMatchObject({
      type: "response.completed",
      response: {
        status: "completed",
        output: [{ type: "function_call", id: "fc_00ff_0", call_id: "call_00ff_0", name: "late", arguments: "{}" }]
      }
    })
    const empty = new ResponseEvents(request, meta)
    const nothing = [...empty.start(), ...empty.push(chunk({ role: "assistant" })), ...empty.end()]
    expect(nothing.map((e) => e.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed"
    ])
    const last = nothing.at(-1)!
    expect("response" in last ? last.response.output : undefined).toStrictEqual(
      responseOf(completion({ role: "assistant", content: "" }), request, meta).output
    )
  })
})

describe("ResponsesChat.ResponseEvents, what a stream leaves out", () => {
  it("usage and finish kept when later chunks do not repeat them; stray logprobs open no message", () => {
    const request = decode({ input: "x", include: ["message.output_text.logprobs"] })
    const id = `resp_${"ab".repeat(12)}`
    const events = new ResponseEvents(request, { ...meta, id })
    const usage = { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 }
    const lp = { logprobs: { content: [{ token: "x", logprob: -1 }] } }
    const all = [
      ...events.start(),
      ...[
        chunk({ role: "assistant" }, lp),
        chunk({ tool_calls: [{ index: 0 }] }),
        chunk({ tool_calls: [{ index: 0, function: { name: "f" } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: "{}" } }] }),
        { ...chunk({}, { ...lp, finish_reason: "length" }), usage } as ChatCompletionChunk,
        chunk({}),
        chunk({ tool_calls: [{ index: 0 }] })
      ].flatMap((c) => events.push(c)),
      ...events.end()
    ]
    const last = all.at(-1)!
    expect(last.type).toBe("response.incomplete")
    expect("response" in last ? last.response : undefined).toMatchObject({
      status: "incomplete",
      incomplete_details: { reason: "max_output_tokens" },
      usage: { input_tokens: 1, output_tokens: 2, total_tokens: 3 },
      output: [
        {
          type: "function_call",
          id: `fc_${"ab".repeat(12)}_0`,
          call_id: `call_${"ab".repeat(8)}_0`,
          name: "f",
          arguments: "{}"
        }
      ]
    })
    expect(all.filter((e) => e.type === "response.output_item.added")).toHaveLength(1)
  })
})
