/**
 * A full disk, for real: the data directory on a small tmpfs the test mounts (the tests run as root here and in
 * CI; where `mount` is refused they skip, saying so loudly). A write refused for want of space is a 507 in
 * each surface's error shape naming the data directory and the space left, the server stays up and keeps
 * serving reads, and writes succeed again once space is freed; `effect-rl train` on a full disk ends with one
 * sentence saying what to free, the database checks `ok`, and with space back the same directory trains on
 * from its last checkpoint. Where no tmpfs can be mounted, `disk-full.test.ts` (in `npm test`) checks the store's
 * answer to a full disk with SQLite's own limit on its database's size.
 */
import { execFileSync, spawnSync } from "node:child_process"
import { mkdtempSync, rmSync, unlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as LocalBackend from "../../src/LocalBackend.js"
import { Checkpoints } from "../../src/local/store/Checkpoints.js"
import { freeBytes } from "../../src/local/store/DiskSpace.js"
import * as Integrity from "../../src/local/store/Integrity.js"
import { Models } from "../../src/local/store/Models.js"
import * as Store from "../../src/local/store/Store.js"
import { API_KEY } from "../support/clients.js"

/** Mounts a tmpfs of `size` on a new directory: the directory, or undefined where mounting is refused. */
const mountTmpfs = (size: string): string | undefined => {
  const dir = mkdtempSync(join(tmpdir(), "effect-rl-tmpfs-"))
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${size}`, "tmpfs", dir], { stdio: "pipe" })
    return dir
  } catch {
    rmSync(dir, { recursive: true, force: true })
    return undefined
  }
}

/** Unmounts (lazily: a file a closing connection or a worker still holds does not keep it) and removes it. */
const unmount = (dir: string) => {
  spawnSync("umount", ["-l", dir])
  rmSync(dir, { recursive: true, force: true })
}

const probe = mountTmpfs("1m")
if (probe === undefined) {
  console.warn(
    "SKIPPED: the disk-full tests need to mount a tmpfs (root, or CAP_SYS_ADMIN), which this machine refuses"
  )
} else unmount(probe)
const canMount = probe !== undefined

/** Fills the filesystem holding `dir` until `leave` bytes are free: the ballast file, to remove. */
const fill = (dir: string, leave: number): string => {
  const ballast = join(dir, "ballast")
  writeFileSync(ballast, Buffer.alloc(Math.max(0, (freeBytes(dir) ?? 0) - leave)))
  return ballast
}

const quickCheck = (file: string) => Effect.runPromise(Integrity.check(file, "quick")).then((result) => result._tag)

/** The step of the last checkpoint the store of `dataDir` holds of the model named `name`. */
const latestStep = (dataDir: string, name: string) =>
  Effect.gen(function* () {
    const model = (yield* Effect.flatMap(Models, (models) => models.list)).find((m) => m.name === name)
    expect(model, `no model ${name}`).toBeDefined()
    const latest = yield* Effect.flatMap(Checkpoints, (checkpoints) => checkpoints.latest(model!.id))
    return Option.getOrThrow(latest).step
  }).pipe(Effect.provide(Store.layer({ dataDir })), Effect.scoped, Effect.orDie, Effect.runPromise)

const post = (url: string, path: string, body: unknown) =>
  Effect.promise(async () => {
    const response = await fetch(`${url}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
      body: JSON.stringify(body)
    })
    const answer = (await response.json()) as {
      readonly detail?: string
      readonly reason?: string
      readonly error?: { readonly type: string; readonly code: number; readonly message: string }
    }
    return { status: response.status, retry: response.headers.get("x-should-retry"), body: answer }
  })

describe("a full disk", () => {
  it.live.skipIf(!canMount)(
    "a refused write is a 507 in each surface's shape naming the data directory; reads go on; writes come back",
    () =>
      Effect.gen(function* () {
        const mount = mountTmpfs("12m")!
        const dataDir = join(mount, "data")
        try {
          yield* Effect.gen(function* () {
            const { url } = yield* LocalBackend.LocalBackend
            const model = { entity: "disk", project: "full", name: "m", base_model: "effect-rl/tiny" }
            const ballast = fill(mount, 0)
            // The training surface ({detail}), the inference surface ({error}), the trace surface ({reason}).
            const training = yield* post(url, "/v1/preview/models", model)
            const responses = yield* post(url, "/v1/responses", {
              model: "effect-rl/tiny",
              input: "hi",
              max_output_tokens: 2
            })
            const trace = yield* post(url, "/call/start", {
              start: {
                project_id: "disk/full",
                op_name: "op",
                started_at: new Date().toISOString(),
                attributes: {},
                inputs: { x: "y".repeat(200_000) }
              }
            })
            for (const answer of [training, responses, trace]) {
              expect(answer.status, JSON.stringify(answer.body)).toBe(507)
              expect(answer.retry).toBe("false")
            }
            const message = (body: unknown) => JSON.stringify(body)
            expect(training.body.detail).toContain(`the disk holding the data directory ${dataDir} is full`)
            expect(training.body.detail).toMatch(/\(\d+ KB free\): free space on it/)
            expect(responses.body.error).toMatchObject({ type: "InsufficientStorageError", code: 507 })
            expect(message(responses.body.error?.message)).toContain(dataDir)
            expect(trace.body.reason).toContain(dataDir)
            // Reads go on.
            const health = yield* Effect.promise(() =>
              fetch(`${url}/v1/health`, { headers: { authorization: `Bearer ${API_KEY}` } })
            )
            expect(health.status).toBe(200)
            // With space back, the same write succeeds.
            unlinkSync(ballast)
            const created = yield* post(url, "/v1/preview/models", model)
            expect(created.status, JSON.stringify(created.body)).toBe(200)
          }).pipe(Effect.provide(LocalBackend.layer({ dataDir, apiKey: Redacted.make(API_KEY) })), Effect.scoped)
          expect(yield* Effect.promise(() => quickCheck(join(dataDir, "effect-rl.sqlite")))).toBe("Ok")
        } finally {
          unmount(mount)
        }
      }),
    60_000
  )

  it.skipIf(!canMount)(
    "effect-rl train on a full disk ends with one sentence saying what to free; with space back it trains on",
    async () => {
      const mount = mountTmpfs("8m")!
      const dataDir = join(mount, "data")
      const { WANDB_API_KEY: _, EFFECT_RL_BASE_MODEL: __, ...env } = process.env
      const train = () =>
        spawnSync(
          process.execPath,
          [
            "--import",
            "tsx",
            "src/cli/main.ts",
            "train",
            "minimal",
            "--data-dir",
            dataDir,
            "--model",
            "disk",
            "--steps",
            "6"
          ],
          { cwd: new URL("../../", import.meta.url).pathname, env, encoding: "utf8", timeout: 120_000 }
        )
      try {
        const full = train()
        expect(full.status, full.stderr).toBe(1)
        const sentence = full.stderr.trim().split("\n").at(-1)!
        expect(sentence).toMatch(/^effect-rl train: /)
        expect(sentence).toContain(`the disk holding the data directory ${dataDir} is full`)
        expect(sentence).toContain("free space on it")
        expect(sentence).not.toContain("try again later")
        expect(full.stderr).not.toMatch(/\n\s+at /)
        expect(await quickCheck(join(dataDir, "effect-rl.sqlite"))).toBe("Ok")
        // Space back: the same directory trains on from the last checkpoint the first run saved (a step past 0:
        // the disk holds a few) to the last step.
        execFileSync("mount", ["-o", "remount,size=64m", mount])
        const saved = await latestStep(dataDir, "disk")
        expect(saved).toBeGreaterThan(0)
        expect(saved).toBeLessThan(6)
        const again = train()
        expect(again.status, again.stderr).toBe(0)
        const loops = again.stdout.match(/training loop: from step \d+ to \d+/g)
        expect(loops).toStrictEqual([`training loop: from step ${saved} to 6`])
        const summary = JSON.parse(
          again.stdout
            .split("\n")
            .find((l) => l.startsWith("summary: "))!
            .slice(9)
        ) as {
          readonly steps: number
        }
        expect(summary.steps).toBe(6 - saved)
        expect(again.stdout).toContain("latest checkpoint: wandb-artifact:///local/examples/disk:step6")
        expect(await latestStep(dataDir, "disk")).toBe(6)
      } finally {
        unmount(mount)
      }
    },
    300_000
  )
})
