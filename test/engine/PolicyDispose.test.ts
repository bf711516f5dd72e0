/**
 * A policy gives its blocks of the kernels' memory back when told (`Policy.dispose`), and the training thread's
 * jobs do so when they end: each job's policy (parameters, gradients, workspaces) and optimiser moments took fresh
 * memory before, about 80 MB a job in `npm start`, since the thread allocates too little JavaScript for the
 * collector to find the old ones soon.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Schema from "effect/Schema"
import { CreateSftTrainingJob } from "../../src/api/TrainingJob.js"
import { loadCheckpoint, saveCheckpoint } from "../../src/local/engine/policy/Checkpoint.js"
import { Policy } from "../../src/local/engine/policy/Policy.js"
import { DEFAULT_POLICY_CONFIG } from "../../src/local/engine/policy/PolicyConfig.js"
import { heap } from "../../src/local/engine/policy/Wasm.js"
import { Rng } from "../../src/local/engine/Random.js"
import { type Report, runJob } from "../../src/local/server/internal/trainingThread.js"

const config = { ...DEFAULT_POLICY_CONFIG, contextLength: 64 }

/**
 * One forward and backward pass over a few sequences, then some decoding (a prompt, three forks advanced together):
 * the logprobs, a copy of the gradients and the logits.
 */
const pass = (policy: Policy) => {
  const rng = new Rng(9)
  const sequences = Array.from({ length: 6 }, () => Int32Array.from({ length: 20 }, () => 32 + rng.int(90)))
  const want = sequences.map((s) => Uint8Array.from(s, (_, t) => (t > 0 ? 1 : 0)))
  policy.zeroGrads()
  const out = policy.forwardBatch(sequences, want)
  policy.backwardBatch(sequences.map((s) => Float64Array.from(s, () => -0.05)))
  const root = policy.prefill(sequences[0]!)
  const forks = [policy.fork(root), policy.fork(root), policy.fork(root)]
  const logits = new Float32Array(forks.length * policy.vocabSize)
  for (let i = 0; i < 4; i++) {
    policy.advanceMany(forks, [40 + i, 50 + i, 60 + i])
    policy.logitsMany(forks, logits)
  }
  for (const state of [root, ...forks]) policy.release(state)
  return {
    logprobs: out.logprobs.map((l) => Array.from(l)),
    grads: Array.from(policy.grads),
    logits: Array.from(logits)
  }
}

describe("Policy.dispose", () => {
  it("gives its memory back: the next policy of its shape takes none new, starts from zero gradients and computes the same bits", () => {
    const H = heap()
    expect(H).toBeDefined()
    const bytes = saveCheckpoint(Policy.create(config, { seed: 4 }))
    const first = loadCheckpoint(bytes).policy
    const expected = pass(first)
    first.dispose()
    const used = H!.used
    const second = loadCheckpoint(bytes).policy
    // Its blocks are the ones the first policy dirtied: its gradients are handed out as zeros, its workspaces as
    // they were (each pass writes them before reading), and it computes what the first computed.
    expect(second.grads.every((g) => g === 0)).toBe(true)
    expect(pass(second)).toEqual(expected)
    expect(H!.used).toBe(used)
    second.dispose()
  })

  it("refuses to be used after, by name, and may be disposed twice", () => {
    const policy = Policy.create(config, { seed: 4 })
    policy.dispose()
    policy.dispose()
    expect(() => policy.prefill([40, 41])).toThrow("policy: used after dispose()")
    expect(() => policy.forwardBatch([[40, 41]], [[0, 1]])).toThrow("policy: used after dispose()")
    expect(() => policy.zeroGrads()).toThrow("policy: used after dispose()")
  })
})

describe("the training thread's jobs", () => {
  it("give their memory back when they end, done or failed", async () => {
    const H = heap()!
    const weights = saveCheckpoint(Policy.create(config, { seed: 4 }))
    const request = Schema.decodeUnknownSync(CreateSftTrainingJob)({
      model_id: "8a1c3f0e-2b7d-4c55-9e61-0d2f4a6b8c90",
      training_data_url: "file:///train.jsonl",
      config: { batch_size: 2, learning_rate: 1e-3 }
    })
    const line = (i: number) =>
      JSON.stringify({
        messages: [
          { role: "user", content: `say ${i}` },
          { role: "assistant", content: `${i}` }
        ]
      })
    const data = [1, 2, 3, 4].map(line).join("\n")
    const job = (text: string) => {
      const reports: Array<Report> = []
      return runJob(
        { kind: "sft", weights, step: 0, request, data: text, defaultLearningRate: undefined },
        (report) => reports.push(report),
        () => false
      ).then(() => reports.at(-1)!)
    }
    expect((await job(data)).type).toBe("done")
    const used = H.used
    for (let i = 0; i < 3; i++) expect((await job(data)).type).toBe("done")
    // A job that fails (no assistant turn to learn) after its policy was loaded gives it back too.
    const failed = await job(JSON.stringify({ messages: [{ role: "user", content: "hi" }] }))
    expect(failed).toMatchObject({ type: "failed" })
    expect((await job(data)).type).toBe("done")
    expect(H.used).toBe(used)
  })
})
