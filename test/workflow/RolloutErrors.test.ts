/**
 * A policy's refusal as an agent sees it through a rollout: the service's own words and status, in the API the
 * agent called (the Responses API names the chat request's fields its way), never the path of the policy's chat
 * completion that the rollout made for it.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import OpenAI from "openai"
import { ApiError } from "../../src/client/ApiError.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as Rollout from "../../src/workflow/Rollout.js"
import * as RolloutOpenAI from "../../src/workflow/RolloutOpenAI.js"

const DESCRIPTION = "max_completion_tokens is 3, but the shortest output response_format allows takes 9 tokens"

/** A policy whose backend refuses every request with a 400 naming `max_completion_tokens`. */
const refusing = Policy.make({
  name: "refusing",
  complete: () =>
    Effect.fail(
      new ApiError({
        reason: "InvalidRequest",
        method: "POST",
        path: "/v1/chat/completions",
        status: 400,
        description: DESCRIPTION,
        errorType: "BadRequestError",
        param: "max_completion_tokens",
        retryable: false
      })
    )
})

describe("a policy's refusal through a rollout", () => {
  it.effect("the agent gets the service's words in its own API's terms, with the status and field", () =>
    Effect.gen(function* () {
      const finished = yield* Rollout.run(
        refusing,
        Effect.flatMap(RolloutOpenAI.client(), (openai) =>
          Effect.promise(async () => {
            const chat = await openai.chat.completions
              .create({ model: "m", messages: [{ role: "user", content: "hi" }], max_completion_tokens: 3 })
              .catch((error: unknown) => error)
            const responses = await openai.responses
              .create({ model: "m", input: "hi", max_output_tokens: 3 })
              .catch((error: unknown) => error)
            return { chat, responses }
          })
        )
      )
      const { chat, responses } = finished.value
      expect(chat).toBeInstanceOf(OpenAI.BadRequestError)
      expect(chat).toMatchObject({ status: 400, param: "max_completion_tokens", type: "BadRequestError" })
      expect((chat as Error).message).toBe(`400 ${DESCRIPTION}`)
      expect(responses).toBeInstanceOf(OpenAI.BadRequestError)
      expect(responses).toMatchObject({ status: 400, param: "max_output_tokens" })
      expect((responses as Error).message).toBe(
        "400 max_output_tokens is 3, but the shortest output text.format allows takes 9 tokens"
      )
    })
  )
})
