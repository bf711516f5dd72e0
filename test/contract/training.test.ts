/**
 * The foundation's `TrainingClient`, unchanged, against the real embedded backend (no fake): every method of
 * the client through the HTTP surface the local server serves, with the decoded values checked, and the
 * error mapping (401, 404, 409, 422, 400, and requests refused before sending) on the server's own replies.
 *
 * The backend is built once for the block, without the test services: the server's long polls and the job
 * worker run on the real clock, as they do for a user. It may read `file://` data under the tests' allowed
 * directory and fetch http(s) data (a test serves a job's data itself), neither of which it does by default.
 */
import { rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { describe, expect, layer } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import type { ChatCompletionRequest } from "../../src/api/ChatCompletion.js"
import type { ModelId } from "../../src/api/Model.js"
import type { TrainingJobId } from "../../src/api/TrainingJob.js"
import type { TrajectoryGroup } from "../../src/api/Trajectory.js"
import { backendWith, dataFilesDir } from "../server/support.js"
import {
  ask,
  BASE,
  eventsToEnd,
  failure,
  flatJob,
  heldData,
  MISSING,
  recorder,
  sampledGroups,
  trainingClient,
  trainOnce,
  WORDS
} from "./support.js"

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** One line of SFT data. */
const sftLine = (word: string) => ({
  messages: [
    { role: "user", content: `Colour ${word}?` },
    { role: "assistant", content: word }
  ]
})

const steps = (items: Chunk.Chunk<{ readonly step: number }>) => Chunk.toReadonlyArray(items).map((c) => c.step)

describe("TrainingClient against the embedded server", () => {
  layer(backendWith({ allowHttp: true }), { excludeTestServices: true })("every method on the real server", (it) => {
    it.scoped("createModel: created, return_existing gives the same model, a taken name is 409 Conflict", () =>
      Effect.gen(function* () {
        const c = yield* trainingClient()
        const first = yield* c.createModel({ project: "contract", name: "m", base_model: BASE, entity: null })
        expect(first.id).toMatch(UUID)
        expect(first).toMatchObject({ entity: "local", project: "contract", name: "m", base_model: BASE })
        const again = yield* c.createModel({ project: "contract", name: "m", base_model: BASE, return_existing: true })
        expect(again).toEqual(first)

        const taken = yield* failure(c.createModel({ project: "contract", name: "m", base_model: BASE }))
        expect(taken).toMatchObject({ reason: "Conflict", status: 409, method: "POST", path: "/v1/preview/models" })
        expect(taken.description).toBe("model m already exists in local/contract")

        const other = yield* c.createModel({ project: "contract", name: "m2", base_model: BASE })
        expect(other.id).not.toBe(first.id)
      })
    )

    it.scoped("deleteModel: counts the checkpoints it deleted; the model is then NotFound", () =>
      Effect.gen(function* () {
        const c = yield* trainingClient()
        const model = yield* c.createModel({ project: "contract", name: "deleted", base_model: BASE })
        yield* trainOnce(c, model.id)
        yield* trainOnce(c, model.id)
        const result = yield* c.deleteModel(model.id)
        expect(result).toEqual({ model_id: model.id, deleted_checkpoints: 3, deleted_run: false })

        const again = yield* failure(c.deleteModel(model.id))
        expect(again).toMatchObject({ reason: "NotFound", status: 404, description: "Model not found" })
        const listed = yield* failure(c.listCheckpoints(model.id))
        expect(listed).toMatchObject({ reason: "NotFound", path: `/v1/preview/models/${model.id}/checkpoints` })
      })
    )

    it.scoped(
      "checkpoints: pages of listCheckpoints, the stream over every page both ways, latest, deleteCheckpoints",
      () =>
        Effect.gen(function* () {
          const c = yield* trainingClient()
          const model = yield* c.createModel({ project: "contract", name: "pages", base_model: BASE })
          for (let i = 0; i < 3; i++) yield* trainOnce(c, model.id)

          const first = yield* c.listCheckpoints(model.id, { limit: 2 })
          expect(first.data.map((x) => x.step)).toEqual([0, 1])
          expect(first).toMatchObject({ object: "list", has_more: true })
          expect(first.first_id).toBe(first.data[0]?.id)
          expect(first.last_id).toBe(first.data[1]?.id)
          for (const checkpoint of first.data) expect(checkpoint.id).toMatch(UUID)
          const second = yield* c.listCheckpoints(model.id, { after: first.last_id, limit: 2 })
          expect(second.data.map((x) => x.step)).toEqual([2, 3])
          expect(second.has_more).toBe(false)
          const desc = yield* c.listCheckpoints(model.id, { order: "desc", limit: 3 })
          expect(desc.data.map((x) => x.step)).toEqual([3, 2, 1])
          expect(desc.has_more).toBe(true)

          // One item per page: four pages, each read with the previous page's last id.
          const rec = recorder()
          const paged = yield* trainingClient({ transformClient: rec.transformClient })
          expect(steps(yield* Stream.runCollect(paged.checkpoints(model.id, { limit: 1 })))).toEqual([0, 1, 2, 3])
          const afters = rec.sent.map((r) => r.url.searchParams.get("after"))
          expect(afters).toEqual([null, ...first.data.map((x) => x.id), second.data[0]?.id])
          expect(steps(yield* Stream.runCollect(c.checkpoints(model.id, { limit: 1, order: "desc" })))).toEqual([
            3, 2, 1, 0
          ])
          const rest = yield* Stream.runCollect(c.checkpoints(model.id, { after: first.data[0]?.id, limit: 2 }))
          expect(steps(rest)).toEqual([1, 2, 3])

          const latest = yield* c.latestCheckpoint(model.id)
          expect(Option.map(latest, (x) => [x.step, x.id])).toEqual(Option.some([3, second.data[1]?.id]))
          expect(Option.map(latest, (x) => typeof x.metrics)).toEqual(Option.some("object"))

          const deleted = yield* c.deleteCheckpoints(model.id, [1, 3, 9])
          expect(deleted).toEqual({ deleted_count: 2, not_found_steps: [9] })
          expect(steps(yield* Stream.runCollect(c.checkpoints(model.id)))).toEqual([0, 2])
          expect(Option.map(yield* c.latestCheckpoint(model.id), (x) => x.step)).toEqual(Option.some(2))
          yield* c.deleteCheckpoints(model.id, [0, 2])
          expect(yield* c.latestCheckpoint(model.id)).toEqual(Option.none())
          expect(Chunk.size(yield* Stream.runCollect(c.checkpoints(model.id)))).toBe(0)
        }),
      30_000
    )

    it.scoped("log: the metrics come back in the result; the same idempotency key gives the same result", () =>
      Effect.gen(function* () {
        const c = yield* trainingClient()
        const model = yield* c.createModel({ project: "contract", name: "log", base_model: BASE })
        const turn = (reward: number, correct: boolean) => ({
          messages_and_choices: [{ role: "user" as const, content: "2+2?" }],
          reward,
          metrics: { correct }
        })
        const request = {
          split: "train",
          trajectory_groups: [
            { trajectories: [turn(1, true), turn(0, false)] },
            {
              trajectories: [turn(1, true), turn(1, true)],
              exceptions: [{ type: "ValueError", message: "x", traceback: "" }]
            }
          ]
        }
        const result = yield* c.log(model.id, request, { idempotencyKey: "contract-log-1" })
        expect(result?.metrics).toEqual({
          reward: 3 / 4,
          reward_std_dev: 0.25,
          exception_rate: 1 / 5,
          correct: 3 / 4,
          num_scenarios: 2,
          num_trajectories: 4,
          num_groups_submitted: 2,
          num_groups_trainable: 1
        })
        expect(yield* c.log(model.id, request, { idempotencyKey: "contract-log-1" })).toEqual(result)
        const missing = yield* failure(c.log(MISSING as ModelId, request))
        expect(missing).toMatchObject({ reason: "NotFound", status: 404, description: "Model not found" })
      })
    )

    it.scoped("a choice whose tool calls are custom ones (as the published schema takes) is logged and trained", () =>
      Effect.gen(function* () {
        const c = yield* trainingClient()
        const model = yield* c.createModel({ project: "contract", name: "custom-tool", base_model: BASE })
        const name = "wandb-artifact:///local/contract/custom-tool"
        const sampled = yield* c.createChatCompletion(ask(name, 0))
        // The sampled choices, each recorded as a call of a custom tool (free-form input) with its text.
        const groups: ReadonlyArray<TrajectoryGroup> = [
          {
            trajectories: sampled.choices.map((choice) => ({
              messages_and_choices: [
                ...ask(name, 0).messages,
                {
                  ...choice,
                  message: {
                    ...choice.message,
                    tool_calls: [
                      {
                        id: `call_${choice.index}`,
                        type: "custom" as const,
                        custom: { name: "say", input: choice.message.content ?? "" }
                      }
                    ]
                  },
                  finish_reason: "tool_calls"
                }
              ],
              reward: choice.index % 2
            }))
          }
        ]
        const logged = yield* c.log(model.id, { split: "train", trajectory_groups: groups })
        expect(logged?.metrics?.num_trajectories).toBe(4)
        const job = yield* c.createTrainingJob({ model_id: model.id, trajectory_groups: groups })
        const events = yield* eventsToEnd(c, job.id)
        expect(events.at(-1)?.type).toBe("training_ended")
        expect(events.some((e) => e.type === "gradient_step")).toBe(true)
      })
    )

    it.scoped(
      "an RL job: the same idempotency key gives the same job; get, one page, all pages, follow with and without wait",
      () =>
        Effect.gen(function* () {
          const c = yield* trainingClient()
          const model = yield* c.createModel({ project: "contract", name: "rl", base_model: BASE })
          const groups = yield* sampledGroups(c, "wandb-artifact:///local/contract/rl")
          const body = { model_id: model.id, trajectory_groups: groups }
          const job = yield* c.createTrainingJob(body, { idempotencyKey: "contract-rl-1" })
          expect(job.id).toMatch(UUID)
          expect(job).toMatchObject({ status: "PENDING", kind: "rl", model_id: model.id })
          expect(typeof job.created_at).toBe("string")
          expect((yield* c.createTrainingJob(body, { idempotencyKey: "contract-rl-1" })).id).toBe(job.id)

          const other = yield* c.createTrainingJob(flatJob(model.id), { idempotencyKey: "contract-rl-2" })
          expect(other.id).not.toBe(job.id)

          const followed = yield* eventsToEnd(c, job.id)
          const types = followed.map((e) => e.type)
          expect(types[0]).toBe("training_started")
          expect(types.at(-1)).toBe("training_ended")
          expect(types.slice(1, -1).length).toBeGreaterThan(0)
          expect(types.slice(1, -1).every((t) => t === "gradient_step")).toBe(true)
          const started = followed[0]
          expect(started?.type === "training_started" && started.data.num_sequences).toBe(types.length - 2)
          const step = followed[1]
          expect(step?.type === "gradient_step" && typeof step.data.loss).toBe("number")
          expect(new Set(followed.map((e) => e.id)).size).toBe(followed.length)
          expect((yield* eventsToEnd(c, other.id)).map((e) => e.type)).toEqual(["training_started", "training_ended"])

          const done = yield* c.getTrainingJob(job.id)
          expect(done).toMatchObject({ id: job.id, status: "COMPLETED", kind: "rl", model_id: model.id, step: 1 })
          expect(typeof done.training_end).toBe("string")
          expect(yield* c.getTrainingJob(other.id)).toMatchObject({ id: other.id, status: "COMPLETED", step: 2 })

          const ids = followed.map((e) => e.id)
          const page = yield* c.listTrainingJobEvents(job.id, { limit: 2 })
          expect(page.data.map((e) => e.id)).toEqual(ids.slice(0, 2))
          expect(page).toMatchObject({ object: "list", has_more: true, first_id: ids[0], last_id: ids[1] })
          const tail = yield* c.listTrainingJobEvents(job.id, { after: ids.at(-2) })
          expect(tail.data.map((e) => e.type)).toEqual(["training_ended"])
          expect(tail.has_more).toBe(false)
          const all = yield* Stream.runCollect(c.trainingJobEvents(job.id, { limit: 1 }))
          expect(Chunk.toReadonlyArray(all).map((e) => e.id)).toEqual(ids)
          const after = yield* Stream.runCollect(c.trainingJobEvents(job.id, { after: ids[0], limit: 2 }))
          expect(Chunk.toReadonlyArray(after).map((e) => e.id)).toEqual(ids.slice(1))

          // Without `wait`: plain polls (no wait_ms), the same events, ending at the terminal one.
          const plain = recorder()
          const poller = yield* trainingClient({ transformClient: plain.transformClient })
          const replay = yield* poller
            .followTrainingJobEvents(job.id, { pollInterval: "20 millis" })
            .pipe(Stream.runCollect, Effect.timeout("10 seconds"))
          expect(Chunk.toReadonlyArray(replay).map((e) => e.id)).toEqual(ids)
          expect(plain.sent.every((r) => !r.url.searchParams.has("wait_ms"))).toBe(true)
          const resumed = yield* c
            .followTrainingJobEvents(job.id, { after: ids[1], pollInterval: "20 millis" })
            .pipe(Stream.runCollect, Effect.timeout("10 seconds"))
          expect(Chunk.toReadonlyArray(resumed).map((e) => e.id)).toEqual(ids.slice(2))

          const latest = yield* c.latestCheckpoint(model.id)
          expect(Option.map(latest, (x) => x.step)).toEqual(Option.some(2))
        }),
      30_000
    )

    it.scoped(
      "followTrainingJobEvents with wait: once caught up, each request is held until the job's next event",
      () =>
        Effect.gen(function* () {
          const c = yield* trainingClient()
          // The job's data is served by a test server that answers only when told, so the job is sure to be
          // waiting (no events yet) while the client follows it.
          const data = yield* heldData(`${JSON.stringify(sftLine("red"))}\n`)
          const model = yield* c.createModel({ project: "contract", name: "held", base_model: BASE })
          const job = yield* c.createSftTrainingJob({ model_id: model.id, training_data_url: data.url })
          const rec = recorder()
          const polled = yield* trainingClient({ transformClient: rec.transformClient })
          // Polls 20 ms apart unless the server holds them: over 300 ms, a server that ignored `wait_ms` would
          // have been asked several more times; one that holds the request was asked once.
          const follower = yield* polled
            .followTrainingJobEvents(job.id, { wait: "5 seconds", pollInterval: "20 millis" })
            .pipe(Stream.runCollect, Effect.map(Chunk.toReadonlyArray), Effect.timeout("20 seconds"), Effect.fork)
          // The first request, with wait_ms, finds nothing and is held by the server.
          yield* Effect.sleep("10 millis").pipe(Effect.repeat({ until: () => rec.sent.length >= 1 }))
          yield* Effect.sleep("300 millis")
          expect(rec.sent.length).toBe(1)
          yield* Effect.sync(data.release)
          const events = yield* Fiber.join(follower)
          expect(events.map((e) => e.type)).toEqual(["training_started", "gradient_step", "training_ended"])
          const waits = rec.sent.map((r) => r.url.searchParams.get("wait_ms"))
          expect(waits.every((w) => w === "5000")).toBe(true)
          // Each held request ends with a new event: at most one request per event, plus the first.
          expect(rec.sent.length).toBeLessThanOrEqual(events.length + 1)
          expect(yield* c.getTrainingJob(job.id)).toMatchObject({ status: "COMPLETED", step: 1 })
        })
    )

    it.scoped("an SFT job from a file:// JSONL: same key same job; trains to step 1; unreadable data fails", () =>
      Effect.gen(function* () {
        const c = yield* trainingClient()
        const dir = yield* Effect.acquireRelease(
          Effect.sync(() => dataFilesDir("contract-")),
          (d) => Effect.sync(() => rmSync(d, { recursive: true, force: true }))
        )
        const file = join(dir, "train.jsonl")
        const lines = WORDS.map((word) => JSON.stringify(sftLine(word)))
        writeFileSync(file, `${lines.join("\n")}\n`)
        const model = yield* c.createModel({ project: "contract", name: "sft", base_model: BASE })
        const body = { model_id: model.id, training_data_url: pathToFileURL(file).href }
        const job = yield* c.createSftTrainingJob(body, { idempotencyKey: "contract-sft-1" })
        expect(job.id).toMatch(UUID)
        expect(job).toMatchObject({ kind: "sft", status: "PENDING", model_id: model.id })
        expect((yield* c.createSftTrainingJob(body, { idempotencyKey: "contract-sft-1" })).id).toBe(job.id)
        const events = yield* eventsToEnd(c, job.id)
        expect(events[0]?.type).toBe("training_started")
        expect(events.at(-1)?.type).toBe("training_ended")
        expect(yield* c.getTrainingJob(job.id)).toMatchObject({ id: job.id, kind: "sft", status: "COMPLETED", step: 1 })
        expect(Option.map(yield* c.latestCheckpoint(model.id), (x) => x.step)).toEqual(Option.some(1))

        const bad = yield* c.createSftTrainingJob({
          model_id: model.id,
          training_data_url: pathToFileURL(join(dir, "missing.jsonl")).href
        })
        const failed = (yield* eventsToEnd(c, bad.id)).at(-1)
        expect(failed?.type).toBe("training_failed")
        expect(failed?.type === "training_failed" && typeof failed.data.error_message).toBe("string")
        const record = yield* c.getTrainingJob(bad.id)
        expect(record).toMatchObject({ status: "FAILED", kind: "sft" })
        expect(record.error_message).toEqual(failed?.type === "training_failed" ? failed.data.error_message : "")

        const unknown = yield* failure(c.createSftTrainingJob({ ...body, model_id: MISSING as ModelId }))
        expect(unknown).toMatchObject({ reason: "NotFound", status: 404, description: "Model not found" })
      })
    )

    it.scoped("health, systemCheck and listBaseModels decode the server's replies", () =>
      Effect.gen(function* () {
        const c = yield* trainingClient()
        expect(yield* c.health).toEqual({ status: "ok" })
        const check = yield* c.systemCheck
        expect(check).toMatchObject({
          api: true,
          database: true,
          cpu_queue: { success: true, errors: [] },
          gpu_queue: { success: true, errors: [] }
        })
        expect(yield* c.listBaseModels).toEqual([
          BASE,
          "effect-rl/tiny-2k",
          "effect-rl/base-2k",
          "effect-rl/base-wide-2k"
        ])
      })
    )

    it.scoped("createChatCompletion and streamChatCompletion: decoded, deterministic for a seed, the same text", () =>
      Effect.gen(function* () {
        const c = yield* trainingClient()
        const request: ChatCompletionRequest = {
          model: BASE,
          messages: [{ role: "user", content: "hello" }],
          seed: 7,
          max_completion_tokens: 6,
          logprobs: true,
          top_logprobs: 2
        }
        const completion = yield* c.createChatCompletion(request)
        expect(completion).toMatchObject({ object: "chat.completion", model: BASE })
        expect(completion.choices).toHaveLength(1)
        const choice = completion.choices[0]
        expect(choice?.message.role).toBe("assistant")
        const tokens = choice?.logprobs?.content ?? []
        expect(tokens.length).toBeGreaterThan(0)
        expect(tokens.length).toBeLessThanOrEqual(6)
        for (const token of tokens) {
          expect(token.logprob).toBeLessThanOrEqual(0)
          expect(token.top_logprobs).toHaveLength(2)
        }
        expect(completion.usage?.completion_tokens).toBe(tokens.length)
        expect((yield* c.createChatCompletion(request)).choices[0]?.message.content).toBe(choice?.message.content)

        const chunks = Chunk.toReadonlyArray(
          yield* Stream.runCollect(c.streamChatCompletion({ ...request, stream_options: { include_usage: true } }))
        )
        expect(chunks[0]?.choices[0]?.delta).toMatchObject({ role: "assistant" })
        expect(chunks.every((chunk) => chunk.object === "chat.completion.chunk")).toBe(true)
        expect(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("")).toBe(choice?.message.content)
        expect(chunks.at(-1)?.usage?.completion_tokens).toBe(tokens.length)
      })
    )

    it.scoped("401: a wrong key is Unauthorized, and neither key shows in the error", () =>
      Effect.gen(function* () {
        const wrong = "sk-wrong-contract-key-987"
        const c = yield* trainingClient({ apiKey: Redacted.make(wrong) })
        const health = yield* failure(c.health, [wrong])
        expect(health).toMatchObject({
          reason: "Unauthorized",
          status: 401,
          method: "GET",
          path: "/v1/health",
          description: "Invalid or missing API key",
          retryable: false
        })
        const chat = yield* failure(
          c.createChatCompletion({ model: BASE, messages: [{ role: "user", content: "x" }] }),
          [wrong]
        )
        expect(chat).toMatchObject({ reason: "Unauthorized", status: 401, errorType: "AuthenticationError", code: 401 })
        const created = yield* failure(c.createModel({ project: "contract", name: "nope", base_model: BASE }), [wrong])
        expect(created.reason).toBe("Unauthorized")
      })
    )

    it.scoped("404: NotFound with the service's message, on every kind of route", () =>
      Effect.gen(function* () {
        const c = yield* trainingClient()
        const job = yield* failure(c.getTrainingJob(MISSING as TrainingJobId))
        expect(job).toMatchObject({
          reason: "NotFound",
          status: 404,
          method: "GET",
          path: `/v1/preview/training-jobs/${MISSING}`,
          description: "Training job not found"
        })
        const events = yield* failure(c.listTrainingJobEvents(MISSING as TrainingJobId))
        expect(events).toMatchObject({ reason: "NotFound", description: "Training job not found" })
        const base = yield* failure(c.createModel({ project: "contract", name: "b", base_model: "gpt-99" }))
        expect(base).toMatchObject({
          reason: "NotFound",
          description: "Base model `gpt-99` not found; see GET /v1/preview/base-models"
        })
        const rl = yield* failure(c.createTrainingJob(flatJob(MISSING as ModelId)))
        expect(rl).toMatchObject({ reason: "NotFound", description: "Model not found" })
        const deleted = yield* failure(c.deleteCheckpoints(MISSING as ModelId, [0]))
        expect(deleted).toMatchObject({ reason: "NotFound", description: "Model not found" })
        const model = yield* c.createModel({ project: "contract", name: "cursor", base_model: BASE })
        const cursor = yield* failure(c.listCheckpoints(model.id, { after: MISSING }))
        expect(cursor).toMatchObject({ reason: "NotFound", status: 404 })
        const chat = yield* failure(
          c.createChatCompletion({ model: "no/such-model", messages: [{ role: "user", content: "x" }] })
        )
        expect(chat).toMatchObject({
          reason: "NotFound",
          status: 404,
          description: "The model `no/such-model` does not exist.",
          errorType: "NotFoundError",
          code: 404
        })
      })
    )

    it.scoped("422: Validation with the server's detail decoded (loc, msg, type)", () =>
      Effect.gen(function* () {
        // The client checks every request against the schemas the server decodes with, so a request it
        // builds cannot draw a 422; the caller's own `transformClient` hook alters it on the way out.
        const c = yield* trainingClient({
          transformClient: HttpClient.mapRequest((request) =>
            request.url.endsWith("/checkpoints") ? HttpClientRequest.setUrlParam(request, "limit", "0") : request
          )
        })
        const model = yield* c.createModel({ project: "contract", name: "invalid", base_model: BASE })
        const error = yield* failure(c.listCheckpoints(model.id))
        expect(error).toMatchObject({
          reason: "Validation",
          status: 422,
          method: "GET",
          path: `/v1/preview/models/${model.id}/checkpoints`,
          retryable: false
        })
        expect(error.detail).toEqual([
          { loc: ["query", "limit"], msg: "Input should be greater than or equal to 1", type: "greater_than_equal" }
        ])
        expect(error.description).toBe("query.limit: Input should be greater than or equal to 1")
      })
    )

    it.scoped("400: a context overflow and a priority are BadRequest with the engine's message and param", () =>
      Effect.gen(function* () {
        const c = yield* trainingClient()
        const long = yield* failure(
          c.createChatCompletion({
            model: BASE,
            messages: [{ role: "user", content: "word ".repeat(2000) }],
            max_completion_tokens: 8
          })
        )
        expect(long).toMatchObject({
          reason: "BadRequest",
          status: 400,
          errorType: "BadRequestError",
          code: 400,
          param: "messages",
          retryable: false
        })
        expect(long.description).toContain("maximum context length is 512 tokens")
        const priority = yield* failure(
          c.createChatCompletion({ model: BASE, messages: [{ role: "user", content: "hi" }], priority: 1 })
        )
        expect(priority).toMatchObject({
          reason: "BadRequest",
          status: 400,
          param: "priority",
          description: "Got priority 1 but Priority scheduling is not enabled."
        })
        const streamed = yield* failure(
          Stream.runDrain(
            c.streamChatCompletion({ model: BASE, messages: [{ role: "user", content: "hi" }], priority: 1 })
          )
        )
        expect(streamed).toMatchObject({ reason: "BadRequest", status: 400, param: "priority" })
      })
    )

    it.scoped("InvalidRequest: a request that breaks its schema is caught before anything is sent", () =>
      Effect.gen(function* () {
        const rec = recorder()
        const c = yield* trainingClient({ transformClient: rec.transformClient })
        const chat = yield* failure(
          c.createChatCompletion({ model: BASE, messages: [{ role: "user", content: "hi" }], top_logprobs: 2 })
        )
        expect(chat).toMatchObject({ reason: "InvalidRequest", path: "/v1/chat/completions" })
        expect(chat.status).toBeUndefined()
        expect(chat.detail?.map((d) => d.loc)).toEqual([["body", "top_logprobs"]])
        const job = yield* failure(c.getTrainingJob("../models" as TrainingJobId))
        expect(job.reason).toBe("InvalidRequest")
        expect(job.detail?.map((d) => d.loc)).toEqual([["path", "training_job_id"]])
        const create = yield* failure(c.createTrainingJob({ model_id: "nope" as ModelId, trajectory_groups: [] }))
        expect(create.detail?.map((d) => d.loc)).toEqual([["body", "model_id"]])
        const page = yield* failure(c.listCheckpoints(MISSING as ModelId, { limit: 101 }))
        expect(page.detail?.[0]).toEqual({
          loc: ["query", "limit"],
          msg: "Expected a number between 1 and 100, actual 101",
          type: "Refinement"
        })
        expect(page.detail?.every((d) => d.loc.join(".") === "query.limit")).toBe(true)
        expect(rec.sent).toEqual([])
      })
    )
  })
})
