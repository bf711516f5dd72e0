/**
 * The rollout gateway against the real embedded backend: agents in child processes (Python, standard library)
 * at once, each seeing only its rollout; keys refused across rollouts, wrong or missing; an ended rollout's
 * 410, also for a request in flight when it ended; the `openai` SDK through the gateway, on chat completions
 * and on the Responses API, recording what `Rollout.chat` records; model names mapped to a fixed policy, not
 * recorded.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import OpenAI from "openai"
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions"
import { isChoice } from "../../src/api/Trajectory.js"
import * as ExternalAgent from "../../src/workflow/ExternalAgent.js"
import { listen } from "../../src/workflow/internal/gateway.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as Rollout from "../../src/workflow/Rollout.js"
import * as RolloutGateway from "../../src/workflow/RolloutGateway.js"
import { entryKinds, instant, normalized, toolTurnsByHand, WorkflowBackend } from "./support.js"

const fixture = new URL("./fixtures/gateway_agent.py", import.meta.url).pathname

const Live = Layer.merge(WorkflowBackend, RolloutGateway.layer())

/** A policy that answers at once with a fixed text (no backend involved). */
const fixed = instant

/** A policy whose completions never come; it completes `arrived` when a request reaches it. */
const stuck = (arrived: Deferred.Deferred<void>) =>
  Policy.make({ name: "stuck", complete: () => Effect.zipRight(Deferred.succeed(arrived, undefined), Effect.never) })

/** A JSON POST with the given headers: the status and the body's text. */
const postWith = (url: string, headers: Readonly<Record<string, string>>, body: unknown) =>
  Effect.promise(async () => {
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify(body)
    })
    return { status: response.status, text: await response.text() }
  })

/** A JSON POST presenting `key` as `Authorization: Bearer <key>` (no key: no header). */
const post = (url: string, key: string | undefined, body: unknown) =>
  postWith(url, key === undefined ? {} : { authorization: `Bearer ${key}` }, body)

const add: ChatCompletionTool = {
  type: "function",
  function: {
    name: "add",
    description: "Adds two numbers",
    parameters: {
      type: "object",
      properties: { a: { type: "number" }, b: { type: "number" } },
      required: ["a", "b"],
      additionalProperties: false
    }
  }
}
const SYSTEM = "You add numbers with the add tool."
const QUESTION = "What is 2 + 3?"
const settings = { max_completion_tokens: 120, seed: 5 }

/** A tool agent as a user writes it with the openai SDK, pointed at a base URL and key. */
const toolAgent = async (endpoint: ExternalAgent.AgentEndpoint, stream: boolean) => {
  const openai = new OpenAI({ baseURL: endpoint.baseUrl, apiKey: endpoint.apiKey, maxRetries: 0 })
  const messages: Array<ChatCompletionMessageParam> = [
    { role: "system", content: SYSTEM },
    { role: "user", content: QUESTION }
  ]
  const request = { model: "gpt-4o", messages, tools: [add], ...settings }
  const first = stream
    ? await openai.chat.completions.stream({ ...request, tool_choice: "required" }).finalChatCompletion()
    : await openai.chat.completions.create({ ...request, tool_choice: "required" })
  const message = first.choices[0]!.message
  const call = message.tool_calls![0]!
  if (call.type !== "function") throw new Error("expected a function call")
  const { a, b } = JSON.parse(call.function.arguments) as { a: number; b: number }
  messages.push(message, { role: "tool", tool_call_id: call.id, content: String(a + b) })
  const second = await openai.chat.completions.create({ ...request, messages, tool_choice: "none" })
  return { sum: a + b, answer: second.choices[0]!.message.content }
}

/** The same tool agent on the Responses API: the call, its output continuing the response by id, an answer. */
const responsesAgent = async (endpoint: ExternalAgent.AgentEndpoint, stream: boolean) => {
  const openai = new OpenAI({ baseURL: endpoint.baseUrl, apiKey: endpoint.apiKey, maxRetries: 0 })
  const tool = {
    type: "function" as const,
    name: "add",
    description: "Adds two numbers",
    parameters: add.function.parameters!,
    strict: null
  }
  // `seed` is the backends' extension (as vLLM's), not in the SDK's types: the rollout passes it on.
  const request = { model: "gpt-4o", instructions: SYSTEM, tools: [tool], max_output_tokens: 120, seed: 5 } as {
    model: string
    instructions: string
    tools: Array<typeof tool>
    max_output_tokens: number
  }
  const body = { ...request, input: QUESTION, tool_choice: "required" as const }
  const first = stream ? await openai.responses.stream(body).finalResponse() : await openai.responses.create(body)
  const call = first.output.find((item) => item.type === "function_call")
  if (call?.type !== "function_call") throw new Error("expected a function call")
  const { a, b } = JSON.parse(call.arguments) as { a: number; b: number }
  const second = await openai.responses.create({
    ...request,
    previous_response_id: first.id,
    input: [{ type: "function_call_output", call_id: call.call_id, output: String(a + b) }],
    tool_choice: "none"
  })
  const read = await openai.responses.retrieve(second.id)
  return { sum: a + b, answer: second.output_text, read: read.output_text }
}

describe("RolloutGateway", () => {
  it.layer(Live, { timeout: 120_000 })((it) => {
    it.effect("two agents in child processes at once each see only their own rollout", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "gateway", name: "two", base_model: "effect-rl/tiny" })
        const published = [
          yield* Deferred.make<RolloutGateway.Endpoint>(),
          yield* Deferred.make<RolloutGateway.Endpoint>()
        ]
        const one = (i: 0 | 1, letter: string) =>
          Rollout.run(
            policy,
            RolloutGateway.withEndpoint((endpoint) =>
              Effect.gen(function* () {
                yield* Deferred.succeed(published[i]!, endpoint)
                const other = yield* Deferred.await(published[1 - i]!)
                expect(other.baseUrl).not.toBe(endpoint.baseUrl)
                const agent = ExternalAgent.command<{ letter: string }>(["/usr/bin/python3", fixture], {
                  env: { OTHER_BASE_URL: other.baseUrl, OTHER_API_KEY: Redacted.value(other.apiKey) }
                })
                return yield* agent.run(endpoint, { letter })
              })
            )
          )
        const [a, b] = yield* Effect.all([one(0, "a"), one(1, "b")], { concurrency: 2 })
        for (const [finished, letter] of [
          [a, "a"],
          [b, "b"]
        ] as const) {
          expect(finished.value?.metrics).toEqual({
            models: 200,
            own: 200,
            cross_key: 401,
            cross_url: 401,
            refusal_names_key: false,
            env_scenario: true
          })
          // One recorded turn each (the refused requests are not turns), the rollout's own question.
          const entries = finished.trajectory.messages_and_choices
          expect(entryKinds(entries)).toEqual(["user", "choice"])
          expect((entries[0] as { content: string }).content).toBe(`pick ${letter}`)
          const choice = entries.find(isChoice)!
          expect(choice.logprobs?.content?.length).toBe(choice.token_ids?.length)
          expect(choice.token_ids?.length).toBeGreaterThan(0)
        }
        expect(yield* Effect.flatMap(RolloutGateway.RolloutGateway, (gateway) => gateway.open)).toBe(0)
      })
    )

    it.effect("a wrong, missing or other rollout's key is a 401; an ended rollout a 410, in flight too", () =>
      Effect.gen(function* () {
        const policy = fixed("fixed", "hi")
        const ask = { model: "x", messages: [{ role: "user", content: "hello" }] }
        const finished = yield* Rollout.run(
          policy,
          RolloutGateway.withEndpoint((endpoint) =>
            Effect.gen(function* () {
              const url = `${endpoint.baseUrl}/chat/completions`
              const key = Redacted.value(endpoint.apiKey)
              const ok = yield* post(url, key, ask)
              const wrong = yield* post(url, `${key.slice(0, -1)}x`, ask)
              const none = yield* post(url, undefined, ask)
              const unknown = yield* post(url.replace(endpoint.id, "nosuchrollout"), key, ask)
              const invalid = yield* post(url, key, { messages: 5 })
              return { endpoint, key, ok, wrong, none, unknown, invalid }
            })
          )
        )
        const { endpoint, key, ok, wrong, none, unknown, invalid } = finished.value
        expect(ok.status).toBe(200)
        expect(JSON.parse(ok.text).choices[0].message.content).toBe("hi")
        for (const refused of [wrong, none, unknown]) {
          expect(refused.status).toBe(401)
          expect(JSON.parse(refused.text).error).toMatchObject({
            type: "invalid_request_error",
            code: "invalid_api_key"
          })
          expect(JSON.parse(refused.text).error.message).toContain("the API key is not this rollout's")
          expect(refused.text).not.toContain(key)
        }
        expect(invalid.status).toBe(400)
        expect(JSON.parse(invalid.text).error.param).toBe("messages")
        // After the end: 410 for the holder of the key, 401 for anyone else.
        const after = yield* post(`${endpoint.baseUrl}/chat/completions`, key, ask)
        expect(after.status).toBe(410)
        expect(JSON.parse(after.text).error).toMatchObject({ type: "invalid_request_error", code: "rollout_ended" })
        expect(JSON.parse(after.text).error.message).toContain("rollout has ended")
        expect((yield* post(`${endpoint.baseUrl}/chat/completions`, "sk-guess", ask)).status).toBe(401)
        expect((yield* post(`${endpoint.baseUrl}/chat/completions`, undefined, ask)).status).toBe(401)
        expect(finished.trajectory.messages_and_choices.filter(isChoice)).toHaveLength(1)

        // A request in flight when its rollout ends is answered 410 too: the rollout ends once the request has
        // reached the policy (which never answers). Checked: answering it as an agent that hung up (no answer)
        // in gateway.ts fails here.
        const arrived = yield* Deferred.make<void>()
        const inFlight = yield* Rollout.run(
          stuck(arrived),
          RolloutGateway.withEndpoint((endpoint) =>
            Effect.gen(function* () {
              const fiber = yield* Effect.fork(
                post(`${endpoint.baseUrl}/chat/completions`, Redacted.value(endpoint.apiKey), ask)
              )
              yield* Deferred.await(arrived)
              return fiber
            })
          )
        )
        const answer = yield* Fiber.join(inFlight.value)
        expect(answer.status).toBe(410)
        expect(JSON.parse(answer.text).error).toMatchObject({ code: "rollout_ended" })
      })
    )

    it.effect("the key is read from Authorization: Bearer (any case and spacing) or api-key, and nothing else", () =>
      Effect.gen(function* () {
        const ask = { model: "x", messages: [{ role: "user", content: "hello" }] }
        const finished = yield* Rollout.run(
          fixed("fixed", "hi"),
          RolloutGateway.withEndpoint((endpoint) => {
            const key = Redacted.value(endpoint.apiKey)
            const statusWith = (headers: Record<string, string>) =>
              Effect.map(postWith(`${endpoint.baseUrl}/chat/completions`, headers, ask), (answer) => answer.status)
            return Effect.all({
              bearer: statusWith({ authorization: `bearer  ${key} ` }),
              apiKey: statusWith({ "api-key": key }),
              otherScheme: statusWith({ authorization: `Basic ${key}` }),
              notBearer: statusWith({ authorization: `NotBearer ${key}` }),
              trailing: statusWith({ authorization: `Bearer ${key} ${key}` }),
              // Authorization, when sent, is the key presented: a wrong one is not rescued by api-key.
              both: statusWith({ authorization: "Bearer sk-wrong", "api-key": key })
            })
          })
        )
        expect(finished.value).toEqual({
          bearer: 200,
          apiKey: 200,
          otherScheme: 401,
          notBearer: 401,
          trailing: 401,
          both: 401
        })
      })
    )

    it.effect("the openai SDK through the gateway records what Rollout.chat records, streamed or not", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "gateway", name: "sdk", base_model: "effect-rl/tiny-2k" })
        for (const stream of [false, true]) {
          const viaGateway = yield* Rollout.run(
            policy,
            RolloutGateway.withEndpoint((endpoint) =>
              ExternalAgent.fromFunction((e: ExternalAgent.AgentEndpoint) => toolAgent(e, stream)).run(endpoint, null)
            )
          )
          const entries = viaGateway.trajectory.messages_and_choices
          expect(entryKinds(entries)).toEqual(["system", "user", "choice", "tool", "choice"])
          const call = entries.filter(isChoice)[0]!.message.tool_calls![0]!
          if (!("function" in call)) throw new Error("expected a function call")
          const { a, b } = JSON.parse(call.function.arguments) as { a: number; b: number }
          const viaChat = yield* toolTurnsByHand(policy, {
            system: SYSTEM,
            question: QUESTION,
            tools: [add] as never,
            request: settings,
            result: String(a + b)
          })
          expect(entries.map(normalized)).toEqual(viaChat.trajectory.messages_and_choices.map(normalized))
          expect(viaGateway.trajectory.additional_histories).toBeUndefined()
        }
      })
    )

    it.effect("the Responses API through the gateway records what Rollout.chat records, streamed or not", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({
          project: "gateway",
          name: "responses",
          base_model: "effect-rl/tiny-2k"
        })
        for (const stream of [false, true]) {
          let seen: Awaited<ReturnType<typeof responsesAgent>> | undefined
          const viaGateway = yield* Rollout.run(
            policy,
            RolloutGateway.withEndpoint((endpoint) =>
              ExternalAgent.fromFunction(async (e: ExternalAgent.AgentEndpoint) => {
                seen = await responsesAgent(e, stream)
              }).run(endpoint, null)
            )
          )
          const entries = viaGateway.trajectory.messages_and_choices
          expect(entryKinds(entries)).toEqual(["system", "user", "choice", "tool", "choice"])
          const viaChat = yield* toolTurnsByHand(policy, {
            system: SYSTEM,
            question: QUESTION,
            tools: [add] as never,
            request: settings,
            result: String(seen!.sum)
          })
          expect(entries.map(normalized)).toEqual(viaChat.trajectory.messages_and_choices.map(normalized))
          expect(viaGateway.trajectory.additional_histories).toBeUndefined()
          expect(seen!.read).toBe(seen!.answer)
        }
      })
    )

    it.effect("model names mapped to a fixed policy are answered by it and not recorded", () =>
      Effect.gen(function* () {
        const trained = fixed("trained", "mine")
        const opponent = fixed("opponent-model", "theirs")
        const finished = yield* Rollout.run(
          trained,
          RolloutGateway.withEndpoint(
            (endpoint) =>
              Effect.promise(async () => {
                const openai = new OpenAI({
                  baseURL: endpoint.baseUrl,
                  apiKey: Redacted.value(endpoint.apiKey),
                  maxRetries: 0
                })
                const models = (await openai.models.list()).data.map((m) => m.id)
                const theirs = await openai.chat.completions.create({
                  model: "opponent",
                  messages: [{ role: "user", content: "your move" }]
                })
                const mine = await openai.chat.completions.create({
                  model: "anything-else",
                  messages: [
                    { role: "user", content: "your move" },
                    { role: "assistant", content: theirs.choices[0]!.message.content },
                    { role: "user", content: "and yours?" }
                  ]
                })
                return { models, theirs: theirs.choices[0]!.message.content, mine: mine.choices[0]!.message.content }
              }),
            { models: { opponent } }
          )
        )
        expect(finished.value).toEqual({ models: ["trained", "opponent"], theirs: "theirs", mine: "mine" })
        // Only the trained policy's turn is a choice; the opponent's reply is context of it.
        const entries = finished.trajectory.messages_and_choices
        expect(entryKinds(entries)).toEqual(["user", "assistant", "user", "choice"])
        expect(entries.filter(isChoice).map((c) => c.message.content)).toEqual(["mine"])
        expect(finished.trajectory.additional_histories).toBeUndefined()
        expect(finished.trajectory.metrics?.completions).toBe(1)
      })
    )
  })

  it.effect("an endpoint whose scope outlives its gateway closes quietly", () =>
    Effect.gen(function* () {
      const gatewayScope = yield* Scope.make()
      const endpointScope = yield* Scope.make()
      const gateway = yield* Scope.extend(RolloutGateway.make(), gatewayScope)
      yield* Rollout.run(fixed("p", "x"), Scope.extend(gateway.register(), endpointScope))
      expect(yield* gateway.open).toBe(1)
      yield* Scope.close(gatewayScope, Exit.void)
      expect(yield* gateway.open).toBe(0)
      expect(yield* Effect.exit(Scope.close(endpointScope, Exit.void))).toStrictEqual(Exit.void)
    })
  )

  it.effect("an ended rollout's key is told 410 while its tombstone is kept: the newest maxEnded of them", () =>
    Effect.gen(function* () {
      const listener = yield* Effect.acquireRelease(
        Effect.promise(() => listen({ maxEnded: 1 })),
        (listener) => Effect.promise(() => listener.close())
      )
      const ask = { model: "x", messages: [{ role: "user", content: "hello" }] }
      const ended = (yield* Effect.forEach([1, 2], () =>
        Rollout.run(fixed("p", "x"), Effect.scoped(listener.register()))
      )).map(({ value }) => value)
      const statuses = yield* Effect.forEach(ended, (endpoint) =>
        Effect.map(
          post(`${endpoint.baseUrl}/chat/completions`, Redacted.value(endpoint.apiKey), ask),
          (answer) => answer.status
        )
      )
      // The first one's tombstone made room for the second's: its key is unknown now.
      expect(statuses).toEqual([401, 410])
    }).pipe(Effect.scoped)
  )

  it.effect("listens where asked, advertises the host agents reach, and says when it cannot listen", () =>
    Effect.gen(function* () {
      const gateway = yield* RolloutGateway.make({ host: "127.0.0.1", advertisedHost: "agents.example" })
      expect(gateway.url).toBe(`http://agents.example:${gateway.port}`)
      const endpoint = yield* Rollout.run(fixed("p", "x"), Effect.scoped(gateway.register()))
      expect(endpoint.value.baseUrl).toMatch(
        new RegExp(`^http://agents\\.example:${gateway.port}/rollouts/[\\w-]+/v1$`)
      )
      expect(String(endpoint.value.apiKey)).not.toContain("sk-rollout-")
      const taken = yield* Effect.flip(RolloutGateway.make({ port: gateway.port }))
      expect(taken).toMatchObject({ _tag: "RolloutGatewayError", reason: "Listen" })
      expect(taken.message).toContain(`cannot listen on 127.0.0.1:${gateway.port}`)
    }).pipe(Effect.scoped)
  )
})
