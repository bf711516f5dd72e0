import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as LocalBackend from "../../src/LocalBackend.js"
import { Policy } from "../../src/local/engine/policy/Policy.js"
import { complete } from "../../src/local/engine/Sampler.js"
import { BASE_MODEL } from "../../src/local/server/internal/inference.js"
import { PolicyCache, promptStatesOf, sharedPromptBudget } from "../../src/local/server/internal/policyCache.js"
import { inference, training } from "../support/clients.js"
import { Backend, send } from "./support.js"

const ask = { messages: [{ role: "user" as const, content: "hello" }], seed: 11, max_completion_tokens: 12 }

const clients = Effect.flatMap(LocalBackend.LocalBackend, ({ url }) =>
  Effect.all({ training: training(url), inference: inference(url) })
)

describe("trained models in inference", () => {
  it.layer(Backend)("on the real server", (it) => {
    it.scoped("/v1/models lists each checkpoint; step 0 answers as the base model for the same seed", () =>
      Effect.gen(function* () {
        const c = yield* clients
        const model = yield* c.training.createModel({ project: "proj", name: "agent", base_model: BASE_MODEL })
        const name = "wandb-artifact:///local/proj/agent:step0"
        const list = yield* c.inference.listModels()
        const entry = list.data.find((m) => m.id === name)
        expect(entry).toMatchObject({ object: "model", root: BASE_MODEL, owned_by: "local", max_model_len: 512 })
        expect(list.data[0]?.id).toBe(BASE_MODEL)
        const [checkpoint] = (yield* c.training.listCheckpoints(model.id)).data
        expect(checkpoint).toBeDefined()
        expect(typeof entry?.created).toBe("number")

        const trained = yield* c.inference.createChatCompletion({ ...ask, model: name })
        const latest = yield* c.inference.createChatCompletion({
          ...ask,
          model: "wandb-artifact:///local/proj/agent"
        })
        const reference = yield* c.inference.createChatCompletion({ ...ask, model: BASE_MODEL })
        expect(trained.model).toBe(name)
        expect(trained.choices[0]?.message.content).toBe(reference.choices[0]?.message.content)
        expect(latest.choices[0]?.message.content).toBe(reference.choices[0]?.message.content)
      })
    )

    it.effect("an unknown trained model or step is 404 in the OpenAI shape", () =>
      Effect.gen(function* () {
        for (const model of [
          "wandb-artifact:///local/proj/nobody:step0",
          "wandb-artifact:///local/proj/agent2:step9",
          "wandb-artifact:///bad"
        ]) {
          const reply = yield* send("POST", "/v1/chat/completions", { ...ask, model })
          expect(reply.status).toBe(404)
          expect(reply.json).toEqual({
            error: { message: `The model \`${model}\` does not exist.`, type: "NotFoundError", param: null, code: 404 }
          })
        }
      })
    )
  })

  it("the policy cache keeps the most recently used entries", () => {
    const cache = new PolicyCache(2)
    const p = Policy.create(undefined, { seed: 1 })
    cache.set("a", p)
    cache.set("b", p)
    expect(cache.get("a")).toBe(p)
    cache.set("c", p)
    expect(cache.get("b")).toBeUndefined()
    expect(cache.get("a")).toBe(p)
    expect(cache.size).toBe(2)
  })

  it("a policy the cache drops gives its prompt states back (the shared budget would keep them, and it)", () => {
    const cache = new PolicyCache(1)
    const [first, second] = [Policy.create(undefined, { seed: 1 }), Policy.create(undefined, { seed: 2 })]
    const ask = (policy: Policy) =>
      complete(
        policy,
        { messages: [{ role: "user", content: "a tic-tac-toe board" }], max_completion_tokens: 1, seed: 0 },
        { modelName: "m", promptStates: promptStatesOf(policy) }
      )
    cache.set("first", first)
    ask(first)
    const kept = promptStatesOf(first).tokens
    expect(kept).toBeGreaterThan(0)
    const before = sharedPromptBudget.tokens
    cache.set("second", second)
    expect(promptStatesOf(first).size).toBe(0)
    expect(sharedPromptBudget.tokens).toBe(before - kept)
  })
})
