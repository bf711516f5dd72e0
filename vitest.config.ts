/**
 * The test runner's configuration: two projects over `test/**`, which differ only in module isolation.
 *
 * - `shared` (most files): a worker imports Effect, the platform and the sources once and runs file after file
 *   on them (`isolate: false`). Loading those modules again for every file cost more CPU than the tests
 *   themselves (about 4 s per file on a loaded 2-core machine, against under 0.5 s shared).
 * - `isolated`: files that change process-global state (environment variables, globals, third-party SDKs
 *   that install their own hooks) each run in a fresh worker thread, so nothing they change leaks into another
 *   file. A new test file that touches `process.env`, `globalThis` or a global telemetry provider belongs here.
 *
 * - `slow`: files named `*.slow.test.ts` (agents learning over several steps in child processes, a loop killed and
 *   restarted, a full disk, the command run as a user runs it, process after process, and the like),
 *   run by `npm run test:slow` rather than `npm test`, which they would take past its few minutes. CI runs both.
 *
 * `npm test` runs `shared` and `isolated` on two workers (`--maxWorkers=2`): vitest's default on a 2-core machine is
 * one (its CPUs less one), which ran the files one after another (6 min here, 4.3 on two; every file passed both
 * ways). The slow tier keeps the default: its agents learn against time limits.
 *
 * `test/support/setup.ts` undoes, before each file, what `@effect/vitest`'s `layer` leaves on the shared `it`.
 */
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

const source = (path: string) => fileURLToPath(new URL(path, import.meta.url))

/** Each subpath export of the package (`effect-rl/RolloutModel`), by its source (`src/workflow/RolloutModel.ts`). */
const subpaths = Object.entries(
  (JSON.parse(readFileSync(source("./package.json"), "utf8")) as { exports: Record<string, unknown> }).exports
).flatMap(([key, target]) =>
  key.startsWith("./") && typeof target === "object" && target !== null && "default" in target
    ? [
        {
          find: `effect-rl/${key.slice(2)}`,
          replacement: source(
            String(target.default)
              .replace(/^\.\/dist\//, "./src/")
              .replace(/\.js$/, ".ts")
          )
        }
      ]
    : []
)

const ISOLATED = [
  "test/server/weave-*.test.ts",
  "test/server/trace-otel.test.ts",
  "test/workflow/Tracing.test.ts",
  "test/server/training-thread-start.test.ts"
]
const SLOW = ["test/**/*.slow.test.ts"]

export default defineConfig({
  // Examples import the package by name, as users do; in tests that name is the sources, not a stale dist/.
  resolve: { alias: [...subpaths, { find: /^effect-rl$/, replacement: source("./src/index.ts") }] },
  test: {
    testTimeout: 30_000,
    // A layer's setup (a real server, its store and its threads) gets a test's time: on two workers, one file's
    // server start took past vitest's default 10 s while the other worker ran a CPU-bound file (CI, trace-calls).
    hookTimeout: 30_000,
    // Builds the dashboard's bundle (dist/ui/) once per run, so the server never serves a stale one.
    globalSetup: ["test/support/buildUi.ts"],
    setupFiles: ["test/support/setup.ts"],
    // Worker reuse is decided per pool, for the whole run: forks are shared, threads isolated.
    poolOptions: { forks: { isolate: false }, threads: { isolate: true } },
    projects: [
      {
        extends: true,
        test: { name: "shared", include: ["test/**/*.test.ts"], exclude: [...ISOLATED, ...SLOW], pool: "forks" }
      },
      { extends: true, test: { name: "isolated", include: ISOLATED, pool: "threads" } },
      { extends: true, test: { name: "slow", include: SLOW, pool: "forks" } }
    ]
  }
})
