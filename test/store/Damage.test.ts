/**
 * Damaged files say so. Bytes flipped in the middle of a data directory's database: SQLite's check at start
 * finds it, and the store refuses the directory naming what is damaged and how to recover. A byte flipped
 * inside a checkpoint's weights (pages still valid, so SQLite sees nothing): the full check names the
 * checkpoint, loading it is an error naming the model and step, and sampling it through the real server is
 * an error naming it, never garbage sampled. A backup taken while a server trains and samples restores into a
 * directory that passes the full check, and the real server on it serves what the original had: the same
 * checkpoints, each with the same greedy answer and logprobs.
 */
import { spawnSync } from "node:child_process"
import { closeSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, statSync, writeSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import OpenAI from "openai"
import * as Backend from "../../src/Backend.js"
import * as LocalBackend from "../../src/LocalBackend.js"
import * as Backup from "../../src/local/store/Backup.js"
import { Checkpoints } from "../../src/local/store/Checkpoints.js"
import * as Database from "../../src/local/store/Database.js"
import * as Integrity from "../../src/local/store/Integrity.js"
import * as Store from "../../src/local/store/Store.js"
import * as Gather from "../../src/workflow/Gather.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as Trainer from "../../src/workflow/Trainer.js"
import { cliArgs } from "../support/cli.js"
import { API_KEY } from "../support/clients.js"
import { pick, reward } from "../workflow/support.js"

const fresh = () => mkdtempSync(join(tmpdir(), "effect-rl-damage-"))

/** Creates a model through the real server (its step-0 checkpoint written with it). */
const createModel = (url: string, name: string) =>
  Effect.promise(async () => {
    const response = await fetch(`${url}/v1/preview/models`, {
      method: "POST",
      headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ entity: "e", project: "p", name, base_model: "effect-rl/tiny" })
    })
    expect(response.status).toBe(200)
    return ((await response.json()) as { readonly id: string }).id
  })

const backend = (dataDir: string) => LocalBackend.layer({ dataDir, apiKey: Redacted.make(API_KEY) })

/** A data directory with `models` models made through the server, closed: the first's id and weights. */
const populate = (dataDir: string, models: number) =>
  Effect.gen(function* () {
    const { url } = yield* LocalBackend.LocalBackend
    const ids = yield* Effect.forEach(
      Array.from({ length: models }, (_, i) => `m${i}`),
      (name) => createModel(url, name)
    )
    return ids[0]!
  }).pipe(
    Effect.provide(backend(dataDir)),
    Effect.scoped,
    Effect.flatMap((id) =>
      Effect.map(
        Effect.flatMap(Checkpoints, (c) => c.weights(id, 0)).pipe(
          Effect.provide(Store.layer({ dataDir })),
          Effect.scoped
        ),
        (weights) => ({ id, weights })
      )
    ),
    Effect.orDie
  )

/** Flips one byte of a file at `offset`. */
const flip = (file: string, offset: number) => {
  const fd = openSync(file, "r+")
  try {
    const byte = Buffer.alloc(1)
    readSync(fd, byte, 0, 1, offset)
    byte[0] = byte[0]! ^ 0xff
    writeSync(fd, byte, 0, 1, offset)
  } finally {
    closeSync(fd)
  }
}

describe("damaged files", () => {
  it.live("a database with flipped bytes mid-file is refused at start, saying what and how to recover", () =>
    Effect.gen(function* () {
      const dataDir = fresh()
      yield* populate(dataDir, 20)
      const file = Database.filename(dataDir)
      const size = statSync(file).size
      // Flip a run of bytes in a page header of the middle of the file (b-tree pages: 4096 bytes).
      const page = Math.floor(size / 4096 / 2) * 4096
      for (let i = 0; i < 8; i++) flip(file, page + i)
      const quick = yield* Integrity.check(file, "quick")
      expect(quick._tag).toBe("Damaged")
      const opened = yield* Effect.exit(Effect.scoped(Layer.build(Store.layer({ dataDir }))))
      expect(Exit.isFailure(opened)).toBe(true)
      const error = Exit.isFailure(opened) ? JSON.stringify(opened.cause) : ""
      expect(error).toContain('"reason":"Damaged"')
      expect(error).toContain(`the database ${file} is damaged (SQLite's quick_check: `)
      expect(error).toContain(".recover")
      rmSync(dataDir, { recursive: true, force: true })
    })
  )

  it.live("a flipped byte inside a checkpoint's weights: the check, the load and the sampling name it", () =>
    Effect.gen(function* () {
      const dataDir = fresh()
      const { id, weights } = yield* populate(dataDir, 1)
      const file = Database.filename(dataDir)
      const bytes = readFileSync(file)
      // Find the weights on disk (a run of them inside one page) and flip a byte there.
      let at = -1
      for (let start = 4096; at === -1 && start + 64 < weights.length; start += 4096) {
        const found = bytes.indexOf(weights.subarray(start, start + 64))
        if (found !== -1) at = found + 32
      }
      expect(at).toBeGreaterThan(0)
      flip(file, at)
      expect((yield* Integrity.check(file, "quick"))._tag).toBe("Ok")
      const full = yield* Integrity.check(file, "full")
      expect(full).toMatchObject({
        _tag: "Damaged",
        problems: ["checkpoint step 0 of model e/p/m0: its weights do not match their digest"]
      })
      const loaded = yield* Effect.either(
        Effect.flatMap(Checkpoints, (c) => c.weights(id, 0)).pipe(
          Effect.provide(Store.layer({ dataDir })),
          Effect.scoped
        )
      )
      expect(Either.isLeft(loaded) && loaded.left.reason).toBe("Corrupt")
      expect(Either.isLeft(loaded) && loaded.left.message).toContain("checkpoint step 0 of model e/p/m0 is damaged")
      // Sampling it through the real server: an error naming it (the base model still answers).
      yield* Effect.gen(function* () {
        const { url } = yield* LocalBackend.LocalBackend
        const client = new OpenAI({ apiKey: API_KEY, baseURL: `${url}/v1`, maxRetries: 0 })
        const messages = [{ role: "user" as const, content: "hi" }]
        const damaged = yield* Effect.promise(() =>
          client.chat.completions
            .create({ model: "wandb-artifact:///e/p/m0:step0", messages, max_completion_tokens: 2 })
            .then(
              () => undefined,
              (error: unknown) => error as InstanceType<typeof OpenAI.APIError>
            )
        )
        expect(damaged?.status).toBe(500)
        expect(damaged?.message).toContain("checkpoint step 0 of model e/p/m0 is damaged")
        const base = yield* Effect.promise(() =>
          client.chat.completions.create({ model: "effect-rl/tiny", messages, max_completion_tokens: 2 })
        )
        expect(base.choices).toHaveLength(1)
      }).pipe(Effect.provide(backend(dataDir)), Effect.scoped)
      rmSync(dataDir, { recursive: true, force: true })
    })
  )
})

/** Runs `effect-rl` to its end (`test/support/cli.ts`). */
const effectRl = (...args: ReadonlyArray<string>) =>
  spawnSync(process.execPath, cliArgs(...args), {
    cwd: new URL("../../", import.meta.url).pathname,
    encoding: "utf8",
    timeout: 60_000
  })

describe("the command: check, backup, and serve refusing a damaged database", () => {
  it.live("check and backup on a sound directory; check names a damaged checkpoint; serve refuses damage", () =>
    Effect.gen(function* () {
      const dataDir = fresh()
      const other = fresh()
      const { weights } = yield* populate(dataDir, 1)
      const sound = effectRl("check", "--data-dir", dataDir)
      expect(sound.status, sound.stderr).toBe(0)
      expect(sound.stdout).toMatch(/effect-rl\.sqlite: ok \(integrity_check, 1 checkpoint digest\(s\)/)
      const copy = join(other, "copy.sqlite")
      const backedUp = effectRl("backup", copy, "--data-dir", dataDir)
      expect(backedUp.status, backedUp.stderr).toBe(0)
      expect(backedUp.stdout).toContain(`backup written: ${copy}`)
      const twice = effectRl("backup", copy, "--data-dir", dataDir)
      expect(twice.status).not.toBe(0)
      // A byte of the weights flipped on disk: check names the checkpoint and how to recover.
      const file = Database.filename(dataDir)
      const bytes = readFileSync(file)
      const at = bytes.indexOf(weights.subarray(8192, 8256))
      expect(at).toBeGreaterThan(0)
      flip(file, at + 16)
      const damaged = effectRl("check", "--data-dir", dataDir)
      expect(damaged.status).toBe(1)
      expect(damaged.stdout).toContain(
        "damaged: checkpoint step 0 of model e/p/m0: its weights do not match their digest"
      )
      expect(damaged.stderr.trim()).toMatch(
        /^effect-rl check: .* is damaged \(1 finding\(s\) above\); restore a backup/
      )
      // Bytes flipped in a page: serve refuses to start, saying what and how to recover.
      const size = statSync(file).size
      const page = Math.floor(size / 4096 / 2) * 4096
      for (let i = 0; i < 8; i++) flip(file, page + i)
      const refused = effectRl("serve", "--data-dir", dataDir, "--port", "0")
      expect(refused.status).toBe(1)
      expect(refused.stderr.trim()).toMatch(/^effect-rl serve: the database .* is damaged \(SQLite's quick_check: /)
      expect(refused.stderr).toContain(".recover")
      for (const dir of [dataDir, other]) rmSync(dir, { recursive: true, force: true })
    })
  )
})

/** A data directory's database replaced by the bytes of a backup (a restore, as a user does it). */
const restore = (backup: string, dataDir: string) => {
  const fd = openSync(Database.filename(dataDir), "w", 0o600)
  writeSync(fd, readFileSync(backup))
  closeSync(fd)
}

/**
 * What the real server on `dataDir` serves: every checkpoint `GET /v1/models` lists, each with its greedy answer
 * to one question and the answer's logprobs (which differ wherever the weights do).
 */
const served = (dataDir: string) =>
  Effect.gen(function* () {
    const { url } = yield* LocalBackend.LocalBackend
    const client = new OpenAI({ apiKey: API_KEY, baseURL: `${url}/v1`, maxRetries: 0 })
    const listed = yield* Effect.promise(() => client.models.list())
    const checkpoints = listed.data.map((m) => m.id).filter((id) => id.startsWith("wandb-artifact:"))
    const answers = yield* Effect.forEach(checkpoints, (model) =>
      Effect.promise(() =>
        client.chat.completions.create({
          model,
          messages: [{ role: "user", content: "what did you keep?" }],
          max_completion_tokens: 6,
          temperature: 0,
          logprobs: true
        })
      ).pipe(
        Effect.map(
          ({ choices: [choice] }) => [model, { content: choice!.message.content, logprobs: choice!.logprobs }] as const
        )
      )
    )
    return new Map(answers)
  }).pipe(Effect.provide(backend(dataDir)), Effect.scoped)

describe("backups", () => {
  it.live(
    "a backup taken while the server trains and samples restores, passes the full check, serves as the original",
    () =>
      Effect.gen(function* () {
        const dataDir = fresh()
        const backups = fresh()
        const duringTraining = fresh()
        const afterTraining = fresh()
        yield* Effect.gen(function* () {
          const { url } = yield* LocalBackend.LocalBackend
          const client = new OpenAI({ apiKey: API_KEY, baseURL: `${url}/v1`, maxRetries: 0 })
          // Load: completions sampling (their responses stored), and models written, while backups are taken.
          const sampling = Effect.forEach(
            Array.from({ length: 12 }, (_, i) => i),
            (i) =>
              Effect.promise(() =>
                client.responses.create({ model: "effect-rl/tiny", input: `question ${i}`, max_output_tokens: 16 })
              ),
            { concurrency: 4 }
          )
          // A training step's job, submitted and followed while the backups run.
          const training = Effect.gen(function* () {
            const policy = yield* Policy.trainable({ project: "p", name: "trained", base_model: "effect-rl/tiny" })
            const groups = yield* Gather.groups({
              policy,
              scenarios: ["a", "b"],
              rolloutsPerGroup: 4,
              rollout: pick,
              reward
            })
            // Rewards that differ within each group, so that the step always moves the weights (a group of equal
            // rewards has no advantage: about one run in twenty trained nothing, and step 1 answered as step 0).
            return yield* Trainer.train(
              policy,
              groups.map(({ group }) => ({
                ...group,
                trajectories: group.trajectories.map((trajectory, i) => ({ ...trajectory, reward: i % 2 }))
              }))
            )
          })
          // Models written, each followed by a backup, while the sampling and the training run.
          const writing = Effect.forEach([1, 2, 3], (i) =>
            Effect.zipRight(createModel(url, `m${i}`), Backup.write(dataDir, join(backups, `b${i}.sqlite`)))
          )
          const [, written, trained] = yield* Effect.all([sampling, writing, training], { concurrency: "unbounded" })
          expect(trained.step).toBe(1)
          expect(written.map((w) => w.bytes > 0)).toEqual([true, true, true])
          // One more once the step is trained (its checkpoint in it), while the server samples.
          yield* Effect.all([sampling, Backup.write(dataDir, join(backups, "b4.sqlite"))], { concurrency: "unbounded" })
          // A backup never overwrites.
          const again = yield* Effect.either(Backup.write(dataDir, join(backups, "b1.sqlite")))
          expect(Either.isLeft(again) && again.left.reason).toBe("Exists")
        }).pipe(Effect.provide(Backend.local({ dataDir, apiKey: Redacted.make(API_KEY) })), Effect.scoped)
        // The last backup taken while training, and the one after it, each restored as a data directory's database:
        // the full check passes.
        restore(join(backups, "b3.sqlite"), duringTraining)
        restore(join(backups, "b4.sqlite"), afterTraining)
        for (const dir of [duringTraining, afterTraining]) {
          expect((yield* Integrity.check(Database.filename(dir), "full"))._tag).toBe("Ok")
        }
        // The real server on each serves what the original serves: the same checkpoints (all of them after the
        // training; those written before the backup during it, m3 among them), each with the same greedy answer
        // and logprobs.
        const original = yield* served(dataDir)
        const trained = [...original.keys()].filter((model) => model.endsWith("/trained:step1"))
        expect(trained).toHaveLength(1)
        // The trained step answers otherwise than its step 0: the comparison covers the trained weights.
        expect(original.get(trained[0]!)).not.toStrictEqual(original.get(trained[0]!.replace(/step1$/, "step0")))
        expect(yield* served(afterTraining)).toStrictEqual(original)
        const restoredDuring = yield* served(duringTraining)
        expect([...restoredDuring.keys()].some((model) => model.endsWith("/m3:step0"))).toBe(true)
        for (const [model, answer] of restoredDuring) expect(answer).toStrictEqual(original.get(model))
        for (const dir of [dataDir, backups, duringTraining, afterTraining])
          rmSync(dir, { recursive: true, force: true })
      })
  )
})
