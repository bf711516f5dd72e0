/**
 * Runs before every test file. `layer(...)` of `@effect/vitest` installs its own `effect`, `scoped`, `layer`,
 * `prop` and `flakyTest` on vitest's shared `it` object (the one every file imports), and never puts the
 * originals back. With `isolate: false` (see `vitest.config.ts`) a worker keeps that object from file to file,
 * so without this a later file's `it.effect` would run in an earlier file's layer, without the test services
 * (TestClock) and with services it never asked for. The methods as first imported are kept on `globalThis`
 * (which outlives a file) and put back before each file.
 */
import { it } from "@effect/vitest"

const KEY = Symbol.for("effect-rl/test/it-methods")
const store = globalThis as { [KEY]?: Record<string, unknown> }
store[KEY] ??= { ...it }
Object.assign(it, store[KEY])
