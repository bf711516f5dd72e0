/**
 * The foundation's `InferenceClient`, unchanged, against the real embedded backend (no fake): the model
 * list (with and without a project), chat completions and their streams on base models and on trained
 * checkpoints, and the error mapping of the OpenAI-shaped replies (401, 404, 422, 400, and requests
 * refused before sending).
 *
 * The backend is built once for the block, without the test services, so the server runs on the real clock.
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { describe, expect, layer } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import type { ChatCompletionRequest } from "../../src/api/ChatCompletion.js"
import { PROJECT_HEADER } from "../../src/client/InferenceClient.js"
import { Backend } from "../server/support.js"
import { BASE, failure, inferenceClient, recorder, trainingClient, trainOnce } from "./support.js"

const WORDS = ["red", "blue", "green", "gold"]

const hi: ChatCompletionRequest = { model: BASE, messages: [{ role: "user", content: "hi" }], max_completion_tokens: 4 }

/** A request constrained to the words, several choices, with logprobs. */
const pick = (model: string): ChatCompletionRequest => ({
  model,
  messages: [{ role: "user", content: "Pick a colour" }],
  n: 3,
  seed: 11,
  temperature: 1,
  logprobs: true,
  max_completion_tokens: 16,
  structured_outputs: { choice: WORDS }
})

const text = (
  chunks: Chunk.Chunk<{ readonly choices: ReadonlyArray<{ readonly delta: { readonly content?: unknown } }> }>
) =>
  Chunk.toReadonlyArray(chunks)
    .map((chunk) => {
      const content = chunk.choices[0]?.delta.content
      return typeof content === "string" ? content : ""
    })
    .join("")

describe("InferenceClient against the embedded server", () => {
  layer(Backend, { excludeTestServices: true })("every method on the real server", (it) => {
    it.scoped(
      "listModels: the base model, then each checkpoint of a trained model; with and without a project",
      () =>
        Effect.gen(function* () {
          const rec = recorder()
          const c = yield* inferenceClient({ transformClient: rec.transformClient })
          const before = yield* c.listModels()
          expect(before.object).toBe("list")
          const base = before.data.find((m) => m.id === BASE)
          expect(base).toMatchObject({
            object: "model",
            owned_by: "effect-rl",
            root: BASE,
            parent: null,
            max_model_len: 512
          })
          expect(Number.isInteger(base?.created)).toBe(true)

          const training = yield* trainingClient()
          const model = yield* training.createModel({ project: "contract-inf", name: "listed", base_model: BASE })
          yield* trainOnce(training, model.id)
          const after = yield* c.listModels()
          const name = "wandb-artifact:///local/contract-inf/listed"
          const trained = after.data.filter((m) => m.id.startsWith(name))
          expect(trained.map((m) => m.id)).toEqual([`${name}:step0`, `${name}:step1`])
          for (const m of trained) {
            expect(m).toMatchObject({ object: "model", owned_by: "local", root: BASE, max_model_len: 512 })
            expect(Number.isInteger(m.created)).toBe(true)
          }
          expect(after.data.length).toBe(before.data.length + 2)

          // A project is sent as OpenAI-Project (the embedded server accepts it and answers the same list).
          const scoped = yield* inferenceClient({ project: "team/default", transformClient: rec.transformClient })
          expect(yield* scoped.listModels()).toEqual(after)
          expect(yield* c.listModels({ project: "team/call" })).toEqual(after)
          const projects = rec.sent.map((r) => r.headers[PROJECT_HEADER.toLowerCase()])
          expect(projects).toEqual([undefined, undefined, "team/default", "team/call"])
        }),
      30_000
    )

    it.scoped(
      "createChatCompletion: n choices among the allowed words, logprobs, usage; deterministic for a seed",
      () =>
        Effect.gen(function* () {
          const c = yield* inferenceClient({ project: "team/p" })
          const completion = yield* c.createChatCompletion(pick(BASE))
          expect(completion).toMatchObject({ object: "chat.completion", model: BASE })
          expect(completion.id).toEqual(expect.stringMatching(/\S/))
          expect(completion.choices.map((choice) => choice.index)).toEqual([0, 1, 2])
          for (const choice of completion.choices) {
            expect(choice.message.role).toBe("assistant")
            expect(WORDS).toContain(choice.message.content)
            expect(choice.finish_reason).toBe("stop")
            const tokens = choice.logprobs?.content ?? []
            // The logprobs cover every sampled token, the stop token that ended the choice included.
            expect(
              tokens
                .slice(0, -1)
                .map((t) => t.token)
                .join("")
            ).toBe(choice.message.content)
            expect(tokens.at(-1)?.token).toMatch(/^<\|[a-z_]+\|>$/)
            for (const token of tokens) expect(token.logprob).toBeLessThanOrEqual(0)
          }
          const tokens = completion.choices.reduce((n, choice) => n + (choice.logprobs?.content?.length ?? 0), 0)
          expect(completion.usage?.completion_tokens).toBe(tokens)
          expect(completion.usage?.prompt_tokens).toBeGreaterThan(0)
          const again = yield* c.createChatCompletion(pick(BASE))
          expect(again.choices.map((choice) => choice.message.content)).toEqual(
            completion.choices.map((choice) => choice.message.content)
          )
        })
    )

    it.scoped("a trained model is served by its latest name and by each step", () =>
      Effect.gen(function* () {
        const training = yield* trainingClient()
        const model = yield* training.createModel({ project: "contract-inf", name: "served", base_model: BASE })
        const c = yield* inferenceClient()
        const name = "wandb-artifact:///local/contract-inf/served"
        const latest = yield* c.createChatCompletion(pick(name))
        const step0 = yield* c.createChatCompletion(pick(`${name}:step0`))
        expect(latest.model).toBe(name)
        expect(step0.model).toBe(`${name}:step0`)
        // At step 0 a model has its base model's weights: the same seed samples the same answers.
        const base = yield* c.createChatCompletion(pick(BASE))
        const answers = (completion: typeof base) => completion.choices.map((choice) => choice.message.content)
        expect(answers(step0)).toEqual(answers(base))
        expect(answers(latest)).toEqual(answers(base))
        const missing = yield* failure(c.createChatCompletion(pick(`${name}:step9`)))
        expect(missing).toMatchObject({ reason: "NotFound", status: 404, errorType: "NotFoundError" })
        expect(model.name).toBe("served")
      })
    )

    it.scoped("streamChatCompletion: a role chunk first, the text of the unstreamed completion, usage last", () =>
      Effect.gen(function* () {
        const rec = recorder()
        const c = yield* inferenceClient({ transformClient: rec.transformClient })
        const request: ChatCompletionRequest = { ...hi, seed: 3, max_completion_tokens: 8 }
        const whole = yield* c.createChatCompletion(request)
        const chunks = yield* Stream.runCollect(
          c.streamChatCompletion({ ...request, stream_options: { include_usage: true } }, { project: "team/s" })
        )
        const all = Chunk.toReadonlyArray(chunks)
        expect(all[0]?.choices[0]?.delta).toMatchObject({ role: "assistant" })
        expect(all.every((chunk) => chunk.object === "chat.completion.chunk" && chunk.id === all[0]?.id)).toBe(true)
        expect(text(chunks)).toBe(whole.choices[0]?.message.content)
        const finish = all.flatMap((chunk) => chunk.choices.flatMap((choice) => choice.finish_reason ?? []))
        expect(finish).toEqual([whole.choices[0]?.finish_reason])
        expect(all.at(-1)).toMatchObject({ choices: [], usage: { completion_tokens: whole.usage?.completion_tokens } })
        expect(rec.sent.at(-1)?.headers[PROJECT_HEADER.toLowerCase()]).toBe("team/s")
        expect(rec.sent.at(-1)?.headers.accept).toBe("text/event-stream")
      })
    )

    it.scoped("401: a wrong key is Unauthorized in the OpenAI shape, and neither key shows in the error", () =>
      Effect.gen(function* () {
        const wrong = "sk-wrong-inference-key-4242"
        const c = yield* inferenceClient({ apiKey: Redacted.make(wrong) })
        for (const call of [
          Effect.asVoid(c.listModels()),
          Effect.asVoid(c.createChatCompletion(hi)),
          Stream.runDrain(c.streamChatCompletion(hi))
        ]) {
          const error = yield* failure(call, [wrong])
          expect(error).toMatchObject({
            reason: "Unauthorized",
            status: 401,
            description: "Invalid or missing API key",
            errorType: "AuthenticationError",
            code: 401,
            retryable: false
          })
        }
      })
    )

    it.scoped("404: an unknown model is NotFound with the service's message, streamed or not", () =>
      Effect.gen(function* () {
        const c = yield* inferenceClient()
        const request = { ...hi, model: "no/such-model" }
        for (const call of [
          Effect.asVoid(c.createChatCompletion(request)),
          Stream.runDrain(c.streamChatCompletion(request))
        ]) {
          const error = yield* failure(call)
          expect(error).toMatchObject({
            reason: "NotFound",
            status: 404,
            method: "POST",
            path: "/v1/chat/completions",
            description: "The model `no/such-model` does not exist.",
            errorType: "NotFoundError",
            code: 404
          })
        }
      })
    )

    it.scoped("422: Validation with the server's detail decoded", () =>
      Effect.gen(function* () {
        // The client checks each request against the schemas the server decodes with, so a request it
        // builds cannot draw a 422; the caller's own `transformClient` hook breaks the body on the way out.
        const c = yield* inferenceClient({
          transformClient: HttpClient.mapRequest((request) =>
            HttpClientRequest.bodyUnsafeJson(request, { model: BASE, messages: 3 })
          )
        })
        const error = yield* failure(c.createChatCompletion(hi))
        expect(error).toMatchObject({ reason: "Validation", status: 422, path: "/v1/chat/completions" })
        expect(error.detail).toEqual([
          { loc: ["body", "messages"], msg: "Input should be a valid list", type: "list_type" }
        ])
        expect(error.description).toBe("body.messages: Input should be a valid list")
      })
    )

    it.scoped("400: a context overflow and a priority are BadRequest with the engine's message, streamed or not", () =>
      Effect.gen(function* () {
        const c = yield* inferenceClient()
        const long = { ...hi, messages: [{ role: "user" as const, content: "word ".repeat(2000) }] }
        for (const call of [
          Effect.asVoid(c.createChatCompletion(long)),
          Stream.runDrain(c.streamChatCompletion(long))
        ]) {
          const error = yield* failure(call)
          expect(error).toMatchObject({
            reason: "BadRequest",
            status: 400,
            errorType: "BadRequestError",
            param: "messages",
            code: 400,
            retryable: false
          })
          expect(error.description).toMatch(/^This model's maximum context length is 512 tokens\./)
        }
        const priority = yield* failure(c.createChatCompletion({ ...hi, priority: 1 }))
        expect(priority).toMatchObject({
          reason: "BadRequest",
          param: "priority",
          description: "Got priority 1 but Priority scheduling is not enabled."
        })
      })
    )

    it.scoped("InvalidRequest: a request that breaks its schema is caught before anything is sent", () =>
      Effect.gen(function* () {
        const rec = recorder()
        const c = yield* inferenceClient({ transformClient: rec.transformClient })
        const options = yield* failure(c.createChatCompletion({ ...hi, stream_options: { include_usage: true } }))
        expect(options.reason).toBe("InvalidRequest")
        expect(options.detail?.map((d) => d.loc)).toEqual([["body", "stream_options"]])
        const top = yield* failure(Stream.runDrain(c.streamChatCompletion({ ...hi, top_logprobs: 3 })))
        expect(top.reason).toBe("InvalidRequest")
        expect(top.detail?.map((d) => d.loc)).toEqual([["body", "top_logprobs"]])
        const n = yield* failure(c.createChatCompletion({ ...hi, n: 0 }))
        expect(n.reason).toBe("InvalidRequest")
        expect(n.detail?.every((d) => d.loc.join(".") === "body.n")).toBe(true)
        expect(rec.sent).toEqual([])
      })
    )
  })
})
