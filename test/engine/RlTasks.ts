/**
 * Small RL tasks for the engine's learning tests and benchmark: a minimal sampling loop over the policy
 * (softmax at temperature 1 with a seeded generator, restricted to a set of choices the way
 * `structured_outputs.choice` restricts it), and two contextual tasks whose prompts are rendered in the chat
 * format.
 *
 * The constraint is what makes "chance" meaningful: a freshly initialised byte-level policy spreads its mass
 * over 261 tokens, so it would essentially never spell a four-letter word unconstrained. The recorded logprob
 * of a sampled token is the policy's own (unconstrained) one, as the trainer computes it, so the importance
 * ratio is exactly 1 on-policy.
 */
import type { TrainingSequence } from "../../src/local/engine/LanguageModel.js"
import { logSoftmaxInto } from "../../src/local/engine/policy/Kernels.js"
import type { Policy, PolicyState } from "../../src/local/engine/policy/Policy.js"
import type { Rng } from "../../src/local/engine/Random.js"
import { decode, encode, encodeWithSpecials, IM_END } from "../../src/local/engine/Tokenizer.js"
import type { RlGroup } from "../../src/local/engine/Trainer.js"

/** A prefix tree of allowed token sequences. */
export type Trie = Map<number, Trie>

/** The tree of the given texts, each followed by IM_END (the end of the assistant turn). */
export const choiceTrie = (choices: ReadonlyArray<string>): Trie => {
  const root: Trie = new Map()
  for (const choice of choices) {
    let node = root
    for (const t of [...encode(choice), IM_END]) {
      let next = node.get(t)
      if (next === undefined) {
        next = new Map()
        node.set(t, next)
      }
      node = next
    }
  }
  return root
}

/** A sampled turn: its tokens (ending with IM_END) and their logprobs under the policy. */
export interface Turn {
  readonly ids: Array<number>
  readonly logprobs: Array<number>
}

/**
 * Sample one turn in each state, in lockstep (one batched forward row per live state per token), restricted
 * to the trie; every sampled token, IM_END included, is consumed by its state.
 */
export const sampleTurns = (policy: Policy, states: ReadonlyArray<PolicyState>, rng: Rng, trie: Trie): Array<Turn> => {
  const V = policy.vocabSize
  const turns: Array<Turn> = states.map(() => ({ ids: [], logprobs: [] }))
  const nodes: Array<Trie> = states.map(() => trie)
  let live = states.map((_, i) => i)
  const logits = new Float32Array(states.length * V)
  const lp = new Float32Array(V)
  const picks = new Int32Array(states.length)
  while (live.length > 0) {
    const liveStates = live.map((i) => states[i]!)
    policy.logitsMany(liveStates, logits, live.length)
    live.forEach((i, row) => {
      logSoftmaxInto(lp, 0, logits, row * V, V)
      const allowed = [...nodes[i]!.keys()]
      let z = 0
      for (const a of allowed) z += Math.exp(lp[a]!)
      let u = rng.float() * z
      let pick = allowed[allowed.length - 1]!
      for (const a of allowed) {
        u -= Math.exp(lp[a]!)
        if (u < 0) {
          pick = a
          break
        }
      }
      turns[i]!.ids.push(pick)
      turns[i]!.logprobs.push(lp[pick]!)
      nodes[i] = nodes[i]!.get(pick)!
      picks[row] = pick
    })
    policy.advanceMany(liveStates, picks, live.length)
    live = live.filter((i) => nodes[i]!.size > 0)
  }
  return turns
}

/** A training sequence from context segments (mask 0) and sampled turns (mask 1, with logprobs). */
export const sequenceOf = (segments: ReadonlyArray<ReadonlyArray<number> | Turn>): TrainingSequence => {
  const ids: Array<number> = []
  const mask: Array<number> = []
  const logprobs: Array<number> = []
  for (const seg of segments) {
    if ("ids" in seg) {
      ids.push(...seg.ids)
      mask.push(...seg.ids.map(() => 1))
      logprobs.push(...seg.logprobs)
    } else {
      ids.push(...seg)
      mask.push(...seg.map(() => 0))
      logprobs.push(...seg.map(() => Number.NaN))
    }
  }
  return { ids: Int32Array.from(ids), mask: Uint8Array.from(mask), logprobs: Float32Array.from(logprobs) }
}

/** The four words of the tasks. */
export const WORDS = ["red", "blue", "green", "gold"] as const

const words = choiceTrie(WORDS)
const acks = choiceTrie(["ok", "sure"])
const textOf = (turn: Turn): string => decode(turn.ids)

/** One step's rollouts of a task: its groups and their mean reward. */
export interface TaskStep {
  readonly groups: Array<RlGroup>
  readonly meanReward: number
}

/**
 * "Say: <word>": `groups` groups (the word cycling with `step`) of `rollouts` replies each; reward 1 for
 * replying exactly the word (then IM_END).
 */
export const sayWordStep = (policy: Policy, rng: Rng, step: number, groups: number, rollouts: number): TaskStep => {
  const out: Array<RlGroup> = []
  let total = 0
  for (let g = 0; g < groups; g++) {
    const word = WORDS[(g + step) % WORDS.length]!
    const prompt = encodeWithSpecials(`<|im_start|>user\nSay: ${word}<|im_end|>\n<|im_start|>assistant\n`)
    const root = policy.prefill(prompt)
    const states = Array.from({ length: rollouts }, () => policy.fork(root))
    const turns = sampleTurns(policy, states, rng, words)
    out.push({
      items: turns.map((turn) => {
        const reward = textOf(turn) === word ? 1 : 0
        total += reward
        return { sequence: sequenceOf([prompt, turn]), reward }
      })
    })
  }
  return { groups: out, meanReward: total / (groups * rollouts) }
}

const secondUser = encodeWithSpecials("\n<|im_start|>user\nWhat was it?<|im_end|>\n<|im_start|>assistant\n")

/**
 * Two turns: "Remember: <word>" (the assistant acknowledges with "ok" or "sure", which earns nothing), then
 * "What was it?"; reward 1 when the second assistant turn is the word.
 */
export const rememberWordStep = (
  policy: Policy,
  rng: Rng,
  step: number,
  groups: number,
  rollouts: number
): TaskStep => {
  const out: Array<RlGroup> = []
  let total = 0
  for (let g = 0; g < groups; g++) {
    const word = WORDS[(g + step) % WORDS.length]!
    const prompt = encodeWithSpecials(`<|im_start|>user\nRemember: ${word}<|im_end|>\n<|im_start|>assistant\n`)
    const root = policy.prefill(prompt)
    const states = Array.from({ length: rollouts }, () => policy.fork(root))
    const first = sampleTurns(policy, states, rng, acks)
    // The second user turn, prefilled once per distinct first reply (a prefix cache, as a server keeps).
    const cache = new Map<string, PolicyState>()
    const seconds = first.map((turn, i) => {
      const key = turn.ids.join(",")
      let base = cache.get(key)
      if (base === undefined) {
        base = policy.fork(states[i]!)
        policy.extend(base, secondUser)
        cache.set(key, base)
      }
      return policy.fork(base)
    })
    const second = sampleTurns(policy, seconds, rng, words)
    out.push({
      items: second.map((turn, i) => {
        const reward = textOf(turn) === word ? 1 : 0
        total += reward
        return { sequence: sequenceOf([prompt, first[i]!, secondUser, turn]), reward }
      })
    })
  }
  return { groups: out, meanReward: total / (groups * rollouts) }
}
