/**
 * How long the `effect-rl` command takes to start: `effect-rl --version` as a fresh process, the bundled bin
 * (`dist/bin/effect-rl.js`, what an installed package and `npm start` run; scripts/build-bin.mjs) against the
 * unbundled module it is built from (`dist/cli/main.js`), alternating, wall milliseconds (min, median, max) and the
 * median of the per-pair ratios bundled / unbundled.
 *
 *   npm run build && npx tsx bench/cliStart.ts [--runs=10]
 */
import { execFileSync } from "node:child_process"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { fmt, intFlag, median, printTable } from "./harness.js"

const root = join(import.meta.dirname, "..")
const runs = intFlag("runs", 10)
const ways = { bundled: join(root, "dist", "bin", "effect-rl.js"), unbundled: join(root, "dist", "cli", "main.js") }
for (const file of Object.values(ways)) {
  if (!existsSync(file)) {
    console.error(`bench/cliStart: ${file} is missing: run \`npm run build\` first`)
    process.exit(1)
  }
}

/** Wall milliseconds of one `node <file> --version`. */
const once = (file: string): number => {
  const started = performance.now()
  execFileSync(process.execPath, [file, "--version"], { stdio: "ignore" })
  return performance.now() - started
}

once(ways.bundled)
once(ways.unbundled)
const times: Record<keyof typeof ways, Array<number>> = { bundled: [], unbundled: [] }
const ratios: Array<number> = []
for (let run = 0; run < runs; run++) {
  const order = run % 2 === 0 ? (["bundled", "unbundled"] as const) : (["unbundled", "bundled"] as const)
  const got = { bundled: 0, unbundled: 0 }
  for (const way of order) got[way] = once(ways[way])
  times.bundled.push(got.bundled)
  times.unbundled.push(got.unbundled)
  ratios.push(got.bundled / got.unbundled)
}
const row = (way: keyof typeof ways) => [
  way,
  fmt(Math.min(...times[way]), 0),
  fmt(median(times[way]), 0),
  fmt(Math.max(...times[way]), 0)
]
printTable([["effect-rl --version", "min ms", "median ms", "max ms"], row("bundled"), row("unbundled")])
console.log(
  `bundled / unbundled: ${fmt(median(ratios), 2)} (${fmt(Math.min(...ratios), 2)}-${fmt(Math.max(...ratios), 2)}), ${runs} pairs`
)
