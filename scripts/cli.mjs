/**
 * Runs the `effect-rl` command from this checkout (what `npm start` and `npm run cli` run): the compiled bin
 * (`dist/bin/effect-rl.js`, the bundle of `dist/cli/main.js` that scripts/build-bin.mjs makes, what an installed
 * package runs) when it was built after the last change to the sources, else the sources through tsx. `npm ci`
 * builds `dist/` (the `prepare` script), so a fresh checkout starts the compiled bin, about 2 s sooner (tsx
 * compiles and resolves every module at each start); a checkout whose sources changed since its last build runs
 * them as they are, so an edit is never run stale.
 *
 *   node scripts/cli.mjs <command> [args...]
 */
import { readdirSync, statSync } from "node:fs"
import { join } from "node:path"
import { pathToFileURL } from "node:url"

const root = join(import.meta.dirname, "..")

/** The compiled bin (built last by `npm run build`, so its time is the build's). */
export const compiledCli = join(root, "dist", "bin", "effect-rl.js")

/** The bin's source. */
export const sourceCli = join(root, "src", "cli", "main.ts")

/** The newest modification time of the `.ts` files under `dir`, in milliseconds. */
const newest = (dir) => {
  let latest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) latest = Math.max(latest, newest(path))
    else if (entry.name.endsWith(".ts")) latest = Math.max(latest, statSync(path).mtimeMs)
  }
  return latest
}

/** Whether `dist/` was built after the last change to `src/` and `examples/` (see the module comment). */
export const compiledIsFresh = () => {
  try {
    const at = statSync(compiledCli).mtimeMs
    return at > newest(join(root, "src")) && at > newest(join(root, "examples"))
  } catch {
    return false
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  if (compiledIsFresh()) {
    await import(pathToFileURL(compiledCli).href)
  } else {
    const { register } = await import("tsx/esm/api")
    register()
    await import(pathToFileURL(sourceCli).href)
  }
}
