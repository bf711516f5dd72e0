/**
 * The engine end to end, the way the embedded backend will drive it: rollouts are chat completions served
 * by the Sampler, their choices go into trajectory groups, the job body crosses the wire as JSON through the
 * `CreateTrainingJob` schema, and the trainer learns from what arrives.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Schema from "effect/Schema"
import type { ChatCompletionRequest } from "../../src/api/ChatCompletion.js"
import { CreateTrainingJob } from "../../src/api/TrainingJob.js"
import type { TrajectoryGroup } from "../../src/api/Trajectory.js"
import { rlGroupsOf, sftSequenceOf } from "../../src/local/engine/Batches.js"
import { makeAdamState } from "../../src/local/engine/Optimizer.js"
import { Policy } from "../../src/local/engine/policy/Policy.js"
import { Rng } from "../../src/local/engine/Random.js"
import { complete } from "../../src/local/engine/Sampler.js"
import { IM_END } from "../../src/local/engine/Tokenizer.js"
import { trainRl } from "../../src/local/engine/Trainer.js"

const WORDS = ["red", "blue", "green", "gold"]
const MODEL_ID = "00000000-0000-4000-8000-000000000001"
const overTheWire = (groups: ReadonlyArray<TrajectoryGroup>) => {
  const json = JSON.stringify(
    Schema.encodeSync(CreateTrainingJob)({ model_id: MODEL_ID as never, trajectory_groups: groups })
  )
  return Schema.decodeUnknownSync(CreateTrainingJob)(JSON.parse(json)).trajectory_groups
}

describe("RL through the wire format", () => {
  it("learns to say the word its prompt names, from sampled completions to trained groups", { timeout: 90_000 }, () => {
    const policy = Policy.create(undefined, { seed: 1 })
    const optimizer = makeAdamState(policy.parameterCount)
    const rng = new Rng(7)
    const curve: Array<number> = []
    const klFirst: Array<number> = []
    for (let step = 0; step < 40; step++) {
      const groups: Array<TrajectoryGroup> = []
      for (let g = 0; g < 8; g++) {
        const word = WORDS[rng.int(WORDS.length)]!
        const user = { role: "user" as const, content: `Say: ${word}` }
        const request: ChatCompletionRequest = {
          model: "local",
          messages: [user],
          n: 8,
          seed: step * 100 + g,
          temperature: 1,
          logprobs: true,
          max_completion_tokens: 8,
          structured_outputs: { choice: WORDS }
        }
        const completion = complete(policy, request, { modelName: "local", now: 0, requestId: "r" })
        groups.push({
          trajectories: completion.choices.map((choice) => ({
            messages_and_choices: [user, choice],
            reward: choice.message.content === word ? 1 : 0
          }))
        })
      }
      const rewards = groups.flatMap((g) => g.trajectories.map((t) => t.reward))
      curve.push(rewards.reduce((s, r) => s + r, 0) / rewards.length)
      const result = trainRl(policy, optimizer, rlGroupsOf(overTheWire(groups)), {})
      if (step === 0) klFirst.push(...result.steps.map((s) => s.kl_div))
      const n = curve.length
      if (n >= 2 && curve[n - 1]! >= 0.9 && curve[n - 2]! >= 0.9) break
    }
    const show = curve.map((r) => r.toFixed(2)).join(" ")
    expect(curve[0], show).toBeLessThan(0.45)
    expect(curve.at(-1)!, show).toBeGreaterThanOrEqual(0.9)
    // The logprobs the sampler recorded are the policy's own: on-policy, the first step's KL is ~0.
    expect(klFirst.length).toBeGreaterThan(0)
    for (const kl of klFirst) expect(Math.abs(kl)).toBeLessThan(1e-4)
  })

  it("renders SFT examples with all or only the last assistant turn learned", () => {
    const example = {
      messages: [
        { role: "user" as const, content: "hi" },
        { role: "assistant" as const, content: "one" },
        { role: "user" as const, content: "again" },
        { role: "assistant" as const, content: "two" }
      ]
    }
    const all = sftSequenceOf(example, "all")
    const last = sftSequenceOf(example, "last")
    const learned = (s: { ids: Int32Array; mask: Uint8Array }) =>
      Array.from(s.ids)
        .filter((_, i) => s.mask[i] === 1)
        .map((id) => (id === IM_END ? "<end>" : String.fromCharCode(id)))
        .join("")
    // Each learned turn ends with its end-of-turn token, so the model learns to stop.
    expect(learned(all)).toBe("one<end>two<end>")
    expect(learned(last)).toBe("two<end>")
    expect(Array.from(all.ids)).toEqual(Array.from(last.ids))
  })

  it("trains the choices of additional_histories with their trajectory's advantage", () => {
    const policy = Policy.create(undefined, { seed: 2 })
    const optimizer = makeAdamState(policy.parameterCount)
    const user = { role: "user" as const, content: "Pick one." }
    const sample = (seed: number) =>
      complete(
        policy,
        { messages: [user], seed, logprobs: true, max_completion_tokens: 4, structured_outputs: { choice: WORDS } },
        { modelName: "local", now: 0, requestId: "r" }
      ).choices[0]!
    const good = sample(1)
    let seed = 2
    let bad = sample(seed)
    while (bad.message.content === good.message.content) bad = sample(++seed)
    // The main conversations hold no choice: only the histories (say, a sub-agent's) have tokens to train.
    const trajectory = (choice: typeof good, reward: number) => ({
      messages_and_choices: [user],
      additional_histories: [{ messages_and_choices: [user, choice] }],
      reward
    })
    const groups = overTheWire([{ trajectories: [trajectory(good, 1), trajectory(bad, 0)] }])
    const score = (choice: typeof good) => {
      const sequence = rlGroupsOf([{ trajectories: [{ messages_and_choices: [user, choice], reward: 0 }] }])[0]!
        .items[0]!.sequence
      const scores = policy.scoreTokens(sequence.ids, 1)
      let sum = 0
      for (let t = 1; t < sequence.ids.length; t++) if (sequence.mask[t] === 1) sum += scores[t - 1]!
      return sum
    }
    const before = [score(good), score(bad)]
    const result = trainRl(policy, optimizer, rlGroupsOf(groups), { learning_rate: 1e-2 })
    expect(result.steps.reduce((n, step) => n + step.num_trainable_tokens, 0)).toBeGreaterThan(0)
    expect(score(good)).toBeGreaterThan(before[0]!)
    expect(score(bad)).toBeLessThan(before[1]!)
  })
})
