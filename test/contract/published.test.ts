/**
 * The published OpenAPI documents as the oracle (issue 36): every request body the real clients put on the wire,
 * and every answer of the real embedded backend (a server on port 0), checked with a JSON Schema 2020-12
 * validator (ajv) against the schema the document gives that operation, found from its method and path:
 * surface B against the newest training document, chat completions (surfaces B and C) against the full-chat one.
 * The documents are copies in `published/`: replacing one with a newer version and running this file again shows
 * what changed, case by case (each failure names the operation, the direction and the fields).
 *
 * One table of cases. A case sends one call and names its operation and the status it expects; the recorder
 * (the clients' own `transformClient` hook) keeps each request's body and each answer's status and text. A 422
 * case sends a deliberately wrong body by hand (the typed clients cannot), so only its answer is checked. What
 * no document gives a schema for is left out and said: streamed chat chunks (the documents have none), and the
 * inference service's `GET /v1/models` (in neither document).
 */
import { readFileSync } from "node:fs"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import { describe, expect, it, layer } from "@effect/vitest"
import { Ajv2020 } from "ajv/dist/2020.js"
import addFormatsModule from "ajv-formats"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type { ChatCompletionRequest } from "../../src/api/ChatCompletion.js"
import type { Model, ModelId } from "../../src/api/Model.js"
import type { TrainingJobId } from "../../src/api/TrainingJob.js"
import { TrajectoryGroup } from "../../src/api/Trajectory.js"
import type * as InferenceClient from "../../src/client/InferenceClient.js"
import type * as TrainingClient from "../../src/client/TrainingClient.js"
import * as LocalBackend from "../../src/LocalBackend.js"
import { backendWith } from "../server/support.js"
import { API_KEY, inference, training } from "../support/clients.js"
import { ask, BASE, eventsToEnd, flatJob, MISSING, sampledGroups } from "./support.js"

type Doc = "training" | "chat"
/** What this test reads of an OpenAPI document: its operations, by path and method. */
interface OpenApi {
  readonly paths: Readonly<
    Record<string, Readonly<Record<string, { readonly requestBody?: unknown; readonly responses: object }>>>
  >
}

const load = (file: string): OpenApi =>
  JSON.parse(readFileSync(new URL(`./published/${file}`, import.meta.url), "utf8"))
const documents: Record<Doc, OpenApi> = {
  training: load("training-api.openapi.json"),
  chat: load("training-api-full-chat.openapi.json")
}

// ajv-formats is CommonJS: its default export is the plugin under Node's ESM loader, `.default` under others.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as unknown as (
  ajv: Ajv2020
) => void
const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false })
addFormats(ajv)
for (const [name, document] of Object.entries(documents)) ajv.addSchema(document, name)

/** A JSON pointer's segment. */
const pointerSegment = (segment: string) => segment.replaceAll("~", "~0").replaceAll("/", "~1")

/** The document's path template matching a concrete path (`/v1/preview/models/{model_id}/log`). */
const templateOf = (doc: Doc, path: string): string | undefined =>
  Object.keys(documents[doc].paths).find((template) =>
    new RegExp(`^${template.replace(/\{[^}]+\}/g, "[^/]+")}$`).test(path)
  )

/** What ajv says is wrong of `value` against the schema at `pointer` of `doc`, or [] when it validates. */
const problems = (doc: Doc, pointer: string, value: unknown): ReadonlyArray<string> => {
  const validate = ajv.getSchema(`${doc}#${pointer}`)
  if (validate === undefined) return [`${doc} has no schema at ${pointer}`]
  if (validate(value)) return []
  return (validate.errors ?? []).map((e) => `${e.instancePath || "/"} ${e.message ?? ""} ${JSON.stringify(e.params)}`)
}

/** One call on the wire: the request's method, path and body, and the answer's status and text. */
interface Exchange {
  readonly method: string
  readonly path: string
  readonly body: string | undefined
  status?: number | undefined
  text?: string | undefined
  contentType?: string | undefined
}

const exchanges: Array<Exchange> = []

/** Records every request the client sends and the answer it gets (read once, handed on unchanged). */
const recording = (client: HttpClient.HttpClient): HttpClient.HttpClient =>
  client.pipe(
    HttpClient.transformResponse((effect) =>
      Effect.flatMap(effect, (response) => {
        const request = response.request
        const body = request.body._tag === "Uint8Array" ? new TextDecoder().decode(request.body.body) : undefined
        const exchange: Exchange = { method: request.method, path: new URL(request.url).pathname, body }
        exchanges.push(exchange)
        exchange.status = response.status
        exchange.contentType = response.headers["content-type"]
        if (exchange.contentType?.startsWith("text/event-stream")) return Effect.succeed(response)
        return Effect.map(response.text, (text) => {
          exchange.text = text
          const init = { status: response.status, headers: response.headers }
          return HttpClientResponse.fromWeb(request, new Response(text === "" ? null : text, init))
        })
      })
    )
  )

/** A request sent by hand (a body the typed clients cannot send), recorded as the clients' are. */
const raw = (method: string, path: string, body?: unknown) =>
  Effect.flatMap(Fixture, ({ url }) =>
    Effect.promise(async () => {
      const text = body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body)
      const response = await fetch(`${url}${path}`, {
        method,
        headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
        ...(text === undefined ? {} : { body: text })
      })
      const exchange: Exchange = { method, path: path.split("?")[0]!, body: undefined }
      exchange.status = response.status
      exchange.contentType = response.headers.get("content-type") ?? undefined
      exchange.text = await response.text()
      exchanges.push(exchange)
    })
  )

/** What the cases share: the clients (recorded) and records made once. */
class Fixture extends Context.Tag("test/published/Fixture")<
  Fixture,
  {
    readonly url: string
    readonly training: TrainingClient.Service
    readonly inference: InferenceClient.Service
    readonly model: Model
    readonly completed: TrainingJobId
    readonly failed: TrainingJobId
    readonly sampled: ReadonlyArray<TrajectoryGroup>
  }
>() {}

const FixtureLive = Layer.scoped(
  Fixture,
  Effect.gen(function* () {
    const { url } = yield* LocalBackend.LocalBackend
    const client = yield* training(url, { transformClient: recording })
    const model = yield* client.createModel({ project: "published", name: "oracle", base_model: BASE })
    const job = yield* client.createTrainingJob(flatJob(model.id))
    yield* eventsToEnd(client, job.id)
    // An SFT job whose data cannot be read fails: a FAILED record with its message.
    const bad = yield* client.createSftTrainingJob({ model_id: model.id, training_data_url: "file:///nowhere.jsonl" })
    yield* eventsToEnd(client, bad.id)
    return {
      url,
      training: client,
      inference: yield* inference(url, { transformClient: recording }),
      model,
      completed: job.id,
      failed: bad.id,
      sampled: yield* sampledGroups(client, "wandb-artifact:///local/published/oracle")
    }
  })
).pipe(Layer.provideMerge(backendWith({ allowHttp: true })))

/** A group as a caller may build one from untyped data: a failed rollout without a traceback. */
const failedRollout = Schema.decodeUnknownSync(TrajectoryGroup)({
  trajectories: [{ messages_and_choices: [{ role: "user", content: "hi" }], reward: 1 }],
  exceptions: [{ type: "TimeoutError", message: "the agent took too long" }]
})

/** A group with every optional part filled: a sampled trajectory's choices, histories, exchanges, metadata. */
const fullGroup = (sampled: TrajectoryGroup): TrajectoryGroup => {
  const first = sampled.trajectories[0]!
  return {
    trajectories: [
      {
        ...first,
        tools: [
          { type: "function", function: { name: "look", description: "look up", parameters: { type: "object" } } }
        ],
        additional_histories: [{ messages_and_choices: first.messages_and_choices, tools: null }],
        initial_policy_version: 0,
        final_policy_version: 0,
        metrics: { correct: true, turns: 2 },
        metadata: { scenario: "s1", attempt: 1, nested: { tags: ["a", "b"] } },
        logs: ["started", "done"],
        start_time: "2026-03-01T00:00:00Z",
        exchanges: { responses: [{ id: "resp_1", output: [{ type: "message" }] }] }
      },
      ...sampled.trajectories.slice(1)
    ],
    metadata: { group: 0, source: { file: "scenarios.jsonl" } },
    metrics: { difficulty: 2 },
    logs: ["group"],
    exceptions: [{ type: "ValueError", message: "bad move", traceback: "Traceback (most recent call last): ..." }]
  }
}

const fullChat: ChatCompletionRequest = {
  ...ask(BASE, 0),
  tools: [{ type: "function", function: { name: "look", parameters: { type: "object", properties: {} } } }],
  tool_choice: "none",
  top_logprobs: 2,
  stop: ["\n\n"],
  user: "oracle",
  max_tokens: 4
}

interface Case {
  readonly name: string
  readonly doc: Doc
  /** The operation, as `METHOD /path/{template}` of the document. */
  readonly operation: string
  readonly status: 200 | 422
  readonly send: Effect.Effect<unknown, unknown, Fixture>
}

const withTraining = <A, E>(f: (c: TrainingClient.Service, x: Context.Tag.Service<Fixture>) => Effect.Effect<A, E>) =>
  Effect.flatMap(Fixture, (x) => f(x.training, x))

/** The table. */
const cases: ReadonlyArray<Case> = [
  {
    name: "create a model, the optional parts empty",
    doc: "training",
    operation: "POST /v1/preview/models",
    status: 200,
    send: withTraining((c) => c.createModel({ project: "published", name: "m1", base_model: BASE }))
  },
  {
    name: "create a model, the optional parts filled",
    doc: "training",
    operation: "POST /v1/preview/models",
    status: 200,
    send: withTraining((c) =>
      c.createModel({ entity: null, project: "published", name: "oracle", base_model: BASE, return_existing: true })
    )
  },
  {
    name: "create a model without a name",
    doc: "training",
    operation: "POST /v1/preview/models",
    status: 422,
    send: raw("POST", "/v1/preview/models", { project: "p", base_model: BASE })
  },
  {
    name: "list checkpoints, no parameters",
    doc: "training",
    operation: "GET /v1/preview/models/{model_id}/checkpoints",
    status: 200,
    send: withTraining((c, x) => c.listCheckpoints(x.model.id))
  },
  {
    name: "list checkpoints, every parameter",
    doc: "training",
    operation: "GET /v1/preview/models/{model_id}/checkpoints",
    status: 200,
    send: withTraining((c, x) => c.listCheckpoints(x.model.id, { limit: 1, order: "desc" }))
  },
  {
    name: "list checkpoints of a model id that is not a UUID",
    doc: "training",
    operation: "GET /v1/preview/models/{model_id}/checkpoints",
    status: 422,
    send: raw("GET", "/v1/preview/models/not-a-uuid/checkpoints")
  },
  {
    name: "delete checkpoints",
    doc: "training",
    operation: "DELETE /v1/preview/models/{model_id}/checkpoints",
    status: 200,
    send: withTraining((c, x) => c.deleteCheckpoints(x.model.id, [99]))
  },
  {
    name: "delete checkpoints without steps",
    doc: "training",
    operation: "DELETE /v1/preview/models/{model_id}/checkpoints",
    status: 422,
    send: Effect.flatMap(Fixture, (x) => raw("DELETE", `/v1/preview/models/${x.model.id}/checkpoints`, { step: [1] }))
  },
  {
    name: "delete a model",
    doc: "training",
    operation: "DELETE /v1/preview/models/{model_id}",
    status: 200,
    send: withTraining((c) =>
      Effect.flatMap(c.createModel({ project: "published", name: "gone", base_model: BASE }), (m) =>
        c.deleteModel(m.id)
      )
    )
  },
  {
    name: "delete a model whose id is not a UUID",
    doc: "training",
    operation: "DELETE /v1/preview/models/{model_id}",
    status: 422,
    send: raw("DELETE", "/v1/preview/models/not-a-uuid")
  },
  {
    name: "log, the optional parts empty",
    doc: "training",
    operation: "POST /v1/preview/models/{model_id}/log",
    status: 200,
    send: withTraining((c, x) =>
      c.log(x.model.id, {
        split: "train",
        trajectory_groups: [{ trajectories: [{ messages_and_choices: [{ role: "user", content: "hi" }], reward: 0 }] }]
      })
    )
  },
  {
    name: "log, the optional parts filled, with a failed rollout given no traceback",
    doc: "training",
    operation: "POST /v1/preview/models/{model_id}/log",
    status: 200,
    send: withTraining((c, x) =>
      c.log(x.model.id, { split: "val", trajectory_groups: [fullGroup(x.sampled[0]!), failedRollout] })
    )
  },
  {
    name: "log a body without a split",
    doc: "training",
    operation: "POST /v1/preview/models/{model_id}/log",
    status: 422,
    send: Effect.flatMap(Fixture, (x) => raw("POST", `/v1/preview/models/${x.model.id}/log`, { trajectory_groups: [] }))
  },
  {
    name: "create an RL job, the optional parts empty",
    doc: "training",
    operation: "POST /v1/preview/training-jobs",
    status: 200,
    send: withTraining((c, x) => c.createTrainingJob(flatJob(x.model.id)))
  },
  {
    name: "create an RL job, the optional parts filled, with a failed rollout given no traceback",
    doc: "training",
    operation: "POST /v1/preview/training-jobs",
    status: 200,
    send: withTraining((c, x) =>
      c.createTrainingJob({
        model_id: x.model.id,
        trajectory_groups: [fullGroup(x.sampled[0]!), x.sampled[1]!, failedRollout],
        experimental_config: {
          learning_rate: 1e-5,
          loss_fn: "cispo",
          importance_sampling_level: "token",
          epsilon: 0.2,
          epsilon_high: 0.3,
          kl_penalty_coef: 0,
          normalize_advantages: true,
          scale_rewards: true,
          allow_training_without_logprobs: false,
          precalculate_logprobs: null
        }
      })
    )
  },
  {
    name: "create an RL job for a model id that is not a UUID",
    doc: "training",
    operation: "POST /v1/preview/training-jobs",
    status: 422,
    send: raw("POST", "/v1/preview/training-jobs", { model_id: "m", trajectory_groups: [] })
  },
  {
    name: "create an SFT job, the optional parts empty",
    doc: "training",
    operation: "POST /v1/preview/sft-training-jobs",
    status: 200,
    send: withTraining((c, x) =>
      c.createSftTrainingJob({ model_id: x.model.id, training_data_url: "file:///nowhere.jsonl" })
    )
  },
  {
    name: "create an SFT job, the optional parts filled",
    doc: "training",
    operation: "POST /v1/preview/sft-training-jobs",
    status: 200,
    send: withTraining((c, x) =>
      c.createSftTrainingJob({
        model_id: x.model.id,
        training_data_url: "file:///nowhere.jsonl",
        config: {
          batch_size: 32,
          learning_rate: [1e-5, 5e-6],
          assistant_turns: "last",
          metric_logging: { enabled: true, target_training_step: 1 }
        },
        experimental_config: {}
      })
    )
  },
  {
    name: "create an SFT job with a config key the service does not take",
    doc: "training",
    operation: "POST /v1/preview/sft-training-jobs",
    status: 422,
    send: Effect.flatMap(Fixture, (x) =>
      raw("POST", "/v1/preview/sft-training-jobs", {
        model_id: x.model.id,
        training_data_url: "file:///nowhere.jsonl",
        config: { epochs: 3 }
      })
    )
  },
  {
    name: "get a pending job",
    doc: "training",
    operation: "GET /v1/preview/training-jobs/{training_job_id}",
    status: 200,
    send: withTraining((c) =>
      Effect.flatMap(c.createModel({ project: "published", name: "pending", base_model: BASE }), (m) =>
        Effect.flatMap(c.createTrainingJob(flatJob(m.id)), (job) => c.getTrainingJob(job.id))
      )
    )
  },
  {
    name: "get a completed job",
    doc: "training",
    operation: "GET /v1/preview/training-jobs/{training_job_id}",
    status: 200,
    send: withTraining((c, x) => c.getTrainingJob(x.completed))
  },
  {
    name: "get a failed job",
    doc: "training",
    operation: "GET /v1/preview/training-jobs/{training_job_id}",
    status: 200,
    send: withTraining((c, x) => c.getTrainingJob(x.failed))
  },
  {
    name: "get a job whose id is not a UUID",
    doc: "training",
    operation: "GET /v1/preview/training-jobs/{training_job_id}",
    status: 422,
    send: raw("GET", "/v1/preview/training-jobs/job-1")
  },
  {
    name: "list a job's events, every parameter",
    doc: "training",
    operation: "GET /v1/preview/training-jobs/{training_job_id}/events",
    status: 200,
    send: withTraining((c, x) => c.listTrainingJobEvents(x.completed, { limit: 2 }))
  },
  {
    name: "list a job's events, no parameters",
    doc: "training",
    operation: "GET /v1/preview/training-jobs/{training_job_id}/events",
    status: 200,
    send: withTraining((c, x) => c.listTrainingJobEvents(x.failed))
  },
  {
    name: "list events with a limit out of range",
    doc: "training",
    operation: "GET /v1/preview/training-jobs/{training_job_id}/events",
    status: 422,
    send: raw("GET", `/v1/preview/training-jobs/${MISSING}/events?limit=0`)
  },
  {
    name: "health",
    doc: "training",
    operation: "GET /v1/health",
    status: 200,
    send: withTraining((c) => c.health)
  },
  {
    name: "system check",
    doc: "training",
    operation: "GET /v1/system-check",
    status: 200,
    send: withTraining((c) => c.systemCheck)
  },
  {
    name: "base models",
    doc: "training",
    operation: "GET /v1/preview/base-models",
    status: 200,
    send: withTraining((c) => c.listBaseModels)
  },
  {
    name: "chat completion (training client), the optional parts empty",
    doc: "chat",
    operation: "POST /v1/chat/completions",
    status: 200,
    send: withTraining((c) => c.createChatCompletion({ model: BASE, messages: [{ role: "user", content: "hi" }] }))
  },
  {
    name: "chat completion (training client), many optional parts filled",
    doc: "chat",
    operation: "POST /v1/chat/completions",
    status: 200,
    send: withTraining((c) => c.createChatCompletion(fullChat))
  },
  {
    name: "chat completion streamed (training client): the request only",
    doc: "chat",
    operation: "POST /v1/chat/completions",
    status: 200,
    send: withTraining((c) =>
      Stream.runDrain(c.streamChatCompletion({ ...fullChat, n: 1, stream_options: { include_usage: true } }))
    )
  },
  {
    name: "chat completion (inference client)",
    doc: "chat",
    operation: "POST /v1/chat/completions",
    status: 200,
    send: Effect.flatMap(Fixture, (x) => x.inference.createChatCompletion(fullChat))
  },
  {
    name: "chat completion without messages",
    doc: "chat",
    operation: "POST /v1/chat/completions",
    status: 422,
    send: raw("POST", "/v1/chat/completions", { model: BASE })
  }
]

/** The problems of one recorded exchange against its operation in the document. */
const check = (c: Case, exchange: Exchange): ReadonlyArray<string> => {
  const out: Array<string> = []
  const template = templateOf(c.doc, exchange.path)
  const operation = `${exchange.method} ${template}`
  const method = exchange.method.toLowerCase()
  const at = `/paths/${pointerSegment(template!)}/${method}`
  const op = template === undefined ? undefined : documents[c.doc].paths[template]?.[method]
  if (op === undefined) return [`${c.doc} has no ${operation}`]
  if (exchange.body !== undefined && c.status !== 422) {
    if (op.requestBody === undefined) out.push(`${operation} takes no body in ${c.doc}`)
    else {
      for (const p of problems(
        c.doc,
        `${at}/requestBody/content/application~1json/schema`,
        JSON.parse(exchange.body)
      )) {
        out.push(`request: ${p}`)
      }
    }
  }
  if (exchange.status !== c.status) out.push(`answered ${exchange.status}, not ${c.status}: ${exchange.text}`)
  else if (exchange.text !== undefined) {
    if (!(String(c.status) in op.responses)) out.push(`${operation} has no ${c.status} in ${c.doc}`)
    const pointer = `${at}/responses/${c.status}/content/application~1json/schema`
    for (const p of problems(c.doc, pointer, JSON.parse(exchange.text))) out.push(`answer: ${p}`)
  }
  return out
}

describe("the wire against the published OpenAPI documents", () => {
  it("every operation of the newest training document has a case, both answers it lists", () => {
    const covered = new Set(cases.filter((c) => c.doc === "training").map((c) => `${c.operation} ${c.status}`))
    const listed = Object.entries(documents.training.paths).flatMap(([path, methods]) =>
      Object.entries(methods).flatMap(([method, op]) =>
        Object.keys(op.responses).map((status) => `${method.toUpperCase()} ${path} ${status}`)
      )
    )
    expect(listed.filter((key) => !covered.has(key) && !key.startsWith("POST /v1/chat/completions"))).toEqual([])
  })

  layer(FixtureLive, { excludeTestServices: true })("the real clients and the embedded backend", (it) => {
    for (const c of cases) {
      it.effect(`${c.operation} ${c.status}: ${c.name}`, () =>
        Effect.gen(function* () {
          exchanges.length = 0
          const sent = yield* Effect.either(c.send)
          // A case may make what it needs first (a model to delete): only its operation's exchanges are checked.
          const own = exchanges.filter((e) => `${e.method} ${templateOf(c.doc, e.path)}` === c.operation)
          expect(own.length, `the case sent no ${c.operation}: ${JSON.stringify(sent)}`).toBeGreaterThan(0)
          expect(own.flatMap((exchange) => check(c, exchange))).toEqual([])
        })
      )
    }

    it.effect("the SFT 422 names the key, and the client refuses the same body before sending", () =>
      Effect.gen(function* () {
        const { model, training: client } = yield* Fixture
        exchanges.length = 0
        yield* raw("POST", "/v1/preview/sft-training-jobs", {
          model_id: model.id,
          training_data_url: "file:///nowhere.jsonl",
          config: { epochs: 3 },
          experimental_config: { seed: 1 }
        })
        const detail = (JSON.parse(exchanges[0]!.text!) as { detail: ReadonlyArray<object> }).detail
        expect(detail).toContainEqual(
          expect.objectContaining({ loc: ["body", "config", "epochs"], type: "extra_forbidden" })
        )
        expect(detail).toContainEqual(
          expect.objectContaining({ loc: ["body", "experimental_config", "seed"], type: "extra_forbidden" })
        )
        exchanges.length = 0
        const refused = yield* Effect.flip(
          client.createSftTrainingJob({
            model_id: model.id as ModelId,
            training_data_url: "file:///nowhere.jsonl",
            config: { epochs: 3 } as never,
            experimental_config: { seed: 1 } as never
          })
        )
        expect(exchanges).toEqual([])
        expect(refused).toMatchObject({ _tag: "ApiError", reason: "InvalidRequest" })
        expect(refused.detail?.map((d) => d.loc)).toEqual([
          ["body", "config", "epochs"],
          ["body", "experimental_config", "seed"]
        ])
        expect(refused.description).toContain("config.epochs, experimental_config.seed")
      })
    )
  })
})
