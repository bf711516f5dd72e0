/**
 * The reference client's traffic, replayed against the real embedded backend: the bodies the most used
 * client of the hosted service (OpenPipe ART, Python) sends, as `scripts/reference-client-fixtures.ts` wrote
 * them down from its serializers (openai-python choice dumps with every unset field `null`, trajectories with
 * a 0.0 reward left out, the 25-key `experimental_config` with nulls, the chat-completions `extra_body`, the
 * SFT job). The client itself cannot run here (no PyPI on this machine), so its bodies are sent with `fetch`,
 * and its reading of the answers is checked as it reads them: events polled with `after` until
 * `training_ended`, every `gradient_step` value through a strict `float()`, the step from
 * `limit=1&order=desc`, the trained checkpoint sampled on the training host.
 */
import { readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Redacted from "effect/Redacted"
import * as TestServices from "effect/TestServices"
import * as LocalBackend from "../../src/LocalBackend.js"
import { API_KEY } from "../support/clients.js"
import { Backend, DATA_ROOT, dataFilesDir, MAX_BODY, type Reply, send } from "./support.js"

const FIXTURES = join(import.meta.dirname, "fixtures", "reference-client")

/** A fixture with its `{{placeholders}}` filled in. */
const fixture = (name: string, values: Readonly<Record<string, string>> = {}): unknown =>
  JSON.parse(
    readFileSync(join(FIXTURES, name), "utf8").replace(/\{\{(\w+)\}\}/g, (_, key: string) => values[key] ?? "")
  )

const ok = (reply: Reply, what: string) => {
  expect(reply.status, `${what}: ${reply.text.slice(0, 500)}`).toBe(200)
  return reply.json as Record<string, unknown>
}

interface Event {
  readonly id: string
  readonly type: string
  readonly data: Record<string, unknown>
}

/**
 * Python's `float(v)` held to what JSON can carry: a number (not a string, a bool or null) that is finite.
 * The reference client applies `float()` to every value of a `gradient_step` event.
 */
const strictFloat = (key: string, value: unknown): number => {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new Error(`float(${JSON.stringify(value)}) fails for ${key}`)
  }
  return value
}

/** The events of a job as the reference client reads them: a poll with `after` = the last id, until the end. */
const pollEvents = (jobId: string) =>
  Effect.gen(function* () {
    const events: Array<Event> = []
    for (let polls = 0; polls < 200; polls++) {
      const after = events.at(-1)?.id
      const page = ok(
        yield* send("GET", `/v1/preview/training-jobs/${jobId}/events${after === undefined ? "" : `?after=${after}`}`),
        "events"
      ) as { readonly data: ReadonlyArray<Event>; readonly has_more: boolean }
      events.push(...page.data)
      const last = events.at(-1)?.type
      if (last === "training_ended" || last === "training_failed") return events
      if (!page.has_more) yield* Effect.sleep("100 millis")
    }
    throw new Error(`job ${jobId} did not end: ${JSON.stringify(events.map((e) => e.type))}`)
  })

/** Every `gradient_step` value read with {@link strictFloat}. */
const readSteps = (events: ReadonlyArray<Event>) =>
  events
    .filter((e) => e.type === "gradient_step")
    .map((e) => Object.fromEntries(Object.entries(e.data).map(([k, v]) => [k, strictFloat(k, v)])))

const latestStep = (modelId: string) =>
  Effect.map(send("GET", `/v1/preview/models/${modelId}/checkpoints?limit=1&order=desc`), (reply) => {
    const page = ok(reply, "checkpoints") as { readonly data: ReadonlyArray<{ readonly step: number }> }
    return page.data[0]?.step
  })

/** Runs `f` with a temporary directory, removed after, on the live clock (the polls really wait). */
const withTempDir = <A, E, R>(f: (dir: string) => Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => dataFilesDir("ref-")),
    f,
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  ).pipe(TestServices.provideLive)

describe("the reference client's traffic", () => {
  it.layer(Backend, { timeout: "120 seconds" })("against the embedded backend", (it) => {
    it.effect("register, sample, log, an RL job followed to its end, the trained checkpoint sampled, SFT", () =>
      withTempDir((dir) =>
        Effect.gen(function* () {
          const model = ok(yield* send("POST", "/v1/preview/models", fixture("register.json")), "register")
          expect(model).toMatchObject({ project: "art-fixture", name: "agent-001", base_model: "effect-rl/tiny" })
          const modelId = String(model.id)
          const entity = String(model.entity)

          // A rollout's turn, as the client samples it: the training host, the latest-checkpoint name, extra_body.
          const chat = ok(
            yield* send("POST", "/v1/chat/completions", fixture("chat-completion.json", { entity })),
            "chat completion"
          ) as {
            readonly choices: ReadonlyArray<{
              readonly token_ids: ReadonlyArray<number>
              readonly logprobs: {
                readonly content: ReadonlyArray<{
                  readonly token: string
                  readonly top_logprobs: ReadonlyArray<unknown>
                }>
              }
            }>
          }
          const choice = chat.choices[0]!
          expect(choice.token_ids.length).toBeGreaterThan(0)
          expect(choice.logprobs.content[0]?.token).toMatch(/^token_id:\d+$/)
          expect(choice.logprobs.content[0]?.top_logprobs).toHaveLength(2)

          ok(
            yield* send("POST", `/v1/preview/models/${modelId}/log`, fixture("log.json", { model_id: modelId })),
            "log"
          )

          const job = ok(
            yield* send("POST", "/v1/preview/training-jobs", fixture("rl-job.json", { model_id: modelId })),
            "RL job"
          )
          const events = yield* pollEvents(String(job.id))
          expect(events.map((e) => e.type)).toEqual(["training_started", "gradient_step", "training_ended"])
          const [step] = readSteps(events)
          expect(step?.num_trajectories).toBe(8)
          expect(step?.loss).toBeTypeOf("number")
          expect(yield* latestStep(modelId)).toBe(1)

          // The trained checkpoint, sampled where the client samples it: the training host, `:step1`.
          const trained = yield* send(
            "POST",
            "/v1/chat/completions",
            fixture("chat-completion.json", { entity }) as object
          )
          ok(trained, "latest checkpoint")
          const pinned = ok(
            yield* send("POST", "/v1/chat/completions", {
              ...(fixture("chat-completion.json", { entity }) as object),
              model: `wandb-artifact:///${entity}/art-fixture/agent-001:step1`
            }),
            "checkpoint step 1"
          )
          expect(pinned.model).toBe(`wandb-artifact:///${entity}/art-fixture/agent-001:step1`)

          // SFT: the data as the client writes it (an artifact on the hosted service, a file here).
          const data = join(dir, "train.jsonl")
          writeFileSync(data, readFileSync(join(FIXTURES, "sft-data.jsonl")))
          const sft = ok(
            yield* send(
              "POST",
              "/v1/preview/sft-training-jobs",
              fixture("sft-job.json", { model_id: modelId, training_data_url: pathToFileURL(data).href })
            ),
            "SFT job"
          )
          const sftEvents = yield* pollEvents(String(sft.id))
          expect(sftEvents.at(-1)?.type).toBe("training_ended")
          expect(readSteps(sftEvents).length).toBeGreaterThan(0)
          expect(yield* latestStep(modelId)).toBe(2)
        })
      )
    )

    it.effect("what the published schema refuses is still a 422 naming the field", () =>
      Effect.gen(function* () {
        const model = ok(yield* send("POST", "/v1/preview/models", fixture("register.json")), "register")
        type Body = {
          trajectory_groups: Array<{ trajectories: Array<{ messages_and_choices: Array<Record<string, unknown>> }> }>
          experimental_config: Record<string, unknown>
        }
        const entries = (b: Body) => b.trajectory_groups[0]!.trajectories[0]!.messages_and_choices
        const loc = ["body", "trajectory_groups", 0, "trajectories", 0, "messages_and_choices"]
        const cases: ReadonlyArray<readonly [string, (b: Body) => void, ReadonlyArray<string | number>]> = [
          [
            "a finish_reason",
            (b) => {
              entries(b)[2]!.finish_reason = "abort"
            },
            [...loc, 2, "finish_reason"]
          ],
          [
            "a message role",
            (b) => {
              entries(b)[1]!.role = "grader"
            },
            [...loc, 1, "role"]
          ],
          [
            "an importance_sampling_level",
            (b) => {
              b.experimental_config.importance_sampling_level = "bogus"
            },
            ["body", "experimental_config", "importance_sampling_level"]
          ],
          [
            "a learning_rate",
            (b) => {
              b.experimental_config.learning_rate = "fast"
            },
            ["body", "experimental_config", "learning_rate"]
          ]
        ]
        for (const [what, spoil, at] of cases) {
          const body = fixture("rl-job.json", { model_id: String(model.id) }) as Body
          spoil(body)
          const reply = yield* send("POST", "/v1/preview/training-jobs", body)
          expect(reply.status, what).toBe(422)
          const detail = (reply.json as { detail: ReadonlyArray<{ loc: ReadonlyArray<unknown> }> }).detail
          expect(
            detail.map((d) => d.loc),
            what
          ).toContainEqual(at)
        }
      })
    )
  })
})

describe("gradient_step events carry finite numbers only", () => {
  const lines: Array<string> = []
  const logger = Logger.make(({ message }) => {
    lines.push((Array.isArray(message) ? message : [message]).map(String).join(" "))
  })
  const Logged = Layer.provide(
    LocalBackend.layer({ apiKey: Redacted.make(API_KEY), maxBodySize: MAX_BODY, allowDirs: [DATA_ROOT] }),
    Logger.replace(Logger.defaultLogger, logger)
  )

  it.layer(Logged, { timeout: "60 seconds" })("a job whose training diverges", (it) => {
    it.effect("non-finite values are left out of the events and counted in the job's log line", () =>
      withTempDir((dir) =>
        Effect.gen(function* () {
          const model = ok(yield* send("POST", "/v1/preview/models", fixture("register.json")), "register")
          const data = join(dir, "train.jsonl")
          writeFileSync(data, readFileSync(join(FIXTURES, "sft-data.jsonl")))
          // A learning rate of 1e30 sends the weights to infinity after the first step: loss and grad_norm are
          // NaN from the second step on.
          const job = ok(
            yield* send("POST", "/v1/preview/sft-training-jobs", {
              model_id: model.id,
              training_data_url: pathToFileURL(data).href,
              config: { batch_size: 1, learning_rate: 1e30 }
            }),
            "SFT job"
          )
          const events = yield* pollEvents(String(job.id))
          expect(events.at(-1)?.type).toBe("training_ended")
          const steps = readSteps(events)
          expect(steps).toHaveLength(3)
          expect(steps[0]).toHaveProperty("loss")
          expect(steps.slice(1).map((s) => [s.loss, s.grad_norm, s.learning_rate])).toEqual([
            [undefined, undefined, 1e30],
            [undefined, undefined, 1e30]
          ])
          const line = lines.find((l) => l.includes(`training job ${String(job.id)}`))
          expect(line).toBe(
            `training job ${String(job.id)} (sft) ended: checkpoint step 1; 4 non-finite metric values left out of its events (loss x2, grad_norm x2)`
          )
        })
      )
    )
  })
})
