/**
 * The test run Stryker mutates against (`npm run test:mutation`, see `stryker.config.mjs`): `vitest.config.ts`'s
 * settings with one project of the test files named by the mutated module's entry in `test/mutation/`.
 */
import { defineConfig, mergeConfig } from "vitest/config"
import base from "./vitest.config.js"

const files = (process.env.EFFECT_RL_MUTATION_TESTS ?? "").split(",").filter((file) => file !== "")

export default mergeConfig(
  { ...base, test: { ...base.test, projects: undefined } },
  defineConfig({ test: { include: files } })
)
