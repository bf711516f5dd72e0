/**
 * The data directory checks' cost: SQLite's `quick_check` (what `serve` and `LocalBackend` run at start,
 * bounded by `Store.START_CHECK_MS`), the full check (`integrity_check` and every checkpoint's digest, what
 * `effect-rl check` runs) and a backup (`VACUUM INTO`), on a data directory of about `--mb` megabytes of
 * checkpoints (default 100), made here with random weights.
 *
 * Run: `npm run bench:integrity [-- --mb 100]`.
 */
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Effect from "effect/Effect"
import * as Backup from "../src/local/store/Backup.js"
import { Checkpoints } from "../src/local/store/Checkpoints.js"
import * as Database from "../src/local/store/Database.js"
import * as Integrity from "../src/local/store/Integrity.js"
import { Models } from "../src/local/store/Models.js"
import * as Store from "../src/local/store/Store.js"

const arg = process.argv.indexOf("--mb")
const megabytes = arg === -1 ? 100 : Number(process.argv[arg + 1])
const CHECKPOINT = 1024 * 1024

const program = Effect.gen(function* () {
  const dataDir = mkdtempSync(join(tmpdir(), "effect-rl-bench-integrity-"))
  yield* Effect.gen(function* () {
    const models = yield* Models
    const checkpoints = yield* Checkpoints
    for (let m = 0; m * 10 < megabytes; m++) {
      const { model } = yield* models.create({
        entity: "bench",
        project: "p",
        name: `m${m}`,
        base_model: "effect-rl/tiny"
      })
      for (let step = 0; step < 10 && m * 10 + step < megabytes; step++) {
        yield* checkpoints.insert(model.id, { step, weights: new Uint8Array(randomBytes(CHECKPOINT)) })
      }
    }
  }).pipe(Effect.provide(Store.layer({ dataDir })), Effect.scoped, Effect.orDie)
  const file = Database.filename(dataDir)
  const size = statSync(file).size / (1024 * 1024)
  const quick = yield* Integrity.check(file, "quick")
  const full = yield* Integrity.check(file, "full")
  const opened = performance.now()
  yield* Effect.void.pipe(Effect.provide(Store.layer({ dataDir })), Effect.scoped, Effect.orDie)
  const openSeconds = (performance.now() - opened) / 1000
  const backup = yield* Backup.write(dataDir, join(dataDir, "backup.sqlite"))
  console.log(`data directory: ${size.toFixed(1)} MB database (${megabytes} checkpoints of 1 MB)`)
  console.log(`quick_check (start-up check): ${quick.seconds.toFixed(2)} s, ${quick._tag}`)
  console.log(
    `full check (integrity_check + ${full._tag === "Ok" ? full.checkpoints : "?"} digests): ${full.seconds.toFixed(2)} s, ${full._tag}`
  )
  console.log(`store opened (lock, quick_check, migrations, recovery): ${openSeconds.toFixed(2)} s`)
  console.log(`backup (VACUUM INTO): ${backup.seconds.toFixed(2)} s, ${(backup.bytes / (1024 * 1024)).toFixed(1)} MB`)
  rmSync(dataDir, { recursive: true, force: true })
})

Effect.runPromise(program)
