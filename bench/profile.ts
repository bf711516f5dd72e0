/**
 * Where the schema encode of `CreateTrainingJob` spends its time, and what brings it near `JSON.stringify`.
 *
 *   npx tsx bench/profile.ts [--groups=32] [--warmup=1] [--iterations=5] [--only=encode --loops=5]
 *
 * 1. every level of the payload encoded on its own (bytes arrays, token logprobs, choices, messages, ...)
 * 2. parse options and call styles on the original schema
 * 3. scratch variants (`bench/variants.ts`) that swap one hot construct, encode + JSON.stringify
 * 4. the library's own paths: the project's client (`src/client`, encode then JSON.stringify), and the
 *    platform's `HttpApiClient` of `TrainingApi` with a transport that only captures the body
 *
 * `--only=encode` just runs the original encode `--loops` times, for `node --cpu-prof --import tsx`.
 */
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientError from "@effect/platform/HttpClientError"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type * as AST from "effect/SchemaAST"
import { Choice, ChoiceLogprobs, TokenLogprob, TopLogprob } from "../src/api/ChatCompletion.js"
import { Message } from "../src/api/ChatMessage.js"
import * as Api from "../src/api/TrainingApi.js"
import { CreateTrainingJob } from "../src/api/TrainingJob.js"
import { MessageOrChoice, Trajectory, TrajectoryGroup } from "../src/api/Trajectory.js"
import { endpointCall } from "../src/client/internal/endpoint.js"
import { defaultFixtureOptions, makePayload } from "./fixtures.js"
import { fmt, interleave, intFlag, median, type Path, printTable } from "./harness.js"
import { makeCreateTrainingJob, type VariantOptions } from "./variants.js"

const groups = intFlag("groups", 32)
const warmup = intFlag("warmup", 1)
const iterations = intFlag("iterations", 5)
const only = process.argv.find((a) => a.startsWith("--only="))?.slice("--only=".length)

const payload = makePayload({ ...defaultFixtureOptions, groups })
const reference = JSON.stringify(payload)
const MB = Buffer.byteLength(reference, "utf8") / 1e6

if (only === "encode") {
  const encode = Schema.encodeSync(CreateTrainingJob)
  const loops = intFlag("loops", 5)
  for (let i = 0; i < loops; i++) {
    const start = performance.now()
    encode(payload)
    console.log(`encode ${fmt(performance.now() - start)} ms`)
  }
  process.exit(0)
}

const same = (name: string) => (json: unknown) => {
  if (json !== reference) throw new Error(`${name}: output differs from JSON.stringify(payload)`)
}
const rounds = { warmup, iterations }
const baselinePath: Path = {
  name: "JSON.stringify(payload)",
  run: () => JSON.stringify(payload),
  check: same("baseline")
}

console.log(
  `payload: ${groups} groups, ${fmt(MB, 2)} MB of JSON; ${warmup} warm-up + ${iterations} timed rounds per section, ` +
    "paths interleaved within a round; ratios are medians of the ratios within a round"
)

// ---------------------------------------------------------------------------------------------------------
// 1. each level on its own
// ---------------------------------------------------------------------------------------------------------

const trajectories = payload.trajectory_groups.flatMap((group) => group.trajectories)
const entries = trajectories.flatMap((trajectory) => trajectory.messages_and_choices)
const choices = entries.filter((entry): entry is Choice => "logprobs" in entry)
const messages = entries.filter((entry): entry is Message => !("logprobs" in entry))
const logprobs = choices.map((choice) => choice.logprobs!)
const tokenArrays = logprobs.map((lp) => lp.content!)
const tokens = tokenArrays.flat()
const bytes = tokens.map((token) => token.bytes!)

interface Level extends Path {
  readonly count: number
}
const level = <A, I>(name: string, schema: Schema.Schema<A, I>, items: ReadonlyArray<unknown>): Level => {
  const encode = Schema.encodeUnknownSync(schema)
  return {
    name,
    count: items.length,
    run: () => {
      for (let i = 0; i < items.length; i++) encode(items[i]!)
    }
  }
}
const levelTable = (title: string, paths: ReadonlyArray<Level>, shareOf: string) => {
  const measured = interleave(paths, rounds)
  console.log(title)
  printTable([
    ["schema", "items", "median ms", "min ms", "ns/item (min)", shareOf, "(min/min)"],
    ...measured.map((m, i) => [
      m.name,
      String(paths[i]!.count),
      fmt(m.median),
      fmt(m.min),
      fmt((m.min * 1e6) / paths[i]!.count, 0),
      `${fmt(100 * m.ratio, 0)}%`,
      `${fmt(100 * m.minRatio, 0)}%`
    ])
  ])
}

levelTable(
  "\n1. encodeSync of each level, over all of its occurrences in the payload",
  [
    level("CreateTrainingJob (whole payload)", CreateTrainingJob, [payload]),
    level("TrajectoryGroup (each)", TrajectoryGroup, payload.trajectory_groups),
    level("Trajectory (each)", Trajectory, trajectories),
    level("MessageOrChoice (choices only)", MessageOrChoice, choices),
    level("MessageOrChoice (messages only)", MessageOrChoice, messages),
    level("Message (each system/user message)", Message, messages),
    level("Choice (each choice)", Choice, choices),
    level("ChoiceLogprobs (each choice)", ChoiceLogprobs, logprobs),
    level("Schema.Array(TokenLogprob) (each choice's content)", Schema.Array(TokenLogprob), tokenArrays),
    level("TokenLogprob (each token)", TokenLogprob, tokens),
    level("Schema.Array(Schema.Int) (each token's bytes)", Schema.Array(Schema.Int), bytes),
    { ...baselinePath, name: "for scale: JSON.stringify(payload)", count: 1 }
  ],
  "of whole"
)

// what a token's pieces cost: `Schema.optional(Schema.NullOr(S))` runs the union `S | null | undefined` for
// every value, `Schema.Int` and `Schema.Finite` a refinement for every number
const IntArray = Schema.Array(Schema.Int)
levelTable(
  "\n1b. one token's pieces, over every token of the payload",
  [
    level("TokenLogprob", TokenLogprob, tokens),
    level(
      "TokenLogprob, fields required (no optional/NullOr unions)",
      Schema.Struct({
        token: Schema.String,
        logprob: Schema.Finite,
        bytes: IntArray,
        top_logprobs: Schema.Array(Schema.Unknown)
      }),
      tokens
    ),
    level(
      "Struct({ token: String, logprob: Finite })",
      Schema.Struct({ token: Schema.String, logprob: Schema.Finite }),
      tokens
    ),
    level(
      "Struct({ token: String, logprob: Number })",
      Schema.Struct({ token: Schema.String, logprob: Schema.Number }),
      tokens
    ),
    level(
      "bytes: Schema.UndefinedOr(Schema.NullOr(Schema.Array(Schema.Int)))",
      Schema.UndefinedOr(Schema.NullOr(IntArray)),
      bytes
    ),
    level("bytes: Schema.NullOr(Schema.Array(Schema.Int))", Schema.NullOr(IntArray), bytes),
    level("bytes: Schema.Array(Schema.Int)", IntArray, bytes),
    level("bytes: Schema.Array(Schema.Number) (no Int refinement)", Schema.Array(Schema.Number), bytes),
    level(
      "top_logprobs: Schema.Array(TopLogprob) (all empty)",
      Schema.Array(TopLogprob),
      tokens.map((t) => t.top_logprobs)
    )
  ],
  "of TokenLogprob"
)

// ---------------------------------------------------------------------------------------------------------
// 2. options and call styles, original schema, encode only
// ---------------------------------------------------------------------------------------------------------

const withOptions = (name: string, options?: AST.ParseOptions): Path => {
  const encode = Schema.encodeSync(CreateTrainingJob, options)
  return { name, run: () => encode(payload) }
}
const styles = interleave(
  [
    baselinePath,
    withOptions("encodeSync (default: errors first, excess ignored)"),
    withOptions('encodeSync { errors: "first" }', { errors: "first" }),
    withOptions('encodeSync { errors: "all" }', { errors: "all" }),
    withOptions('encodeSync { onExcessProperty: "preserve" }', { onExcessProperty: "preserve" }),
    withOptions('encodeSync { onExcessProperty: "error" }', { onExcessProperty: "error" }),
    withOptions("encodeSync { exact: true }", { exact: true }),
    withOptions('encodeSync { propertyOrder: "original" }', { propertyOrder: "original" }),
    {
      name: "Schema.encodeSync(CreateTrainingJob) made on every call",
      run: () => Schema.encodeSync(CreateTrainingJob)(payload)
    },
    {
      name: "Effect.runSync(Schema.encode(CreateTrainingJob)(payload))",
      run: () => Effect.runSync(Schema.encode(CreateTrainingJob)(payload))
    },
    { name: "Schema.validateSync(CreateTrainingJob)", run: () => Schema.validateSync(CreateTrainingJob)(payload) },
    { name: "Schema.is(CreateTrainingJob)", run: () => Schema.is(CreateTrainingJob)(payload) }
  ],
  rounds
)
console.log("\n2. the original schema: options and call styles (encode only, no JSON.stringify)")
printTable([
  ["call", "median ms", "min ms", "x JSON.stringify", "(min/min)"],
  ...styles.map((m) => [m.name, fmt(m.median), fmt(m.min), `${fmt(m.ratio, 2)}x`, `${fmt(m.minRatio, 2)}x`])
])

// ---------------------------------------------------------------------------------------------------------
// 3. variants, encode + JSON.stringify
// ---------------------------------------------------------------------------------------------------------

const variants: ReadonlyArray<[string, VariantOptions]> = [
  ["rebuilt copy of the library's schema (control)", {}],
  ["plain Array(TokenLogprob), no fast path", { tokens: "plain" }],
  ["union Message first", { union: "message-first" }],
  ["union guarded (index undefined -> Message)", { union: "guarded" }],
  ["bytes only: declare + guard, fallback", { tokens: "fast-bytes" }],
  ["library's fast path + union guarded", { union: "guarded" }]
]

const encodeTimes: Array<Array<number>> = []
const variantPath = (name: string, encode: (payload: CreateTrainingJob) => unknown): Path => {
  const times: Array<number> = []
  encodeTimes.push(times)
  return {
    name,
    run: (timed) => {
      const start = performance.now()
      const encoded = encode(payload)
      if (timed) times.push(performance.now() - start)
      return JSON.stringify(encoded)
    },
    check: same(name)
  }
}
const [variantBaseline, ...measured] = interleave(
  [
    baselinePath,
    variantPath("src CreateTrainingJob", Schema.encodeSync(CreateTrainingJob)),
    ...variants.map(([name, options]) => variantPath(name, Schema.encodeSync(makeCreateTrainingJob(options))))
  ],
  rounds
)
console.log("\n3. variants (bench/variants.ts): encode, and encode + JSON.stringify, vs JSON.stringify(payload)")
printTable([
  ["variant", "encode ms", "encode+JSON ms", "min ms", "MB/s", "x JSON.stringify", "(min/min)"],
  [
    variantBaseline!.name,
    "",
    fmt(variantBaseline!.median),
    fmt(variantBaseline!.min),
    fmt(MB / (variantBaseline!.median / 1000)),
    "1.00x",
    "1.00x"
  ],
  ...measured.map((m, i) => [
    m.name,
    fmt(median(encodeTimes[i]!)),
    fmt(m.median),
    fmt(m.min),
    fmt(MB / (m.median / 1000)),
    `${fmt(m.ratio, 2)}x`,
    `${fmt(m.minRatio, 2)}x`
  ])
])

// the fast paths must reject what the original rejects, with the same issue
const broken = (mutate: (payload: CreateTrainingJob) => void): CreateTrainingJob => {
  const copy = JSON.parse(JSON.stringify(makePayload({ ...defaultFixtureOptions, groups: 1 }))) as CreateTrainingJob
  mutate(copy)
  return copy
}
const firstChoice = (p: CreateTrainingJob) => p.trajectory_groups[0]!.trajectories[0]!.messages_and_choices[2] as Choice
const cases: ReadonlyArray<[string, CreateTrainingJob]> = [
  [
    "byte 1.5",
    broken((p) => {
      ;(firstChoice(p).logprobs!.content![3]!.bytes as Array<number>)[0] = 1.5
    })
  ],
  [
    "logprob as string",
    broken((p) => {
      ;(firstChoice(p).logprobs!.content![5] as { logprob: unknown }).logprob = "-0.5"
    })
  ],
  [
    "logprob NaN",
    broken((p) => {
      ;(firstChoice(p).logprobs!.content![7] as { logprob: number }).logprob = Number.NaN
    })
  ],
  [
    "bad top_logprobs entry",
    broken((p) => {
      ;(firstChoice(p).logprobs!.content![9] as { top_logprobs?: unknown }).top_logprobs = [{ token: 1 }]
    })
  ],
  [
    "excess key on a token",
    broken((p) => {
      ;(firstChoice(p).logprobs!.content![11] as { extra?: unknown }).extra = "dropped"
    })
  ],
  [
    "message without role",
    broken((p) => {
      delete (p.trajectory_groups[0]!.trajectories[0]!.messages_and_choices[1] as { role?: unknown }).role
    })
  ]
]
// the outcome of an encode: the message, or the JSON of the encoded value
const outcomeOf = (schema: Schema.Schema<CreateTrainingJob, Schema.Schema.Encoded<typeof CreateTrainingJob>>) => {
  const encode = Schema.encodeEither(schema)
  return (input: CreateTrainingJob) => {
    const result = encode(input)
    return result._tag === "Left" ? `rejected: ${result.left.message}` : `accepted: ${JSON.stringify(result.right)}`
  }
}
console.log("\nodd input: does each variant give the original's outcome (same issue message, or same JSON)?")
const originalOutcome = outcomeOf(CreateTrainingJob)
for (const [name, options] of variants.slice(1)) {
  const variantOutcome = outcomeOf(makeCreateTrainingJob(options))
  const verdicts = cases.map(([label, input]) => {
    const a = originalOutcome(input)
    const b = variantOutcome(input)
    return `${label}: ${a.slice(0, a.indexOf(":"))}${a === b ? ", same" : ", DIFFERS"}`
  })
  console.log(`  ${name}: ${verdicts.join("; ")}`)
}

// ---------------------------------------------------------------------------------------------------------
// 4. the library's own paths: the project's client (src/client: Schema.encodeUnknown, then JSON.stringify),
//    and the platform's HttpApiClient (encode, JSON.stringify, UTF-8 bytes) with a transport that keeps the
//    body and fails the call, so that nothing but building the request is timed
// ---------------------------------------------------------------------------------------------------------

const createTrainingJob = endpointCall(Api.createTrainingJob)
let sentBytes = 0
const transport = HttpClient.make((request) => {
  sentBytes = request.body._tag === "Uint8Array" ? request.body.body.byteLength : -1
  return Effect.fail(new HttpClientError.RequestError({ request, reason: "Transport", description: "bench" }))
})
const platformClient = Effect.runSync(
  HttpApiClient.makeWith(Api.TrainingApi, { httpClient: transport, baseUrl: "http://bench" })
)
const utf8 = new TextEncoder()
const library = interleave(
  [
    baselinePath,
    {
      name: "src/client endpointCall(createTrainingJob).prepare (encode, JSON)",
      run: () => Effect.runSync(createTrainingJob.prepare({ payload, retry: false })).body,
      check: same("src/client")
    },
    { name: "JSON.stringify + TextEncoder.encode", run: () => utf8.encode(JSON.stringify(payload)) },
    {
      name: "platform HttpApiClient createTrainingJob (encode, JSON, UTF-8)",
      run: () => Effect.runSync(Effect.either(platformClient.createTrainingJob({ payload }))),
      check: () => {
        if (sentBytes !== Buffer.byteLength(reference, "utf8")) throw new Error("HttpApiClient sent another body")
      }
    }
  ],
  rounds
)
console.log("\n4. the library's own paths (request building only)")
printTable([
  ["path", "median ms", "min ms", "MB/s", "x JSON.stringify", "(min/min)"],
  ...library.map((m) => [
    m.name,
    fmt(m.median),
    fmt(m.min),
    fmt(MB / (m.median / 1000)),
    `${fmt(m.ratio, 2)}x`,
    `${fmt(m.minRatio, 2)}x`
  ])
])
