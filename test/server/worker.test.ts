/**
 * The job worker against a real SQLite store in a temp dir: RL and SFT jobs run on the engine, emit their
 * events in order and leave a new checkpoint; failures end the job and the worker goes on.
 */
import { writeFileSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { ChatCompletionRequest } from "../../src/api/ChatCompletion.js"
import type { ModelId } from "../../src/api/Model.js"
import { CreateTrainingJob } from "../../src/api/TrainingJob.js"
import type { TrajectoryGroup } from "../../src/api/Trajectory.js"
import { saveCheckpoint } from "../../src/local/engine/policy/Checkpoint.js"
import { Policy } from "../../src/local/engine/policy/Policy.js"
import { complete } from "../../src/local/engine/Sampler.js"
import * as Worker from "../../src/local/server/internal/worker.js"
import { makeReader } from "../../src/local/server/internal/workerData.js"
import { Checkpoints } from "../../src/local/store/Checkpoints.js"
import { type JobEvent, JobEvents } from "../../src/local/store/JobEvents.js"
import { INTERRUPTED_MESSAGE, Jobs } from "../../src/local/store/Jobs.js"
import { Models } from "../../src/local/store/Models.js"
import * as Store from "../../src/local/store/Store.js"
import { modelRequest, tempDir } from "../store/support.js"

const WORDS = ["red", "blue", "green", "gold"]

const newModel = (name: string) =>
  Effect.flatMap(Models, (models) =>
    models.create(modelRequest(name), {
      initialWeights: Effect.sync(() => saveCheckpoint(Policy.create(undefined, { seed: 0 })))
    })
  ).pipe(Effect.map((created) => created.model.id))

/** An RL job body whose groups were sampled from the step 0 policy (rewards alternate, so every group trains). */
const rlRequest = (modelId: string, seed: number) => {
  const policy = Policy.create(undefined, { seed: 0 })
  const groups: Array<TrajectoryGroup> = [0, 1, 2].map((g) => {
    const user = { role: "user" as const, content: `Say: ${WORDS[g]}` }
    const request: ChatCompletionRequest = {
      model: "local",
      messages: [user],
      n: 4,
      seed: seed * 10 + g,
      temperature: 1,
      logprobs: true,
      max_completion_tokens: 8,
      structured_outputs: { choice: WORDS }
    }
    const completion = complete(policy, request, { modelName: "local", now: 0, requestId: "r" })
    return {
      trajectories: completion.choices.map((choice) => ({
        messages_and_choices: [user, choice],
        reward: choice.index % 2
      }))
    }
  })
  const body = Schema.encodeSync(CreateTrainingJob)({ model_id: modelId as ModelId, trajectory_groups: groups })
  return JSON.parse(JSON.stringify(body)) as unknown
}

/** Waits until the job's last event ends it; every event, in order. */
const eventsToEnd = (jobId: string) =>
  Effect.gen(function* () {
    const events = yield* JobEvents
    const all: Array<JobEvent> = []
    for (let round = 0; round < 200; round++) {
      const page = yield* events.list(jobId, { after: all.at(-1)?.id, limit: 100 })
      all.push(...page.data)
      const last = all.at(-1)
      if (last !== undefined && (last.type === "training_ended" || last.type === "training_failed")) return all
      yield* events.waitForEvents(jobId, last?.id, 5000)
    }
    throw new Error(`job ${jobId} did not end`)
  })

const types = (events: ReadonlyArray<JobEvent>) => events.map((event) => event.type)

const withStore = (dataDir: string) => Effect.provide(Store.layer({ dataDir }))
/**
 * The worker reads what these tests write (files under the temporary directory, and a local HTTP server's
 * data): its default reader reads nothing. The server's read policy is tested on the real server
 * (`trainingData.test.ts`).
 */
const workerLayer = Worker.layer({
  pollMs: 200,
  readTrainingData: makeReader({ allowDirs: [tmpdir()], allowHttp: true })
})
const withWorker = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.provide(effect, workerLayer)

const sftLines = (count: number): string =>
  Array.from({ length: count }, (_, i) =>
    JSON.stringify({
      messages: [
        { role: "user", content: `Colour ${i % 4}?` },
        { role: "assistant", content: WORDS[i % 4] }
      ]
    })
  ).join("\n")

/** A local HTTP server answering `/train.jsonl` with the body, anything else with 404; its base URL. */
const serveText = (body: string) =>
  Effect.acquireRelease(
    Effect.async<{ readonly url: string; readonly close: () => void }>((resume) => {
      const server = createServer((request, response) => {
        if (request.url === "/train.jsonl") response.writeHead(200, { "content-type": "application/jsonl" }).end(body)
        else response.writeHead(404).end()
      })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo
        resume(Effect.succeed({ url: `http://127.0.0.1:${port}`, close: () => server.close() }))
      })
    }),
    (served) => Effect.sync(served.close)
  )

describe("Worker", () => {
  it.scopedLive(
    "runs an RL job: started, gradient steps, ended, and a new checkpoint at step 1",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        yield* withStore(dir)(
          Effect.gen(function* () {
            const modelId = yield* newModel("rl")
            const job = yield* Effect.flatMap(Jobs, (jobs) => jobs.enqueue(modelId, "rl", rlRequest(modelId, 1)))
            const events = yield* withWorker(eventsToEnd(job.id))
            const kinds = types(events)
            expect(kinds[0]).toBe("training_started")
            expect(kinds.at(-1)).toBe("training_ended")
            const steps = events.filter((event) => event.type === "gradient_step")
            expect(steps.length).toBeGreaterThan(0)
            expect(kinds.slice(1, -1).every((type) => type === "gradient_step")).toBe(true)
            expect(events[0]!.data).toEqual({ num_sequences: steps.length })
            for (const key of ["loss", "entropy", "grad_norm", "learning_rate", "reward", "kl_div"]) {
              expect(typeof steps[0]!.data[key], key).toBe("number")
            }
            expect(events.at(-1)!.data).toEqual({ step: 1 })

            const checkpoints = yield* Checkpoints
            const latest = Option.getOrThrow(yield* checkpoints.latest(modelId))
            expect(latest.step).toBe(1)
            expect(typeof latest.metrics.loss).toBe("number")
            const before = yield* checkpoints.weights(modelId, 0)
            const after = yield* checkpoints.weights(modelId, 1)
            expect(Buffer.from(after).equals(Buffer.from(before))).toBe(false)
            const done = yield* Effect.flatMap(Jobs, (jobs) => jobs.get(job.id))
            expect(done).toMatchObject({ status: "COMPLETED", step: 1, error_message: null })
          })
        )
      }),
    { timeout: 20_000 }
  )

  it.scopedLive(
    "runs two jobs of one model in order, each on the previous checkpoint",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        yield* withStore(dir)(
          Effect.gen(function* () {
            const modelId = yield* newModel("two")
            const jobs = yield* Jobs
            const first = yield* jobs.enqueue(modelId, "rl", rlRequest(modelId, 2))
            const second = yield* jobs.enqueue(modelId, "rl", rlRequest(modelId, 3))
            yield* withWorker(Effect.zip(eventsToEnd(first.id), eventsToEnd(second.id)))
            const a = yield* jobs.get(first.id)
            const b = yield* jobs.get(second.id)
            expect([a.status, a.step, b.status, b.step]).toEqual(["COMPLETED", 1, "COMPLETED", 2])
            expect(b.training_start! >= a.training_end!).toBe(true)
            const page = yield* Effect.flatMap(Checkpoints, (checkpoints) => checkpoints.list(modelId))
            expect(page.data.map((checkpoint) => checkpoint.step)).toEqual([0, 1, 2])
          })
        )
      }),
    { timeout: 20_000 }
  )

  it.scopedLive(
    "runs an SFT job from a file:// JSONL, one step per batch, and lowers the loss",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const file = join(dir, "train.jsonl")
        writeFileSync(file, `${sftLines(48)}\n`)
        yield* withStore(dir)(
          Effect.gen(function* () {
            const modelId = yield* newModel("sft")
            const job = yield* Effect.flatMap(Jobs, (jobs) =>
              jobs.enqueue(modelId, "sft", {
                model_id: modelId,
                training_data_url: pathToFileURL(file).href,
                config: { batch_size: 4, learning_rate: 0.01 }
              })
            )
            const events = yield* withWorker(eventsToEnd(job.id))
            const steps = events.filter((event) => event.type === "gradient_step")
            expect(types(events)[0]).toBe("training_started")
            expect(types(events).at(-1)).toBe("training_ended")
            expect(steps.length).toBe(12)
            expect(events[0]!.data).toEqual({ num_sequences: 12 })
            const losses = steps.map((step) => step.data.loss as number)
            expect(losses.at(-1)!).toBeLessThan(losses[0]! * 0.8)
            expect(steps[0]!.data.learning_rate).toBe(0.01)
            const latest = Option.getOrThrow(yield* Effect.flatMap(Checkpoints, (c) => c.latest(modelId)))
            expect(latest.step).toBe(1)
          })
        )
      }),
    { timeout: 20_000 }
  )

  it.scopedLive(
    "fails jobs with broken data or requests, with a message, and runs the next job",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const broken = join(dir, "broken.jsonl")
        writeFileSync(broken, `${sftLines(1)}\nnot json\n`)
        yield* withStore(dir)(
          Effect.gen(function* () {
            const modelId = yield* newModel("broken")
            const jobs = yield* Jobs
            const bad = (request: unknown) => jobs.enqueue(modelId, "sft", request)
            const badJson = yield* bad({ model_id: modelId, training_data_url: pathToFileURL(broken).href })
            const missing = yield* bad({ model_id: modelId, training_data_url: pathToFileURL(join(dir, "no")).href })
            const scheme = yield* bad({ model_id: modelId, training_data_url: "s3://bucket/data.jsonl" })
            const badRl = yield* jobs.enqueue(modelId, "rl", { model_id: modelId, trajectory_groups: "nope" })
            const good = yield* jobs.enqueue(modelId, "rl", rlRequest(modelId, 4))
            const failure = (id: string) =>
              Effect.map(eventsToEnd(id), (events) => {
                expect(types(events)).toEqual(["training_failed"])
                return String(events[0]!.data.error_message)
              })
            const messages = yield* withWorker(
              Effect.gen(function* () {
                const out = yield* Effect.forEach([badJson, missing, scheme, badRl], (job) => failure(job.id))
                expect(types(yield* eventsToEnd(good.id)).at(-1)).toBe("training_ended")
                return out
              })
            )
            expect(messages[0]).toContain("training data line 2 is not JSON")
            expect(messages[1]).toContain("cannot read training data")
            expect(messages[2]).toContain("unsupported training_data_url")
            expect(messages[3]).toContain("invalid job request")
            const failed = yield* jobs.get(badJson.id)
            expect(failed).toMatchObject({ status: "FAILED", error_message: messages[0] })
            expect(yield* jobs.get(good.id)).toMatchObject({ status: "COMPLETED", step: 1 })
          })
        )
      }),
    { timeout: 20_000 }
  )

  it.scopedLive(
    "reads SFT data over http(s), and fails a job whose data answers 404 or whose checkpoint is corrupt",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const served = yield* serveText(sftLines(8))
        yield* withStore(dir)(
          Effect.gen(function* () {
            const modelId = yield* newModel("http")
            const jobs = yield* Jobs
            const sft = (path: string) => ({ model_id: modelId, training_data_url: `${served.url}${path}` })
            const missing = yield* jobs.enqueue(modelId, "sft", sft("/gone.jsonl"))
            const good = yield* jobs.enqueue(modelId, "sft", sft("/train.jsonl"))
            const corrupt = yield* Effect.flatMap(Models, (models) =>
              models.create(modelRequest("corrupt"), { initialWeights: Effect.succeed(Uint8Array.of(1, 2, 3)) })
            )
            const corruptJob = yield* jobs.enqueue(corrupt.model.id, "rl", rlRequest(corrupt.model.id, 5))
            const [a, b, c] = yield* withWorker(
              Effect.all([eventsToEnd(missing.id), eventsToEnd(good.id), eventsToEnd(corruptJob.id)])
            )
            expect(a.at(-1)!.data.error_message).toContain("HTTP 404")
            expect(types(b)[0]).toBe("training_started")
            expect(types(b).at(-1)).toBe("training_ended")
            expect(types(c)).toEqual(["training_failed"])
            expect(c[0]!.data.error_message).toContain("cannot load the checkpoint of step 0")
          })
        )
      }),
    { timeout: 20_000 }
  )

  it.scopedLive(
    "fails a running job with the stopped message when the worker stops, writing no checkpoint",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const file = join(dir, "long.jsonl")
        writeFileSync(file, sftLines(1000))
        yield* withStore(dir)(
          Effect.gen(function* () {
            const modelId = yield* newModel("stop")
            const jobs = yield* Jobs
            const events = yield* JobEvents
            const job = yield* jobs.enqueue(modelId, "sft", {
              model_id: modelId,
              training_data_url: pathToFileURL(file).href,
              config: { batch_size: 1 }
            })
            // Run the worker until the job has taken a step, then close its scope.
            yield* withWorker(
              Effect.gen(function* () {
                for (let i = 0; i < 100; i++) {
                  const page = yield* events.list(job.id, { limit: 100 })
                  if (page.data.some((event) => event.type === "gradient_step")) break
                  yield* events.waitForEvents(job.id, page.data.at(-1)?.id, 2000)
                }
                // Timers fire between the job's steps: the event loop is not held for the whole job. Its steps are
                // reported faster than written one by one; writing each as its message came held the loop until
                // the last (this timer fired after 1.8-2.6 s, at 999 of the 1000 steps or after the job had ended).
                yield* Effect.sleep("5 millis")
                const running = yield* jobs.get(job.id)
                expect(running.status).toBe("RUNNING")
                expect(running.progress).toBeLessThan(0.5)
              })
            )
            const all = yield* eventsToEnd(job.id)
            expect(all.at(-1)).toMatchObject({ type: "training_failed", data: { error_message: INTERRUPTED_MESSAGE } })
            expect(yield* jobs.get(job.id)).toMatchObject({ status: "FAILED", step: null })
            const latest = Option.getOrThrow(yield* Effect.flatMap(Checkpoints, (c) => c.latest(modelId)))
            expect(latest.step).toBe(0)
          })
        )
      }),
    { timeout: 20_000 }
  )
})
