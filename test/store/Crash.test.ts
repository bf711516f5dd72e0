import { spawn } from "node:child_process"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { Checkpoints } from "../../src/local/store/Checkpoints.js"
import { IdempotencyKeys } from "../../src/local/store/IdempotencyKeys.js"
import { JobEvents } from "../../src/local/store/JobEvents.js"
import { INTERRUPTED_MESSAGE, Jobs } from "../../src/local/store/Jobs.js"
import { Logs } from "../../src/local/store/Logs.js"
import { Models } from "../../src/local/store/Models.js"
import { tempDir, withStore } from "./support.js"

const root = join(import.meta.dirname, "../..")

/** Runs the crash writer on a data dir until it has written, then kills it with SIGKILL. */
const writeAndKill = (dataDir: string) =>
  Effect.async<{ readonly model: string; readonly job: string }, Error>((resume) => {
    // One process (`node --import tsx`), not the `tsx` wrapper: SIGKILL on the wrapper would leave its child,
    // the writer, running with the database open, and the test would not simulate a crash at all.
    const child = spawn(
      process.execPath,
      ["--import", "tsx", join(import.meta.dirname, "fixtures/crash-writer.ts"), dataDir],
      {
        cwd: root,
        stdio: ["ignore", "pipe", "inherit"]
      }
    )
    let out = ""
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString()
      if (out.includes("\n")) {
        child.kill("SIGKILL")
        child.on("exit", () => resume(Effect.succeed(JSON.parse(out) as { model: string; job: string })))
      }
    })
    child.on("error", (error) => resume(Effect.fail(error)))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

describe("crash", () => {
  it.live(
    "keeps every acknowledged write after kill -9 and fails the running job on restart",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const ids = yield* writeAndKill(dir)
        yield* withStore(dir)(
          Effect.gen(function* () {
            expect((yield* (yield* Models).get(ids.model)).name).toBe("crash")
            expect(yield* (yield* Checkpoints).weights(ids.model, 0)).toEqual(Buffer.from([7, 7, 7]))
            expect((yield* (yield* Logs).list(ids.model)).length).toBe(1)
            expect(yield* (yield* Jobs).get(ids.job)).toMatchObject({
              status: "FAILED",
              error_message: INTERRUPTED_MESSAGE
            })
            const events = (yield* (yield* JobEvents).list(ids.job)).data.map((e) => e.type)
            expect(events).toEqual(["training_started", "training_failed"])
            const stored = yield* (yield* IdempotencyKeys).lookup("key", "POST /x", "{}")
            expect(Option.getOrThrow(stored).body).toBe(ids.job)
          })
        )
      }).pipe(Effect.scoped),
    30_000
  )
})
