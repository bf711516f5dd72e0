/**
 * Deterministic fixtures for the encode benchmark: a realistic RL job body (`CreateTrainingJob`) built from a
 * seeded PRNG (mulberry32), so every run serializes the same bytes.
 */
import type { Choice, TokenLogprob } from "../src/api/ChatCompletion.js"
import type { SystemMessage, UserMessage } from "../src/api/ChatMessage.js"
import { ModelId } from "../src/api/Model.js"
import type { CreateTrainingJob } from "../src/api/TrainingJob.js"
import type { MessageOrChoice, Trajectory, TrajectoryGroup } from "../src/api/Trajectory.js"

/** The shape of the generated payload. */
export interface FixtureOptions {
  readonly groups: number
  readonly trajectoriesPerGroup: number
  /** Entries of `messages_and_choices` per trajectory: a system message, then user and assistant turns. */
  readonly entriesPerTrajectory: number
  readonly tokensPerChoice: number
  readonly seed: number
}

export const defaultFixtureOptions: FixtureOptions = {
  groups: 256,
  trajectoriesPerGroup: 8,
  entriesPerTrajectory: 10,
  tokensPerChoice: 64,
  seed: 0x5eed
}

/** mulberry32: a small, fast, seeded 32-bit PRNG returning floats in [0, 1). */
export const mulberry32 = (seed: number) => {
  let a = seed >>> 0
  return (): number => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

type Rng = () => number

const pick = <A>(rng: Rng, items: ReadonlyArray<A>): A => items[Math.floor(rng() * items.length)]!

/** Token strings as a BPE tokenizer emits them: leading spaces, short words, punctuation, some non-ASCII. */
const TOKENS: ReadonlyArray<string> = [
  " the",
  " a",
  " to",
  " of",
  " and",
  " is",
  " in",
  " that",
  " we",
  " it",
  " for",
  " answer",
  " step",
  " value",
  " function",
  " return",
  " list",
  " sum",
  " First",
  " Then",
  " so",
  " x",
  " =",
  " +",
  " 2",
  "1",
  "0",
  "42",
  ".",
  ",",
  ":",
  "(",
  ")",
  "\n",
  "\n\n",
  " ",
  "  ",
  "ing",
  "ed",
  "tion",
  "’s",
  " café",
  " naïve",
  " über",
  "é",
  " —",
  " →",
  " ≤",
  " π",
  " Ω",
  " 数",
  "学",
  " 日本",
  "語",
  " привет",
  " 🙂",
  '"',
  "\\",
  "\t"
]

const WORDS: ReadonlyArray<string> = [
  "please",
  "compute",
  "the",
  "sum",
  "of",
  "these",
  "numbers",
  "and",
  "explain",
  "your",
  "reasoning",
  "briefly",
  "what",
  "is",
  "next",
  "step",
  "café",
  "über",
  "résumé",
  "数学",
  "question",
  "correct",
  "try",
  "again",
  "answer",
  "format"
]

const encoder = new TextEncoder()
const tokenBytes = new Map<string, ReadonlyArray<number>>()
const bytesOf = (token: string): ReadonlyArray<number> => {
  let bytes = tokenBytes.get(token)
  if (bytes === undefined) {
    bytes = Array.from(encoder.encode(token))
    tokenBytes.set(token, bytes)
  }
  // a fresh array per entry, as a parsed response would carry
  return bytes.slice()
}

const sentence = (rng: Rng, words: number): string => {
  const out: Array<string> = []
  for (let i = 0; i < words; i++) out.push(pick(rng, WORDS))
  return `${out.join(" ")}?`
}

const uuid = (rng: Rng): string => {
  const hex = (n: number) => {
    let s = ""
    for (let i = 0; i < n; i++) s += Math.floor(rng() * 16).toString(16)
    return s
  }
  const variant = "89ab"[Math.floor(rng() * 4)]!
  return `${hex(8)}-${hex(4)}-4${hex(3)}-${variant}${hex(3)}-${hex(12)}`
}

const tokenLogprob = (rng: Rng): TokenLogprob => {
  const token = pick(rng, TOKENS)
  // most sampled tokens are likely; a long tail of unlikely ones
  return { token, logprob: -(rng() ** 3) * 8, bytes: bytesOf(token), top_logprobs: [] }
}

// keys in the schema's order, so that the encoded copy serializes to the same bytes as the input
const choice = (rng: Rng, tokens: number): Choice => {
  const content: Array<TokenLogprob> = []
  for (let i = 0; i < tokens; i++) content.push(tokenLogprob(rng))
  return {
    index: 0,
    message: { role: "assistant", content: content.map((entry) => entry.token).join("") },
    logprobs: { content },
    finish_reason: "stop"
  }
}

const SYSTEM_PROMPT =
  "You are a careful math tutor. Think step by step, show intermediate results, and end with a line of the form " +
  "'Answer: <number>'. Keep answers short — at most a few sentences. Réponds en anglais."

const trajectory = (rng: Rng, options: FixtureOptions, index: number, startMs: number): Trajectory => {
  const system: SystemMessage = { role: "system", content: SYSTEM_PROMPT }
  const entries: Array<MessageOrChoice> = [system]
  for (let i = 1; i < options.entriesPerTrajectory; i++) {
    if (i % 2 === 1) {
      const user: UserMessage = { role: "user", content: sentence(rng, 6 + Math.floor(rng() * 20)) }
      entries.push(user)
    } else {
      entries.push(choice(rng, options.tokensPerChoice))
    }
  }
  const reward = Math.round(rng() * 1000) / 1000
  return {
    messages_and_choices: entries,
    reward,
    initial_policy_version: 12,
    final_policy_version: 12 + (index % 2),
    metrics: {
      correct: reward > 0.5,
      duration_s: rng() * 30,
      num_turns: Math.floor(options.entriesPerTrajectory / 2),
      completion_tokens: options.tokensPerChoice * Math.floor((options.entriesPerTrajectory - 1) / 2)
    },
    metadata: {
      scenario_id: `scenario-${Math.floor(rng() * 1e6)}`,
      difficulty: Math.floor(rng() * 5),
      split: "train",
      retried: rng() < 0.1,
      notes: null
    },
    start_time: new Date(startMs + index * 1_337).toISOString()
  }
}

/**
 * Build the RL job body. With the defaults: 256 groups x 8 trajectories x 10 entries (system, user, assistant,
 * ..., user: 4 choices of 64 tokens each per trajectory, the final user turn being the environment's feedback).
 */
export const makePayload = (options: FixtureOptions = defaultFixtureOptions): CreateTrainingJob => {
  const rng = mulberry32(options.seed)
  const startMs = Date.UTC(2025, 0, 1, 12, 0, 0)
  const trajectory_groups: Array<TrajectoryGroup> = []
  for (let g = 0; g < options.groups; g++) {
    const trajectories: Array<Trajectory> = []
    for (let t = 0; t < options.trajectoriesPerGroup; t++) {
      trajectories.push(trajectory(rng, options, g * options.trajectoriesPerGroup + t, startMs))
    }
    trajectory_groups.push({ trajectories })
  }
  return {
    model_id: ModelId.make(uuid(rng)),
    trajectory_groups,
    experimental_config: {
      epsilon: 0.2,
      epsilon_high: 0.28,
      importance_sampling_level: "token",
      learning_rate: 1e-5,
      loss_fn: "cispo",
      precalculate_logprobs: true
    }
  }
}
