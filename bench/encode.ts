/**
 * Encode benchmark of the RL job body (`CreateTrainingJob`): how much the schema's encode costs next to a plain
 * `JSON.stringify` of the same payload.
 *
 *   npx tsx bench/encode.ts [--warmup=1] [--iterations=5] [--parse-json-iterations=3] [--groups=256]
 *
 * Paths, in one process and on one payload:
 *   (a) baseline      JSON.stringify(payload)
 *   (b) encode+JSON   JSON.stringify(Schema.encodeSync(CreateTrainingJob)(payload)): the library's path; the
 *                     client (src/client/internal/endpoint.ts) runs Schema.encodeUnknown with the endpoint's
 *                     payload schema, then JSON.stringify, as the platform HttpApiClient does too
 *   (c) parseJson     Schema.encodeSync(Schema.parseJson(CreateTrainingJob))(payload)
 *   (d) plain         (b) without the library's fast path for logprob entries (src/api/internal/fastPath.ts):
 *                     the same schema built from plain structs (bench/variants.ts), to show what the guard buys
 *
 * The paths run interleaved, in rounds (a, b, c, d, then again), so that a change of machine load hits all of
 * them alike; the "per round" ratio is the median of the ratios within a round. (a), (b) and (d) get `--warmup`
 * untimed rounds (one suffices: a single run of (b) calls the hot parser closures millions of times) and
 * `--iterations` timed ones. (c) compiles to the same parser as (b), warmed by then, so it gets no warm-up and
 * is timed in the first `--parse-json-iterations` rounds only; this keeps the whole run near a minute.
 * A full GC runs before every run (bench/harness.ts exposes `gc`).
 */
import { createRequire } from "node:module"
import * as Schema from "effect/Schema"
import { CreateTrainingJob } from "../src/api/TrainingJob.js"
import { defaultFixtureOptions, makePayload } from "./fixtures.js"
import { fmt, type InterleavedMeasurement, interleave, intFlag, median, printTable } from "./harness.js"
import { makeCreateTrainingJob } from "./variants.js"

const warmup = intFlag("warmup", 1)
const iterations = intFlag("iterations", 5)
const parseJsonIterations = intFlag("parse-json-iterations", 3)
const fixture = { ...defaultFixtureOptions, groups: intFlag("groups", defaultFixtureOptions.groups) }

const started = performance.now()

// ---------------------------------------------------------------------------------------------------------
// payload
// ---------------------------------------------------------------------------------------------------------

const buildStart = performance.now()
const payload = makePayload(fixture)
const buildMs = performance.now() - buildStart

const reference = JSON.stringify(payload)
const bytes = Buffer.byteLength(reference, "utf8")
const MB = bytes / 1e6

let trajectories = 0
let choices = 0
let tokens = 0
for (const group of payload.trajectory_groups) {
  for (const trajectory of group.trajectories) {
    trajectories++
    for (const entry of trajectory.messages_and_choices) {
      if ("logprobs" in entry) {
        choices++
        tokens += entry.logprobs?.content?.length ?? 0
      }
    }
  }
}

console.log("CreateTrainingJob encode benchmark")
console.log(
  `payload: ${fixture.groups} groups x ${fixture.trajectoriesPerGroup} trajectories x ${fixture.entriesPerTrajectory} entries` +
    ` = ${trajectories} trajectories, ${choices} choices, ${tokens} token logprobs (built in ${fmt(buildMs, 0)} ms)`
)
console.log(
  `JSON size: ${fmt(MB, 2)} MB (${bytes} bytes UTF-8, ${reference.length} UTF-16 code units); ` +
    `${warmup} warm-up + ${iterations} timed rounds for (a), (b), (d), 0 + ${parseJsonIterations} for (c), ` +
    "interleaved; full GC before each run"
)
const effectVersion = (createRequire(import.meta.url)("effect/package.json") as { version: string }).version
console.log(`node ${process.version}, effect ${effectVersion}`)
console.log("")

// every path must produce exactly the baseline's JSON (keys of the fixture are in the schema's order)
const sameJson = (path: string) => (json: unknown) => {
  if (json !== reference) throw new Error(`${path}: output differs from JSON.stringify(payload)`)
}

// ---------------------------------------------------------------------------------------------------------
// the paths
// ---------------------------------------------------------------------------------------------------------

// (b): the encoder is compiled once (effect also memoizes the compiled parser per AST); its two halves are timed
const encode = Schema.encodeSync(CreateTrainingJob)
const split = { encode: [] as Array<number>, stringify: [] as Array<number> }
const encodeThenStringify = (timed: boolean) => {
  const t0 = performance.now()
  const encoded = encode(payload)
  const t1 = performance.now()
  const json = JSON.stringify(encoded)
  const t2 = performance.now()
  if (timed) {
    split.encode.push(t1 - t0)
    split.stringify.push(t2 - t1)
  }
  return json
}

// (c): encode and stringify in one schema
const encodeJson = Schema.encodeSync(Schema.parseJson(CreateTrainingJob))

// (d): the same schema without the library's fast path for logprob entries (plain structs), to show its gain
const encodePlain = Schema.encodeSync(makeCreateTrainingJob({ tokens: "plain" }))

const [baseline, schemaPath, parseJsonPath, plainPath] = interleave(
  [
    { name: "(a) JSON.stringify(payload)", run: () => JSON.stringify(payload), check: sameJson("baseline") },
    {
      name: "(b) JSON.stringify(encodeSync(CreateTrainingJob)(payload))",
      run: encodeThenStringify,
      check: sameJson("encodeSync")
    },
    {
      name: "(c) encodeSync(parseJson(CreateTrainingJob))(payload)",
      run: () => encodeJson(payload),
      check: sameJson("parseJson"),
      warmup: 0,
      iterations: parseJsonIterations
    },
    {
      name: "(d) as (b), plain structs (no fast path)",
      run: () => JSON.stringify(encodePlain(payload)),
      check: sameJson("plain structs")
    }
  ],
  { warmup, iterations }
) as [InterleavedMeasurement, InterleavedMeasurement, InterleavedMeasurement, InterleavedMeasurement]
const encodeOnly = median(split.encode)
const stringifyOnly = median(split.stringify)

// ---------------------------------------------------------------------------------------------------------
// report
// ---------------------------------------------------------------------------------------------------------

const row = (m: InterleavedMeasurement): Array<string> => [
  m.name,
  String(m.samples.length),
  fmt(m.median),
  fmt(m.min),
  fmt(MB / (m.median / 1000)),
  `${fmt(m.median / baseline.median, 2)}x`,
  `${fmt(m.ratio, 2)}x`,
  `${fmt(m.minRatio, 2)}x`
]

printTable([
  ["path", "runs", "median ms", "min ms", "MB/s", "vs (a)", "per round", "min/min"],
  row(baseline),
  row(schemaPath),
  [
    "    (b) encodeSync alone",
    String(split.encode.length),
    fmt(encodeOnly),
    fmt(Math.min(...split.encode)),
    "",
    "",
    ""
  ],
  [
    "    (b) JSON.stringify(encoded) alone",
    String(split.stringify.length),
    fmt(stringifyOnly),
    fmt(Math.min(...split.stringify)),
    "",
    "",
    "",
    ""
  ],
  row(parseJsonPath),
  row(plainPath)
])

console.log("")
console.log(
  "vs (a): ratio of the medians; per round: median of the ratios to (a) within a round (robust to load changes); " +
    "min/min: fastest run over (a)'s fastest (least disturbed by other load)"
)
console.log(
  `ratio schema/baseline: encodeSync+JSON.stringify ${fmt(schemaPath.median / baseline.median, 2)}x ` +
    `(per round ${fmt(schemaPath.ratio, 2)}x, min/min ${fmt(schemaPath.minRatio, 2)}x), parseJson ${fmt(parseJsonPath.median / baseline.median, 2)}x ` +
    `(per round ${fmt(parseJsonPath.ratio, 2)}x, min/min ${fmt(parseJsonPath.minRatio, 2)}x); plain structs ${fmt(plainPath.median / baseline.median, 2)}x ` +
    `(per round ${fmt(plainPath.ratio, 2)}x, min/min ${fmt(plainPath.minRatio, 2)}x); aim: <= 2x`
)
console.log(
  `encodeSync alone: ${fmt(encodeOnly / baseline.median, 2)}x a baseline stringify, ` +
    `${fmt(tokens / (encodeOnly / 1000) / 1e6, 2)} M token logprobs/s`
)
console.log(`total wall time ${fmt((performance.now() - started) / 1000)} s`)
