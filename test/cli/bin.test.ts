/**
 * The bundled command (`dist/bin/`, scripts/build-bin.mjs), which an installed package and `npm start` run: it runs
 * (the unbundled one when a module of the user's is to be loaded),
 * the examples' registry is inside it, it holds one copy of `effect` (the examples' imports of `effect-rl` bundled
 * with the command's own, not beside them), and the package's modules in it find their files where they were. Its
 * training runs are the slow tests' (`test/examples/cli-train.slow.test.ts`), through the same bin.
 */
import { spawnSync } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { compiledCli, compiledIsFresh } from "../../scripts/cli.mjs"
import { runCli, usesCompiledCli } from "../support/cli.js"

const root = join(import.meta.dirname, "..", "..")
const bin = join(root, "dist", "bin")
const fresh = compiledIsFresh()
if (!fresh) console.warn(`SKIPPED: ${compiledCli} is missing or older than src/: run \`npm run build\``)

/** The bundle's files and their text. */
const files = () =>
  readdirSync(bin)
    .filter((name) => name.endsWith(".js"))
    .map((name) => ({ name, text: readFileSync(join(bin, name), "utf8") }))

describe.skipIf(!fresh)("the bundled effect-rl command", () => {
  it("is what the tests and npm start run, and package.json's bin", () => {
    expect(usesCompiledCli).toBe(true)
    const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { bin: Record<string, string> }
    expect(join(root, pkg.bin["effect-rl"]!)).toBe(compiledCli)
  })

  it("prints its version, and the examples it trains (the registry is bundled)", async () => {
    const env = { PATH: process.env.PATH }
    const version = await runCli(["--version"], env)
    const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }
    expect(version.code).toBe(0)
    expect(version.stdout.trim()).toBe(pkg.version)
    const list = await runCli(["train"], env)
    expect(list.code).toBe(0)
    expect(list.stdout).toMatch(/^examples: .*\btictactoe\b/)
  })

  it("starts the bundle, or the unbundled command when a module of the user's is to be loaded", () => {
    const loaded = (...args: ReadonlyArray<string>) => {
      const dir = mkdtempSync(join(tmpdir(), "effect-rl-bin-"))
      const trace = join(dir, "modules.txt")
      try {
        spawnSync(process.execPath, ["--import", join(root, "scripts", "import-trace.mjs"), compiledCli, ...args], {
          cwd: dir,
          env: { PATH: process.env.PATH, IMPORT_TRACE_FILE: trace },
          stdio: "ignore"
        })
        const urls = readFileSync(trace, "utf8")
        return { bundle: urls.includes("/dist/bin/command.js"), unbundled: urls.includes("/dist/cli/main.js") }
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }
    expect(loaded("--version")).toEqual({ bundle: true, unbundled: false })
    // The user's module (missing here: the command says so) would import effect-rl and effect from node_modules.
    expect(loaded("runner", "--cluster", "sqlite:x.db", "--agents", "agents.mjs")).toEqual({
      bundle: false,
      unbundled: true
    })
    expect(loaded("train-agent", "node agent.mjs", "--reward=reward.mjs")).toEqual({ bundle: false, unbundled: true })
  })

  it("holds one copy of effect's core and of each module of this package, the compiled one", () => {
    const copies = files().filter(({ text }) => /\b(?:const|let|var) globalStoreId = `effect\/GlobalValue`/.test(text))
    expect(copies.map(({ name }) => name)).toHaveLength(1)
    // esbuild heads each module it bundles with a comment naming its file (the bundle is not minified; a module
    // whose exports are imported as a namespace is headed twice, in the one file that holds it).
    const holders = new Map<string, Set<string>>()
    for (const { name, text } of files()) {
      for (const line of text.match(/^\/\/ (?:src|dist|examples)\/\S+$/gm) ?? []) {
        holders.set(line, (holders.get(line) ?? new Set()).add(name))
      }
    }
    expect([...holders.keys()].filter((line) => !line.startsWith("// dist/"))).toEqual([])
    expect(holders.size).toBeGreaterThan(100)
    expect([...holders].filter(([, names]) => names.size > 1).map(([line]) => line)).toEqual([])
  })

  it("keeps each package module's own URL (what finds the weights, the dashboard, SQLite)", () => {
    const all = files()
      .map(({ text }) => text)
      .join("\n")
    for (const module of [
      "dist/cli/main.js",
      "dist/local/server/internal/baseModels.js",
      "dist/local/server/internal/assets.js",
      "dist/local/store/Integrity.js",
      "dist/local/store/Backup.js"
    ]) {
      expect(all.includes(`__effectRlModuleUrl(${JSON.stringify(module)})`), module).toBe(true)
    }
    expect(all.includes("registry, import.meta.url")).toBe(false)
  })

  it("starts its threads on its own entries for them", () => {
    const all = files()
      .map(({ text }) => text)
      .join("\n")
    for (const entry of ["thread-decoding", "thread-training"]) {
      expect(files().map(({ name }) => name)).toContain(`${entry}.js`)
      expect(all.includes(`startModuleThread(new URL("./${entry}.js", import.meta.url).href`), entry).toBe(true)
    }
    expect(all.includes("startModuleThread(import.meta.url")).toBe(false)
  })
})
