import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

export default defineConfig({
  // Examples import the package by name, as users do; in tests that name is the sources, not a stale dist/.
  resolve: { alias: { "effect-rl": fileURLToPath(new URL("./src/index.ts", import.meta.url)) } },
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000
  }
})
