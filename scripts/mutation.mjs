#!/usr/bin/env node
/**
 * `npm run test:mutation [-- <module>...]`: mutation testing (Stryker, with its vitest runner) of the modules
 * where a silent bug costs users most, one Stryker run per entry of `test/mutation/` (all of them, or those
 * named), and a table of killed / survived / no coverage per module at the end. Not part of `npm test`: a
 * module takes minutes. Reports: `reports/mutation/<module>.json` (and Stryker's clear-text output).
 *
 * Options: `--incremental` reuses the previous run's results for unchanged code and tests;
 * `--concurrency <n>` (default 2) test processes per run.
 */
import { spawnSync } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"

const root = new URL("..", import.meta.url)
const args = process.argv.slice(2)
const flag = (name) => args.includes(name)
const option = (name) => {
  const at = args.indexOf(name)
  return at === -1 ? undefined : args[at + 1]
}
const all = readdirSync(new URL("test/mutation/", root))
  .filter((file) => file.endsWith(".json"))
  .map((file) => file.slice(0, -".json".length))
  .sort()
const named = args.filter((arg, i) => !arg.startsWith("--") && args[i - 1] !== "--concurrency")
const unknown = named.filter((name) => !all.includes(name))
if (unknown.length > 0) {
  console.error(`test:mutation: no module ${unknown.join(", ")} in test/mutation/ (there: ${all.join(", ")})`)
  process.exit(2)
}
const modules = named.length > 0 ? named : all

const rows = []
let failed = false
for (const name of modules) {
  console.log(`\n== mutation testing: ${name}`)
  const run = spawnSync("npx", ["stryker", "run"], {
    cwd: root,
    stdio: "inherit",
    env: {
      ...process.env,
      EFFECT_RL_MUTATION_MODULE: name,
      EFFECT_RL_MUTATION_INCREMENTAL: flag("--incremental") ? "1" : "0",
      EFFECT_RL_MUTATION_CONCURRENCY: option("--concurrency") ?? "2"
    }
  })
  if (run.status !== 0) {
    failed = true
    rows.push({ name, error: `stryker exited ${run.status ?? run.signal}` })
    continue
  }
  const report = JSON.parse(readFileSync(new URL(`reports/mutation/${name}.json`, root), "utf8"))
  const count = { Killed: 0, Timeout: 0, Survived: 0, NoCoverage: 0, other: 0 }
  for (const file of Object.values(report.files)) {
    for (const mutant of file.mutants) {
      if (mutant.status in count) count[mutant.status]++
      else count.other++
    }
  }
  rows.push({ name, ...count })
}

console.log("\n| module | killed | timed out | survived | no coverage | score |")
console.log("| --- | --- | --- | --- | --- | --- |")
for (const row of rows) {
  if ("error" in row) {
    console.log(`| ${row.name} | ${row.error} | | | | |`)
    continue
  }
  const detected = row.Killed + row.Timeout
  const total = detected + row.Survived + row.NoCoverage
  const score = total === 0 ? "-" : `${((100 * detected) / total).toFixed(1)}%`
  console.log(`| ${row.name} | ${row.Killed} | ${row.Timeout} | ${row.Survived} | ${row.NoCoverage} | ${score} |`)
}
process.exit(failed ? 1 : 0)
