#!/usr/bin/env node
// Completes package-lock.json with the optional platform packages (other OSes and CPUs) that this
// machine's registry does not serve. npm leaves such packages out of the lock file it writes, then
// `npm ci` rejects that same lock file as out of sync ("Missing: @biomejs/cli-darwin-arm64@ from lock
// file", npm/cli#9846). Listing them as optional entries lets `npm ci` accept the lock file; it then skips
// them (a failed optional package is not an error). Run after any `npm install` that changes the lock.
import { readFileSync, writeFileSync } from "node:fs"

const path = new URL("../package-lock.json", import.meta.url)
const lock = JSON.parse(readFileSync(path, "utf8"))
const packages = lock.packages
let added = 0
for (const [key, entry] of Object.entries(packages)) {
  for (const [name, range] of Object.entries(entry.optionalDependencies ?? {})) {
    const nested = `${key === "" ? "" : `${key}/`}node_modules/${name}`
    const hoisted = `node_modules/${name}`
    if (packages[nested] !== undefined || packages[hoisted] !== undefined) continue
    packages[hoisted] = { version: range.replace(/^[\^~=]/, ""), ...(entry.dev ? { dev: true } : {}), optional: true }
    added++
  }
}
lock.packages = Object.fromEntries(
  Object.entries(packages).sort(([a], [b]) => (a === "" ? -1 : b === "" ? 1 : a < b ? -1 : a > b ? 1 : 0))
)
writeFileSync(path, `${JSON.stringify(lock, null, 2)}\n`)
console.log(`lockfile-optional: ${added} optional platform entries added`)
