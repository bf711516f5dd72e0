/**
 * Importing the package loads none of the embedded backend: the root and every client and workflow module
 * load nothing under `src/local/` (nor SQLite, the HTTP server, Jinja or protobuf code) until a backend is
 * built. Each import runs in a fresh `node` process, its modules listed by the loader hooks of
 * scripts/import-trace.mjs: the compiled `dist/` (what the package ships) when it was built after the last change
 * to the sources, else the sources through tsx (see scripts/cli.mjs; a process starts in a third of the time).
 * `bench/import.ts` measures what the import costs.
 */
import { execFileSync, spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { compiledIsFresh } from "../../scripts/cli.mjs"

const root = join(import.meta.dirname, "..", "..")

const compiled = compiledIsFresh()
/** The loader flags for the modules run: tsx for the sources, none for `dist/`. */
const loader = compiled ? [] : ["--import", "tsx/esm"]
/** A module of the package by its path under `src/` without extension (e.g. `workflow/Gather`), as imported. */
const mod = (path: string) => (compiled ? `./dist/${path}.js` : `./src/${path}.ts`)
/** Whether a loaded URL is the module at `path` (as {@link mod} names it). */
const isMod = (url: string, path: string) => url.endsWith(mod(path).slice(1))

/** The modules a fresh process loads to run `code` (an ES module body). */
const modulesOf = (code: string): ReadonlyArray<string> => {
  const dir = mkdtempSync(join(tmpdir(), "effect-rl-imports-"))
  const trace = join(dir, "modules.txt")
  try {
    execFileSync(
      process.execPath,
      [...loader, "--import", "./scripts/import-trace.mjs", "--input-type=module", "-e", code],
      { cwd: root, env: { ...process.env, IMPORT_TRACE_FILE: trace }, encoding: "utf8" }
    )
    return readFileSync(trace, "utf8")
      .split("\n")
      .filter((line) => line !== "")
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

const backendParts =
  /\/(src|dist)\/local\/|better-sqlite3|sql-sqlite-node|NodeHttpServer|HttpApiBuilder|@huggingface\/jinja|protobufjs|otlpProtobuf/

/** The optional peer dependencies: only the subpath modules made for them may load them. */
const optionalPeers =
  /\/node_modules\/(openai|@effect\/ai|@effect\/cluster|@effect\/rpc|@effect\/workflow|@effect\/sql-pg|pg|@modelcontextprotocol\/sdk)\//

/** The cluster: only `RolloutCluster` (and what it loads) may load it. */
const clusterParts =
  /\/node_modules\/(@effect\/cluster|@effect\/rpc|@effect\/workflow|@effect\/sql-pg|pg)\/|NodeCluster|\/src\/workflow\/(RolloutCluster|internal\/cluster)\.ts/

const light = [
  "index",
  "Backend",
  "LocalBackend",
  "client/TrainingClient",
  "client/InferenceClient",
  "client/ChatStream",
  "client/TraceClient",
  "workflow/Policy",
  "workflow/Rollout",
  "workflow/Reward",
  "workflow/Gather",
  "workflow/Trainer",
  "workflow/TrainingLoop",
  "workflow/Tracing",
  "workflow/Tools",
  "workflow/RolloutAgent",
  "workflow/McpTools"
]

describe("imports", () => {
  it("the package root and the client and workflow modules load nothing of the embedded backend", {
    timeout: 120_000
  }, () => {
    const code = light.map((m) => `await import("${mod(m)}")`).join("; ")
    const modules = modulesOf(code)
    // The trace saw the sources load (so an empty list cannot pass for a clean one).
    expect(modules.some((url) => isMod(url, "workflow/TrainingLoop"))).toBe(true)
    expect(modules.filter((url) => backendParts.test(url))).toEqual([])
    expect(modules.filter((url) => optionalPeers.test(url))).toEqual([])
  })

  it("a training loop that asks for no cluster loads none of it", { timeout: 120_000 }, () => {
    const modules = modulesOf(
      `const { Backend, Policy, TrainingLoop } = await import("${mod("index")}"); const { Effect } = await import("effect");
       await Effect.runPromise(Effect.gen(function* () {
         const policy = yield* Policy.trainable({ project: "imports", name: "loop", base_model: "effect-rl/tiny" })
         yield* TrainingLoop.run({ policy, scenarios: ["a"], rollout: () => Effect.succeed(1), reward: () => Effect.succeed(1),
           groupsPerStep: 1, rolloutsPerGroup: 2, steps: 1, state: false })
       }).pipe(Effect.provide(Backend.local())))`
    )
    expect(modules.some((url) => isMod(url, "workflow/internal/gather"))).toBe(true)
    expect(modules.filter((url) => clusterParts.test(url))).toEqual([])
  })

  it("RolloutCluster loads the cluster (the checks above would see it)", { timeout: 120_000 }, () => {
    const modules = modulesOf(
      `const RolloutCluster = await import("${mod("workflow/RolloutCluster")}"); const { Effect, Layer } = await import("effect");
       await Effect.runPromise(Effect.scoped(Layer.build(RolloutCluster.layer({ cluster: "sqlite::memory:", agents: [] }))))`
    )
    expect(modules.some((url) => /\/node_modules\/@effect\/cluster\//.test(url))).toBe(true)
    expect(modules.some((url) => /NodeClusterSocket/.test(url))).toBe(true)
  })

  it("the agent layers load their optional peers (the check above would see them)", { timeout: 120_000 }, () => {
    const modules = modulesOf(
      `await import("${mod("workflow/RolloutModel")}"); await import("${mod("workflow/RolloutOpenAI")}")`
    )
    expect(modules.some((url) => /\/node_modules\/openai\//.test(url))).toBe(true)
    expect(modules.some((url) => /\/node_modules\/@effect\/ai\//.test(url))).toBe(true)
    expect(modules.filter((url) => backendParts.test(url))).toEqual([])
  })

  it("the command's --help and health load neither the server nor the engine", { timeout: 120_000 }, () => {
    const dir = mkdtempSync(join(tmpdir(), "effect-rl-imports-"))
    const trace = join(dir, "modules.txt")
    try {
      for (const args of [["--help"], ["health"], ["serve", "--help"], ["runner", "--help"]]) {
        const { WANDB_API_KEY: _, EFFECT_RL_TRAINING_URL: __, ...env } = process.env
        spawnSync(
          process.execPath,
          [...loader, "--import", "./scripts/import-trace.mjs", mod("cli/main").slice(2), ...args],
          { cwd: root, env: { ...env, IMPORT_TRACE_FILE: trace }, encoding: "utf8" }
        )
      }
      const modules = readFileSync(trace, "utf8")
        .split("\n")
        .filter((line) => line !== "")
      expect(modules.some((url) => isMod(url, "cli/main"))).toBe(true)
      expect(modules.filter((url) => backendParts.test(url))).toEqual([])
      expect(modules.filter((url) => clusterParts.test(url))).toEqual([])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("building Backend.local() loads the backend (the check above would see it)", { timeout: 120_000 }, () => {
    const modules = modulesOf(
      `const { Backend } = await import("${mod("index")}"); const { Effect, Layer } = await import("effect");
       await Effect.runPromise(Effect.scoped(Layer.build(Backend.local())))`
    )
    expect(modules.some((url) => isMod(url, "local/server/Server"))).toBe(true)
    expect(modules.some((url) => /better-sqlite3/.test(url))).toBe(true)
  })
})
