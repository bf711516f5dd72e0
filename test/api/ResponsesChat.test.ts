/**
 * The Responses API's translation onto chat completions, as pure functions: a request's items and settings
 * as chat messages and fields (and what it refuses, by field, with what it says), a completion's choice as a
 * `Response` (every field), the stored input items and their pages. The streamed events are
 * `ResponseEvents.test.ts`'s.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import type { ChatCompletion } from "../../src/api/ChatCompletion.js"
import { Response, type ResponseCreateRequest } from "../../src/api/Responses.js"
import {
  chatRequestOf,
  firstField,
  historyItemsOf,
  inputItemsPage,
  itemId,
  itemsOf,
  newResponseId,
  responseIdOfItem,
  responseOf,
  responsesMessageOf,
  responsesParamOf,
  storedInputItemsOf
} from "../../src/api/ResponsesChat.js"
import { completion, decode, meta } from "./responsesFixtures.js"

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

describe("ResponsesChat.chatRequestOf, field by field", () => {
  const chatOf = (body: unknown, context?: Parameters<typeof chatRequestOf>[1]) =>
    Either.getOrThrow(chatRequestOf(decode(body), context))
  const refusal = (body: unknown, context?: Parameters<typeof chatRequestOf>[1]) =>
    Either.flip(chatRequestOf(body as ResponseCreateRequest, context)).pipe(Either.getOrThrow)

  it("the whole chat request: every setting set, and none of them when unset", () => {
    expect(
      chatOf({
        instructions: "Be brief.",
        input: "hi",
        max_output_tokens: 9,
        temperature: 0,
        top_p: 1,
        seed: 0,
        parallel_tool_calls: true,
        tools: [{ type: "function", name: "f", description: "F", parameters: { type: "object" }, strict: false }],
        tool_choice: "auto",
        top_logprobs: 2,
        text: {
          format: { type: "json_schema", name: "n", schema: { type: "object" }, description: "d", strict: false }
        }
      })
    ).toStrictEqual({
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "hi" }
      ],
      tools: [
        { type: "function", function: { name: "f", description: "F", parameters: { type: "object" }, strict: false } }
      ],
      tool_choice: "auto",
      parallel_tool_calls: true,
      max_completion_tokens: 9,
      temperature: 0,
      top_p: 1,
      seed: 0,
      logprobs: true,
      top_logprobs: 2,
      response_format: {
        type: "json_schema",
        json_schema: { name: "n", schema: { type: "object" }, description: "d", strict: false }
      }
    })
    const nulls = {
      instructions: null,
      max_output_tokens: null,
      temperature: null,
      top_p: null,
      seed: null,
      parallel_tool_calls: null,
      tools: null,
      tool_choice: null,
      top_logprobs: null,
      include: null,
      text: null
    }
    for (const unset of [{}, nulls, { instructions: "", tools: [], text: { format: { type: "text" } } }]) {
      expect(chatOf({ input: "hi", ...unset })).toStrictEqual({ messages: [{ role: "user", content: "hi" }] })
    }
    // A tool's null description, parameters and strict are left out; logprobs asked by include keep no top_logprobs.
    expect(
      chatOf({
        input: "hi",
        tools: [{ type: "function", name: "f", description: null, parameters: null, strict: null }],
        include: ["message.output_text.logprobs"],
        text: { format: { type: "json_schema", name: "n", schema: {}, description: null, strict: null } }
      })
    ).toStrictEqual({
      messages: [{ role: "user", content: "hi" }],
      tools: [{ type: "function", function: { name: "f" } }],
      logprobs: true,
      response_format: { type: "json_schema", json_schema: { name: "n", schema: {} } }
    })
    expect(chatOf({ input: "hi", top_logprobs: 0 }).logprobs).toBeUndefined()
    expect(chatOf({ input: "hi", include: ["reasoning.encrypted_content"] }).logprobs).toBeUndefined()
    expect(chatOf({ instructions: "only" }).messages).toStrictEqual([{ role: "system", content: "only" }])
    expect(chatOf({ input: "hi", tool_choice: "none" }).tool_choice).toBe("none")
  })

  it("assistant turns: text and calls one message, a new one per turn, refusals kept", () => {
    const messages = chatOf({
      input: [
        { role: "assistant", content: "one" },
        { role: "assistant", content: [{ type: "refusal", refusal: "no" }] },
        { role: "user", content: "q" },
        { type: "function_call", call_id: "a", name: "f", arguments: "1" },
        { role: "assistant", content: [{ type: "output_text", text: "after" }] },
        { type: "function_call", call_id: "b", name: "g", arguments: "2" },
        { type: "function_call", call_id: "c", name: "h", arguments: "3" },
        {
          role: "assistant",
          content: [
            { type: "text", text: "x" },
            { type: "refusal", refusal: "y" },
            { type: "refusal", refusal: "z" }
          ]
        }
      ]
    }).messages
    expect(messages).toStrictEqual([
      { role: "assistant", content: "one" },
      { role: "assistant", content: "", refusal: "no" },
      { role: "user", content: "q" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "a", type: "function", function: { name: "f", arguments: "1" } }]
      },
      {
        role: "assistant",
        content: "after",
        tool_calls: [
          { id: "b", type: "function", function: { name: "g", arguments: "2" } },
          { id: "c", type: "function", function: { name: "h", arguments: "3" } }
        ]
      },
      { role: "assistant", content: "x", refusal: "yz" }
    ])
    // Messages without a type are messages; system and developer keep their role.
    expect(
      chatOf({
        input: [
          { role: "system", content: "s" },
          { role: "developer", content: [{ type: "input_text", text: "d" }] }
        ]
      }).messages
    ).toStrictEqual([
      { role: "system", content: "s" },
      { role: "developer", content: "d" }
    ])
  })

  it("each refusal names its field and says why", () => {
    const cases: ReadonlyArray<readonly [unknown, string | null, string]> = [
      [{ input: [{ role: "tool", content: "x" }] }, "input[0].role", 'input[0] has role "tool"'],
      [
        { input: [{ type: "function_call_output", call_id: "call_9", output: "3" }] },
        "input[0].call_id",
        "No tool call found for function call output with call_id call_9 (input[0] answers no function_call"
      ],
      [
        {
          input: [
            { type: "function_call", call_id: "call_1", name: "add", arguments: "{}" },
            { type: "function_call_output", call_id: "call_1", output: "3" },
            { type: "function_call_output", call_id: "call_2", output: "4" }
          ]
        },
        "input[2].call_id",
        "call_id call_2"
      ],
      [
        { input: [{ type: "function_call", call_id: "call_1", name: "add", arguments: "{not json" }] },
        "input[0].arguments",
        "input[0].arguments must be JSON"
      ],
      [{ input: [{ role: "user", content: 5 }] }, "input[0].content", "input[0].content must be a string or an array"],
      [
        {
          input: [
            {
              role: "user",
              content: [
                { type: "input_text", text: "a" },
                { type: "refusal", refusal: "r" }
              ]
            }
          ]
        },
        "input[0].content[1].type",
        'input[0].content[1] is a part of type "refusal"'
      ],
      [
        { input: [{ role: "user", content: [{ type: "input_text", text: 1 }] }] },
        "input[0].content[0].type",
        'input[0].content[0] is a part of type "input_text"'
      ],
      [
        { input: [{ role: "assistant", content: [{ type: "refusal", refusal: 1 }] }] },
        "input[0].content[0].type",
        "which this engine does not take"
      ],
      [
        {
          input: [
            { role: "user", content: "x" },
            { type: "function_call", call_id: "c", name: "f" }
          ]
        },
        "input[1]",
        "input[1] must have call_id, name and arguments"
      ],
      [{ input: [{ type: "function_call", call_id: "c", arguments: "{}" }] }, "input[0]", "must have call_id, name"],
      [{ input: [{ type: "function_call", name: "f", arguments: "{}" }] }, "input[0]", "must have call_id, name"],
      [{ input: [{ type: "function_call_output", output: "o" }] }, "input[0].call_id", "input[0] must have a call_id"],
      [
        { input: [{ type: "function_call_output", call_id: "c", output: 3 }] },
        "input[0].output",
        "input[0].output must be a string"
      ],
      [{ input: [{ type: "computer_call" }] }, "input[0].type", 'input[0] is an item of type "computer_call"'],
      [{ input: "x", tools: [{ type: "function" }] }, "tools[0].type", 'tools[0] is a tool of type "function"'],
      [{ input: "x", tools: [{ type: "mcp" }] }, "tools[0].type", "built-in tools are not run"],
      [
        { input: "x", tool_choice: { type: "function" } },
        "tool_choice",
        'tool_choice of type "function" is not served'
      ],
      [{ input: "x", background: true }, "background", "background responses are not served"],
      [{ input: "x", conversation: "c" }, "conversation", "conversations are not served"],
      [{ input: "x", prompt: { id: "p" } }, "prompt", "prompt templates are not served"],
      [{ input: "x", context_management: {} }, "context_management", "context management"],
      [{ input: "x", truncation: "auto" }, "truncation", 'truncation "auto" is not served'],
      [{ input: [] }, "input", "input is empty"],
      [{}, "input", "input is empty"]
    ]
    for (const [body, param, message] of cases) {
      const error = refusal(body)
      expect([error.param, error.reason], JSON.stringify(body)).toEqual([param, "Invalid"])
      expect(error.message, JSON.stringify(body)).toContain(message)
      expect(error._tag).toBe("ResponsesRequestError")
    }
    // What is served of the same fields.
    for (const body of [
      { input: "x", background: false, truncation: "disabled" },
      { input: "x", conversation: null, prompt: null, context_management: null }
    ]) {
      expect(Either.isRight(chatRequestOf(body as ResponseCreateRequest))).toBe(true)
    }
  })

  it("history items and references: their params, references resolved once, not to references", () => {
    const history = [{ type: "message", role: "user", content: [{ type: "input_text", text: "q" }] }, { type: "bogus" }]
    const inHistory = refusal(decode({ input: "x" }), { history })
    expect(inHistory.param).toBe("previous_response_id (item 1).type")
    const items: Record<string, { readonly type?: string } & Record<string, unknown>> = {
      text: { type: "message", role: "assistant", content: [{ type: "output_text", text: "t" }] },
      loop: { type: "item_reference", id: "text" },
      bad: { type: "message", role: "nobody", content: "" }
    }
    const resolve = (id: string) => items[id]
    expect(chatOf({ input: [{ type: "item_reference", id: "text" }] }, { resolve }).messages).toStrictEqual([
      { role: "assistant", content: "t" }
    ])
    for (const [id, context] of [
      ["loop", { resolve }],
      ["nothing", { resolve }],
      ["text", {}]
    ] as const) {
      const error = refusal(
        decode({
          input: [
            { role: "user", content: "x" },
            { type: "item_reference", id }
          ]
        }),
        context
      )
      expect([error.param, error.reason]).toEqual(["input[1].id", "NotFound"])
      expect(error.message).toBe(`input[1] refers to item "${id}", which is not an item of a stored response`)
    }
    // A referenced item is checked as the item it names, at the reference's place.
    expect(
      refusal(
        decode({
          input: [
            { role: "user", content: "x" },
            { type: "item_reference", id: "bad" }
          ]
        }),
        { resolve }
      ).param
    ).toBe("input[1].role")
  })
})

describe("ResponsesChat.responseOf, whole", () => {
  it("every field of the response, from the request and the completion", () => {
    const request = decode({
      input: "x",
      instructions: "I",
      max_output_tokens: 5,
      metadata: { k: "v" },
      parallel_tool_calls: false,
      previous_response_id: "resp_0a",
      temperature: 0.3,
      top_p: 0.8,
      top_logprobs: 1,
      text: { format: { type: "json_object" } },
      tool_choice: "required",
      tools: [{ type: "function", name: "f", parameters: { type: "object" } }, { type: "web_search" }],
      user: "u"
    })
    const whole = completion({ role: "assistant", content: "t" }, "stop", [
      { token: "t", logprob: -1, bytes: [116], top_logprobs: [{ token: "u", logprob: -2, bytes: [117] }] }
    ] as never)
    expect(responseOf(whole, request, { ...meta, store: false })).toStrictEqual({
      id: "resp_00ff",
      object: "response",
      created_at: 1_700_000_000,
      status: "completed",
      completed_at: 1_700_000_000,
      error: null,
      incomplete_details: null,
      instructions: "I",
      max_output_tokens: 5,
      metadata: { k: "v" },
      model: "m",
      output: [
        {
          type: "message",
          id: "msg_00ff_0",
          role: "assistant",
          status: "completed",
          content: [
            {
              type: "output_text",
              text: "t",
              annotations: [],
              logprobs: [
                { token: "t", logprob: -1, bytes: [116], top_logprobs: [{ token: "u", logprob: -2, bytes: [117] }] }
              ]
            }
          ]
        }
      ],
      parallel_tool_calls: false,
      previous_response_id: "resp_0a",
      temperature: 0.3,
      top_p: 0.8,
      top_logprobs: 1,
      text: { format: { type: "json_object" } },
      tool_choice: "required",
      tools: [{ type: "function", name: "f", parameters: { type: "object" } }],
      truncation: "disabled",
      store: false,
      background: false,
      reasoning: null,
      service_tier: "default",
      user: "u",
      usage: {
        input_tokens: 10,
        input_tokens_details: { cached_tokens: 4 },
        output_tokens: 3,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 13
      }
    })
    // The defaults of what the request leaves out; no usage, no cached tokens, no choice.
    const bare = responseOf(
      { ...whole, choices: [], usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } },
      decode({ input: "x" }),
      meta
    )
    expect(bare).toMatchObject({
      status: "completed",
      instructions: null,
      max_output_tokens: null,
      metadata: {},
      output: [],
      parallel_tool_calls: true,
      previous_response_id: null,
      temperature: null,
      top_p: null,
      top_logprobs: null,
      text: { format: { type: "text" } },
      tool_choice: "auto",
      tools: [],
      store: true,
      user: null,
      usage: { input_tokens: 1, input_tokens_details: { cached_tokens: 0 }, output_tokens: 2, total_tokens: 3 }
    })
    const { usage: _usage, ...noUsage } = whole
    expect(responseOf(noUsage as ChatCompletion, decode({ input: "x" }), meta).usage).toBeNull()
  })

  it("refusals, empty answers, content filters, calls without ids, top logprobs without bytes", () => {
    const output = (message: Record<string, unknown>, finish = "stop", logprobs: ReadonlyArray<unknown> = []) =>
      responseOf(
        completion(message as never, finish, logprobs as never),
        decode({ input: "x", include: ["message.output_text.logprobs"] }),
        meta
      )
    expect(output({ role: "assistant", content: null, refusal: "no" }).output).toStrictEqual([
      {
        type: "message",
        id: "msg_00ff_0",
        role: "assistant",
        status: "completed",
        content: [{ type: "refusal", refusal: "no" }]
      }
    ])
    expect(output({ role: "assistant", content: "a", refusal: "b" }).output[0]).toMatchObject({
      content: [
        { type: "output_text", text: "a" },
        { type: "refusal", refusal: "b" }
      ]
    })
    expect(output({ role: "assistant", content: null }).output).toStrictEqual([
      {
        type: "message",
        id: "msg_00ff_0",
        role: "assistant",
        status: "completed",
        content: [{ type: "output_text", text: "", annotations: [], logprobs: [] }]
      }
    ])
    const filtered = output({ role: "assistant", content: "a" }, "content_filter")
    expect([filtered.status, filtered.incomplete_details, filtered.output[0]?.status]).toEqual([
      "incomplete",
      { reason: "content_filter" },
      "incomplete"
    ])
    const calls = output({
      role: "assistant",
      content: "",
      tool_calls: [
        { type: "function", function: { name: "f", arguments: "1" } },
        { type: "function", function: { name: "g", arguments: "2" } }
      ]
    })
    expect(calls.output).toStrictEqual([
      {
        type: "function_call",
        id: "fc_00ff_0",
        call_id: "call_00ff_0",
        name: "f",
        arguments: "1",
        status: "completed"
      },
      { type: "function_call", id: "fc_00ff_1", call_id: "call_00ff_1", name: "g", arguments: "2", status: "completed" }
    ])
    const long = responseOf(
      completion({
        role: "assistant",
        content: null,
        tool_calls: [{ type: "function", function: { name: "f", arguments: "" } }]
      } as never),
      decode({ input: "x" }),
      { ...meta, id: `resp_${"ab".repeat(12)}` }
    )
    expect(long.output[0]).toMatchObject({ call_id: `call_${"ab".repeat(8)}_0` })
    expect(
      output({ role: "assistant", content: "t" }, "stop", [
        { token: "t", logprob: -1, top_logprobs: [{ token: "u", logprob: -2 }] }
      ]).output[0]
    ).toMatchObject({
      content: [
        { logprobs: [{ token: "t", logprob: -1, bytes: [], top_logprobs: [{ token: "u", logprob: -2, bytes: [] }] }] }
      ]
    })
  })

  it("response ids, item ids and the response an item id names", () => {
    const id = newResponseId()
    expect(id).toMatch(/^resp_[0-9a-f]{48}$/)
    expect(newResponseId()).not.toBe(id)
    expect(itemId(id, "fco", "i2")).toBe(`fco_${id.slice(5)}_i2`)
    for (const kind of ["msg", "fc", "fco"] as const) {
      expect(responseIdOfItem(itemId(id, kind, 3))).toBe(id)
      expect(responseIdOfItem(itemId(id, kind, "i3"))).toBe(id)
    }
    for (const other of [
      `x${itemId(id, "msg", 0)}`,
      `${itemId(id, "msg", 0)}x`,
      "fc_ab_",
      "fc__1",
      "rs_ab_1",
      "msg_ab_j1"
    ]) {
      expect(responseIdOfItem(other), other).toBeUndefined()
    }
  })
})

describe("ResponsesChat stored items, whole", () => {
  it("every kind of input item stored with its id; references as the item they name", () => {
    const named = { type: "function_call", id: "fc_x_0", call_id: "k", name: "n", arguments: "{}" }
    const request = decode({
      input: [
        { role: "assistant", content: "said" },
        { type: "message", id: "msg_own", role: "user", content: [{ type: "input_text", text: "q" }] },
        { type: "function_call", call_id: "c", name: "f", arguments: "{}" },
        { type: "function_call", id: "fc_own", call_id: "c2", name: "g", arguments: "[]" },
        { type: "function_call_output", id: "fco_own", call_id: "c", output: "o" },
        { type: "item_reference", id: "fc_x_0" },
        { type: "item_reference", id: "unknown" },
        { type: "reasoning", summary: [] }
      ]
    })
    const resolve = (id: string) => (id === "fc_x_0" ? named : undefined)
    expect(storedInputItemsOf(request, meta.id, resolve)).toStrictEqual([
      {
        type: "message",
        id: "msg_00ff_i0",
        role: "assistant",
        status: "completed",
        content: [{ type: "output_text", text: "said", annotations: [] }]
      },
      {
        type: "message",
        id: "msg_own",
        role: "user",
        status: "completed",
        content: [{ type: "input_text", text: "q" }]
      },
      { type: "function_call", id: "fc_00ff_i2", call_id: "c", name: "f", arguments: "{}", status: "completed" },
      { type: "function_call", id: "fc_own", call_id: "c2", name: "g", arguments: "[]", status: "completed" },
      { type: "function_call_output", id: "fco_own", call_id: "c", output: "o", status: "completed" },
      { type: "function_call", id: "fc_x_0", call_id: "k", name: "n", arguments: "{}", status: "completed" }
    ])
    expect(storedInputItemsOf(decode({ input: "hi" }), meta.id)).toStrictEqual([
      {
        type: "message",
        id: "msg_00ff_i0",
        role: "user",
        status: "completed",
        content: [{ type: "input_text", text: "hi" }]
      }
    ])
    expect(storedInputItemsOf(decode({}), meta.id)).toStrictEqual([])
  })

  it("a chain's items oldest first: each response's input, then its output", () => {
    const stored = (n: number) => ({
      response: { output: [{ type: "message", id: `out${n}` }] } as unknown as Response,
      inputItems: [{ id: `in${n}` }] as never,
      previousResponseId: null
    })
    expect(itemsOf(stored(1)).map((item) => item.id)).toEqual(["in1", "out1"])
    expect(historyItemsOf([stored(2), stored(1)]).map((item) => item.id)).toEqual(["in1", "out1", "in2", "out2"])
  })

  it("pages: the default limit is 20, newest first; limits 1 to 100; an empty page", () => {
    const items = Array.from({ length: 25 }, (_, i) => ({ id: `i${i}` })) as never as Parameters<
      typeof inputItemsPage
    >[0]
    const first = Either.getOrThrow(inputItemsPage(items, {}))
    expect([first.object, first.data.length, first.first_id, first.last_id, first.has_more]).toEqual([
      "list",
      20,
      "i24",
      "i5",
      true
    ])
    const rest = Either.getOrThrow(inputItemsPage(items, { after: "i5" }))
    expect([rest.data.map((i) => i.id), rest.has_more]).toEqual([["i4", "i3", "i2", "i1", "i0"], false])
    const asc = Either.getOrThrow(inputItemsPage(items, { order: "asc", limit: "100" }))
    expect([asc.data.length, asc.first_id, asc.last_id, asc.has_more]).toEqual([25, "i0", "i24", false])
    const exact = Either.getOrThrow(inputItemsPage(items, { order: "asc", limit: "5", after: "i19" }))
    expect([exact.data.map((i) => i.id), exact.has_more]).toEqual([["i20", "i21", "i22", "i23", "i24"], false])
    const none = Either.getOrThrow(inputItemsPage(items, { order: "asc", after: "i24" }))
    expect([none.data, none.first_id, none.last_id, none.has_more]).toEqual([[], null, null, false])
    for (const limit of ["0", "101", "1.5", "x"]) {
      const error = Either.flip(inputItemsPage(items, { limit })).pipe(Either.getOrThrow)
      expect([error.param, error.message]).toEqual([
        "limit",
        `limit must be a whole number from 1 to 100, got '${limit}'`
      ])
    }
    expect(Either.flip(inputItemsPage(items, { order: "up" })).pipe(Either.getOrThrow).message).toBe(
      "order must be asc or desc, got 'up'"
    )
    expect(Either.flip(inputItemsPage(items, { after: "zz" })).pipe(Either.getOrThrow)).toMatchObject({
      param: "after",
      description: "after names no input item of this response: 'zz'"
    })
  })

  it("the first field a schema failure names; chat names in errors as the Responses request's", () => {
    const failure = (schema: Schema.Schema.Any, value: unknown) =>
      Either.flip(Schema.decodeUnknownEither(schema as Schema.Schema<unknown>)(value)).pipe(Either.getOrThrow)
    expect(firstField(failure(Schema.Struct({ a: Schema.Array(Schema.Number) }), { a: [1, "x"] }))).toBe("a.1")
    expect(firstField(failure(Schema.Number, "x"))).toBeNull()
    expect(responsesParamOf(null)).toBeNull()
    for (const [chat, responses] of [
      ["max_tokens", "max_output_tokens"],
      ["response_format", "text.format"],
      ["structured_outputs.json_schema.x", "text.format.x"],
      ["messages[2].content", "input.content"],
      ["messages", "input"],
      ["tools[1].function.name", "tools[1].name"],
      ["xmax_tokens", "xmax_tokens"],
      ["seed", "seed"]
    ]) {
      expect(responsesParamOf(chat!), chat).toBe(responses)
    }
    expect(responsesMessageOf("max_completion_tokens and response_format, not max_completion_tokens_x")).toBe(
      "max_output_tokens and text.format, not max_completion_tokens_x"
    )
  })
})

describe("ResponsesChat: what each branch reads", () => {
  const refusal = (body: unknown, context?: Parameters<typeof chatRequestOf>[1]) =>
    Either.flip(chatRequestOf(body as ResponseCreateRequest, context)).pipe(Either.getOrThrow)

  it("a part is read by its type, a tool and a tool_choice by theirs", () => {
    for (const [body, param] of [
      [{ input: [{ role: "user", content: [{ type: "input_audio", text: "t" }] }] }, "input[0].content[0].type"],
      [
        { input: [{ role: "assistant", content: [{ type: "output_audio", refusal: "r" }] }] },
        "input[0].content[0].type"
      ],
      [
        { input: [{ type: "function_call_output", call_id: "c", output: [{ type: "refusal", refusal: "r" }] }] },
        "input[0].output[0].type"
      ],
      [{ input: "x", tools: [{ type: "custom", name: "grammar" }] }, "tools[0].type"],
      [{ input: "x", tool_choice: { type: "custom", name: "grammar" } }, "tool_choice"]
    ] as const) {
      expect(refusal(body).param, JSON.stringify(body)).toBe(param)
    }
  })

  it("an output item's index of two digits still names its response", () => {
    expect(responseIdOfItem("msg_00ff_12")).toBe("resp_00ff")
    expect(responseIdOfItem("fco_00ff_i12")).toBe("resp_00ff")
    // Every id is 24 bytes in hex, small bytes padded (one in 16 is below 0x10: fifty ids all but surely hold one).
    for (let i = 0; i < 50; i++) expect(newResponseId()).toMatch(/^resp_[0-9a-f]{48}$/)
  })

  it("a refusal beside calls keeps its message; logprobs asked of a choice without them are empty", () => {
    const response = responseOf(
      completion({
        role: "assistant",
        content: "",
        refusal: "no",
        tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "{}" } }]
      } as never),
      decode({ input: "x" }),
      meta
    )
    expect(response.output.map((item) => item.type)).toEqual(["message", "function_call"])
    expect(response.output[0]).toMatchObject({ content: [{ type: "refusal", refusal: "no" }] })
    const { logprobs: _logprobs, ...bare } = completion({ role: "assistant", content: "t" }).choices[0]!
    const asked = responseOf(
      { ...completion({ role: "assistant", content: "t" }), choices: [bare] },
      decode({ input: "x", top_logprobs: 1 }),
      meta
    )
    expect(asked.output[0]).toMatchObject({ content: [{ type: "output_text", text: "t", logprobs: [] }] })
  })

  it("stored items: an item with its own id kept as sent, only references resolved, none without a resolver", () => {
    const stored = { type: "message", id: "msg_own", role: "user", content: [{ type: "input_text", text: "stored" }] }
    const request = decode({
      input: [{ type: "message", id: "msg_own", role: "user", content: [{ type: "input_text", text: "sent" }] }]
    })
    expect(storedInputItemsOf(request, meta.id, (id) => (id === "msg_own" ? stored : undefined))).toStrictEqual([
      {
        type: "message",
        id: "msg_own",
        role: "user",
        status: "completed",
        content: [{ type: "input_text", text: "sent" }]
      }
    ])
    expect(storedInputItemsOf(decode({ input: [{ type: "item_reference", id: "msg_own" }] }), meta.id)).toStrictEqual(
      []
    )
    // A reference whose id is not a string (the schema takes it as another item) is never looked up.
    const anything = () => stored
    const numbered = decode({ input: [{ type: "item_reference", id: 5 }] })
    expect(storedInputItemsOf(numbered, meta.id, anything)).toStrictEqual([])
    expect(refusal(numbered, { resolve: anything })).toMatchObject({ param: "input[0].id", reason: "NotFound" })
  })
})
