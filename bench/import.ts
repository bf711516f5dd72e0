/**
 * What importing the package costs a program that only talks to the hosted service: modules loaded,
 * milliseconds and resident memory of `import "effect-rl"` (the built `dist/`, as an installed package loads
 * it), against `effect` plus `@effect/platform-node` alone (their package roots, as a program imports them);
 * the root import after those two (what it adds to such a program); and building `Backend.local()` on top.
 *
 *   npm run build && npx tsx bench/import.ts [--runs=7]
 *
 * Each sample is a fresh `node` process (nothing cached), the paths interleaved run by run; the child times
 * its own `import()` with `performance.now()`. The modules are counted in one more process per path, through
 * the loader hooks of scripts/import-trace.mjs (not in the timed ones: the hooks slow each module down). The table gives medians; "vs baseline" is the median of the per-run differences.
 * It also lists what of the embedded backend each path loaded (`dist/local/`, SQLite, the HTTP server, Jinja,
 * protobuf), which for the root import must be nothing.
 */
import { execFileSync } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fmt, intFlag, median, printTable } from "./harness.js"

const root = join(import.meta.dirname, "..")
const runs = intFlag("runs", 7)
if (!existsSync(join(root, "dist", "index.js"))) {
  console.error("bench/import: dist/ is missing: run `npm run build` first")
  process.exit(1)
}

/** The embedded backend's heavy parts, as module URLs show them. */
const HEAVY: ReadonlyArray<readonly [string, RegExp]> = [
  ["dist/local/", /\/dist\/local\//],
  ["SQLite", /better-sqlite3|sql-sqlite-node/],
  ["HTTP server", /NodeHttpServer|HttpApiBuilder/],
  ["Jinja", /@huggingface\/jinja/],
  ["protobuf", /protobufjs|otlpProtobuf/]
]

const paths: ReadonlyArray<readonly [string, string]> = [
  ["baseline: effect + @effect/platform-node", `await import("effect"); await import("@effect/platform-node")`],
  ["import effect-rl", `await import("effect-rl")`],
  [
    "baseline, then effect-rl (a user's program)",
    `await import("effect"); await import("@effect/platform-node"); await import("effect-rl")`
  ],
  [
    "effect-rl + Backend.local() built",
    `const { Backend } = await import("effect-rl"); const { Effect, Layer } = await import("effect");
     await Effect.runPromise(Effect.scoped(Layer.build(Backend.local())))`
  ]
]

interface Sample {
  readonly ms: number
  readonly rssMb: number
}

/** One fresh process running `code`: its own timing of it, and its RSS after. */
const sample = (code: string): Sample => {
  const script = `const t = performance.now(); ${code}; const ms = performance.now() - t;
    console.log(JSON.stringify({ ms, rssMb: process.memoryUsage().rss / 2 ** 20 }))`
  const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], { cwd: root, encoding: "utf8" })
  return JSON.parse(out.trim().split("\n").at(-1)!) as Sample
}

/** The modules `code` loads, counted in a separate process (the loader hooks slow each module down). */
const modulesOf = (code: string): ReadonlyArray<string> => {
  const dir = mkdtempSync(join(tmpdir(), "effect-rl-import-"))
  const trace = join(dir, "modules.txt")
  try {
    execFileSync(
      process.execPath,
      ["--import", join(root, "scripts", "import-trace.mjs"), "--input-type=module", "-e", code],
      { cwd: root, env: { ...process.env, IMPORT_TRACE_FILE: trace }, encoding: "utf8" }
    )
    return existsSync(trace)
      ? readFileSync(trace, "utf8")
          .split("\n")
          .filter((l) => l !== "")
      : []
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

const modules = paths.map(([, code]) => modulesOf(code))
const samples: Array<Array<Sample>> = paths.map(() => [])
for (let run = 0; run < runs + 1; run++) {
  for (const [i, [, code]] of paths.entries()) {
    const s = sample(code)
    if (run > 0) samples[i]!.push(s) // the first round warms the file system cache
  }
}

console.log(
  `import cost, node ${process.version}, ${runs} fresh processes per path (interleaved, after one warm-up round)`
)
const base = samples[0]!
const rows = paths.map(([name], i) => {
  const mine = samples[i]!
  const deltas = mine.map((s, k) => s.ms - base[k]!.ms)
  const heavy = HEAVY.filter(([, pattern]) => modules[i]!.some((url) => pattern.test(url))).map(([n]) => n)
  return [
    name,
    String(modules[i]!.length),
    fmt(median(mine.map((s) => s.ms))),
    i === 0 ? "" : `${median(deltas) >= 0 ? "+" : ""}${fmt(median(deltas))}`,
    fmt(median(mine.map((s) => s.rssMb))),
    heavy.length === 0 ? "none" : heavy.join(", ")
  ]
})
printTable([["path", "modules", "import ms", "vs baseline", "RSS MB", "backend parts loaded"], ...rows])
const alone = rows[1]!
const added = rows[2]!
console.log(
  `goal: the root import adds at most 80 ms to a program that loads effect and @effect/platform-node, and loads none of the backend: ${added[3]} ms (alone: ${alone[3]} ms against the baseline), backend parts: ${alone[5]}`
)
