/**
 * The trainer against the real embedded backend (log, RL and SFT jobs followed to the end, a flat group,
 * retention), and its event following against a scripted service for what the real backend never does.
 */
import { readdirSync, readFileSync, rmSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Stream from "effect/Stream"
import * as TestServices from "effect/TestServices"
import type { TrainingJobId } from "../../src/api/TrainingJob.js"
import type { TrajectoryGroup } from "../../src/api/Trajectory.js"
import { InferenceClient } from "../../src/client/InferenceClient.js"
import { TrainingClient } from "../../src/client/TrainingClient.js"
import * as Metrics from "../../src/workflow/Metrics.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as SftData from "../../src/workflow/SftData.js"
import * as Trainer from "../../src/workflow/Trainer.js"
import { dataFilesDir } from "../server/support.js"
import { inference, training } from "../support/clients.js"
import * as FakeService from "../support/FakeService.js"
import { TINY, WorkflowBackend } from "./support.js"

const WORDS = ["red", "blue", "green", "gold"]

/** A group of four sampled answers to "Say: <word>", rewarded by `reward(choice index, answer)`. */
const sample = (policy: Policy.Policy, g: number, reward: (index: number, answer: string) => number) =>
  Effect.gen(function* () {
    const messages = [{ role: "user" as const, content: `Say: ${WORDS[g]}` }]
    const completion = yield* policy.complete({
      messages,
      n: 4,
      seed: 7 + g,
      temperature: 1,
      logprobs: true,
      max_completion_tokens: 8,
      structured_outputs: { choice: WORDS }
    })
    const group: TrajectoryGroup = {
      trajectories: completion.choices.map((choice) => ({
        messages_and_choices: [...messages, choice],
        reward: reward(choice.index, choice.message.content ?? "")
      }))
    }
    return group
  })

const spread = (index: number) => index / 3

const tempDir = Effect.acquireRelease(
  Effect.sync(() => dataFilesDir("trainer-")),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

describe("Trainer on the real backend", () => {
  it.layer(WorkflowBackend, { timeout: 60_000 })((it) => {
    it.effect("log stores groups and answers the metrics computed from them", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "trainer", name: "log", base_model: TINY })
        const groups = [yield* sample(policy, 0, spread), yield* sample(policy, 1, (_, a) => (a === "blue" ? 1 : 0))]
        const result = yield* Trainer.log(policy, groups, "val")
        const expected = Metrics.compute(groups)
        expect(result?.metrics?.reward).toBeCloseTo(expected.reward ?? Number.NaN, 9)
        expect(result?.metrics?.num_trajectories).toBe(8)
        // The same call again is answered under the same derived key: the service stores it once.
        const again = yield* Trainer.log(policy, groups, "val")
        expect(again).toEqual(result)
      }).pipe(TestServices.provideLive)
    )

    it.effect("train: a job on two groups of differing rewards moves the policy one step, metrics averaged", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "trainer", name: "rl", base_model: TINY })
        const before = yield* policy.step
        const groups = [yield* sample(policy, 0, spread), yield* sample(policy, 1, spread)]
        const seen: Array<Trainer.Progress> = []
        const result = yield* Trainer.train(policy, groups, {
          wait: "5 seconds",
          onEvent: (progress) => Effect.sync(() => seen.push(progress))
        })
        expect(result.step).toBe(before + 1)
        expect(yield* policy.step).toBe(before + 1)
        expect(seen[0]?.event.type).toBe("training_started")
        expect(seen.at(-1)?.event.type).toBe("training_ended")
        const steps = seen.filter((p) => p.event.type === "gradient_step")
        expect(result.gradientSteps).toBe(steps.length)
        expect(result.gradientSteps).toBeGreaterThan(0)
        expect(steps.map((p) => p.step)).toEqual(steps.map((_, i) => i + 1))
        expect(steps.every((p) => p.of === result.gradientSteps)).toBe(true)
        // The mean of each step's loss, as the events reported it.
        const losses = steps.map((p) => (p.event.data as { loss?: number | null }).loss ?? Number.NaN)
        expect(result.metrics.loss).toBeCloseTo(Metrics.mean(losses) ?? Number.NaN, 9)

        const record = yield* (yield* TrainingClient).getTrainingJob(result.jobId)
        expect(record).toMatchObject({ status: "COMPLETED", step: before + 1 })

        // The next completion samples from the new checkpoint.
        const next = yield* policy.complete({ messages: [{ role: "user", content: "hi" }], max_completion_tokens: 2 })
        expect(next.model).toBe(`${policy.name}:step${before + 1}`)

        // Resubmitting the same groups from the same step joins the job already run (the default key).
        yield* policy.setStep(before)
        const joined = yield* Trainer.train(policy, groups, { wait: "5 seconds", onEvent: () => Effect.void })
        expect(joined.jobId).toBe(result.jobId)
        expect(joined.step).toBe(before + 1)
        expect(joined.metrics).toEqual(result.metrics)
      }).pipe(TestServices.provideLive)
    )

    it.effect("train: a flat group (equal rewards) takes no gradient step yet ends with a new checkpoint", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "trainer", name: "flat", base_model: TINY })
        const before = yield* policy.step
        const flat = yield* sample(policy, 2, () => 0.5)
        const seen: Array<Trainer.Progress> = []
        const result = yield* Trainer.train(policy, [flat], {
          wait: "5 seconds",
          onEvent: (progress) => Effect.sync(() => seen.push(progress))
        })
        expect(seen.map((p) => p.event.type)).toEqual(["training_started", "training_ended"])
        expect(seen[0]?.event.data).toMatchObject({ num_sequences: 0 })
        expect(result.gradientSteps).toBe(0)
        expect(result.metrics).toEqual({})
        expect(result.step).toBe(before + 1)
        expect(yield* policy.step).toBe(before + 1)
      }).pipe(TestServices.provideLive)
    )

    it.effect("train: groups without trajectories are dropped; none left fails before submitting, saying why", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "trainer", name: "empty", base_model: TINY })
        const error = yield* Effect.flip(
          Trainer.train(policy, [
            { trajectories: [], exceptions: [{ type: "Boom", message: "no", traceback: "" }] },
            { trajectories: [], exceptions: [{ type: "Bang", message: "neither", traceback: "" }] }
          ])
        )
        expect(error).toMatchObject({ _tag: "TrainerError", reason: "NothingToTrain" })
        // The rollouts' failures are why: the first one's own words, and how many.
        expect(error.message).toContain(
          "none of the 2 groups has a trajectory (2 rollouts failed; the first: Boom: no)"
        )
        expect(yield* policy.step).toBe(0)
      }).pipe(TestServices.provideLive)
    )

    it.scoped("trainSft: conversations written to a directory as JSONL train to a new step", () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const policy = yield* Policy.trainable({ project: "trainer", name: "sft", base_model: TINY })
        const before = yield* policy.step
        const conversations: Array<SftData.Conversation> = WORDS.map((word) => ({
          messages: [
            { role: "user", content: `Colour ${word}?` },
            { role: "assistant", content: word }
          ]
        }))
        const seen: Array<Trainer.Progress> = []
        const result = yield* Trainer.trainSft(policy, conversations, {
          config: { batch_size: 2, learning_rate: 1e-3 },
          wait: "5 seconds",
          onEvent: (progress) => Effect.sync(() => seen.push(progress))
        }).pipe(Effect.provide(SftData.directory(dir)))
        expect(result.step).toBe(before + 1)
        expect(yield* policy.step).toBe(before + 1)
        expect(result.gradientSteps).toBe(2)
        expect(seen.at(-1)?.event.type).toBe("training_ended")
        const files = readdirSync(dir)
        expect(files).toHaveLength(1)
        const lines = readFileSync(join(dir, files[0] ?? ""), "utf8")
          .trimEnd()
          .split("\n")
        expect(lines.map((line) => JSON.parse(line))).toEqual(conversations)

        // Data the backend cannot read: the job fails with the service's message; the step stays.
        const failed = yield* Effect.flip(
          Trainer.trainSftUrl(policy, `file://${join(dir, "missing.jsonl")}`, {
            wait: "5 seconds",
            onEvent: () => Effect.void
          })
        )
        expect(failed._tag).toBe("TrainingFailed")
        expect(failed).toMatchObject({ errorMessage: expect.stringContaining("missing.jsonl") })
        expect(yield* policy.step).toBe(before + 1)

        const none = yield* Effect.flip(Trainer.trainSft(policy, []).pipe(Effect.provide(SftData.directory(dir))))
        expect(none).toMatchObject({ _tag: "TrainerError", reason: "NothingToTrain" })
      }).pipe(TestServices.provideLive)
    )

    it.effect("prune keeps the latest and the best checkpoint by a metric, and the policy's step", () =>
      Effect.gen(function* () {
        const client = yield* TrainingClient
        const policy = yield* Policy.trainable({ project: "trainer", name: "prune", base_model: TINY })
        for (const round of [0, 1, 2]) {
          const groups = [yield* sample(policy, round, spread), yield* sample(policy, 3, spread)]
          yield* Trainer.train(policy, groups, { wait: "5 seconds", onEvent: () => Effect.void })
        }
        const all = Chunk.toArray(yield* Stream.runCollect(client.checkpoints(policy.record.id)))
        const steps = all.map((c) => c.step)
        const latest = Math.max(...steps)
        expect(latest).toBe(3)
        // The best by `loss` (lowest), among the checkpoints that carry it.
        const scored = all.filter((c) => c.metrics.loss !== undefined)
        expect(scored.length).toBeGreaterThan(0)
        const best = scored.reduce((a, b) => ((b.metrics.loss ?? 0) <= (a.metrics.loss ?? 0) ? b : a)).step

        // The policy pinned to step 1 keeps it from deletion too.
        const pinned = yield* Policy.fromModel(policy.record, { step: 1 })
        const deleted = yield* Trainer.prune(pinned, { keepLatest: 1, best: { metric: "loss", direction: "min" } })
        const kept = new Set([latest, best, 1])
        expect(deleted).toEqual(steps.filter((s) => !kept.has(s)).sort((a, b) => a - b))
        expect(deleted.length).toBeGreaterThan(0)
        const left = Chunk.toArray(yield* Stream.runCollect(client.checkpoints(policy.record.id))).map((c) => c.step)
        expect(new Set(left)).toEqual(kept)

        // Nothing more to delete: a second prune deletes nothing.
        expect(yield* Trainer.prune(pinned, { keepLatest: 1, best: { metric: "loss", direction: "min" } })).toEqual([])
      }).pipe(TestServices.provideLive)
    )
  })
})

// ---------------------------------------------------------------------------------------------------------
// Event following against a scripted service. The real backend serves events from one SQLite table in
// order, so it never repeats a page, serves one out of order, or fails mid-way; a programmable fake of the
// service (a real HTTP server on port 0) is how those cases are produced.

const UUID = FakeService.ids.event
const started = (n: number) => ({ id: UUID(0), type: "training_started", data: { num_sequences: n } })
const step = (i: number, loss: number) => ({ id: UUID(i), type: "gradient_step", data: { loss, grad_norm: i } })
const ended = (i: number) => ({ id: UUID(i), type: "training_ended", data: {} })
const page = (
  data: ReadonlyArray<{ readonly id: string; readonly type: string; readonly data: object }>,
  hasMore = false
) => ({
  json: { object: "list", data, first_id: data[0]?.id ?? "", last_id: data.at(-1)?.id ?? "", has_more: hasMore }
})

const EVENTS = "/v1/preview/training-jobs/:id/events"

/** The fake service, both real clients against it, and a trainable policy over its model (at step 2). */
const scripted = (options: { readonly maxRetries?: number } = {}) =>
  Effect.gen(function* () {
    const fake = yield* FakeService.make
    const layer = Layer.mergeAll(
      Layer.effect(TrainingClient, training(fake.url, options)),
      Layer.effect(InferenceClient, inference(fake.url))
    )
    const context = yield* Layer.build(layer)
    const policy = yield* Policy.trainable({ project: "p", name: "m", base_model: "base" }).pipe(
      Effect.provide(context)
    )
    return { fake, context, policy }
  })

const fast = { pollInterval: "10 millis", wait: "1 second" } as const

const group: TrajectoryGroup = {
  trajectories: [0, 1].map((reward) => ({
    messages_and_choices: [{ role: "user" as const, content: "q" }],
    reward
  }))
}

describe("Trainer following a scripted service", () => {
  it.scoped("repeated and overlapping pages count each event once", () =>
    Effect.gen(function* () {
      const { fake, context, policy } = yield* scripted()
      fake.route("GET", EVENTS, (request, attempt) => {
        const after = request.query.get("after")
        if (after === null) return page([started(2), step(1, 0.5)], true)
        // The first page is served again for the next cursor, then a page overlapping it.
        if (after === UUID(1) && attempt === 1) return page([started(2), step(1, 0.5)], true)
        if (after === UUID(1)) return page([step(1, 0.5), step(2, 0.25)], true)
        return page([step(2, 0.25), ended(3)])
      })
      fake.route("GET", "/v1/preview/training-jobs/:id", (r) => ({
        json: { ...FakeService.jobRecord(r.path.split("/")[4]!), status: "COMPLETED", step: 3 }
      }))
      const seen: Array<Trainer.Progress> = []
      const result = yield* Trainer.train(policy, [group], {
        ...fast,
        onEvent: (p) => Effect.sync(() => seen.push(p))
      }).pipe(Effect.provide(context))
      expect(seen.map((p) => p.event.id)).toEqual([UUID(0), UUID(1), UUID(2), UUID(3)])
      expect(result).toEqual({
        jobId: FakeService.ids.job,
        step: 3,
        metrics: { grad_norm: 1.5, loss: 0.375 },
        gradientSteps: 2
      })
      expect(yield* policy.step).toBe(3)
      expect(fake.count("GET", EVENTS)).toBe(4)
    }).pipe(TestServices.provideLive)
  )

  it.scoped("an out-of-order page that brings the end early: the whole list is read again for the steps", () =>
    Effect.gen(function* () {
      const { fake, context, policy } = yield* scripted()
      const all = [started(3), step(1, 1), step(2, 2), step(3, 3), ended(4)]
      let firstPage = true
      fake.route("GET", EVENTS, (request) => {
        const after = request.query.get("after")
        if (after === null && firstPage) {
          firstPage = false
          return page(all.slice(0, 2), true)
        }
        // The end, then a step that came before it, then the listing from the start in order.
        if (after === UUID(1)) return page([ended(4), step(3, 3)])
        return page(all)
      })
      const seen: Array<Trainer.Progress> = []
      const result = yield* Trainer.train(policy, [group], {
        ...fast,
        onEvent: (p) => Effect.sync(() => seen.push(p))
      }).pipe(Effect.provide(context))
      expect(result.gradientSteps).toBe(3)
      expect(result.metrics).toEqual({ grad_norm: 2, loss: 2 })
      expect(new Set(seen.map((p) => p.event.id))).toEqual(new Set(all.map((e) => e.id)))
      expect(seen).toHaveLength(5)
      // No step in the job record: the latest checkpoint (the fake's step 2) is the new step.
      expect(result.step).toBe(2)
    }).pipe(TestServices.provideLive)
  )

  it.scoped("what the published schema lets the service answer: an unknown event, null metrics, empty last_id", () =>
    Effect.gen(function* () {
      const { fake, context, policy } = yield* scripted()
      const unknown = { id: UUID(2), type: "checkpoint_uploaded", data: { bytes: 123 } }
      const loose = { id: UUID(3), type: "gradient_step", data: { loss: null, grad_norm: "NaN", entropy: 0.5 } }
      // `last_id` left at its published default "": the cursor is the page's last item.
      const bare = (data: ReadonlyArray<object>, has_more: boolean) => ({
        json: { object: "list", data, has_more }
      })
      fake.route("GET", EVENTS, (request) => {
        const after = request.query.get("after")
        if (after === null) return bare([started(2), step(1, 0.5)], true)
        if (after === UUID(1)) return bare([unknown, loose], true)
        return bare([ended(4)], false)
      })
      fake.route("GET", "/v1/preview/models/:id/checkpoints", () => ({
        json: bare([{ id: FakeService.ids.checkpoint(7), step: 7, metrics: { reward: null, loss: 0.5 } }], false).json
      }))
      const seen: Array<Trainer.Progress> = []
      const result = yield* Trainer.train(policy, [group], {
        ...fast,
        onEvent: (p) => Effect.sync(() => seen.push(p))
      }).pipe(Effect.provide(context))
      // The unknown event is passed on as such; the null and "NaN" metrics are nulls, left out of the means.
      expect(seen.map((p) => p.event.type)).toEqual([
        "training_started",
        "gradient_step",
        "unknown",
        "gradient_step",
        "training_ended"
      ])
      expect(seen[2]?.event).toEqual({
        id: UUID(2),
        type: "unknown",
        event_type: "checkpoint_uploaded",
        data: { bytes: 123 }
      })
      expect(seen[3]?.event.data).toEqual({ loss: null, grad_norm: null, entropy: 0.5 })
      expect(result).toEqual({
        jobId: FakeService.ids.job,
        step: 7,
        metrics: { entropy: 0.5, grad_norm: 1, loss: 0.5 },
        gradientSteps: 2
      })
      expect(yield* policy.step).toBe(7)
      const cursors = fake.received.filter((r) => r.path.endsWith("/events")).map((r) => r.query.get("after"))
      expect(cursors).toEqual([null, UUID(1), UUID(3)])
    }).pipe(TestServices.provideLive)
  )

  it.scoped("a 503 mid-way is retried by the client; an outage longer than its retries is resumed", () =>
    Effect.gen(function* () {
      const { fake, context, policy } = yield* scripted({ maxRetries: 0 })
      let failures = 0
      fake.route("GET", EVENTS, (request) => {
        const after = request.query.get("after")
        if (after === null) return page([started(2), step(1, 0.5)], true)
        // Three 503s in a row: the client (no retries here) fails, the trainer resumes from event 1.
        if (failures < 3) {
          failures++
          return { status: 503, json: { detail: "overloaded" } }
        }
        return page([step(2, 0.25), ended(3)])
      })
      const result = yield* Trainer.train(policy, [group], { ...fast, onEvent: () => Effect.void }).pipe(
        Effect.provide(context)
      )
      expect(result.gradientSteps).toBe(2)
      expect(result.metrics.loss).toBeCloseTo(0.375, 12)
      expect(failures).toBe(3)
      const cursors = fake.received.filter((r) => r.path.endsWith("/events")).map((r) => r.query.get("after"))
      expect(cursors).toEqual([null, UUID(1), UUID(1), UUID(1), UUID(1)])

      // With the client's own retries (default 3) a single 503 never reaches the trainer.
      const retried = yield* scripted()
      let once = false
      retried.fake.route("GET", EVENTS, (request) => {
        if (request.query.get("after") === null) return page([started(1)], true)
        if (!once) {
          once = true
          return { status: 503, json: { detail: "overloaded" } }
        }
        return page([step(1, 0.5), ended(2)])
      })
      const events = yield* Trainer.events(FakeService.ids.job as TrainingJobId, fast).pipe(
        Stream.runCollect,
        Effect.provide(retried.context)
      )
      expect(Chunk.toArray(events).map((e) => e.type)).toEqual(["training_started", "gradient_step", "training_ended"])
      expect(retried.fake.count("GET", EVENTS)).toBe(3)
    }).pipe(TestServices.provideLive)
  )

  it.scoped("a failure that is not transient is not resumed", () =>
    Effect.gen(function* () {
      const { fake, context, policy } = yield* scripted({ maxRetries: 0 })
      fake.route("GET", EVENTS, () => ({ status: 404, json: { detail: "Training job not found" } }))
      const error = yield* Effect.flip(Trainer.train(policy, [group], fast).pipe(Effect.provide(context)))
      expect(error).toMatchObject({ _tag: "ApiError", reason: "NotFound", status: 404 })
      expect(fake.count("GET", EVENTS)).toBe(1)
      expect(yield* policy.step).toBe(2)
    }).pipe(TestServices.provideLive)
  )

  it.scoped("training_failed is a TrainingFailed with the service's message; the policy stays", () =>
    Effect.gen(function* () {
      const { fake, context, policy } = yield* scripted()
      fake.route("GET", EVENTS, () =>
        page([
          started(2),
          step(1, 0.5),
          { id: UUID(2), type: "training_failed", data: { error_message: "CUDA out of memory" } }
        ])
      )
      const error = yield* Effect.flip(Trainer.train(policy, [group], fast).pipe(Effect.provide(context)))
      expect(error).toBeInstanceOf(Trainer.TrainingFailed)
      expect(error).toMatchObject({ jobId: FakeService.ids.job, errorMessage: "CUDA out of memory" })
      expect(error.message).toContain("CUDA out of memory")
      expect(yield* policy.step).toBe(2)
      expect(fake.count("GET", "/v1/preview/training-jobs/:id")).toBe(0)
    }).pipe(TestServices.provideLive)
  )

  it.scoped("the submission: empty groups dropped, a key derived from model, step and body, progress logged", () =>
    Effect.gen(function* () {
      const { fake, context, policy } = yield* scripted()
      const lines: Array<string> = []
      const logger = Logger.make(({ message }) => {
        lines.push((Array.isArray(message) ? message : [message]).map(String).join(" "))
      })
      const run = (groups: ReadonlyArray<TrajectoryGroup>) =>
        Trainer.train(policy, groups, fast).pipe(
          Effect.provide(context),
          Effect.provide(Logger.replace(Logger.defaultLogger, logger))
        )
      yield* run([group, { trajectories: [] }])
      yield* policy.setStep(2)
      yield* run([group])
      yield* run([{ ...group, metadata: { other: 1 } }])
      const posts = fake.received.filter((r) => r.method === "POST" && r.path === "/v1/preview/training-jobs")
      expect(posts).toHaveLength(3)
      expect(posts[0]?.json).toMatchObject({ trajectory_groups: [group] })
      const keys = posts.map((r) => r.headers["idempotency-key"])
      expect(keys[0]).toMatch(/^effect-rl-rl-/)
      expect(keys[0]).toContain(FakeService.ids.model)
      expect(keys[1]).toBe(keys[0])
      expect(keys[2]).not.toBe(keys[0])
      expect(lines).toContain(`training job ${FakeService.ids.job}: gradient step 1/2 loss 0.5000`)
      expect(lines).toContain(`training job ${FakeService.ids.job} ended after 2 gradient steps`)
    }).pipe(TestServices.provideLive)
  )
})
