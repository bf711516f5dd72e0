/**
 * Writes test/server/fixtures/reference-client/: the request bodies the reference Python client of the
 * training service (OpenPipe ART) sends, in the shapes its serializers give them, with choices sampled from
 * the embedded engine's seed-0 policy (so their token ids and logprobs are real for that tokenizer).
 *
 * The client itself cannot run here (no PyPI), so its traffic is written down from how it builds each body:
 * - chat completions: `extra_body` merged at the top level (`return_token_ids`, `return_tokens_as_token_ids`,
 *   `chat_template_kwargs`), `logprobs` and `top_logprobs` from the caller;
 * - choices: openai-python's `model_dump(mode="json")`, every unset optional field written as `null`, the
 *   server's extra keys (`stop_reason`, `token_ids`, `reasoning_content`) kept;
 * - trajectories and groups: the newer serializer drops defaults (a 0.0 `reward`, empty collections, null
 *   `tools`) but dumps choices in full; the older one writes everything out (nulls, `[]`, `{}`, `0.0`) and
 *   never `start_time`; a group's exceptions are `{type: "<class '...'>", message, traceback}`;
 * - `experimental_config`: every key of the current published document written out (null when unset), plus
 *   the two the client adds on its own (`loss_type`, `max_completion_length`);
 * - SFT: `{model_id, training_data_url, config: {learning_rate, assistant_turns}}` (`batch_size` only when not
 *   "auto"), its data JSONL lines `{messages, tools?}`.
 *
 * Run: `npx tsx scripts/reference-client-fixtures.ts`. The output is deterministic (seeded sampling).
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import type { ChatCompletionRequest, Choice } from "../src/api/ChatCompletion.js"
import { Policy } from "../src/local/engine/policy/Policy.js"
import { complete } from "../src/local/engine/Sampler.js"

const OUT = join(import.meta.dirname, "..", "test", "server", "fixtures", "reference-client")

/** A placeholder the tests replace with the model's id. */
const MODEL_ID = "{{model_id}}"

const policy = Policy.create(undefined, { seed: 0 })

const system = { role: "system", content: "Answer with one colour word." }
const question = (word: string) => ({ role: "user", content: `Colour of ${word}?` })

/** The chat-completions body the client sends for one turn (extra_body merged in, as openai-python does). */
const chatRequest = (model: string, messages: ReadonlyArray<object>, seed: number) => ({
  model,
  messages,
  logprobs: true,
  top_logprobs: 2,
  max_completion_tokens: 6,
  temperature: 1,
  seed,
  return_token_ids: true,
  return_tokens_as_token_ids: true,
  chat_template_kwargs: { preserve_thinking: true }
})

/** openai-python's dump of a top logprob, a token logprob, the logprobs, the message and the choice. */
const dumpTop = (top: { token: string; logprob: number; bytes?: ReadonlyArray<number> | null }) => ({
  token: top.token,
  bytes: top.bytes ?? null,
  logprob: top.logprob
})

const dumpChoice = (choice: Choice) => ({
  finish_reason: choice.finish_reason,
  index: choice.index,
  logprobs:
    choice.logprobs == null
      ? null
      : {
          content:
            choice.logprobs.content?.map((entry) => ({
              ...dumpTop(entry),
              top_logprobs: (entry.top_logprobs ?? []).map(dumpTop)
            })) ?? null,
          refusal: null
        },
  message: {
    content: choice.message.content ?? null,
    refusal: null,
    role: "assistant",
    annotations: null,
    audio: null,
    function_call: null,
    tool_calls: null,
    reasoning_content: null
  },
  stop_reason: choice.stop_reason ?? null,
  token_ids: choice.token_ids ?? null
})

const sample = (messages: ReadonlyArray<object>, seed: number) => {
  const request = chatRequest("wandb-artifact:///local/art-fixture/agent-001", messages, seed)
  const completion = complete(policy, request as unknown as ChatCompletionRequest, {
    modelName: request.model,
    now: 0,
    requestId: `fixture-${seed}`
  })
  return dumpChoice(completion.choices[0]!)
}

const tool = {
  type: "function",
  function: {
    name: "lookup_colour",
    description: "Look up the colour of a thing.",
    parameters: { type: "object", properties: { thing: { type: "string" } }, required: ["thing"] },
    strict: null
  }
}

// The newer serializer: defaults left out (a 0.0 reward among them), choices dumped in full.
const newer = {
  trajectories: [1, 0, 0.5, 0].map((reward, i) => {
    const messages = [system, question("grass")]
    return {
      messages_and_choices: [...messages, sample(messages, 100 + i)],
      ...(reward === 0 ? {} : { reward }),
      ...(i === 2 ? { metrics: { correct: false, turns: 1 }, metadata: { scenario: "grass", attempt: i } } : {}),
      ...(i === 3 ? { logs: ["the answer was empty"] } : {})
    }
  }),
  metadata: { scenario: "grass" },
  metrics: { accuracy: 0.25 },
  exceptions: [
    {
      type: "<class 'TimeoutError'>",
      message: "rollout 4 ran out of time",
      traceback: 'Traceback (most recent call last):\n  File "rollout.py", line 12, in rollout\nTimeoutError'
    }
  ]
}

// The older serializer: everything written out, nulls and empty collections included, a 0.0 reward given.
const older = {
  trajectories: [0, 1, 0, 1].map((reward, i) => {
    const messages = [system, question("sky")]
    const first = sample(messages, 200 + i)
    return {
      messages_and_choices: [...messages, first],
      tools: i === 1 ? [tool] : null,
      additional_histories:
        i === 1 ? [{ messages_and_choices: [question("sea"), sample([question("sea")], 300 + i)], tools: null }] : [],
      reward: reward === 0 ? 0.0 : reward,
      initial_policy_version: null,
      final_policy_version: null,
      metrics: {},
      metadata: {},
      logs: []
    }
  }),
  exceptions: [],
  metadata: {},
  metrics: {},
  logs: []
}

const experimentalConfig = {
  advantage_balance: 0.0,
  allow_training_without_logprobs: false,
  epsilon: null,
  epsilon_high: null,
  importance_sampling_level: "token",
  kimi_k2_tau: null,
  kl_penalty_coef: 0.0,
  kl_penalty_reference_step: null,
  kl_penalty_source: "current_learner",
  kl_penalty_step_lag: null,
  kl_ref_adapter_path: null,
  learning_rate: 5e-6,
  logprob_calculation_chunk_size: 1024,
  loss_fn: "cispo",
  mask_prob_ratio: false,
  max_negative_advantage_importance_sampling_weight: null,
  normalize_advantages: true,
  num_trajectories_learning_rate_multiplier_power: 0.0,
  packed_sequence_length: null,
  plot_tensors: false,
  ppo: false,
  precalculate_logprobs: false,
  scale_learning_rate_by_reward_std_dev: false,
  scale_rewards: true,
  truncated_importance_sampling: null,
  loss_type: null,
  max_completion_length: null
}

const sftLines = [
  { messages: [system, question("grass"), { role: "assistant", content: "green" }] },
  { messages: [system, question("sky"), { role: "assistant", content: "blue" }] },
  {
    messages: [
      system,
      question("snow"),
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "call_1", type: "function", function: { name: "lookup_colour", arguments: '{"thing": "snow"}' } }
        ]
      },
      { role: "tool", content: "white", tool_call_id: "call_1" },
      { role: "assistant", content: "white" }
    ],
    tools: [tool]
  }
]

const write = (name: string, value: unknown) =>
  writeFileSync(join(OUT, name), `${JSON.stringify(value, null, 2)}\n`, "utf8")

mkdirSync(OUT, { recursive: true })
write("register.json", {
  entity: null,
  project: "art-fixture",
  name: "agent-001",
  base_model: "effect-rl/tiny",
  return_existing: true
})
write(
  "chat-completion.json",
  chatRequest("wandb-artifact:///{{entity}}/art-fixture/agent-001", [system, question("grass")], 7)
)
write("log.json", { model_id: MODEL_ID, trajectory_groups: [newer, older], split: "val" })
write("rl-job.json", { model_id: MODEL_ID, trajectory_groups: [newer, older], experimental_config: experimentalConfig })
write("sft-job.json", {
  model_id: MODEL_ID,
  training_data_url: "{{training_data_url}}",
  config: { learning_rate: 5e-5, assistant_turns: "all" }
})
writeFileSync(join(OUT, "sft-data.jsonl"), `${sftLines.map((line) => JSON.stringify(line)).join("\n")}\n`, "utf8")
console.log(`wrote ${OUT}`)
