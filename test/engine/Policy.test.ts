import { describe, expect, it } from "@effect/vitest"
import { adamStep, makeAdamState } from "../../src/local/engine/Optimizer.js"
import { CheckpointFormatError, loadCheckpoint, saveCheckpoint } from "../../src/local/engine/policy/Checkpoint.js"
import { logSoftmaxInto } from "../../src/local/engine/policy/Kernels.js"
import { Policy } from "../../src/local/engine/policy/Policy.js"
import {
  DEFAULT_POLICY_CONFIG,
  type PolicyConfig,
  parameterCount,
  parameterTensors
} from "../../src/local/engine/policy/PolicyConfig.js"
import { Rng } from "../../src/local/engine/Random.js"

const tiny: PolicyConfig = { vocabSize: 13, contextLength: 16, dModel: 8, nLayers: 2, nHeads: 2, dFf: 12 }

const bitsEqual = (a: ArrayLike<number>, b: ArrayLike<number>): boolean => {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return false
  return true
}

const randomIds = (rng: Rng, n: number, vocab: number): Array<number> => Array.from({ length: n }, () => rng.int(vocab))

describe("Policy", () => {
  it("has the documented size", () => {
    expect(parameterCount(DEFAULT_POLICY_CONFIG)).toBe(105_909)
    const tensors = parameterTensors(DEFAULT_POLICY_CONFIG)
    expect(tensors.reduce((s, t) => s + t.size, 0)).toBe(105_909)
    expect(Policy.create().params).toBeInstanceOf(Float32Array)
  })

  it("matches finite differences of its float64 twin (gradient check, shared prefixes included)", () => {
    const policy = Policy.create(tiny, { seed: 3, float64: true })
    // Two sequences share a prefix (one packed row each for it); one more stands alone.
    const seqs = [
      [1, 2, 3, 4, 5, 6],
      [1, 2, 3, 7, 8],
      [9, 2, 10, 11]
    ].map((s) => Int32Array.from(s))
    const want = seqs.map((s) => Uint8Array.from(s, (_, t) => (t >= 1 ? 1 : 0)))
    const rng = new Rng(5)
    const coef = seqs.map((s) => Float64Array.from(s, () => rng.normal()))
    const loss = (): number => {
      const out = policy.forwardBatch(seqs, want, { keepActivations: false })
      let l = 0
      out.logprobs.forEach((lp, s) => {
        for (let t = 1; t < lp.length; t++) l += coef[s]![t]! * lp[t]!
      })
      return l
    }
    const packed = policy.forwardBatch(seqs, want)
    expect(packed.rows).toBe(12)
    policy.zeroGrads()
    policy.backwardBatch(coef)
    const grads = Float64Array.from(policy.grads)
    // A few random parameters of every tensor (embedding rows of tokens in use).
    let worst = 0
    for (const tensor of parameterTensors(tiny)) {
      for (let k = 0; k < 4; k++) {
        const i =
          tensor.name === "tokEmb"
            ? 2 * tiny.dModel + rng.int(tiny.dModel)
            : tensor.name === "posEmb"
              ? rng.int(5 * tiny.dModel)
              : tensor.offset + rng.int(tensor.size)
        const old = policy.params[i]!
        const eps = 1e-5
        policy.params[i] = old + eps
        const up = loss()
        policy.params[i] = old - eps
        const down = loss()
        policy.params[i] = old
        const fd = (up - down) / (2 * eps)
        const rel = Math.abs(fd - grads[i]!) / Math.max(1e-7, Math.abs(fd) + Math.abs(grads[i]!))
        worst = Math.max(worst, rel)
      }
    }
    expect(worst).toBeLessThan(1e-5)
  })

  it("decodes with the same bits as it scores, one by one, batched or several tokens at once", () => {
    const policy = Policy.create(DEFAULT_POLICY_CONFIG, { seed: 1 })
    const V = policy.vocabSize
    const rng = new Rng(2)
    const ids = randomIds(rng, 40, V)
    const scored = policy.scoreTokens(ids, 10)
    expect(scored.length).toBe(30)
    const lp = new Float32Array(V)
    // Token by token.
    const state = policy.prefill(ids.slice(0, 10))
    const decoded: Array<number> = []
    for (let t = 10; t < 40; t++) {
      logSoftmaxInto(lp, 0, policy.logits(state), 0, V)
      decoded.push(lp[ids[t]!]!)
      policy.advance(state, ids[t]!)
    }
    expect(bitsEqual(decoded, scored)).toBe(true)
    // Several states in lockstep.
    const root = policy.prefill(ids.slice(0, 5))
    policy.extend(root, ids.slice(5, 10))
    const states = [policy.fork(root), policy.fork(root), policy.fork(root)]
    const logits = new Float32Array(3 * V)
    for (let t = 10; t < 40; t++) {
      policy.logitsMany(states, logits)
      for (let b = 0; b < 3; b++) {
        logSoftmaxInto(lp, 0, logits, b * V, V)
        expect(Object.is(lp[ids[t]!], scored[t - 10])).toBe(true)
      }
      policy.advanceMany(states, [ids[t]!, ids[t]!, ids[t]!])
    }
    // Scored in a packed batch beside other sequences.
    const other = Int32Array.from([...ids.slice(0, 20), 1, 2, 3])
    const batch = policy.forwardBatch(
      [other, Int32Array.from(ids)],
      [new Uint8Array(23), Uint8Array.from(ids, (_, t) => (t >= 10 ? 1 : 0))]
    )
    expect(bitsEqual(Float32Array.from(batch.logprobs[1]!.subarray(10)), scored)).toBe(true)
  })

  it("keeps forks independent", () => {
    const policy = Policy.create(tiny, { seed: 1 })
    const state = policy.prefill([1, 2, 3])
    const before = Float32Array.from(policy.logits(state))
    const fork = policy.fork(state)
    for (let i = 0; i < 12; i++) policy.advance(fork, 4)
    expect(fork.length).toBe(15)
    expect(state.length).toBe(3)
    expect(bitsEqual(policy.logits(state), before)).toBe(true)
  })

  it("refuses a sequence past its context with the conventional message", () => {
    const policy = Policy.create(tiny, { seed: 1 })
    expect(() => policy.prefill(new Array(17).fill(1))).toThrow(/maximum context length is 16 tokens/)
    const state = policy.prefill(new Array(16).fill(1))
    expect(() => policy.advance(state, 1)).toThrow(/maximum context length/)
    expect(() => policy.prefill([13])).toThrow(/out of range/)
  })

  it("initialises from its seed, bit for bit", () => {
    const a = Policy.create(DEFAULT_POLICY_CONFIG, { seed: 7 })
    const b = Policy.create(DEFAULT_POLICY_CONFIG, { seed: 7 })
    const c = Policy.create(DEFAULT_POLICY_CONFIG, { seed: 8 })
    expect(bitsEqual(a.params, b.params)).toBe(true)
    expect(bitsEqual(a.params, c.params)).toBe(false)
  })
})

describe("checkpoints", () => {
  const trainSome = (policy: Policy, opt: ReturnType<typeof makeAdamState>, steps: number, seed: number): void => {
    const rng = new Rng(seed)
    for (let s = 0; s < steps; s++) {
      const seqs = [0, 1, 2].map(() => Int32Array.from(randomIds(rng, 10, policy.vocabSize)))
      const want = seqs.map((q) => Uint8Array.from(q, (_, t) => (t >= 1 ? 1 : 0)))
      policy.forwardBatch(seqs, want)
      policy.zeroGrads()
      policy.backwardBatch(want.map((w) => Float64Array.from(w, (m) => -m / 27)))
      adamStep(policy.params, policy.grads, opt, 1e-2)
    }
  }

  it("round-trips weights and optimiser state bit for bit, and training continues identically", () => {
    const a = Policy.create(DEFAULT_POLICY_CONFIG, { seed: 11 })
    const optA = makeAdamState(a.parameterCount)
    trainSome(a, optA, 3, 1)
    const bytes = saveCheckpoint(a, optA)
    const { policy: b, optimizer: optB } = loadCheckpoint(bytes)
    expect(optB).toBeDefined()
    expect(b.config).toEqual(a.config)
    expect(bitsEqual(b.params, a.params)).toBe(true)
    expect(bitsEqual(optB!.m, optA.m)).toBe(true)
    expect(bitsEqual(optB!.v, optA.v)).toBe(true)
    expect(optB!.step).toBe(3)
    expect(optB!.config).toEqual(optA.config)
    expect(Buffer.from(saveCheckpoint(b, optB)).equals(Buffer.from(bytes))).toBe(true)
    // Two more steps on each: the same bits.
    trainSome(a, optA, 2, 2)
    trainSome(b, optB!, 2, 2)
    expect(bitsEqual(b.params, a.params)).toBe(true)
    expect(bitsEqual(optB!.m, optA.m)).toBe(true)
    // Weights alone.
    const weightsOnly = loadCheckpoint(saveCheckpoint(a))
    expect(weightsOnly.optimizer).toBeUndefined()
    expect(bitsEqual(weightsOnly.policy.params, a.params)).toBe(true)
  })

  it("rejects bytes that are not a checkpoint of this format", () => {
    const policy = Policy.create(tiny, { seed: 1 })
    const bytes = saveCheckpoint(policy, makeAdamState(policy.parameterCount))
    expect(() => loadCheckpoint(new TextEncoder().encode("hello world, not a checkpoint"))).toThrow(
      /not an effect-rl policy checkpoint/
    )
    const otherVersion = bytes.slice()
    otherVersion[4] = 99
    expect(() => loadCheckpoint(otherVersion)).toThrow(/unsupported checkpoint version 99/)
    expect(() => loadCheckpoint(bytes.subarray(0, bytes.length - 4))).toThrow(CheckpointFormatError)
    expect(() => loadCheckpoint(bytes.subarray(0, 20))).toThrow(/truncated/)
  })
})
