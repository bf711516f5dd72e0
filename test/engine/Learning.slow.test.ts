import { describe, expect, it } from "@effect/vitest"
import { makeAdamState } from "../../src/local/engine/Optimizer.js"
import { Policy } from "../../src/local/engine/policy/Policy.js"
import { Rng } from "../../src/local/engine/Random.js"
import { trainRl } from "../../src/local/engine/Trainer.js"
import { rememberWordStep, sayWordStep, type TaskStep } from "./RlTasks.js"

// The seed of the policy's initialisation (its sampler's seed is SEED + 1000). Checked on other seeds before
// fixing this one, with the default learning rate: seeds 1-12 all reach 0.9 on the first task, in 9 to 31
// steps (a few linger near 0.75, "green" and "gold" told apart last); on the two-turn task seeds 1-6 gain
// 0.39 to 0.61 in mean reward from the first five steps to the last five.
const SEED = 1
const GROUPS = 8
const ROLLOUTS = 8

type Task = (policy: Policy, rng: Rng, step: number, groups: number, rollouts: number) => TaskStep

/** RL from a fresh policy: each step samples the task's groups, then trains on them (one gradient step). */
const learn = (task: Task, maxSteps: number, done: (curve: ReadonlyArray<number>) => boolean) => {
  const policy = Policy.create(undefined, { seed: SEED })
  const optimizer = makeAdamState(policy.parameterCount)
  const rng = new Rng(SEED + 1000)
  const curve: Array<number> = []
  for (let step = 0; step < maxSteps && !done(curve); step++) {
    const { groups, meanReward } = task(policy, rng, step, GROUPS, ROLLOUTS)
    curve.push(meanReward)
    const result = trainRl(policy, optimizer, groups, {})
    expect(result.steps.length).toBeLessThanOrEqual(1)
  }
  return { policy, curve }
}

const mean = (xs: ReadonlyArray<number>): number => xs.reduce((s, x) => s + x, 0) / xs.length
const show = (curve: ReadonlyArray<number>): string => curve.map((r) => r.toFixed(2)).join(" ")

describe("learning", () => {
  it("learns to say the word its prompt names: from chance to >= 0.9 within 40 steps", { timeout: 60_000 }, () => {
    const reached = (curve: ReadonlyArray<number>) =>
      curve.length >= 2 && curve[curve.length - 1]! >= 0.9 && curve[curve.length - 2]! >= 0.9
    const { curve } = learn(sayWordStep, 40, reached)
    // Chance is 1/4 (the sampler picks among the four words; a fresh policy is near uniform).
    expect(curve[0], show(curve)).toBeLessThan(0.45)
    expect(reached(curve), show(curve)).toBe(true)
    expect(curve.length).toBeLessThanOrEqual(40)
  })

  it("improves on a two-turn task whose reward depends on the second assistant turn", { timeout: 60_000 }, () => {
    const { curve } = learn(rememberWordStep, 25, () => false)
    const first = mean(curve.slice(0, 5))
    const last = mean(curve.slice(-5))
    expect(last - first, show(curve)).toBeGreaterThan(0.25)
  })

  it("samples and trains with the same bits twice", { timeout: 60_000 }, () => {
    const a = learn(sayWordStep, 3, () => false)
    const b = learn(sayWordStep, 3, () => false)
    expect(b.curve).toEqual(a.curve)
    // The parameters' own bytes: with the WebAssembly kernels they are a view into one memory the process shares.
    const bytes = (params: Float32Array | Float64Array) =>
      Buffer.from(params.buffer, params.byteOffset, params.byteLength)
    expect(bytes(b.policy.params).equals(bytes(a.policy.params))).toBe(true)
  })
})
