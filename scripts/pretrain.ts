/**
 * Pretrain the embedded engine's base models (`effect-rl/base-2k`, `effect-rl/base-wide-2k`) and write their
 * weights, checksum and record:
 *
 * ```sh
 * nice -n 10 npx tsx scripts/pretrain.ts                      # base-2k's shipped run, into assets/
 * nice -n 10 npx tsx scripts/pretrain.ts --run base-wide-2k   # base-wide-2k's, into assets/
 * npx tsx scripts/pretrain.ts --steps 40 --out /tmp/base.erlp # a shorter run elsewhere
 * npx tsx scripts/pretrain.ts --sample 3                      # print the first conversations of the corpus
 * ```
 *
 * Options: `--run name` (the shipped run whose options are the defaults and whose file is the default `--out`:
 * `base-2k`, the default, or `base-wide-2k`), `--seed n`, `--steps n`, `--stop-after n` (end after n steps of the `--steps` schedule), `--out file`
 * (default `assets/base-2k.erlp`), `--snapshots dir` (a checkpoint every 100 steps, to evaluate while it runs),
 * `--sample n`; to compare other runs (each defaults to the chosen run's): the shape (`--d-model n`, `--layers n`,
 * `--heads n`, `--ff n`), `--learning-rate x`, `--drill-steps n`, `--kernels wasm|js` (base-2k's run: js;
 * base-wide-2k's: wasm). Evaluate a file with
 * `npx tsx bench/base.ts --weights=<file> --rl=0`. Writes `<out>`, `<out>.sha256`
 * (`sha256sum` format) and `<out>.json` (the options, the checksum after the first steps, the time taken).
 * Single-threaded and deterministic: the same options give the same file bit for bit.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { basename, dirname, join } from "node:path"
import { parseArgs } from "node:util"
import { saveCheckpoint } from "../src/local/engine/policy/Checkpoint.js"
import { decode } from "../src/local/engine/Tokenizer.js"
import { Corpus } from "./pretrain/Corpus.js"
import { PREFIX_STEPS, type PretrainOptions, pretrain, RUNS, sha256 } from "./pretrain/Pretrain.js"

const { values } = parseArgs({
  options: {
    seed: { type: "string" },
    steps: { type: "string" },
    "stop-after": { type: "string" },
    out: { type: "string" },
    snapshots: { type: "string" },
    sample: { type: "string" },
    "d-model": { type: "string" },
    layers: { type: "string" },
    heads: { type: "string" },
    ff: { type: "string" },
    "learning-rate": { type: "string" },
    "drill-steps": { type: "string" },
    kernels: { type: "string" },
    run: { type: "string" }
  }
})

const run = RUNS.find((r) => r.model === `effect-rl/${values.run ?? "base-2k"}`)
if (run === undefined) {
  throw new Error(
    `--run must be one of ${RUNS.map((r) => r.model.replace("effect-rl/", "")).join(", ")}, got '${values.run}'`
  )
}
const SHIPPED_RUN = run.options

if (values.sample !== undefined) {
  const corpus = new Corpus(Number(values.seed ?? SHIPPED_RUN.seed))
  for (let i = 0; i < Number(values.sample); i++) {
    console.log(decode(corpus.nextRendered().ids, { skipSpecialTokens: false }))
  }
  process.exit(0)
}

function kernelsOf(name: string): "js" | "wasm" {
  if (name !== "js" && name !== "wasm") throw new Error(`--kernels must be js or wasm, got '${name}'`)
  return name
}

const options: PretrainOptions = {
  ...SHIPPED_RUN,
  seed: Number(values.seed ?? SHIPPED_RUN.seed),
  steps: Number(values.steps ?? SHIPPED_RUN.steps),
  config: {
    ...SHIPPED_RUN.config,
    dModel: Number(values["d-model"] ?? SHIPPED_RUN.config.dModel),
    nLayers: Number(values.layers ?? SHIPPED_RUN.config.nLayers),
    nHeads: Number(values.heads ?? SHIPPED_RUN.config.nHeads),
    dFf: Number(values.ff ?? SHIPPED_RUN.config.dFf)
  },
  learningRate: Number(values["learning-rate"] ?? SHIPPED_RUN.learningRate),
  drillSteps: Number(values["drill-steps"] ?? SHIPPED_RUN.drillSteps),
  ...(values.kernels === undefined ? {} : { kernels: kernelsOf(values.kernels) })
}
const stopAfter = Number(values["stop-after"] ?? options.steps)
const out = values.out ?? run.file
const started = performance.now()
let tokens = 0
let prefixSha256 = ""
let window = { a: 0, c: 0, k: 0, n: 0, tokens: 0, at: started }
if (values.snapshots !== undefined) mkdirSync(values.snapshots, { recursive: true })

const policy = pretrain(
  options,
  (report, policy) => {
    tokens += report.tokens
    window = {
      a: window.a + report.assistantLoss,
      c: window.c + report.contextLoss,
      k: window.k + report.copyLoss,
      n: window.n + 1,
      tokens: window.tokens + report.tokens,
      at: window.at
    }
    if (report.step === PREFIX_STEPS) prefixSha256 = sha256(saveCheckpoint(policy))
    if (report.step % 10 === 0 || report.step === options.steps) {
      const now = performance.now()
      console.log(
        `step ${report.step}/${options.steps}  assistant ${(window.a / window.n).toFixed(3)}  context ${(window.c / window.n).toFixed(3)}  copied ${(window.k / window.n).toFixed(3)}  lr ${report.learningRate.toExponential(2)}  ${Math.round(window.tokens / ((now - window.at) / 1000))} tok/s  ${((now - started) / 60000).toFixed(1)} min`
      )
      window = { a: 0, c: 0, k: 0, n: 0, tokens: 0, at: now }
    }
    if (values.snapshots !== undefined && report.step % 100 === 0) {
      writeFileSync(join(values.snapshots, `step${report.step}.erlp`), saveCheckpoint(policy))
    }
  },
  stopAfter
)

const bytes = saveCheckpoint(policy)
const checksum = sha256(bytes)
const seconds = (performance.now() - started) / 1000
mkdirSync(dirname(out), { recursive: true })
writeFileSync(out, bytes)
writeFileSync(`${out}.sha256`, `${checksum}  ${basename(out)}\n`)
writeFileSync(
  `${out}.json`,
  `${JSON.stringify(
    {
      model: run.model,
      sha256: checksum,
      bytes: bytes.length,
      options,
      stoppedAfter: Math.min(stopAfter, options.steps),
      prefix: { steps: PREFIX_STEPS, sha256: prefixSha256 },
      tokens,
      seconds: Math.round(seconds),
      tokensPerSecond: Math.round(tokens / seconds),
      node: process.version
    },
    null,
    2
  )}\n`
)
console.log(`${out}: ${bytes.length} bytes, sha256 ${checksum}, ${tokens} tokens in ${seconds.toFixed(0)} s`)
