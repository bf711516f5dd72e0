/**
 * Helpers of the contract tests that run the real clients against the real embedded backend: the clients
 * pointed at the running `LocalBackend`, a failure reader that checks the key never shows in an error, a
 * request recorder (through the clients' own `transformClient` hook), and small RL jobs that make
 * checkpoints quickly.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as HttpClient from "@effect/platform/HttpClient"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import type { ChatCompletionRequest } from "../../src/api/ChatCompletion.js"
import type { ModelId } from "../../src/api/Model.js"
import type { TrainingJobEvent, TrainingJobId } from "../../src/api/TrainingJob.js"
import type { TrajectoryGroup } from "../../src/api/Trajectory.js"
import type * as InferenceClient from "../../src/client/InferenceClient.js"
import type * as TrainingClient from "../../src/client/TrainingClient.js"
import * as LocalBackend from "../../src/LocalBackend.js"
import { inference, training } from "../support/clients.js"

/** The base model every fresh backend serves. */
export const BASE = "effect-rl/tiny"

/** A well-formed UUID no record has. */
export const MISSING = "00000000-0000-4000-8000-000000000000"

/** The training client against the running backend, for the life of the scope. */
export const trainingClient = (options: Partial<TrainingClient.Options> = {}) =>
  Effect.flatMap(LocalBackend.LocalBackend, ({ url }) => training(url, options))

/** The inference client against the running backend, for the life of the scope. */
export const inferenceClient = (options: Partial<InferenceClient.Options> = {}) =>
  Effect.flatMap(LocalBackend.LocalBackend, ({ url }) => inference(url, options))

/** A request as the client sent it: method, URL with its query, headers. */
export interface Sent {
  readonly method: string
  readonly url: URL
  readonly headers: Readonly<Record<string, string>>
}

/**
 * A `transformClient` that records every request the client puts on the wire (the server cannot be asked
 * what it received, so the client's own hook is where to look).
 */
export const recorder = () => {
  const sent: Array<Sent> = []
  const transformClient = (client: HttpClient.HttpClient) =>
    HttpClient.tapRequest(client, (request) =>
      Effect.sync(() => {
        const url = new URL(request.url)
        for (const [key, value] of request.urlParams) url.searchParams.append(key, value)
        sent.push({ method: request.method, url, headers: request.headers })
      })
    )
  return { sent, transformClient }
}

export { failure } from "../support/failure.js"

/** A job body whose only group has equal rewards: nothing to train, so it ends at once with a new checkpoint. */
export const flatJob = (modelId: ModelId) => ({
  model_id: modelId,
  trajectory_groups: [
    {
      trajectories: [
        { messages_and_choices: [{ role: "user" as const, content: "hi" }], reward: 1 },
        { messages_and_choices: [{ role: "user" as const, content: "hi" }], reward: 1 }
      ]
    }
  ]
})

/** Every event of a job to its end, followed with a long poll, within 20 s. */
export const eventsToEnd = (client: TrainingClient.Service, id: TrainingJobId) =>
  client.followTrainingJobEvents(id, { wait: "5 seconds" }).pipe(
    Stream.runCollect,
    Effect.map((events): ReadonlyArray<TrainingJobEvent> => Chunk.toReadonlyArray(events)),
    Effect.timeout("20 seconds")
  )

/** Train a flat job on the model to its end: one more checkpoint. */
export const trainOnce = (client: TrainingClient.Service, modelId: ModelId) =>
  Effect.flatMap(client.createTrainingJob(flatJob(modelId)), (job) => eventsToEnd(client, job.id))

/**
 * A test HTTP server serving `body` as SFT training data, holding every request until `release` is called
 * (or the scope closes): a job reading it stays waiting, with no events, for as long as a test needs.
 */
export const heldData = (body: string) =>
  Effect.acquireRelease(
    Effect.async<{ readonly url: string; readonly release: () => void; readonly server: http.Server }>((resume) => {
      let release = () => {}
      const released = new Promise<void>((resolve) => {
        release = resolve
      })
      const server = http.createServer((_request, response) => {
        void released.then(() => response.writeHead(200, { "content-type": "application/jsonl" }).end(body))
      })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo
        resume(Effect.succeed({ url: `http://127.0.0.1:${port}/train.jsonl`, release, server }))
      })
    }),
    ({ release, server }) =>
      Effect.async<void>((resume) => {
        release()
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  )

/** The words the sampled groups answer with (`structured_outputs.choice`). */
export const WORDS = ["red", "blue", "green", "gold"]

/** A sampling request for group `g`, constrained to the words, with logprobs, for any model name; seeded from `seed`. */
export const ask = (model: string, g: number, seed = 40): ChatCompletionRequest => ({
  model,
  messages: [{ role: "user", content: `Say: ${WORDS[g]}` }],
  n: 4,
  seed: seed + g,
  temperature: 1,
  logprobs: true,
  max_completion_tokens: 4,
  structured_outputs: { choice: WORDS }
})

/** Two groups sampled through the client's own chat completions; alternating rewards, so both train. */
export const sampledGroups = (client: TrainingClient.Service, model: string, seed = 40) =>
  Effect.forEach([0, 1], (g) =>
    Effect.map(
      client.createChatCompletion(ask(model, g, seed)),
      (completion): TrajectoryGroup => ({
        trajectories: completion.choices.map((choice) => ({
          messages_and_choices: [...ask(model, g, seed).messages, choice],
          reward: choice.index % 2
        }))
      })
    )
  )
