/**
 * A job's full life on the real server, through the repo's real clients: create a model, sample groups from
 * its latest checkpoint, log them, train an RL job and follow its events to the end, then sample the new
 * checkpoint; and an SFT job from a `file://` JSONL, and one whose data cannot be read.
 */
import { rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as TestServices from "effect/TestServices"
import type { ChatCompletionRequest } from "../../src/api/ChatCompletion.js"
import type { ModelId } from "../../src/api/Model.js"
import type { TrainingJobId } from "../../src/api/TrainingJob.js"
import type { TrajectoryGroup } from "../../src/api/Trajectory.js"
import * as LocalBackend from "../../src/LocalBackend.js"
import { inference, training } from "../support/clients.js"
import { Backend, dataFilesDir } from "./support.js"

const WORDS = ["red", "blue", "green", "gold"]

const clients = Effect.flatMap(LocalBackend.LocalBackend, ({ url }) =>
  Effect.all({ training: training(url), inference: inference(url) })
)

type Clients = Effect.Effect.Success<typeof clients>

/** The same request for any model name: sampled with a fixed seed, constrained to the words. */
const ask = (model: string, g: number): ChatCompletionRequest => ({
  model,
  messages: [{ role: "user", content: `Say: ${WORDS[g]}` }],
  n: 4,
  seed: 100 + g,
  temperature: 1,
  logprobs: true,
  max_completion_tokens: 8,
  structured_outputs: { choice: WORDS }
})

/** Follows a job's events to the end (long poll), within 20 s. */
const eventsOf = (c: Clients, id: string) =>
  c.training
    .followTrainingJobEvents(id as TrainingJobId, { wait: "5 seconds" })
    .pipe(Stream.runCollect, Effect.map(Chunk.toArray), Effect.timeout("20 seconds"))

const tempDir = Effect.acquireRelease(
  Effect.sync(() => dataFilesDir("life-")),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

describe("a training job's life", () => {
  it.layer(Backend)("on the real server", (it) => {
    it.scoped(
      "create → sample → log → RL job → events to the end → step 1 answers differently from step 0",
      () =>
        Effect.gen(function* () {
          const c = yield* clients
          const model = yield* c.training.createModel({ project: "life", name: "agent", base_model: "effect-rl/tiny" })
          const latest = "wandb-artifact:///local/life/agent"

          const groups: Array<TrajectoryGroup> = []
          for (const g of [0, 1, 2]) {
            const request = ask(latest, g)
            const completion = yield* c.inference.createChatCompletion(request)
            expect(completion.choices).toHaveLength(4)
            groups.push({
              trajectories: completion.choices.map((choice) => ({
                messages_and_choices: [...request.messages, choice],
                reward: choice.message.content === WORDS[g] ? 1 : choice.index % 2
              }))
            })
          }
          const logged = yield* c.training.log(model.id, { split: "train", trajectory_groups: groups })
          expect(logged).not.toBeNull()

          const body = { model_id: model.id as ModelId, trajectory_groups: groups }
          const job = yield* c.training.createTrainingJob(body, { idempotencyKey: "life-rl-1" })
          expect(job).toMatchObject({ status: "PENDING", kind: "rl", model_id: model.id })
          const events = yield* eventsOf(c, job.id)
          const types = events.map((event) => event.type)
          expect(types[0]).toBe("training_started")
          expect(types.at(-1)).toBe("training_ended")
          expect(types.slice(1, -1).length).toBeGreaterThan(0)
          expect(types.slice(1, -1).every((type) => type === "gradient_step")).toBe(true)

          const checkpoint = yield* c.training.latestCheckpoint(model.id)
          expect(Option.map(checkpoint, (cp) => cp.step)).toEqual(Option.some(1))

          const before = yield* c.inference.createChatCompletion(ask(`${latest}:step0`, 0))
          const after = yield* c.inference.createChatCompletion(ask(`${latest}:step1`, 0))
          expect(after.model).toBe(`${latest}:step1`)
          const logprobs = (completion: typeof before) =>
            JSON.stringify(completion.choices.map((choice) => choice.logprobs))
          expect(logprobs(after)).not.toBe(logprobs(before))

          const done = yield* c.training.getTrainingJob(job.id)
          expect(done).toMatchObject({ id: job.id, status: "COMPLETED", step: 1 })
          const again = yield* c.training.createTrainingJob(body, { idempotencyKey: "life-rl-1" })
          expect(again.id).toBe(job.id)
        }).pipe(TestServices.provideLive),
      30_000
    )

    it.scoped("an SFT job from a file:// JSONL trains to step 1; unreadable data ends training_failed", () =>
      Effect.gen(function* () {
        const c = yield* clients
        const dir = yield* tempDir
        const file = join(dir, "train.jsonl")
        const lines = WORDS.map((word) =>
          JSON.stringify({
            messages: [
              { role: "user", content: `Colour ${word}?` },
              { role: "assistant", content: word }
            ]
          })
        )
        writeFileSync(file, `${lines.join("\n")}\n`)
        const model = yield* c.training.createModel({ project: "life", name: "sft", base_model: "effect-rl/tiny" })
        const job = yield* c.training.createSftTrainingJob({
          model_id: model.id as ModelId,
          training_data_url: pathToFileURL(file).href
        })
        expect(job).toMatchObject({ kind: "sft", status: "PENDING" })
        const events = yield* eventsOf(c, job.id)
        expect(events[0]?.type).toBe("training_started")
        expect(events.at(-1)?.type).toBe("training_ended")
        const checkpoint = yield* c.training.latestCheckpoint(model.id)
        expect(Option.map(checkpoint, (cp) => cp.step)).toEqual(Option.some(1))
        expect(yield* c.training.getTrainingJob(job.id)).toMatchObject({ status: "COMPLETED", step: 1 })

        const bad = yield* c.training.createSftTrainingJob({
          model_id: model.id as ModelId,
          training_data_url: pathToFileURL(join(dir, "missing.jsonl")).href
        })
        const failed = yield* eventsOf(c, bad.id)
        const last = failed.at(-1)
        expect(last?.type).toBe("training_failed")
        expect(typeof (last?.data as { error_message?: unknown } | undefined)?.error_message).toBe("string")
        const record = yield* c.training.getTrainingJob(bad.id)
        expect(record).toMatchObject({ status: "FAILED" })
        expect(typeof record.error_message).toBe("string")
        const still = yield* c.training.latestCheckpoint(model.id)
        expect(Option.map(still, (cp) => cp.step)).toEqual(Option.some(1))
      }).pipe(TestServices.provideLive)
    )
  })
})
