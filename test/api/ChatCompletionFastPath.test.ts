import { describe, expect, it } from "@effect/vitest"
import * as Arbitrary from "effect/Arbitrary"
import * as FastCheck from "effect/FastCheck"
import * as Schema from "effect/Schema"
import type * as AST from "effect/SchemaAST"
import { ChatCompletion, ChatCompletionRequest, StructuredOutputs } from "../../src/api/ChatCompletion.js"
import { AssistantMessage, SystemMessage, ToolMessage, UserMessage } from "../../src/api/ChatMessage.js"
import { chatCompletion } from "../../src/api/internal/chatCompletionFastPath.js"
import { requestFields, requestKeys } from "../../src/api/internal/chatRequestFastPath.js"
import { engineChoice, MESSAGE_KEYS, sameAs } from "./parity.js"

/** The schema a fast path stands in front of: the type parameter of its declaration. */
const plainOf = <A, I>(schema: Schema.Schema<A, I>): Schema.Schema<A, I> =>
  Schema.make((schema.ast as AST.Declaration).typeParameters[0]!)

const PlainRequest = plainOf(ChatCompletionRequest)
const PlainCompletion = plainOf(ChatCompletion)

type Loose = Record<string, unknown>

// ---------------------------------------------------------------------------------------------------------
// requests
// ---------------------------------------------------------------------------------------------------------

/** The common fields, drawn from the schema; the other fields come from the whole request's arbitrary. */
const commonFields = Arbitrary.make(
  ChatCompletionRequest.from.pick(
    "model",
    "logprobs",
    "top_logprobs",
    "max_tokens",
    "max_completion_tokens",
    "n",
    "seed",
    "stop",
    "stream",
    "stream_options",
    "temperature",
    "top_p",
    "tools",
    "tool_choice",
    "response_format",
    "structured_outputs",
    "return_token_ids",
    "include_stop_str_in_output",
    "skip_special_tokens"
  )
)
const message = FastCheck.oneof(
  Arbitrary.make(SystemMessage),
  Arbitrary.make(UserMessage),
  Arbitrary.make(AssistantMessage),
  Arbitrary.make(ToolMessage)
)
const commonRequest = FastCheck.record({ messages: FastCheck.array(message, { maxLength: 5 }), fields: commonFields })
  .map(({ fields, messages }) => ({ messages, ...fields }) as Loose)
  // Mostly the plain shapes a client sends (a named tool_choice naming one of its tools), so that many decode.
  .map((request) => {
    const tools = request.tools as ReadonlyArray<{ function: { name: string } }> | null | undefined
    const choice = request.tool_choice
    if (typeof choice === "object" && choice !== null && tools != null && tools.length > 0) {
      return { ...request, tool_choice: { type: "function", function: { name: tools[0]!.function.name } } }
    }
    return request
  })
const anyRequest = Arbitrary.make(ChatCompletionRequest).map((request) => request as unknown as Loose)

/** Values at the edges of the fields' schemas (and past them), to set one field of a valid value to. */
const EDGE_VALUES: ReadonlyArray<unknown> = [
  0,
  -1,
  -2,
  1,
  1.5,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  2 ** 53,
  "",
  "x",
  "auto",
  "none",
  "required",
  "low",
  "text",
  "json_schema",
  "function",
  "assistant",
  "chat.completion",
  true,
  false,
  null,
  undefined,
  [],
  ["a"],
  [1],
  [1.5],
  [null],
  {},
  { type: "text", text: "a" },
  { name: "f", arguments: "{}" },
  { function: { name: "f" } },
  { id: "c", type: "function", function: { name: "f", arguments: "" } }
]
const oddValue = FastCheck.constantFrom(...EDGE_VALUES)

const firstMessage = (r: Loose) => ((r.messages as Array<Loose>)[0] ?? { role: "user", content: "x" }) as Loose
const nearRequest = FastCheck.oneof(
  { weight: 6, arbitrary: commonRequest },
  { weight: 2, arbitrary: anyRequest },
  commonRequest.map((r) => ({ ...r, extra: 1 })),
  commonRequest.map((r) => ({ ...r, messages: [{ ...firstMessage(r), extra: 1 }] })),
  commonRequest.map((r) => ({ ...r, messages: [{ ...firstMessage(r), content: null }] })),
  commonRequest.map((r) => ({ ...r, messages: [{ role: "assistant", tool_calls: null }] })),
  commonRequest.map((r) => ({ ...r, messages: [{ role: "assistant", tool_calls: [{ id: "c", type: "custom" }] }] })),
  commonRequest.map((r) => ({ ...r, messages: [{ role: "narrator", content: "x" }] })),
  commonRequest.map((r) => ({ ...r, messages: [{ role: "user", content: [{ type: "text", text: "a", x: 1 }] }] })),
  FastCheck.tuple(commonRequest, FastCheck.constantFrom(...requestKeys), oddValue).map(([r, key, value]) => ({
    ...r,
    [key]: value
  })),
  FastCheck.tuple(commonRequest, FastCheck.constantFrom(...MESSAGE_KEYS), oddValue).map(([r, key, value]) => ({
    ...r,
    messages: [{ ...firstMessage(r), [key]: value }]
  })),
  commonRequest.map((r) => ({ ...r, top_logprobs: 2, logprobs: false })),
  commonRequest.map((r) => ({ ...r, stream_options: { include_usage: true }, stream: false })),
  commonRequest.map((r) => ({ ...r, tool_choice: "required", tools: [] })),
  commonRequest.map((r) => ({ ...r, tool_choice: { function: { name: "nowhere" } } })),
  commonRequest.map((r) => ({ ...r, structured_outputs: { choice: ["1", 2], extra: 1 } })),
  commonRequest.map((r) => ({ ...r, response_format: { type: "structural_tag", structures: [] } })),
  commonRequest.map((r) => ({ ...r, logit_bias: { "1": 0.5 }, documents: null })),
  commonRequest.map((r) => ({ ...r, model: undefined, temperature: Number.NaN })),
  commonRequest.map((r) => ({ ...r, messages: "hello" })),
  FastCheck.constant(null)
)

describe("the fast path of chat completion requests", () => {
  it("decodes and encodes exactly as the plain schema (the same keys in the same order), valid or not", () => {
    let fastOnes = 0
    FastCheck.assert(
      FastCheck.property(nearRequest, (request) => {
        const fast = requestFields(request)
        if (fast !== undefined && Schema.decodeUnknownEither(PlainRequest)(request)._tag === "Right") fastOnes++
        sameAs(ChatCompletionRequest, PlainRequest, request)
      }),
      { numRuns: 600 }
    )
    // Many requests of the common shapes take the fast path.
    expect(fastOnes).toBeGreaterThan(60)
  })

  it("knows every key of the request, in the schema's order (a key it does not decode is declined, not dropped)", () => {
    expect(requestKeys).toStrictEqual(Object.keys(ChatCompletionRequest.from.fields))
  })

  // A tic-tac-toe turn as the example sends it (examples/tictactoe.ts, through Rollout.chat and Policy).
  const turn = () =>
    JSON.parse(
      JSON.stringify({
        messages: [
          { role: "user", content: "123\n456\n789" },
          { role: "assistant", content: "5" },
          { role: "user", content: "1O3\n4X6\n789" }
        ],
        max_completion_tokens: 2,
        structured_outputs: { choice: ["1", "3", "4", "6", "7", "8", "9"] },
        seed: 7,
        logprobs: true,
        return_token_ids: true,
        model: "wandb-artifact:///examples/tictactoe:step3",
        nvext: { ignored: true }
      })
    ) as Loose

  it("takes a tic-tac-toe turn (the choice list kept as given, where the plain schema copies it)", () => {
    const request = turn()
    const choice = (request.structured_outputs as Loose).choice
    const decoded = Schema.decodeUnknownSync(ChatCompletionRequest)(request)
    expect(decoded.structured_outputs?.choice).toBe(choice)
    expect(Schema.decodeUnknownSync(PlainRequest)(request).structured_outputs?.choice).not.toBe(choice)
    expect(decoded).toStrictEqual(Schema.decodeUnknownSync(PlainRequest)(request))
    // The schema's order, not the request's; the key it does not name dropped.
    expect(Object.keys(decoded)).toStrictEqual([
      "messages",
      "model",
      "logprobs",
      "max_completion_tokens",
      "seed",
      "structured_outputs",
      "return_token_ids"
    ])
    // The client's encode takes it too.
    expect(Schema.encodeSync(ChatCompletionRequest)(decoded).structured_outputs?.choice).toBe(choice)
  })

  it("leaves other parse options and derived schemas to the plain schema", () => {
    const request = turn()
    for (const options of [{ onExcessProperty: "preserve" }, { propertyOrder: "original" }] as const) {
      const fast = Schema.decodeUnknownSync(ChatCompletionRequest)(request, options)
      const plain = Schema.decodeUnknownSync(PlainRequest)(request, options)
      expect(fast).toStrictEqual(plain)
      expect(JSON.stringify(fast)).toBe(JSON.stringify(plain))
    }
    expect(Schema.decodeUnknownEither(ChatCompletionRequest)(request, { onExcessProperty: "error" })._tag).toBe("Left")
    expect(Schema.is(ChatCompletionRequest)(request)).toBe(Schema.is(PlainRequest)(request))
  })
})

// ---------------------------------------------------------------------------------------------------------
// every field at its edges
// ---------------------------------------------------------------------------------------------------------

/** Stands for a key left out. */
const ABSENT = Symbol("absent")
const EDGES: ReadonlyArray<unknown> = [ABSENT, ...EDGE_VALUES]

/** `base` with the key `key` of the object at `path` set to `value` (or left out, for {@link ABSENT}). */
const setAt = (base: unknown, path: ReadonlyArray<string | number>, key: string, value: unknown): unknown => {
  const copy = structuredClone(base) as Loose
  let at: Loose = copy
  for (const step of path) at = at[step] as Loose
  if (value === ABSENT) delete at[key]
  else at[key] = value
  return copy
}

/** For each object at a path of `base` and each of its keys (and one it does not name), every edge value. */
const everyEdge = <A, I>(
  fast: Schema.Schema<A, I>,
  plain: Schema.Schema<A, I>,
  base: unknown,
  places: ReadonlyArray<readonly [ReadonlyArray<string | number>, ReadonlyArray<string>]>
) => {
  for (const [path, keys] of places) {
    for (const key of [...keys, "extra"]) for (const value of EDGES) sameAs(fast, plain, setAt(base, path, key, value))
  }
}

const richRequest = {
  messages: [
    { role: "system", content: [{ type: "text", text: "be brief" }], name: "s" },
    { role: "user", content: "hi" },
    {
      role: "assistant",
      content: null,
      tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{}" } }],
      reasoning: "r"
    },
    { role: "tool", content: "1", tool_call_id: "c1" },
    { role: "developer", content: "d" }
  ],
  model: "m",
  tools: [
    { type: "function", function: { name: "f", description: "d", parameters: { type: "object" }, strict: true } }
  ],
  tool_choice: { type: "function", function: { name: "f" } },
  response_format: { type: "json_schema", json_schema: { name: "n", schema: { type: "object" }, strict: true } },
  stream: true,
  stream_options: { include_usage: true, continuous_usage_stats: false },
  structured_outputs: { choice: ["a", "b"], regex: null, disable_fallback: true },
  stop: ["x"],
  temperature: 0.5
}

describe("the fast paths, every field at its edges", () => {
  it("a request: every key of every object set to each edge value, or left out", () => {
    // The request itself takes the fast path, so each change is one the fast path sees.
    expect(requestFields(richRequest)).toStrictEqual(Schema.decodeUnknownSync(PlainRequest)(richRequest))
    everyEdge(ChatCompletionRequest, PlainRequest, richRequest, [
      [[], requestKeys],
      ...richRequest.messages.map((_, i) => [["messages", i], MESSAGE_KEYS] as const),
      [
        ["messages", 0, "content", 0],
        ["type", "text"]
      ],
      [
        ["messages", 2, "tool_calls", 0],
        ["id", "type", "function"]
      ],
      [
        ["messages", 2, "tool_calls", 0, "function"],
        ["name", "arguments"]
      ],
      [
        ["tools", 0],
        ["type", "function"]
      ],
      [
        ["tools", 0, "function"],
        ["name", "description", "parameters", "strict"]
      ],
      [["tool_choice"], ["type", "function"]],
      [["response_format"], ["type", "json_schema"]],
      [
        ["response_format", "json_schema"],
        ["name", "description", "schema", "strict"]
      ],
      [["stream_options"], ["include_usage", "continuous_usage_stats"]],
      [["structured_outputs"], Object.keys(StructuredOutputs.fields)]
    ])
  })

  it("a completion: every key of every object set to each edge value, or left out", () => {
    const rich = {
      id: "c",
      object: "chat.completion",
      created: 1,
      model: "m",
      choices: [
        {
          index: 0,
          message: {
            role: "assistant",
            content: null,
            refusal: null,
            function_call: { name: "g", arguments: "" },
            tool_calls: [{ id: "t", type: "function", function: { name: "f", arguments: "{}" } }],
            reasoning: null
          },
          logprobs: { content: [{ token: "a", logprob: -1, bytes: [97], top_logprobs: [] }], refusal: null },
          finish_reason: "tool_calls",
          stop_reason: 3,
          token_ids: [1]
        }
      ],
      usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3, prompt_tokens_details: { cached_tokens: 0 } },
      service_tier: "default",
      system_fingerprint: "fp",
      prompt_token_ids: [1, 2],
      kv_transfer_params: null
    }
    expect(chatCompletion(rich, true)).toStrictEqual(Schema.decodeUnknownSync(PlainCompletion)(rich))
    everyEdge(ChatCompletion, PlainCompletion, rich, [
      [[], PlainFields],
      [["choices", 0], CHOICE_KEYS],
      [
        ["choices", 0, "message"],
        [...MESSAGE_KEYS, "annotations"]
      ],
      [
        ["choices", 0, "message", "tool_calls", 0],
        ["id", "type", "function"]
      ],
      [
        ["choices", 0, "message", "tool_calls", 0, "function"],
        ["name", "arguments"]
      ],
      [
        ["choices", 0, "message", "function_call"],
        ["name", "arguments"]
      ],
      [
        ["choices", 0, "logprobs"],
        ["content", "refusal"]
      ],
      [["usage"], USAGE_KEYS],
      [["usage", "prompt_tokens_details"], ["cached_tokens"]]
    ])
  })
})

// ---------------------------------------------------------------------------------------------------------
// responses
// ---------------------------------------------------------------------------------------------------------

/** Without the fields the fast path leaves to the schema unless null (annotations, audio, prompt logprobs). */
const common = (c: ChatCompletion): ChatCompletion => {
  const { prompt_logprobs: _, ...rest } = c
  return {
    ...rest,
    choices: c.choices.map(({ message: { annotations: _a, audio: _b, ...message }, ...choice }) => ({
      ...choice,
      message
    }))
  }
}
const completion = FastCheck.oneof(
  { weight: 3, arbitrary: Arbitrary.make(ChatCompletion).map(common) },
  Arbitrary.make(ChatCompletion)
)
// As a service sends it (the encoded side): usage counts may be missing or null there.
const encodedCompletion = completion.map((c) => Schema.encodeSync(PlainCompletion)(c) as Loose)
const PlainFields = (PlainCompletion.ast as AST.TypeLiteral).propertySignatures.map((ps) => ps.name as string)
const CHOICE_KEYS = ["index", "message", "logprobs", "finish_reason", "stop_reason", "token_ids"]
const USAGE_KEYS = ["prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details"]
const firstChoice = (c: Loose) => ((c.choices as Array<Loose>)[0] ?? {}) as Loose
const nearCompletion = FastCheck.oneof(
  { weight: 3, arbitrary: encodedCompletion },
  { weight: 2, arbitrary: completion.map((c) => c as unknown as Loose) },
  encodedCompletion.map((c) => ({ ...c, nvext: { timing: 1 } })),
  encodedCompletion.map((c) => ({
    ...c,
    usage: { total_tokens: 3, prompt_tokens: null, completion_tokens: undefined }
  })),
  encodedCompletion.map((c) => ({ ...c, usage: { prompt_tokens: 1.5 } })),
  encodedCompletion.map((c) => ({ ...c, usage: undefined })),
  encodedCompletion.map((c) => ({ ...c, created: "yesterday" })),
  encodedCompletion.map((c) => ({ ...c, choices: [{ ...firstChoice(c), extra: 1, message: { role: "assistant" } }] })),
  encodedCompletion.map((c) => ({ ...c, choices: [{ index: 0, message: { role: "assistant" } }] })),
  encodedCompletion.map((c) => ({
    ...c,
    choices: [{ index: 0, message: { role: "a", tool_calls: [{ type: "function" }] }, finish_reason: null }]
  })),
  encodedCompletion.map((c) => ({
    ...c,
    choices: [{ ...firstChoice(c), logprobs: { content: [{ token: "a", logprob: 0, extra: 1 }] } }]
  })),
  encodedCompletion.map((c) => ({ ...c, prompt_token_ids: [1, 2.5] })),
  FastCheck.tuple(encodedCompletion, FastCheck.constantFrom(...PlainFields), oddValue).map(([c, key, value]) => ({
    ...c,
    [key]: value
  })),
  FastCheck.tuple(encodedCompletion, FastCheck.constantFrom(...CHOICE_KEYS), oddValue).map(([c, key, value]) => ({
    ...c,
    choices: [{ ...firstChoice(c), [key]: value }]
  })),
  FastCheck.tuple(encodedCompletion, FastCheck.constantFrom(...MESSAGE_KEYS, "annotations"), oddValue).map(
    ([c, key, value]) => ({
      ...c,
      choices: [{ ...firstChoice(c), message: { ...(firstChoice(c).message as Loose), [key]: value } }]
    })
  ),
  FastCheck.tuple(encodedCompletion, FastCheck.constantFrom(...USAGE_KEYS), oddValue).map(([c, key, value]) => ({
    ...c,
    usage: { ...(c.usage as Loose), [key]: value }
  })),
  FastCheck.constant(null)
)

describe("the fast path of chat completions", () => {
  it("decodes and encodes exactly as the plain schema (the same keys in the same order), valid or not", () => {
    let fastOnes = 0
    FastCheck.assert(
      FastCheck.property(nearCompletion, (value) => {
        if (chatCompletion(value, true) !== undefined) fastOnes++
        sameAs(ChatCompletion, PlainCompletion, value)
      }),
      { numRuns: 600 }
    )
    // Many completions of the common shapes take the fast path.
    expect(fastOnes).toBeGreaterThan(150)
  })

  const response = () =>
    JSON.parse(
      JSON.stringify({
        id: "chatcmpl-1",
        object: "chat.completion",
        created: 1,
        model: "m",
        choices: [engineChoice()],
        usage: { prompt_tokens: 40, completion_tokens: 2, total_tokens: 42 },
        prompt_token_ids: [1, 2, 3]
      })
    ) as Loose

  it("takes the engine's response (token ids kept as given, where the plain schema copies them)", () => {
    const value = response()
    const decoded = Schema.decodeUnknownSync(ChatCompletion)(value)
    expect(decoded.prompt_token_ids).toBe(value.prompt_token_ids)
    expect(decoded.choices[0]!.token_ids).toBe(firstChoice(value).token_ids)
    expect(Schema.decodeUnknownSync(PlainCompletion)(value).prompt_token_ids).not.toBe(value.prompt_token_ids)
    expect(decoded).toStrictEqual(Schema.decodeUnknownSync(PlainCompletion)(value))
    // The server's encode takes it too.
    expect(Schema.encodeSync(ChatCompletion)(decoded).prompt_token_ids).toBe(value.prompt_token_ids)
  })

  it("applies the usage defaults when decoding only, and leaves Schema.is to the plain schema", () => {
    const value = { ...response(), usage: {} }
    expect(Schema.decodeUnknownSync(ChatCompletion)(value).usage).toStrictEqual({
      prompt_tokens: 0,
      completion_tokens: 0,
      total_tokens: 0
    })
    expect(Schema.encodeUnknownEither(ChatCompletion)(value)._tag).toBe("Left")
    expect(Schema.is(ChatCompletion)(value)).toBe(false)
    expect(Schema.is(ChatCompletion)(response())).toBe(true)
  })
})
