/**
 * When sharing a decoding step with the decoding thread pays, by the size of the step: batched decoding steps
 * (`Policy.extendMany`, one token for each of `lanes` sequences holding `context` tokens) run alone on this thread
 * and shared with the decoding thread, alternating, microseconds a step (median of 5 rounds of 30 steps each),
 * and the ratio alone / shared (above 1: sharing is faster). Sharing has a fixed cost (waking the thread, waiting
 * for its last chunk), so small steps run faster alone; `DecodeThread.worthSharing` decides by the step's size for
 * that reason.
 *
 *   npx tsx bench/share.ts
 */
import { availableParallelism, loadavg } from "node:os"
import { decodeThread } from "../src/local/engine/policy/DecodeThread.js"
import { Policy } from "../src/local/engine/policy/Policy.js"
import { DEFAULT_POLICY_CONFIG } from "../src/local/engine/policy/PolicyConfig.js"

const thread = decodeThread.get()
if (thread === undefined || !(await thread.whenReady())) {
  console.log(`no decoding thread here (${availableParallelism()} core(s)): nothing to compare`)
  process.exit(0)
}
const policy = Policy.create({ ...DEFAULT_POLICY_CONFIG, contextLength: 1024 }, { seed: 1 })

/** The mean time of a decoding step of `lanes` sequences at `context` tokens, in ms, run `way`. */
const step = (way: "alone" | "shared", lanes: number, context: number, steps: number): number => {
  const states = Array.from({ length: lanes }, (_, i) =>
    policy.prefill(Array.from({ length: context }, (_, t) => (t * 7 + i) % 250))
  )
  const ids = states.map((_, i) => [i % 200])
  thread.alwaysShare = way === "shared"
  const started = performance.now()
  for (let g = 0; g < steps; g++) policy.extendMany(states, ids)
  const ms = (performance.now() - started) / steps
  thread.alwaysShare = false
  for (const state of states) policy.release(state)
  return ms
}

/** Steps alone never consult the thread: with the thread off, a step runs on this thread whole. */
const alone = (lanes: number, context: number, steps: number): number => {
  decodeThread.enabled = false
  try {
    return step("alone", lanes, context, steps)
  } finally {
    decodeThread.enabled = true
  }
}

const median = (xs: Array<number>): number => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
for (let w = 0; w < 3; w++) {
  alone(16, 300, 40)
  step("shared", 16, 300, 40)
}
console.log(
  `decoding steps alone and shared with the decoding thread; node ${process.version}, ${availableParallelism()} cores, ` +
    `load average ${loadavg()
      .map((x) => x.toFixed(2))
      .join(" ")}`
)
for (const lanes of [2, 4, 8, 16, 32, 48]) {
  for (const context of [50, 300]) {
    const times = { alone: [] as Array<number>, shared: [] as Array<number> }
    for (let round = 0; round < 5; round++) {
      times.alone.push(alone(lanes, context, 30))
      times.shared.push(step("shared", lanes, context, 30))
    }
    const a = median(times.alone)
    const s = median(times.shared)
    console.log(
      `  ${String(lanes).padStart(2)} sequences at ${String(context).padStart(3)} tokens: alone ` +
        `${(a * 1000).toFixed(0).padStart(5)} us a step, shared ${(s * 1000).toFixed(0).padStart(5)} us, ` +
        `alone / shared ${(a / s).toFixed(2)}`
    )
  }
}
process.exit(0)
