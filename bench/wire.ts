/**
 * Wire-schema benchmark of one chat completion as `npm start` (tic-tac-toe on the embedded backend) makes it:
 * the server's decode of the request (the endpoint's payload), the client's encode of it, the client's decode
 * of the response and the server's encode of it, each with the full schema and with the exported one (which
 * has the fast path of src/api/internal/chatRequestFastPath.ts and chatCompletionFastPath.ts), in one process.
 *
 *   npx tsx bench/wire.ts [--warmup=2] [--iterations=7] [--ops=2000]
 *
 * The full schema is the one the exported schema's fast path stands in front of (its declaration's type
 * parameter); before the fast path the exported schema was the full one itself, and both rows measure the same.
 * Requests are multi-turn games of 3, 5, 7 and 9 messages (user boards and assistant moves), with
 * `structured_outputs.choice`, `logprobs`, `return_token_ids`, `seed` and `max_completion_tokens: 2`, parsed from
 * JSON as the server sees them; responses are what the engine sends for them (src/local/engine/sampler/Job.ts):
 * one choice with its two logprob entries and token ids, usage and the prompt's token ids.
 *
 * Time: `--ops` decodes (or encodes) a run, runs interleaved in rounds with the full schema first (a full GC
 * before each), the median run reported per op, and the ratio of the two within a round. Allocation: the heap's
 * growth over a batch of 16 ops after a full GC (a
 * batch fits in the young generation, so no scavenge runs within it; the median of 40 batches), per op.
 */
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import * as Schema from "effect/Schema"
import type * as AST from "effect/SchemaAST"
import { ChatCompletion, ChatCompletionRequest } from "../src/api/ChatCompletion.js"
import { fmt, type InterleavedMeasurement, interleave, intFlag, median, printTable } from "./harness.js"

const warmup = intFlag("warmup", 2)
const iterations = intFlag("iterations", 7)
const ops = intFlag("ops", 2000)

setFlagsFromString("--expose-gc")
const collect = runInNewContext("gc") as () => void

/** The schema a fast path stands in front of (a `Schema.declare` over it), or the schema itself. */
const fullOf = <A, I>(schema: Schema.Schema<A, I>): Schema.Schema<A, I> =>
  schema.ast._tag === "Declaration" && (schema.ast as AST.Declaration).typeParameters.length === 1
    ? Schema.make((schema.ast as AST.Declaration).typeParameters[0]!)
    : schema

// ---------------------------------------------------------------------------------------------------------
// fixtures
// ---------------------------------------------------------------------------------------------------------

const boards = ["123\n456\n789", "123\n4X6\n78O", "1O3\n4X6\nX8O", "1OX\n4X6\nX8O", "OOX\n4X6\nXXO"]
const moves = ["5", "7", "3", "8"]

/** A request of `turns` user boards and the assistant moves between them (2 x turns - 1 messages). */
const requestOf = (turns: number) => {
  const messages: Array<Record<string, unknown>> = []
  for (let t = 0; t < turns; t++) {
    if (t > 0) messages.push({ role: "assistant", content: moves[t - 1] })
    messages.push({ role: "user", content: boards[t] })
  }
  const free = [...boards[turns - 1]!].filter((c) => c >= "1" && c <= "9")
  // Key order as the rollout builds it: the conversation's request, then what Rollout.chat and Policy add.
  return JSON.parse(
    JSON.stringify({
      messages,
      max_completion_tokens: 2,
      structured_outputs: { choice: free },
      seed: 1234,
      logprobs: true,
      return_token_ids: true,
      model: "wandb-artifact:///examples/tictactoe:step3"
    })
  ) as unknown
}

/** The engine's response to a request of `turns` turns. */
const responseOf = (turns: number) =>
  JSON.parse(
    JSON.stringify({
      id: "chatcmpl-0123456789abcdef01234567",
      object: "chat.completion",
      created: 1764180000,
      model: "wandb-artifact:///examples/tictactoe:step3",
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: "5", refusal: null },
          logprobs: {
            content: [
              { token: "5", logprob: -1.0986, bytes: [53], top_logprobs: [] },
              { token: "<|im_end|>", logprob: -0.0123, bytes: [], top_logprobs: [] }
            ],
            refusal: null
          },
          finish_reason: "stop",
          stop_reason: null,
          token_ids: [53, 2]
        }
      ],
      usage: { prompt_tokens: 24 * turns, completion_tokens: 2, total_tokens: 24 * turns + 2 },
      prompt_token_ids: Array.from({ length: 24 * turns }, (_, i) => (i * 37) % 256)
    })
  ) as unknown

const TURNS = [2, 3, 4, 5] // 3, 5, 7 and 9 messages
const requests = TURNS.map(requestOf)
const responses = TURNS.map(responseOf)
// what the client encodes and the server encodes: decoded values (the types' side)
const requestValues = requests.map((r) => Schema.decodeUnknownSync(fullOf(ChatCompletionRequest))(r))
const responseValues = responses.map((r) => Schema.decodeUnknownSync(fullOf(ChatCompletion))(r))

// ---------------------------------------------------------------------------------------------------------
// the paths
// ---------------------------------------------------------------------------------------------------------

type Op = (u: unknown) => unknown

/** A run: `ops` calls of `op` over the inputs in turn; the schema's result must match the full schema's. */
const runOf = (op: Op, inputs: ReadonlyArray<unknown>) => () => {
  let last: unknown
  for (let i = 0; i < ops; i++) last = op(inputs[i & 3])
  return last
}

interface Case {
  readonly name: string
  readonly inputs: ReadonlyArray<unknown>
  readonly full: Op
  readonly fast: Op
}

const sync =
  (f: (u: unknown, o?: AST.ParseOptions) => unknown): Op =>
  (u) =>
    f(u)

const cases: ReadonlyArray<Case> = [
  {
    name: "server: decode ChatCompletionRequest",
    inputs: requests,
    full: sync(Schema.decodeUnknownSync(fullOf(ChatCompletionRequest))),
    fast: sync(Schema.decodeUnknownSync(ChatCompletionRequest))
  },
  {
    name: "client: encode ChatCompletionRequest",
    inputs: requestValues,
    full: sync(Schema.encodeUnknownSync(fullOf(ChatCompletionRequest))),
    fast: sync(Schema.encodeUnknownSync(ChatCompletionRequest))
  },
  {
    name: "client: decode ChatCompletion",
    inputs: responses,
    full: sync(Schema.decodeUnknownSync(fullOf(ChatCompletion))),
    fast: sync(Schema.decodeUnknownSync(ChatCompletion))
  },
  {
    name: "server: encode ChatCompletion",
    inputs: responseValues,
    full: sync(Schema.encodeUnknownSync(fullOf(ChatCompletion))),
    fast: sync(Schema.encodeUnknownSync(ChatCompletion))
  }
]

// The two give the same JSON (the same keys in the same order) on every input.
for (const c of cases) {
  for (const input of c.inputs) {
    const a = JSON.stringify(c.full(input))
    const b = JSON.stringify(c.fast(input))
    if (a !== b) throw new Error(`${c.name}: the exported schema gives ${b}, the full one ${a}`)
  }
}

/** Bytes allocated per op: the median heap growth over 40 batches of 16 ops, each after a full GC. */
const allocated = (op: Op, inputs: ReadonlyArray<unknown>): number => {
  const keep: Array<unknown> = new Array(16)
  const grown: Array<number> = []
  for (let batch = 0; batch < 40; batch++) {
    collect()
    const before = process.memoryUsage().heapUsed
    for (let i = 0; i < 16; i++) keep[i] = op(inputs[i & 3])
    grown.push(process.memoryUsage().heapUsed - before)
  }
  return median(grown) / 16
}

console.log("Chat-completions wire schemas: full schema vs exported schema (fast path), per op")
console.log(
  `node ${process.version}; requests of ${TURNS.map((t) => 2 * t - 1).join(", ")} messages in turn; ` +
    `${ops} ops a run, ${warmup} warm-up + ${iterations} timed rounds, interleaved; full GC before each run`
)
console.log("")

const rows: Array<Array<string>> = [
  ["case", "full us/op", "fast us/op", "per round", "full B/op", "fast B/op", "bytes ratio"]
]
for (const c of cases) {
  const [full, fast] = interleave(
    [
      { name: "full", run: runOf(c.full, c.inputs) },
      { name: "fast", run: runOf(c.fast, c.inputs) }
    ],
    { warmup, iterations }
  ) as [InterleavedMeasurement, InterleavedMeasurement]
  const fullBytes = allocated(c.full, c.inputs)
  const fastBytes = allocated(c.fast, c.inputs)
  rows.push([
    c.name,
    fmt((full.median * 1000) / ops, 2),
    fmt((fast.median * 1000) / ops, 2),
    `${fmt(fast.ratio, 2)}x`,
    fmt(fullBytes, 0),
    fmt(fastBytes, 0),
    `${fmt(fastBytes / fullBytes, 2)}x`
  ])
}
printTable(rows)
console.log("")
console.log(
  "per round: median over rounds of fast/full time in the same round; B/op: heap growth per op over a batch " +
    "after a full GC (the median of 40 batches)"
)
