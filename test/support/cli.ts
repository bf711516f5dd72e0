/**
 * How the tests run the `effect-rl` command as a process: the compiled bin (`dist/cli/main.js`, what an installed
 * package runs) when it was built after the last change to the sources, else the sources through tsx. `npm ci`
 * builds `dist/` (the `prepare` script), so a fresh checkout and CI run the compiled bin, which starts in about
 * a third of the time (tsx compiles and resolves every module at each start: some 1.3 s a process here); a
 * checkout whose sources changed since its last build runs them as they are.
 */
import { readdirSync, statSync } from "node:fs"
import { join } from "node:path"

const root = join(import.meta.dirname, "..", "..")
const compiled = join(root, "dist", "cli", "main.js")
const source = join(root, "src", "cli", "main.ts")

/** The newest modification time of the `.ts` files under `dir`, in milliseconds. */
const newest = (dir: string): number => {
  let latest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) latest = Math.max(latest, newest(path))
    else if (entry.name.endsWith(".ts")) latest = Math.max(latest, statSync(path).mtimeMs)
  }
  return latest
}

const built = (): boolean => {
  try {
    const at = statSync(compiled).mtimeMs
    return at > newest(join(root, "src")) && at > newest(join(root, "examples"))
  } catch {
    return false
  }
}

/** Whether the tests run the compiled bin (see the module comment). */
export const usesCompiledCli = built()

/** Node's arguments that run `effect-rl <args>` (with `process.execPath`, from the repository's root). */
export const cliArgs = (...args: ReadonlyArray<string>): Array<string> =>
  usesCompiledCli ? [compiled, ...args] : ["--import", "tsx", source, ...args]

/** The same as one shell word list (for `sh -c`), paths quoted. */
export const cliShell = (...args: ReadonlyArray<string>): string =>
  [process.execPath, ...cliArgs(...args)].map((word) => `"${word}"`).join(" ")
