/**
 * One test per validation rule of the training and inference surfaces, each sending a minimal bad request to
 * the real server and asserting the whole answer: 422 `{detail: [{loc, msg, type}]}` (seed 2.2), or, for the
 * engine's checks across chat-completion fields, 400 in the OpenAI shape (reference chat-completions.md,
 * "Errors"). Rules already pinned by errors.test.ts (log reward given a string, ModelCreate `name` type and
 * `base_model` missing, the `training_job_id` and DELETE-model `model_id` path ids, checkpoint `limit=0`,
 * `limit=abc`, `order=up`, event `limit=101`, the log route's path and `split` type, invalid JSON) and by
 * chat.test.ts (`messages` not a list, `stream_options` without `stream`) are not repeated.
 *
 * Where each row comes from:
 * - Chat completions: seed 4.3's parameter table and 8 (Limits), seed 2.6 (message kinds), and the
 *   `ChatCompletionRequest` of reference/training-api-full-chat.openapi.json (nullable fields, `tool_choice`
 *   `none` only, `response_format`, `structured_outputs`, `logits_processors`, `vllm_xargs`).
 * - Models, checkpoints, jobs and events: seed 4.2 and the current reference/training-api.openapi.json
 *   (`ModelCreate`, checkpoint deletion `steps`, list `limit` 1..100 and `order`, `experimental_config`, SFT
 *   `config`); `wait_ms` (0..60000) is the embedded backend's extension. A cursor `after` is any string (an
 *   unknown one is a 404, see jobs.test.ts), so it has no validation row.
 * - Log and trajectories: seed 2.4 and 4.2 (Log), reference/training-service.md (trajectory fields).
 *
 * Numbers: JSON cannot carry NaN or Infinity, but `1e999` parses to Infinity, so the finite-number rules are
 * tested with it; `NaN` is not JSON at all. Integer fields are tested with non-numeric strings, since pydantic
 * would accept `"8"` for an integer in lax mode.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { ValidationError } from "../../src/api/HttpValidationError.js"
import { Backend, send } from "./support.js"

const MODEL = "00000000-0000-4000-8000-000000000001"
const JOB = "00000000-0000-4000-8000-000000000002"
const CHAT = "/v1/chat/completions"
const hi = [{ role: "user", content: "hi" }]

interface Row {
  readonly rule: string
  readonly method: "GET" | "POST" | "DELETE"
  readonly path: string
  /** The body: a value sent as JSON, or a string sent as it is (for `1e999` and the like). */
  readonly body?: unknown
  readonly detail: ReadonlyArray<ValidationError>
}

const at = (loc: ReadonlyArray<string | number>, msg: string, type: string): ValidationError => ({
  loc: ["body", ...loc],
  msg,
  type
})

const missing = (...loc: ReadonlyArray<string | number>) => at(loc, "Field required", "missing")
const notString = (...loc: ReadonlyArray<string | number>) => at(loc, "Input should be a valid string", "string_type")
const notList = (...loc: ReadonlyArray<string | number>) => at(loc, "Input should be a valid list", "list_type")
const notDict = (...loc: ReadonlyArray<string | number>) => at(loc, "Input should be a valid dictionary", "dict_type")
const notBool = (...loc: ReadonlyArray<string | number>) =>
  at(loc, "Input should be a valid boolean, unable to interpret input", "bool_parsing")
const notNumber = (...loc: ReadonlyArray<string | number>) =>
  at(loc, "Input should be a valid number, unable to parse string as a number", "float_parsing")
const notFinite = (...loc: ReadonlyArray<string | number>) =>
  at(loc, "Input should be a finite number", "finite_number")
const fraction = (...loc: ReadonlyArray<string | number>) =>
  at(loc, "Input should be a valid integer, got a number with a fractional part", "int_from_float")
const notInt = (...loc: ReadonlyArray<string | number>) =>
  at(loc, "Input should be a valid integer, unable to parse string as an integer", "int_parsing")
const literal = (text: string, ...loc: ReadonlyArray<string | number>) =>
  at(loc, `Input should be ${text}`, "literal_error")
const query = (name: string, msg: string, type: string): ValidationError => ({ loc: ["query", name], msg, type })
const badPath = (name: string): ValidationError => ({
  loc: ["path", name],
  msg: "Input should be a valid UUID",
  type: "uuid_parsing"
})

const chat = (rule: string, fields: object, ...detail: ReadonlyArray<ValidationError>): Row => ({
  rule,
  method: "POST",
  path: CHAT,
  body: { messages: hi, ...fields },
  detail
})
/** A chat body with a number JSON.stringify cannot write (`1e999`) or that a JS number cannot hold exactly. */
const chatRaw = (rule: string, fields: string, ...detail: ReadonlyArray<ValidationError>): Row => ({
  rule,
  method: "POST",
  path: CHAT,
  body: `{"messages":[{"role":"user","content":"hi"}],${fields}}`,
  detail
})

const LOG = `/v1/preview/models/${MODEL}/log`
const T = ["trajectory_groups", 0, "trajectories", 0] as const
const log = (rule: string, trajectory: object, ...detail: ReadonlyArray<ValidationError>): Row => ({
  rule,
  method: "POST",
  path: LOG,
  body: {
    split: "train",
    trajectory_groups: [{ trajectories: [{ messages_and_choices: hi, reward: 1, ...trajectory }] }]
  },
  detail
})
const job = (rule: string, fields: object, ...detail: ReadonlyArray<ValidationError>): Row => ({
  rule,
  method: "POST",
  path: "/v1/preview/training-jobs",
  body: { model_id: MODEL, trajectory_groups: [], ...fields },
  detail
})
const sft = (rule: string, fields: object, ...detail: ReadonlyArray<ValidationError>): Row => ({
  rule,
  method: "POST",
  path: "/v1/preview/sft-training-jobs",
  body: { model_id: MODEL, training_data_url: "file:///data.jsonl", ...fields },
  detail
})
const createModel = (rule: string, body: unknown, ...detail: ReadonlyArray<ValidationError>): Row => ({
  rule,
  method: "POST",
  path: "/v1/preview/models",
  body,
  detail
})

const ROLES = "'developer', 'system', 'user', 'assistant', 'tool' or 'function'"

const rows: ReadonlyArray<Row> = [
  // Chat completions (seed 4.3, 2.6, 8; full-chat OpenAPI ChatCompletionRequest).
  {
    rule: "chat: messages is required",
    method: "POST",
    path: CHAT,
    body: { model: "m" },
    detail: [missing("messages")]
  },
  chat("chat: a message is an object", { messages: ["hi"] }, notDict("messages", 0)),
  chat(
    "chat: a message has a role (or a generic message's author)",
    { messages: [{ content: "hi" }] },
    missing("messages", 0, "role"),
    missing("messages", 0, "author"),
    notList("messages", 0, "content")
  ),
  chat(
    "chat: a message role is one of the kinds, or a custom role string",
    { messages: [{ role: 5, content: "hi" }] },
    literal(ROLES, "messages", 0, "role"),
    notString("messages", 0, "role"),
    missing("messages", 0, "author"),
    notList("messages", 0, "content")
  ),
  chat(
    "chat: message content is a string or a list of parts",
    { messages: [{ role: "user", content: 5 }] },
    notString("messages", 0, "content"),
    notList("messages", 0, "content"),
    missing("messages", 0, "author")
  ),
  chat("chat: model is a string or null", { model: 1 }, notString("model")),
  chat("chat: frequency_penalty is a number", { frequency_penalty: "high" }, notNumber("frequency_penalty")),
  chatRaw("chat: temperature is a finite number", `"temperature":1e999`, notFinite("temperature")),
  chat("chat: logit_bias maps to numbers", { logit_bias: { "50": "up" } }, notNumber("logit_bias", "50")),
  chat("chat: logit_bias is an object", { logit_bias: [1] }, notDict("logit_bias")),
  chat("chat: logprobs is a boolean", { logprobs: "maybe" }, notBool("logprobs")),
  chat("chat: top_logprobs is an integer", { logprobs: true, top_logprobs: 1.5 }, fraction("top_logprobs")),
  chat("chat: max_tokens is an integer", { max_tokens: 2.5 }, fraction("max_tokens")),
  chat("chat: max_completion_tokens is an integer", { max_completion_tokens: "many" }, notInt("max_completion_tokens")),
  chat("chat: n is an integer", { n: 1.5 }, fraction("n")),
  chat("chat: n >= 1", { n: 0 }, at(["n"], "Input should be greater than or equal to 1", "greater_than_equal")),
  chat("chat: seed is an integer", { seed: 1.5 }, fraction("seed")),
  chatRaw(
    "chat: seed <= 9223372036854776000 (seed 8)",
    `"seed":10000000000000000000`,
    at(["seed"], "Input should be less than or equal to 9223372036854776000", "less_than_equal")
  ),
  chatRaw(
    "chat: seed >= -9223372036854776000 (seed 8)",
    `"seed":-10000000000000000000`,
    at(["seed"], "Input should be greater than or equal to -9223372036854776000", "greater_than_equal")
  ),
  chatRaw(
    "chat: seed beyond 2^53 cannot be read exactly (embedded backend's limit)",
    `"seed":1152921504606846976`,
    at(["seed"], "Input should be a valid integer, unable to read it exactly (too large)", "int_parsing_size")
  ),
  chat("chat: stop is a string or a list of strings", { stop: 5 }, notString("stop"), notList("stop")),
  chat("chat: stream is a boolean", { stream: "maybe" }, notBool("stream")),
  chat(
    "chat: stream_options.include_usage is a boolean",
    { stream: true, stream_options: { include_usage: "maybe" } },
    notBool("stream_options", "include_usage")
  ),
  chat(
    "chat: response_format.type is text, json_object, json_schema (or structural_tag)",
    { response_format: { type: "xml" } },
    literal("'structural_tag'", "response_format", "type"),
    literal("'text', 'json_object' or 'json_schema'", "response_format", "type")
  ),
  chat(
    "chat: response_format.json_schema has a name",
    { response_format: { type: "json_schema", json_schema: {} } },
    literal("'structural_tag'", "response_format", "type"),
    missing("response_format", "json_schema", "name")
  ),
  chat("chat: a tool has a function", { tools: [{ type: "function" }] }, missing("tools", 0, "function")),
  chat(
    "chat: a tool's type is function",
    { tools: [{ type: "web", function: { name: "f" } }] },
    literal("'function'", "tools", 0, "type")
  ),
  chat(
    "chat: tool_choice is none, auto, required or a named tool",
    { tool_choice: "always" },
    literal("'none', 'auto' or 'required'", "tool_choice"),
    notDict("tool_choice")
  ),
  chat(
    "chat: reasoning_effort is low, medium or high",
    { reasoning_effort: "max" },
    literal("'low', 'medium' or 'high'", "reasoning_effort")
  ),
  chat("chat: include_reasoning is a boolean", { include_reasoning: "maybe" }, notBool("include_reasoning")),
  chat("chat: user is a string", { user: 7 }, notString("user")),
  chat("chat: top_k is an integer", { top_k: 0.5 }, fraction("top_k")),
  chat("chat: min_p is a number", { min_p: "low" }, notNumber("min_p")),
  chat(
    "chat: length_penalty is a number (not nullable)",
    { length_penalty: null },
    at(["length_penalty"], "Input should be a valid number", "float_type")
  ),
  chat("chat: stop_token_ids are integers", { stop_token_ids: ["eos"] }, notInt("stop_token_ids", 0)),
  chat("chat: min_tokens is an integer", { min_tokens: 1.5 }, fraction("min_tokens")),
  chat(
    "chat: truncate_prompt_tokens >= -1 (seed 8)",
    { truncate_prompt_tokens: -2 },
    at(["truncate_prompt_tokens"], "Input should be greater than or equal to -1", "greater_than_equal")
  ),
  chat("chat: prompt_logprobs is an integer", { prompt_logprobs: 0.5 }, fraction("prompt_logprobs")),
  chat("chat: allowed_token_ids are integers", { allowed_token_ids: [1.5] }, fraction("allowed_token_ids", 0)),
  chat("chat: bad_words are strings", { bad_words: [1] }, notString("bad_words", 0)),
  chat("chat: echo is a boolean", { echo: "maybe" }, notBool("echo")),
  chat("chat: documents are objects of strings", { documents: [{ title: 1 }] }, notString("documents", 0, "title")),
  chat("chat: chat_template is a string", { chat_template: 1 }, notString("chat_template")),
  chat("chat: chat_template_kwargs is an object", { chat_template_kwargs: "x" }, notDict("chat_template_kwargs")),
  chat(
    "chat: structured_outputs.choice is a list of strings",
    { structured_outputs: { choice: "a" } },
    notList("structured_outputs", "choice")
  ),
  chat("chat: priority is an integer", { priority: 0.5 }, fraction("priority")),
  chat("chat: request_id is a string", { request_id: 5 }, notString("request_id")),
  chat(
    "chat: a logits processor is a name or {qualname, args, kwargs}",
    { logits_processors: [{ args: [] }] },
    notString("logits_processors", 0),
    missing("logits_processors", 0, "qualname")
  ),
  chat(
    "chat: vllm_xargs values are strings, numbers or lists of them",
    { vllm_xargs: { a: true } },
    notString("vllm_xargs", "a"),
    at(["vllm_xargs", "a"], "Input should be a valid number", "float_type"),
    notList("vllm_xargs", "a")
  ),

  // Models and checkpoints (seed 4.2; OpenAPI ModelCreate, DeleteCheckpointsRequest, list query).
  createModel("models: the body is an object", [1, 2], {
    loc: ["body"],
    msg: "Input should be a valid dictionary",
    type: "dict_type"
  }),
  createModel("models: project is required", { name: "n", base_model: "b" }, missing("project")),
  createModel(
    "models: entity is a string or null",
    { entity: 1, project: "p", name: "n", base_model: "b" },
    notString("entity")
  ),
  createModel(
    "models: return_existing is a boolean",
    { project: "p", name: "n", base_model: "b", return_existing: "maybe" },
    notBool("return_existing")
  ),
  {
    rule: "checkpoints delete: model_id is a UUID",
    method: "DELETE",
    path: "/v1/preview/models/x/checkpoints",
    body: { steps: [1] },
    detail: [badPath("model_id")]
  },
  {
    rule: "checkpoints delete: steps is required",
    method: "DELETE",
    path: `/v1/preview/models/${MODEL}/checkpoints`,
    body: {},
    detail: [missing("steps")]
  },
  {
    rule: "checkpoints delete: steps are integers",
    method: "DELETE",
    path: `/v1/preview/models/${MODEL}/checkpoints`,
    body: { steps: [1.5] },
    detail: [fraction("steps", 0)]
  },
  {
    rule: "checkpoints list: model_id is a UUID",
    method: "GET",
    path: "/v1/preview/models/x/checkpoints",
    detail: [badPath("model_id")]
  },
  {
    rule: "checkpoints list: limit <= 100",
    method: "GET",
    path: `/v1/preview/models/${MODEL}/checkpoints?limit=101`,
    detail: [query("limit", "Input should be less than or equal to 100", "less_than_equal")]
  },
  {
    rule: "checkpoints list: limit is an integer",
    method: "GET",
    path: `/v1/preview/models/${MODEL}/checkpoints?limit=1.5`,
    detail: [query("limit", "Input should be a valid integer, got a number with a fractional part", "int_from_float")]
  },

  // Training job events (seed 4.2; OpenAPI list query; wait_ms is the embedded backend's).
  {
    rule: "events: limit >= 1",
    method: "GET",
    path: `/v1/preview/training-jobs/${JOB}/events?limit=0`,
    detail: [query("limit", "Input should be greater than or equal to 1", "greater_than_equal")]
  },
  {
    rule: "events: wait_ms <= 60000",
    method: "GET",
    path: `/v1/preview/training-jobs/${JOB}/events?wait_ms=60001`,
    detail: [query("wait_ms", "Input should be less than or equal to 60000", "less_than_equal")]
  },
  {
    rule: "events: wait_ms >= 0",
    method: "GET",
    path: `/v1/preview/training-jobs/${JOB}/events?wait_ms=-1`,
    detail: [query("wait_ms", "Input should be greater than or equal to 0", "greater_than_equal")]
  },

  // Log and trajectories (seed 2.4, 4.2 Log).
  {
    rule: "log: split is required",
    method: "POST",
    path: LOG,
    body: { trajectory_groups: [] },
    detail: [missing("split")]
  },
  {
    rule: "log: trajectory_groups is required",
    method: "POST",
    path: LOG,
    body: { split: "train" },
    detail: [missing("trajectory_groups")]
  },
  {
    rule: "log: trajectory_groups is a list",
    method: "POST",
    path: LOG,
    body: { split: "train", trajectory_groups: {} },
    detail: [notList("trajectory_groups")]
  },
  {
    rule: "log: a group has trajectories",
    method: "POST",
    path: LOG,
    body: { split: "train", trajectory_groups: [{}] },
    detail: [missing("trajectory_groups", 0, "trajectories")]
  },
  log(
    "log: a choice's finish_reason is one the training service takes",
    {
      messages_and_choices: [{ index: 0, message: { role: "assistant", content: "x" }, finish_reason: "abort" }]
    },
    literal(
      "'stop', 'length', 'tool_calls', 'content_filter' or 'function_call'",
      ...T,
      "messages_and_choices",
      0,
      "finish_reason"
    )
  ),
  log(
    "log: a message's role is one the training service takes in a trajectory",
    { messages_and_choices: [{ role: "grader", content: "x" }] },
    literal("'developer', 'system', 'user', 'assistant', 'tool' or 'function'", ...T, "messages_and_choices", 0, "role")
  ),
  log(
    "log: an assistant message sent as context has no null tool_calls (the service's message param)",
    { messages_and_choices: [{ role: "assistant", content: "x", tool_calls: null }] },
    notList(...T, "messages_and_choices", 0, "tool_calls")
  ),
  log(
    "log: reward is a number, not null",
    { reward: null },
    at([...T, "reward"], "Input should be a valid number", "float_type")
  ),
  {
    rule: "log: reward is finite (1e999 parses to Infinity)",
    method: "POST",
    path: LOG,
    body: `{"split":"train","trajectory_groups":[{"trajectories":[{"messages_and_choices":[],"reward":1e999}]}]}`,
    detail: [notFinite(...T, "reward")]
  },
  {
    rule: "log: reward NaN is not JSON",
    method: "POST",
    path: LOG,
    body: `{"split":"train","trajectory_groups":[{"trajectories":[{"messages_and_choices":[],"reward":NaN}]}]}`,
    detail: [{ loc: ["body", 0], msg: "JSON decode error", type: "json_invalid" }]
  },
  log(
    "log: an entry of messages_and_choices is a choice or a message (role union)",
    { messages_and_choices: [{ content: "x" }] },
    missing(...T, "messages_and_choices", 0, "index"),
    missing(...T, "messages_and_choices", 0, "message"),
    missing(...T, "messages_and_choices", 0, "finish_reason"),
    missing(...T, "messages_and_choices", 0, "role"),
    missing(...T, "messages_and_choices", 0, "author"),
    notList(...T, "messages_and_choices", 0, "content")
  ),
  log(
    "log: a choice's logprob is a number",
    {
      messages_and_choices: [
        {
          index: 0,
          message: { role: "assistant", content: "x" },
          finish_reason: "stop",
          logprobs: { content: [{ token: "x", logprob: "low" }] }
        }
      ]
    },
    notNumber(...T, "messages_and_choices", 0, "logprobs", "content", 0, "logprob"),
    missing(...T, "messages_and_choices", 0, "role"),
    missing(...T, "messages_and_choices", 0, "author")
  ),
  log(
    "log: a tool's function name is a string",
    { tools: [{ type: "function", function: { name: 1 } }] },
    notString(...T, "tools", 0, "function", "name")
  ),
  log(
    "log: metrics are numbers or booleans",
    { metrics: { a: "x" } },
    notNumber(...T, "metrics", "a"),
    notBool(...T, "metrics", "a")
  ),
  // The published document types a trajectory's metadata as any object (values of any JSON type, issue 36).
  log("log: metadata is an object", { metadata: [1] }, notDict(...T, "metadata")),
  log("log: logs are strings", { logs: [1] }, notString(...T, "logs", 0)),
  log("log: start_time is a string", { start_time: 1 }, notString(...T, "start_time")),
  log(
    "log: initial_policy_version is an integer",
    { initial_policy_version: 1.5 },
    fraction(...T, "initial_policy_version")
  ),
  log(
    "log: an additional history has messages_and_choices",
    { additional_histories: [{}] },
    missing(...T, "additional_histories", 0, "messages_and_choices")
  ),
  {
    rule: "log: a group's exception has a message",
    method: "POST",
    path: LOG,
    body: { split: "train", trajectory_groups: [{ trajectories: [], exceptions: [{ type: "E" }] }] },
    detail: [missing("trajectory_groups", 0, "exceptions", 0, "message")]
  },

  // RL training jobs (seed 4.2 Create RL Training Job, 2.5; OpenAPI experimental_config).
  {
    rule: "rl job: model_id is required",
    method: "POST",
    path: "/v1/preview/training-jobs",
    body: { trajectory_groups: [] },
    detail: [missing("model_id")]
  },
  job(
    "rl job: model_id is a UUID",
    { model_id: "m-1" },
    at(["model_id"], "Input should be a valid UUID", "uuid_parsing")
  ),
  {
    rule: "rl job: trajectory_groups is required",
    method: "POST",
    path: "/v1/preview/training-jobs",
    body: { model_id: MODEL },
    detail: [missing("trajectory_groups")]
  },
  job("rl job: experimental_config is an object", { experimental_config: 1 }, notDict("experimental_config")),
  job(
    "rl job: experimental_config.learning_rate is a number",
    { experimental_config: { learning_rate: "fast" } },
    notNumber("experimental_config", "learning_rate")
  ),
  job(
    "rl job: experimental_config.importance_sampling_level is a known level",
    { experimental_config: { importance_sampling_level: "tok" } },
    literal("'token', 'sequence', 'average' or 'geometric_average'", "experimental_config", "importance_sampling_level")
  ),
  job(
    "rl job: experimental_config.ppo is a boolean",
    { experimental_config: { ppo: "maybe" } },
    notBool("experimental_config", "ppo")
  ),
  job(
    "rl job: experimental_config.loss_fn is cispo or ppo",
    { experimental_config: { loss_fn: "sft" } },
    literal("'cispo' or 'ppo'", "experimental_config", "loss_fn")
  ),
  job(
    "rl job: experimental_config.packed_sequence_length is an integer",
    { experimental_config: { packed_sequence_length: 1.5 } },
    fraction("experimental_config", "packed_sequence_length")
  ),

  // SFT training jobs (OpenAPI CreateSftTrainingJob).
  sft(
    "sft job: model_id is a UUID string",
    { model_id: 1 },
    at(["model_id"], "UUID input should be a string, bytes or UUID object", "uuid_type")
  ),
  {
    rule: "sft job: training_data_url is required",
    method: "POST",
    path: "/v1/preview/sft-training-jobs",
    body: { model_id: MODEL },
    detail: [missing("training_data_url")]
  },
  sft(
    "sft job: config.batch_size is an integer or auto",
    { config: { batch_size: "big" } },
    notInt("config", "batch_size"),
    literal("'auto'", "config", "batch_size")
  ),
  sft(
    "sft job: config.learning_rate is a number or a list of numbers",
    { config: { learning_rate: "fast" } },
    notNumber("config", "learning_rate"),
    notList("config", "learning_rate")
  ),
  sft(
    "sft job: config.assistant_turns is all or last",
    { config: { assistant_turns: "first" } },
    literal("'all' or 'last'", "config", "assistant_turns")
  ),
  sft("sft job: experimental_config is an object", { experimental_config: [] }, notDict("experimental_config"))
]

/** The engine's checks across chat-completion fields: 400 in the OpenAI shape, naming the parameter. */
const crossField: ReadonlyArray<{
  readonly rule: string
  readonly fields: object
  readonly param: string
  readonly message: string
}> = [
  {
    rule: "chat: top_logprobs > 0 needs logprobs",
    fields: { top_logprobs: 2 },
    param: "top_logprobs",
    message: "top_logprobs needs logprobs set to true"
  },
  {
    rule: "chat: continue_final_message cannot be combined with add_generation_prompt",
    fields: { continue_final_message: true },
    param: "continue_final_message",
    message:
      "continue_final_message cannot be combined with add_generation_prompt (which defaults to true): set add_generation_prompt to false"
  },
  {
    rule: "chat: prompt_logprobs is not available with stream",
    fields: { prompt_logprobs: 1, stream: true },
    param: "prompt_logprobs",
    message: "prompt_logprobs is not available when stream is true"
  }
]

describe("validation rules", () => {
  it.layer(Backend)("on the real server", (it) => {
    for (const row of rows) {
      it.effect(`422: ${row.rule}`, () =>
        Effect.gen(function* () {
          const reply = yield* send(row.method, row.path, row.body)
          expect({ status: reply.status, json: reply.json }).toEqual({ status: 422, json: { detail: row.detail } })
        })
      )
    }

    for (const row of crossField) {
      it.effect(`400: ${row.rule}`, () =>
        Effect.gen(function* () {
          const reply = yield* send("POST", CHAT, { messages: hi, ...row.fields })
          expect({ status: reply.status, json: reply.json }).toEqual({
            status: 400,
            json: { error: { message: row.message, type: "BadRequestError", param: row.param, code: 400 } }
          })
        })
      )
    }

    it.effect("the same fields, valid, pass (the rows fail for the stated reason only)", () =>
      Effect.gen(function* () {
        const ok = yield* send("POST", CHAT, {
          messages: hi,
          max_completion_tokens: 2,
          n: 1,
          seed: 9007199254740991,
          truncate_prompt_tokens: -1,
          logprobs: true,
          top_logprobs: 2,
          tool_choice: "none",
          continue_final_message: false
        })
        expect(ok.status).toBe(200)
        const listed = yield* send("GET", `/v1/preview/models/${MODEL}/checkpoints?limit=100&order=asc`)
        expect(listed).toMatchObject({ status: 404 })
        const events = yield* send("GET", `/v1/preview/training-jobs/${JOB}/events?limit=1&wait_ms=0`)
        expect(events).toMatchObject({ status: 404 })
      })
    )
  })
})
