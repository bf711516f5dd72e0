import { readFileSync } from "node:fs"
import { describe, expect, it } from "@effect/vitest"

interface LockEntry {
  readonly optionalDependencies?: Record<string, string>
}

describe("package-lock.json", () => {
  // `npm ci` rejects a lock file that lacks an optional platform package npm could not fetch (npm/cli#9846);
  // `npm run lockfile` adds them after an install that changed the lock file.
  it("lists every optional dependency, so that npm ci accepts it", () => {
    const lock = JSON.parse(readFileSync(new URL("../../package-lock.json", import.meta.url), "utf8")) as {
      packages: Record<string, LockEntry>
    }
    const missing: Array<string> = []
    for (const [key, entry] of Object.entries(lock.packages)) {
      for (const name of Object.keys(entry.optionalDependencies ?? {})) {
        const nested = `${key === "" ? "" : `${key}/`}node_modules/${name}`
        if (lock.packages[nested] === undefined && lock.packages[`node_modules/${name}`] === undefined) {
          missing.push(`${name} (optional dependency of ${key || "the package"})`)
        }
      }
    }
    expect(missing).toEqual([])
  })
})
