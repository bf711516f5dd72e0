/**
 * When the training thread starts: not with a server that only serves (sampling needs no thread), but when a
 * model is created, so its code compiles while the model's first rollouts are gathered. Isolated (a thread
 * per process: another file's jobs would have started it).
 */
import { expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as LocalBackend from "../../src/LocalBackend.js"
import * as TrainingThread from "../../src/local/server/internal/trainingThread.js"
import { inference, training } from "../support/clients.js"
import { Backend } from "./support.js"

layer(Backend, { timeout: 60_000 })("the training thread", (it) => {
  it.scoped("starts with the first model created, not with a server that only samples", () =>
    Effect.gen(function* () {
      const { url } = yield* LocalBackend.LocalBackend
      const completion = yield* (yield* inference(url)).createChatCompletion({
        model: "effect-rl/tiny",
        messages: [{ role: "user", content: "hi" }],
        max_completion_tokens: 4
      })
      expect(completion.choices).toHaveLength(1)
      expect(TrainingThread.running()).toBe(false)
      yield* (yield* training(url)).createModel({ project: "p", name: "thread", base_model: "effect-rl/tiny" })
      expect(TrainingThread.running()).toBe(true)
    })
  )
})
