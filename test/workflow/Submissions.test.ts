/**
 * Submissions that never train twice. Against a scripted training service (a real HTTP server on port 0: the
 * hosted service cannot be reached from here, and the real embedded backend never loses a response) that
 * creates the job and then drops the connection, with and without idempotency support: never two jobs for
 * one step, the typed error when the outcome is unknown, the same job under the same key where keys are
 * honoured, and the records a restarted process goes by. Against the real embedded backend: the header that
 * says keys are honoured, read by the client, and an intent recorded before a crash answered with the job
 * created before it.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as KeyValueStore from "@effect/platform/KeyValueStore"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as TestServices from "effect/TestServices"
import { IDEMPOTENCY_KEYS_HEADER } from "../../src/api/TrainingApi.js"
import { CreateTrainingJob } from "../../src/api/TrainingJob.js"
import type { TrajectoryGroup } from "../../src/api/Trajectory.js"
import { InferenceClient } from "../../src/client/InferenceClient.js"
import { TrainingClient } from "../../src/client/TrainingClient.js"
import { LocalBackend } from "../../src/LocalBackend.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as Submissions from "../../src/workflow/Submissions.js"
import * as Trainer from "../../src/workflow/Trainer.js"
import { inference, training } from "../support/clients.js"
import * as FakeService from "../support/FakeService.js"
import { TINY, WorkflowBackend } from "./support.js"

const JOBS = "/v1/preview/training-jobs"
const UUID = (n: number) => `00000000-0000-4000-8000-${n.toString(16).padStart(12, "0")}`

const group = (reward: number): TrajectoryGroup => ({
  trajectories: [0, 1].map((r) => ({
    messages_and_choices: [{ role: "user" as const, content: "q" }],
    reward: r + reward
  }))
})

const fast = { pollInterval: "10 millis", wait: "1 second", onEvent: () => Effect.void } as const

const stateDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "effect-rl-submissions-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

/**
 * The scripted service at checkpoint 2, whose job create makes a job and then, on the first request, drops
 * the connection before answering (every time, or, with `honours`, the first time); with `honours`, its replies say so and a repeated key answers its job.
 */
const service = (options: { readonly honours: boolean; readonly drop?: boolean }) =>
  Effect.gen(function* () {
    const fake = yield* FakeService.make
    const jobs: Array<{ readonly id: string; readonly key: string | undefined; readonly body: string }> = []
    const said = options.honours ? { [IDEMPOTENCY_KEYS_HEADER]: "honoured" } : undefined
    fake.route("POST", JOBS, (request, attempt) => {
      const key = request.headers["idempotency-key"] as string | undefined
      const earlier = options.honours ? jobs.find((job) => job.key === key) : undefined
      if (earlier !== undefined) return { json: FakeService.jobRecord(earlier.id), ...(said ? { headers: said } : {}) }
      const job = { id: UUID(500 + jobs.length), key, body: request.body }
      jobs.push(job)
      // The job exists; the answer is lost (a reset after the body was read): always where keys are not
      // honoured (nothing should ask twice), the first time where they are.
      if ((options.drop ?? true) && (!options.honours || attempt === 0)) return { destroy: true }
      return { json: FakeService.jobRecord(job.id), ...(said ? { headers: said } : {}) }
    })
    if (said) fake.route("GET", "/v1/health", () => ({ json: { status: "ok" }, headers: said }))
    const context = yield* Layer.build(
      Layer.mergeAll(
        Layer.effect(TrainingClient, training(fake.url)),
        Layer.effect(InferenceClient, inference(fake.url))
      )
    )
    const policy = yield* Policy.trainable({ project: "p", name: "m", base_model: "base" }).pipe(
      Effect.provide(context)
    )
    return { fake, jobs, context, policy }
  })

/** `text` as a literal in a regular expression. */
const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

const records = (dir: string) =>
  readdirSync(dir).map((name) => JSON.parse(readFileSync(join(dir, name), "utf8")) as Record<string, unknown>)

describe("a create whose answer is lost, on a scripted service", () => {
  it.scoped("without idempotency support: one job, TrainerError Ambiguous; a restart submits nothing", () =>
    Effect.gen(function* () {
      const dir = yield* stateDir
      const { fake, jobs, context, policy } = yield* service({ honours: false })
      const error = yield* Effect.flip(
        Trainer.train(policy, [group(0)], { ...fast, state: dir }).pipe(Effect.provide(context))
      )
      expect(error).toMatchObject({
        _tag: "TrainerError",
        reason: "Ambiguous",
        modelId: FakeService.ids.model,
        step: 2
      })
      if (error._tag !== "TrainerError") throw error
      expect(error.idempotencyKey).toMatch(/^effect-rl-rl-/)
      expect(error.cause).toMatchObject({ _tag: "ApiError", reason: "Ambiguous", method: "POST", path: JOBS })
      expect(error.record).toBe(join(dir, `${FakeService.ids.model}.step-2.json`))
      expect(error.message).toContain("remove the record")
      expect(jobs).toHaveLength(1)
      expect(fake.count("POST", JOBS)).toBe(1)
      // The intent stays: what was sent, under which key, and no job id.
      const [intent] = records(dir)
      expect(intent).toMatchObject({ step: 2, kind: "rl", idempotencyKey: error.idempotencyKey })
      expect(intent?.jobId).toBeUndefined()
      expect(intent?.request).toEqual(JSON.parse(jobs[0]!.body))

      // A restarted process (other groups, the same state): still nothing submitted.
      const again = yield* Effect.flip(
        Trainer.train(policy, [group(1)], { ...fast, state: dir }).pipe(Effect.provide(context))
      )
      expect(again).toMatchObject({ _tag: "TrainerError", reason: "Ambiguous", step: 2 })
      expect(fake.count("POST", JOBS)).toBe(1)
      expect(jobs).toHaveLength(1)
      // Without a state the typed error is the same; nothing is repeated either.
      const bare = yield* Effect.flip(Trainer.train(policy, [group(2)], fast).pipe(Effect.provide(context)))
      expect(bare).toMatchObject({ reason: "Ambiguous", step: 2, record: undefined })
      expect(fake.count("POST", JOBS)).toBe(2)
    }).pipe(TestServices.provideLive)
  )

  it.scoped("with idempotency support: the retry under the same key answers the same job; one job", () =>
    Effect.gen(function* () {
      const dir = yield* stateDir
      const { fake, jobs, context, policy } = yield* service({ honours: true })
      const result = yield* Trainer.train(policy, [group(0)], { ...fast, state: dir }).pipe(Effect.provide(context))
      expect(jobs).toHaveLength(1)
      expect(result.jobId).toBe(jobs[0]!.id)
      const posts = fake.received.filter((r) => r.method === "POST" && r.path === JOBS)
      expect(posts).toHaveLength(2)
      expect(new Set(posts.map((r) => r.headers["idempotency-key"])).size).toBe(1)
      // The record now names the job, and no longer keeps the request.
      expect(records(dir)).toEqual([expect.objectContaining({ step: 2, jobId: jobs[0]!.id })])
      expect(records(dir)[0]).not.toHaveProperty("request")

      // A restarted process at the same step follows the recorded job: no create at all.
      yield* policy.setStep(2)
      const followed = yield* Trainer.train(policy, [group(1)], { ...fast, state: dir }).pipe(Effect.provide(context))
      expect(followed.jobId).toBe(jobs[0]!.id)
      expect(fake.count("POST", JOBS)).toBe(2)
    }).pipe(TestServices.provideLive)
  )

  it.scoped("an intent left by a crash is sent again under its key, with its request, where keys are honoured", () =>
    Effect.gen(function* () {
      const { fake, jobs, context, policy } = yield* service({ honours: true, drop: false })
      // Any KeyValueStore will do: here one in memory, holding what a killed process wrote before its create.
      const store = yield* Effect.provide(KeyValueStore.KeyValueStore, KeyValueStore.layerMemory)
      const request = Schema.encodeSync(CreateTrainingJob)({
        model_id: policy.record.id,
        trajectory_groups: [group(7)]
      })
      yield* Submissions.put(
        store,
        new Submissions.Submission({
          modelId: policy.record.id,
          step: 2,
          kind: "rl",
          idempotencyKey: "crashed-key",
          request,
          metrics: { reward: 7.5 },
          submittedAt: new Date(0).toISOString()
        })
      )
      const resumed = yield* Trainer.resume(policy, { ...fast, state: store }).pipe(Effect.provide(context))
      expect(Option.isSome(resumed)).toBe(true)
      const posts = fake.received.filter((r) => r.method === "POST" && r.path === JOBS)
      expect(posts.map((r) => r.headers["idempotency-key"])).toEqual(["crashed-key"])
      expect(JSON.parse(posts[0]!.body)).toEqual(request)
      expect(jobs).toHaveLength(1)
      expect(Option.getOrThrow(resumed).submission.metrics).toEqual({ reward: 7.5 })
      const stored = Option.getOrThrow(yield* Submissions.get(store, policy.record.id, 2))
      expect(stored.jobId).toBe(jobs[0]!.id)
      expect(stored.request).toBeUndefined()
    }).pipe(TestServices.provideLive)
  )

  it.scoped("a create refused outright (404) removes the intent; a failed job removes the record", () =>
    Effect.gen(function* () {
      const dir = yield* stateDir
      const { fake, context, policy } = yield* service({ honours: false })
      fake.route("POST", JOBS, () => ({ status: 404, json: { detail: "Model not found" } }))
      const error = yield* Effect.flip(
        Trainer.train(policy, [group(0)], { ...fast, state: dir }).pipe(Effect.provide(context))
      )
      expect(error).toMatchObject({ _tag: "ApiError", reason: "NotFound" })
      expect(records(dir)).toEqual([])

      fake.route("POST", JOBS, () => ({ json: FakeService.jobRecord(UUID(900)) }))
      fake.route("GET", "/v1/preview/training-jobs/:id/events", () => ({
        json: {
          object: "list",
          data: [{ id: UUID(1000), type: "training_failed", data: { error_message: "boom" } }],
          has_more: false
        }
      }))
      const failed = yield* Effect.flip(
        Trainer.train(policy, [group(0)], { ...fast, state: dir }).pipe(Effect.provide(context))
      )
      expect(failed._tag).toBe("TrainingFailed")
      expect(records(dir)).toEqual([])
    }).pipe(TestServices.provideLive)
  )

  it.scoped(
    "a job an earlier run recorded that failed: the step is done anew; a job of this run that fails fails",
    () =>
      Effect.gen(function* () {
        const dir = yield* stateDir
        const { fake, jobs, context, policy } = yield* service({ honours: true, drop: false })
        // Every job fails (as the embedded backend fails the one it ran when its process was killed).
        fake.route("GET", "/v1/preview/training-jobs/:id/events", () => ({
          json: {
            object: "list",
            data: [
              {
                id: UUID(1000),
                type: "training_failed",
                data: { error_message: "the server stopped while the job was running" }
              }
            ],
            has_more: false
          }
        }))
        yield* Submissions.put(
          dir,
          new Submissions.Submission({
            modelId: policy.record.id,
            step: 2,
            kind: "rl",
            idempotencyKey: "earlier-key",
            jobId: UUID(77),
            submittedAt: new Date(0).toISOString()
          })
        )
        // Resumed: the earlier job is followed, found failed, its record removed; nothing to resume.
        const resumed = yield* Trainer.resume(policy, { ...fast, state: dir }).pipe(Effect.provide(context))
        expect(Option.isNone(resumed)).toBe(true)
        expect(records(dir)).toEqual([])
        expect(fake.count("POST", JOBS)).toBe(0)
        expect(yield* policy.step).toBe(2)
        // The step submitted anew (a job of this run): its failure is the call's.
        const failed = yield* Effect.flip(
          Trainer.train(policy, [group(0)], { ...fast, state: dir }).pipe(Effect.provide(context))
        )
        expect(failed).toMatchObject({ _tag: "TrainingFailed", jobId: jobs[0]!.id })
        expect(jobs).toHaveLength(1)
        expect(records(dir)).toEqual([])
      }).pipe(TestServices.provideLive)
  )
})

describe("the record on disk (Submissions.directory)", () => {
  const submission = (step: number, jobId?: string) =>
    new Submissions.Submission({
      modelId: "m/1",
      step,
      kind: "sft",
      idempotencyKey: `key-${step}`,
      ...(jobId === undefined ? {} : { jobId }),
      submittedAt: new Date(0).toISOString()
    })

  it.scoped("a record is written whole under its model and step, private to the user, and read back", () =>
    Effect.gen(function* () {
      const dir = join(yield* stateDir, "state")
      expect(Option.isNone(yield* Submissions.get(dir, "m/1", 4))).toBe(true)
      yield* Submissions.put(dir, submission(4))
      yield* Submissions.put(dir, submission(4, "job-4"))
      // One file per key, the key's name encoded; no temporary file left.
      expect(readdirSync(dir)).toEqual(["m%2F1.step-4.json"])
      const file = join(dir, "m%2F1.step-4.json")
      expect(Submissions.describe(dir, "m/1", 4)).toBe(file)
      expect(statSync(dir).mode & 0o777).toBe(0o700)
      expect(statSync(file).mode & 0o777).toBe(0o600)
      expect(JSON.parse(readFileSync(file, "utf8"))).toEqual({
        modelId: "m/1",
        step: 4,
        kind: "sft",
        idempotencyKey: "key-4",
        jobId: "job-4",
        submittedAt: "1970-01-01T00:00:00.000Z"
      })
      expect(yield* Submissions.get(dir, "m/1", 4)).toEqual(Option.some(submission(4, "job-4")))
      yield* Submissions.remove(dir, "m/1", 4)
      expect(Option.isNone(yield* Submissions.get(dir, "m/1", 4))).toBe(true)
      // Removing what is not there is nothing.
      yield* Submissions.remove(dir, "m/1", 4)
    })
  )

  it.scoped("as a KeyValueStore: bytes, size and clear, a crashed write's temporary file not counted", () =>
    Effect.gen(function* () {
      const dir = join(yield* stateDir, "state")
      const store = Submissions.directory(dir)
      // A directory not made yet holds nothing.
      expect(yield* store.size).toBe(0)
      yield* store.clear
      yield* store.set("a", "one")
      yield* store.set("b", new Uint8Array([1, 2, 3]))
      writeFileSync(join(dir, "c.0000.tmp"), "half a record")
      expect(yield* store.size).toBe(2)
      expect(yield* store.get("a")).toEqual(Option.some("one"))
      expect(yield* store.getUint8Array("b")).toEqual(Option.some(new Uint8Array([1, 2, 3])))
      expect(yield* store.getUint8Array("c")).toEqual(Option.none())
      yield* store.clear
      expect(yield* store.size).toBe(0)
      expect(yield* store.get("a")).toEqual(Option.none())
      expect(yield* store.get("b")).toEqual(Option.none())
    })
  )

  it.scoped("a write closes its file: no descriptor left open per record", () =>
    Effect.gen(function* () {
      const dir = yield* stateDir
      const open = () => readdirSync("/proc/self/fd").length
      const before = open()
      for (let step = 0; step < 40; step++) yield* Submissions.put(dir, submission(step))
      expect(open() - before).toBeLessThan(10)
    })
  )

  it.scoped("a store that cannot be read or written fails, naming the method and the file", () =>
    Effect.gen(function* () {
      const dir = yield* stateDir
      // A directory where the record's file should be: it cannot be read, nor renamed over.
      mkdirSync(join(dir, "m%2F1.step-4.json"))
      const read = yield* Effect.flip(Submissions.get(dir, "m/1", 4))
      expect(read.message).toMatch(
        new RegExp(`^Unknown: KeyValueStore\\.get \\(${literal(join(dir, "m%2F1.step-4.json"))}\\): EISDIR`)
      )
      expect(read).toMatchObject({ _tag: "SystemError", reason: "Unknown", module: "KeyValueStore", method: "get" })
      expect((yield* Effect.flip(Submissions.directory(dir).getUint8Array("m/1.step-4.json"))).message).toMatch(
        /^Unknown: KeyValueStore\.getUint8Array .*EISDIR/
      )
      const written = yield* Effect.flip(Submissions.put(dir, submission(4)))
      expect(written.message).toMatch(/^Unknown: KeyValueStore\.set \(.*m%2F1\.step-4\.json\): E(ISDIR|EXIST|NOTEMPTY)/)
      // A file where the directory should be.
      const file = join(dir, "not-a-directory")
      writeFileSync(file, "")
      expect((yield* Effect.flip(Submissions.remove(file, "m/1", 4))).message).toMatch(
        /^Unknown: KeyValueStore\.remove .*ENOTDIR/
      )
      const store = Submissions.directory(file)
      expect((yield* Effect.flip(store.size)).message).toMatch(/^Unknown: KeyValueStore\.size .*ENOTDIR/)
      expect((yield* Effect.flip(store.clear)).message).toMatch(/^Unknown: KeyValueStore\.clear .*ENOTDIR/)
      // A directory among the records: clear does not remove it, and says so.
      const cluttered = join(dir, "cluttered")
      mkdirSync(join(cluttered, "sub"), { recursive: true })
      expect((yield* Effect.flip(Submissions.directory(cluttered).clear)).message).toMatch(
        /^Unknown: KeyValueStore\.clear .*directory/
      )
    })
  )

  it("a store of the user's own is named by the key", () => {
    const store = KeyValueStore.make({
      get: () => Effect.succeed(Option.none()),
      getUint8Array: () => Effect.succeed(Option.none()),
      set: () => Effect.void,
      remove: () => Effect.void,
      clear: Effect.void,
      size: Effect.succeed(0)
    })
    expect(Submissions.describe(store, "m", 3)).toBe("key m.step-3.json")
  })
})

describe("the real embedded backend", () => {
  it.layer(WorkflowBackend, { timeout: 60_000 })((it) => {
    it.effect("says x-idempotency-keys: honoured on every response, and the client reads it", () =>
      Effect.gen(function* () {
        const { url, apiKey } = yield* LocalBackend
        const ok = yield* Effect.promise(() => fetch(`${url}/v1/health`))
        expect(ok.headers.get(IDEMPOTENCY_KEYS_HEADER)).toBe("honoured")
        const unauthorised = yield* Effect.promise(() => fetch(`${url}/v1/preview/models`, { method: "POST" }))
        expect(unauthorised.status).toBe(401)
        expect(unauthorised.headers.get(IDEMPOTENCY_KEYS_HEADER)).toBe("honoured")
        expect(apiKey).toBeDefined()
        expect(yield* (yield* TrainingClient).honoursIdempotencyKeys).toBe(true)
      }).pipe(TestServices.provideLive)
    )

    it.effect("an intent recorded before a crash, its job created: the restart answers that job, no second one", () =>
      Effect.gen(function* () {
        const client = yield* TrainingClient
        const policy = yield* Policy.trainable({ project: "submissions", name: "intent", base_model: TINY })
        const store = yield* Effect.provide(KeyValueStore.KeyValueStore, KeyValueStore.layerMemory)
        const body = { model_id: policy.record.id, trajectory_groups: [group(0)] }
        const key = "effect-rl-test-intent"
        yield* Submissions.put(
          store,
          new Submissions.Submission({
            modelId: policy.record.id,
            step: 0,
            kind: "rl",
            idempotencyKey: key,
            request: Schema.encodeSync(CreateTrainingJob)(body),
            submittedAt: new Date().toISOString()
          })
        )
        // The killed process's create reached the backend; its answer was never read.
        const created = yield* client.createTrainingJob(body, { idempotencyKey: key })
        const result = yield* Trainer.train(policy, [group(3)], {
          wait: "5 seconds",
          onEvent: () => Effect.void,
          state: store
        })
        expect(result.jobId).toBe(created.id)
        expect(result.step).toBe(1)
        const checkpoints = yield* Stream.runCollect(client.checkpoints(policy.record.id))
        expect([...checkpoints].map((c) => c.step)).toEqual([0, 1])
      }).pipe(TestServices.provideLive)
    )
  })
})
