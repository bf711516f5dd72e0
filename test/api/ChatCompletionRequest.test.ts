import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { ChatCompletionRequest, SEED_MAX, SEED_MIN, StructuredOutputs } from "../../src/api/ChatCompletion.js"

const messages = [{ role: "user", content: "What is 2 + 2?" }]

const decode = Schema.decodeUnknownEither(ChatCompletionRequest)

/** The issues of decoding `input` as a request ([] when it decodes). */
const issues = (input: unknown): ReadonlyArray<ParseResult.ArrayFormatterIssue> =>
  Either.match(decode(input), {
    onLeft: (error) => ParseResult.ArrayFormatter.formatErrorSync(error),
    onRight: () => []
  })

/** `fields` (with `messages`) fail to decode, and every issue points at `field`. */
const rejectedAt = (field: string, fields: Record<string, unknown>) => {
  const found = issues({ messages, ...fields })
  expect(found.length, `expected ${JSON.stringify(fields)} to be rejected`).toBeGreaterThan(0)
  for (const issue of found) expect(issue.path[0], issue.message).toBe(field)
}

/** `fields` (with `messages`) decode. */
const accepted = (fields: Record<string, unknown>) => expect(issues({ messages, ...fields })).toStrictEqual([])

describe("ChatCompletionRequest constraints", () => {
  it("seed: rejects values outside the int64 bounds and non-integers", () => {
    rejectedAt("seed", { seed: 1e19 })
    rejectedAt("seed", { seed: -1e19 })
    rejectedAt("seed", { seed: SEED_MAX * 2 })
    rejectedAt("seed", { seed: 1.5 })
    rejectedAt("seed", { seed: "42" })
    accepted({ seed: 0 })
    accepted({ seed: -1 })
    accepted({ seed: null })
    accepted({ seed: Number.MAX_SAFE_INTEGER })
    accepted({ seed: Number.MIN_SAFE_INTEGER })
  })

  it("seed: integers past 2^53 are rejected although the stated bounds are wider", () => {
    // `Schema.Int` admits safe integers only. A larger JS number is not sent exactly (`JSON.stringify(2 ** 60)`
    // is "1152921504606847000"), and the bounds themselves, written by JSON as ±9223372036854776000, fall
    // outside int64 on the engine's side.
    expect(JSON.stringify(2 ** 60)).toBe("1152921504606847000")
    rejectedAt("seed", { seed: 2 ** 60 })
    rejectedAt("seed", { seed: SEED_MAX })
    rejectedAt("seed", { seed: SEED_MIN })
  })

  it("truncate_prompt_tokens: -1 and above are accepted, below -1 rejected", () => {
    rejectedAt("truncate_prompt_tokens", { truncate_prompt_tokens: -2 })
    rejectedAt("truncate_prompt_tokens", { truncate_prompt_tokens: -100 })
    rejectedAt("truncate_prompt_tokens", { truncate_prompt_tokens: 0.5 })
    accepted({ truncate_prompt_tokens: -1 })
    accepted({ truncate_prompt_tokens: 0 })
    accepted({ truncate_prompt_tokens: 512 })
    accepted({ truncate_prompt_tokens: null })
  })

  it("tool_choice: none, auto, required or a named tool of tools, as the published schema has it", () => {
    const tools = [{ type: "function", function: { name: "add", parameters: { type: "object" } } }]
    accepted({ tool_choice: "none" })
    accepted({ tool_choice: null })
    accepted({ tools, tool_choice: "auto" })
    accepted({ tools, tool_choice: "required" })
    accepted({ tools, tool_choice: { type: "function", function: { name: "add" } } })
    accepted({ tools, tool_choice: { function: { name: "add" } } })
    accepted({ tools, parallel_tool_calls: false })
    rejectedAt("tool_choice", { tools, tool_choice: "always" })
    rejectedAt("tool_choice", { tools, tool_choice: { type: "function", function: {} } })
    // Across fields: required needs tools; a named tool must be one of them.
    rejectedAt("tool_choice", { tool_choice: "required" })
    rejectedAt("tool_choice", { tools: [], tool_choice: "required" })
    rejectedAt("tool_choice", { tools, tool_choice: { type: "function", function: { name: "sub" } } })
    rejectedAt("tool_choice", { tool_choice: { type: "function", function: { name: "add" } } })
  })

  it("continue_final_message: true needs add_generation_prompt: false", () => {
    rejectedAt("continue_final_message", { continue_final_message: true })
    rejectedAt("continue_final_message", { continue_final_message: true, add_generation_prompt: true })
    accepted({ continue_final_message: true, add_generation_prompt: false })
    accepted({ continue_final_message: false })
    accepted({ continue_final_message: false, add_generation_prompt: true })
  })

  it("top_logprobs > 0 needs logprobs: true", () => {
    rejectedAt("top_logprobs", { top_logprobs: 3 })
    rejectedAt("top_logprobs", { top_logprobs: 3, logprobs: false })
    rejectedAt("top_logprobs", { top_logprobs: 3, logprobs: null })
    accepted({ top_logprobs: 3, logprobs: true })
    accepted({ top_logprobs: 0 })
    accepted({ top_logprobs: null })
  })

  it("stream_options needs stream: true", () => {
    rejectedAt("stream_options", { stream_options: { include_usage: true } })
    rejectedAt("stream_options", { stream_options: {}, stream: false })
    accepted({ stream_options: { include_usage: true, continuous_usage_stats: true }, stream: true })
    accepted({ stream_options: null })
  })

  it("prompt_logprobs is refused with stream: true", () => {
    rejectedAt("prompt_logprobs", { prompt_logprobs: 1, stream: true })
    rejectedAt("prompt_logprobs", { prompt_logprobs: 0, stream: true })
    accepted({ prompt_logprobs: 1 })
    accepted({ prompt_logprobs: 1, stream: false })
    accepted({ prompt_logprobs: null, stream: true })
  })

  it("n must be at least 1", () => {
    rejectedAt("n", { n: 0 })
    rejectedAt("n", { n: -1 })
    rejectedAt("n", { n: 1.5 })
    accepted({ n: 1 })
    accepted({ n: 4 })
    accepted({ n: null })
  })

  it("reports every broken rule across fields, each under its own field", () => {
    const found = issues({ messages, continue_final_message: true, top_logprobs: 2, stream_options: {} })
    expect(found.map((issue) => issue.path)).toStrictEqual([
      ["continue_final_message"],
      ["top_logprobs"],
      ["stream_options"]
    ])
  })

  it("needs messages", () => {
    expect(issues({}).map((issue) => issue.path)).toStrictEqual([["messages"]])
    accepted({})
  })

  it("ignores an unknown field, as the engine does", () => {
    const decoded = Either.getOrThrow(decode({ messages, some_future_option: true }))
    expect(decoded).toStrictEqual({ messages })
  })
})

/** Every request field of seed section 4.3 (`<engine>_xargs` is `vllm_xargs` on the wire). */
const seedFields = [
  "messages",
  "model",
  "frequency_penalty",
  "logit_bias",
  "logprobs",
  "top_logprobs",
  "max_tokens",
  "max_completion_tokens",
  "n",
  "presence_penalty",
  "response_format",
  "seed",
  "stop",
  "stream",
  "stream_options",
  "temperature",
  "top_p",
  "tools",
  "tool_choice",
  "reasoning_effort",
  "include_reasoning",
  "parallel_tool_calls",
  "user",
  "use_beam_search",
  "top_k",
  "min_p",
  "repetition_penalty",
  "length_penalty",
  "stop_token_ids",
  "include_stop_str_in_output",
  "ignore_eos",
  "min_tokens",
  "skip_special_tokens",
  "spaces_between_special_tokens",
  "truncate_prompt_tokens",
  "prompt_logprobs",
  "allowed_token_ids",
  "bad_words",
  "echo",
  "add_generation_prompt",
  "continue_final_message",
  "add_special_tokens",
  "documents",
  "chat_template",
  "chat_template_kwargs",
  "mm_processor_kwargs",
  "structured_outputs",
  "priority",
  "request_id",
  "logits_processors",
  "return_tokens_as_token_ids",
  "return_token_ids",
  "cache_salt",
  "kv_transfer_params",
  "vllm_xargs"
]

/**
 * A request with every field of 4.3 set to a valid value. `stream_options` and `prompt_logprobs` exclude
 * each other (one needs `stream: true`, the other refuses it), so this one does not stream and sets
 * `stream_options` to null; {@link fullStreamingRequest} is the streaming twin.
 */
const fullRequest = {
  messages: [
    { role: "developer", content: "Answer in French.", name: "policy" },
    { role: "system", content: [{ type: "text", text: "You are a careful assistant." }] },
    {
      role: "user",
      content: [
        { type: "text", text: "What is in this picture?" },
        { type: "image_url", image_url: { url: "https://example.com/cat.png", detail: "low" } },
        { type: "input_audio", input_audio: { data: "UklGRg==", format: "wav" } },
        { type: "file", file: { file_id: "file-123", filename: "notes.txt" } }
      ],
      name: "alice"
    },
    {
      role: "assistant",
      content: null,
      tool_calls: [{ id: "call_1", type: "function", function: { name: "lookup", arguments: '{"q":"cat"}' } }]
    },
    { role: "tool", content: "A cat.", tool_call_id: "call_1" },
    { role: "function", content: "42", name: "answer" },
    { role: "critic", content: [{ type: "thinking", thinking: "check the answer" }] },
    { author: { role: "assistant", name: null }, content: [{ type: "text", text: "Un chat." }], channel: "final" },
    { role: "assistant", content: "C'est un" }
  ],
  model: "wandb-artifact:///team/project/agent:step12",
  frequency_penalty: 0.5,
  logit_bias: { "50256": -100, "11": 2.5 },
  logprobs: true,
  top_logprobs: 5,
  max_tokens: 256,
  max_completion_tokens: 128,
  n: 2,
  presence_penalty: -0.5,
  response_format: {
    type: "json_schema",
    json_schema: {
      name: "answer",
      description: "The answer and its confidence.",
      schema: {
        type: "object",
        properties: { answer: { type: "string" }, confidence: { type: "number" } },
        required: ["answer"]
      },
      strict: true
    }
  },
  seed: 1234,
  stop: ["\n\n", "END"],
  stream: false,
  stream_options: null,
  temperature: 0.7,
  top_p: 0.95,
  tools: [
    {
      type: "function",
      function: {
        name: "lookup",
        description: "Look a word up.",
        parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
        strict: false
      }
    }
  ],
  tool_choice: "none",
  reasoning_effort: "medium",
  include_reasoning: true,
  parallel_tool_calls: false,
  user: "user-42",
  use_beam_search: false,
  top_k: 40,
  min_p: 0.05,
  repetition_penalty: 1.1,
  length_penalty: 1,
  stop_token_ids: [50256, 2],
  include_stop_str_in_output: false,
  ignore_eos: false,
  min_tokens: 1,
  skip_special_tokens: true,
  spaces_between_special_tokens: true,
  truncate_prompt_tokens: -1,
  prompt_logprobs: 2,
  allowed_token_ids: [1, 2, 3, 50256],
  bad_words: ["darn", "heck"],
  echo: true,
  add_generation_prompt: false,
  continue_final_message: true,
  add_special_tokens: false,
  documents: [{ title: "Cats", text: "Cats are small felines." }],
  chat_template: "{% for m in messages %}{{ m.content }}{% endfor %}",
  chat_template_kwargs: { enable_thinking: false, tools_in_system: ["lookup"] },
  mm_processor_kwargs: { max_pixels: 1_000_000 },
  structured_outputs: {
    json: { type: "object", properties: { answer: { type: "string" } } },
    regex: "[A-Z][a-z]+",
    choice: ["yes", "no"],
    grammar: 'root ::= "yes" | "no"',
    json_object: false,
    disable_fallback: true,
    disable_any_whitespace: true,
    disable_additional_properties: true,
    whitespace_pattern: "[ ]?",
    structural_tag: '{"type":"structural_tag"}',
    _backend: "xgrammar",
    _backend_was_auto: false
  },
  priority: 0,
  request_id: "req-0001",
  logits_processors: ["my.module.NoRepeat", { qualname: "my.module.Bias", args: [1, "x"], kwargs: { scale: 0.5 } }],
  return_tokens_as_token_ids: true,
  return_token_ids: true,
  cache_salt: "s3cr3t-salt-with-enough-entropy",
  kv_transfer_params: { do_remote_prefill: false, remote_engine_id: null },
  vllm_xargs: { lora_rank: 8, tag: "eval", ratios: [0.5, 1, "max"] }
}

/** The streaming twin of {@link fullRequest}: `stream_options` set, `prompt_logprobs` null. */
const fullStreamingRequest = {
  ...fullRequest,
  stream: true,
  stream_options: { include_usage: true, continuous_usage_stats: false },
  prompt_logprobs: null
}

describe("ChatCompletionRequest with every field", () => {
  it("the schema and the fixture cover exactly the fields of seed 4.3", () => {
    expect(Object.keys(ChatCompletionRequest.from.fields).sort()).toStrictEqual([...seedFields].sort())
    expect(Object.keys(fullRequest).sort()).toStrictEqual([...seedFields].sort())
    expect(Object.keys(fullRequest.structured_outputs).sort()).toStrictEqual(
      Object.keys(StructuredOutputs.fields).sort()
    )
  })

  it.each([
    ["not streaming", fullRequest],
    ["streaming", fullStreamingRequest]
  ])("decodes and encodes unchanged (%s)", (_, request) => {
    const decoded = Schema.decodeUnknownSync(ChatCompletionRequest)(request)
    expect(decoded).toStrictEqual(request)
    const encoded = Schema.encodeSync(ChatCompletionRequest)(decoded)
    expect(encoded).toStrictEqual(request)
    expect(JSON.parse(JSON.stringify(encoded))).toStrictEqual(request)
  })
})
