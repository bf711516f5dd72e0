/**
 * How the tests run the `effect-rl` command as a process: the compiled bin (`dist/bin/effect-rl.js`, the bundle
 * of `dist/cli/main.js`, what an installed package runs) when it was built after the last change to the sources, else the sources through tsx. `npm ci`
 * builds `dist/` (the `prepare` script), so a fresh checkout and CI run the compiled bin, which starts in about
 * a third of the time (tsx compiles and resolves every module at each start: some 1.3 s a process here); a
 * checkout whose sources changed since its last build runs them as they are. The check is `scripts/cli.mjs`'s,
 * which `npm start` runs the same way.
 */
import { spawn } from "node:child_process"
import { join } from "node:path"
import { compiledCli, compiledIsFresh, sourceCli } from "../../scripts/cli.mjs"

/** Whether the tests run the compiled bin (see the module comment). */
export const usesCompiledCli = compiledIsFresh()

/** Node's arguments that run `effect-rl <args>` (with `process.execPath`, from the repository's root). */
export const cliArgs = (...args: ReadonlyArray<string>): Array<string> =>
  usesCompiledCli ? [compiledCli, ...args] : ["--import", "tsx", sourceCli, ...args]

/** The same as one shell word list (for `sh -c`), paths quoted. */
export const cliShell = (...args: ReadonlyArray<string>): string =>
  [process.execPath, ...cliArgs(...args)].map((word) => `"${word}"`).join(" ")

/** What a run of the command left: its exit code and its output. */
export interface CliOutcome {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const root = join(import.meta.dirname, "..", "..")

/** Runs `effect-rl <args>` to its end from the repository's root, with exactly `env`; stdout and stderr piped. */
export const runCli = (args: ReadonlyArray<string>, env: NodeJS.ProcessEnv): Promise<CliOutcome> =>
  new Promise((resolve) => {
    const child = spawn(process.execPath, cliArgs(...args), { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk) => {
      stdout += chunk
    })
    child.stderr.on("data", (chunk) => {
      stderr += chunk
    })
    child.once("exit", (code) => resolve({ code, stdout, stderr }))
  })
