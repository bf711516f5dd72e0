/**
 * The data directory's commands: `effect-rl check [--data-dir <dir>]` runs the full check of its database
 * (SQLite's `integrity_check` and every checkpoint's weights against their digest, see `Integrity`), and
 * `effect-rl backup <file> [--data-dir <dir>]` writes a consistent copy of it (see `Backup`). Both work while a
 * server runs on the directory: they open the database read-only, without its lock.
 *
 * @since 0.1.0
 */
import { homedir } from "node:os"
import { join, resolve } from "node:path"
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { failed } from "./failure.js"
import { describe, table } from "./help.js"

const dataDirOption = Options.directory("data-dir").pipe(
  Options.withPseudoName("dir"),
  Options.withDefault(join(homedir(), ".effect-rl")),
  describe("the data directory (default ~/.effect-rl, as serve's)")
)

/** `effect-rl check`'s table (its options and help). */
export const checkTable = table(
  "check",
  "check a data directory's database in full: SQLite's integrity_check and every checkpoint's digest",
  { dataDir: dataDirOption }
)

/** `effect-rl check`: exit code 0 when nothing is damaged, 1 (with what and how to recover) when something is. */
export const check = Command.make("check", checkTable.config, ({ dataDir }) =>
  Effect.gen(function* () {
    const [Database, Integrity] = yield* Effect.promise(() =>
      Promise.all([import("../local/store/Database.js"), import("../local/store/Integrity.js")])
    )
    const file = Database.filename(resolve(dataDir))
    const result = yield* Integrity.check(file, "full")
    if (result._tag === "Damaged") {
      for (const problem of result.problems) yield* Console.log(`damaged: ${problem}`)
      return yield* Effect.fail(
        failed(`${file} is damaged (${result.problems.length} finding(s) above); ${Integrity.recoveryAdvice(file)}`)
      )
    }
    if (result._tag === "Ok") {
      yield* Console.log(
        `${file}: ok (integrity_check, ${result.checkpoints} checkpoint digest(s); ${result.seconds.toFixed(2)} s)`
      )
    }
  })
).pipe(Command.withDescription(checkTable.help.description))

/** `effect-rl backup`'s table (its argument, options and help). */
export const backupTable = table(
  "backup",
  "write a consistent copy of a data directory's database, also while it is served",
  {
    file: Args.file({ name: "file", exists: "no" }).pipe(describe("the backup file to write (must not exist)")),
    dataDir: dataDirOption
  }
)

/** `effect-rl backup <file>`: the copy, its size and time; a failure as one sentence. */
export const backup = Command.make("backup", backupTable.config, ({ file, dataDir }) =>
  Effect.gen(function* () {
    const Backup = yield* Effect.promise(() => import("../local/store/Backup.js"))
    const written = yield* Backup.write(resolve(dataDir), file).pipe(Effect.mapError((error) => failed(error.message)))
    yield* Console.log(
      `backup written: ${written.file} (${(written.bytes / (1024 * 1024)).toFixed(1)} MB, ${written.seconds.toFixed(2)} s); to restore it, put it in an empty directory as effect-rl.sqlite and serve --data-dir that directory`
    )
  })
).pipe(Command.withDescription(backupTable.help.description))
