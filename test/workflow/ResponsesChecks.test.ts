/**
 * The Responses request checked as OpenAI checks it, one table of cases sent alike to the embedded backend's
 * `/v1/responses` and to a rollout's (through `RolloutFetch`, whose policy is the same backend's model): each
 * refused case a 400 naming the field, each accepted case answered. The two share the request schema and the
 * translation, so they refuse the same bodies.
 */
import { describe, expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as LocalBackend from "../../src/LocalBackend.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as Rollout from "../../src/workflow/Rollout.js"
import * as RolloutFetch from "../../src/workflow/RolloutFetch.js"
import { TINY, WorkflowBackend } from "./support.js"

const base = { model: TINY, input: "hi", max_output_tokens: 2 }
const sixteen = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`, "v"]))

const call = { type: "function_call", call_id: "call_1", name: "add", arguments: '{"a":1,"b":2}' }
const output = { type: "function_call_output", call_id: "call_1", output: "3" }

/** Bodies the API refuses: the field each 400 must name. */
const REFUSED: ReadonlyArray<readonly [string, Record<string, unknown>, string]> = [
  ["temperature above 2", { temperature: 3 }, "temperature"],
  ["temperature below 0", { temperature: -0.5 }, "temperature"],
  ["top_p above 1", { top_p: 1.5 }, "top_p"],
  ["an include value OpenAI does not know", { include: ["bogus.include"] }, "include"],
  ["17 metadata pairs", { metadata: { ...sixteen, k16: "v" } }, "metadata"],
  ["a metadata value of 513 characters", { metadata: { k: "x".repeat(513) } }, "metadata"],
  ["a metadata key of 65 characters", { metadata: { ["k".repeat(65)]: "v" } }, "metadata"],
  ["max_output_tokens past the context", { max_output_tokens: 1_000_000_000 }, "max_output_tokens"],
  ["max_output_tokens of 2^31", { max_output_tokens: 2 ** 31 }, "max_output_tokens"],
  ["an input past the context", { input: "word ".repeat(4_000) }, "input"],
  [
    "a tool output that answers no call",
    {
      input: [
        { role: "user", content: "hi" },
        { type: "function_call_output", call_id: "call_x", output: "3" }
      ]
    },
    "input"
  ],
  [
    "a call whose arguments are not JSON",
    { input: [{ role: "user", content: "hi" }, { ...call, arguments: "{not json" }, output] },
    "input"
  ]
]

/** Bodies at the limits, answered. */
const ACCEPTED: ReadonlyArray<readonly [string, Record<string, unknown>]> = [
  ["a call and its output", { input: [{ role: "user", content: "hi" }, call, output] }],
  ["temperature 2 and top_p 1", { temperature: 2, top_p: 1 }],
  ["temperature 0", { temperature: 0 }],
  [
    "the logprobs include, and one OpenAI knows that changes nothing here",
    { include: ["message.output_text.logprobs", "reasoning.encrypted_content"] }
  ],
  [
    "16 metadata pairs, a key of 64 and a value of 512",
    { metadata: { ...Object.fromEntries(Object.entries(sixteen).slice(1)), ["k".repeat(64)]: "x".repeat(512) } }
  ]
]

/** What a surface answered: the status and, for an error, its OpenAI body. */
interface Answer {
  readonly status: number
  readonly body: { readonly error?: { readonly message?: string; readonly param?: string | null } }
}

/** Sends every case with `post`; what each answered. */
const table = (post: (body: Record<string, unknown>) => Promise<Answer>) =>
  Effect.promise(async () => {
    const refused = []
    for (const [name, fields, param] of REFUSED) {
      const answer = await post({ ...base, ...fields })
      refused.push({ name, status: answer.status, param: answer.body?.error?.param, expected: param })
    }
    const accepted = []
    for (const [name, fields] of ACCEPTED) {
      const answer = await post({ ...base, ...fields })
      accepted.push({ name, status: answer.status, error: answer.body?.error?.message })
    }
    return { refused, accepted }
  })

const check = (result: Effect.Effect.Success<ReturnType<typeof table>>) => {
  for (const one of result.refused) {
    expect({ case: one.name, status: one.status }).toEqual({ case: one.name, status: 400 })
    expect({ case: one.name, param: one.param?.split(/[.[]/)[0] }).toEqual({ case: one.name, param: one.expected })
  }
  for (const one of result.accepted) expect(one).toEqual({ name: one.name, status: 200, error: undefined })
}

describe("the Responses request's checks", () => {
  layer(WorkflowBackend, { excludeTestServices: true })((it) => {
    it.effect("the embedded backend's /v1/responses", () =>
      Effect.gen(function* () {
        const { url, apiKey } = yield* LocalBackend.LocalBackend
        const result = yield* table(async (body) => {
          const response = await fetch(`${url}/v1/responses`, {
            method: "POST",
            headers: { authorization: `Bearer ${Redacted.value(apiKey)}`, "content-type": "application/json" },
            body: JSON.stringify(body)
          })
          return { status: response.status, body: (await response.json()) as Answer["body"] }
        })
        check(result)
      })
    )

    it.effect("any response id that is not one is a 404 (get, delete, input items), on both surfaces", () =>
      Effect.gen(function* () {
        const { url, apiKey } = yield* LocalBackend.LocalBackend
        const policy = yield* Policy.trainable({ project: "checks", name: "ids", base_model: TINY })
        const ids = ["resp_nosuch", "x".repeat(120), "%zz", "a%2Fb"]
        const routes = (id: string) => [
          ["GET", `/responses/${id}`],
          ["DELETE", `/responses/${id}`],
          ["GET", `/responses/${id}/input_items`]
        ]
        const ask = (send: (method: string, path: string) => Promise<Answer>) =>
          Effect.promise(async () => {
            const answers = []
            for (const id of ids) {
              for (const [method, path] of routes(id)) {
                const answer = await send(method!, path!)
                answers.push({
                  method,
                  path,
                  status: answer.status,
                  messageMissing: answer.body.error?.message === undefined
                })
              }
            }
            return answers
          })
        const local = yield* ask(async (method, path) => {
          const response = await fetch(`${url}/v1${path}`, {
            method,
            headers: { authorization: `Bearer ${Redacted.value(apiKey)}` }
          })
          return { status: response.status, body: (await response.json()) as Answer["body"] }
        })
        const rollout = yield* Rollout.run(
          policy,
          Effect.flatMap(RolloutFetch.fetch(), (fetch) =>
            ask(async (method, path) => {
              const response = await fetch(`${RolloutFetch.BASE_URL}${path}`, { method })
              return { status: response.status, body: (await response.json()) as Answer["body"] }
            })
          )
        )
        for (const answer of [...local, ...rollout.value]) {
          expect(answer).toEqual({ ...answer, status: 404, messageMissing: false })
        }
      })
    )

    it.effect("a rollout's /v1/responses", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "checks", name: "responses", base_model: TINY })
        const finished = yield* Rollout.run(
          policy,
          Effect.flatMap(RolloutFetch.fetch(), (fetch) =>
            table(async (body) => {
              const response = await fetch(`${RolloutFetch.BASE_URL}/responses`, {
                method: "POST",
                headers: { "content-type": "application/json" },
                body: JSON.stringify(body)
              })
              return { status: response.status, body: (await response.json()) as Answer["body"] }
            })
          )
        )
        check(finished.value)
      })
    )

    it.effect("a rollout names a previous_response_id cycle, and does not follow it", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "checks", name: "cycle", base_model: TINY })
        const finished = yield* Rollout.run(
          policy,
          Effect.gen(function* () {
            const fetch = yield* RolloutFetch.fetch()
            const { recorder } = yield* Rollout.Current
            return yield* Effect.promise(async () => {
              const create = async (body: Record<string, unknown>) => {
                const response = await fetch(`${RolloutFetch.BASE_URL}/responses`, {
                  method: "POST",
                  headers: { "content-type": "application/json" },
                  body: JSON.stringify({ ...base, ...body })
                })
                return { status: response.status, body: (await response.json()) as { id: string } & Answer["body"] }
              }
              const first = await create({})
              const second = await create({ previous_response_id: first.body.id })
              // The rollout's store damaged: the first response now continues the second.
              const stored = recorder.responses.get(first.body.id)!
              recorder.responses.set(first.body.id, { ...stored, previousResponseId: second.body.id })
              return { first, second, third: await create({ previous_response_id: second.body.id }) }
            })
          })
        )
        const { first, second, third } = finished.value
        expect([first.status, second.status]).toEqual([200, 200])
        expect(third.status).toBe(400)
        expect(third.body.error).toMatchObject({
          param: "previous_response_id",
          message: `Previous response with id '${second.body.id}' continues a cycle: '${first.body.id}' continues '${second.body.id}', which the chain passed already.`
        })
      })
    )
  })
})
