// @ts-check
/**
 * Stryker's configuration for one module of `test/mutation/` (`npm run test:mutation`, `scripts/mutation.mjs`):
 * the module's `mutate` globs are mutated and its `tests` run against each mutant, in one vitest project
 * (`vitest.mutation.config.ts`). The module comes from `EFFECT_RL_MUTATION_MODULE` (its file's name).
 */
import { readFileSync } from "node:fs"

const name = process.env.EFFECT_RL_MUTATION_MODULE
if (name === undefined || name === "") throw new Error("stryker.config.mjs: set EFFECT_RL_MUTATION_MODULE")
/** @type {{ readonly mutate: ReadonlyArray<string>; readonly tests: ReadonlyArray<string> }} */
const module = JSON.parse(readFileSync(new URL(`./test/mutation/${name}.json`, import.meta.url), "utf8"))
process.env.EFFECT_RL_MUTATION_TESTS = module.tests.join(",")

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: "vitest",
  vitest: { configFile: "vitest.mutation.config.ts", related: false },
  mutate: [...module.mutate],
  coverageAnalysis: "perTest",
  ignoreStatic: true,
  reporters: ["clear-text", "progress", "json"],
  jsonReporter: { fileName: `reports/mutation/${name}.json` },
  incremental: process.env.EFFECT_RL_MUTATION_INCREMENTAL === "1",
  incrementalFile: `reports/mutation/${name}.incremental.json`,
  concurrency: Number(process.env.EFFECT_RL_MUTATION_CONCURRENCY ?? 2),
  tempDirName: `.stryker-tmp/${name}`,
  timeoutMS: 10_000
}
