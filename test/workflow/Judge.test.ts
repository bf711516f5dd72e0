/**
 * Tests of `Reward.judge`: the prompt it builds from a group (the shared prefix once, each rest labelled),
 * the structured output it asks for, the validation and retries of its answers, and its errors. The judge's
 * own logic is tested against a scripted policy (`Policy.make` with a `complete` that answers from a
 * script, a double standing in for a capable chat model, which cannot run here); the structured-output path
 * end to end runs against the real embedded backend and its tiny model.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { ChatCompletion, ChatCompletionRequest, Choice } from "../../src/api/ChatCompletion.js"
import type { Message } from "../../src/api/ChatMessage.js"
import type { JsonObject } from "../../src/api/Json.js"
import { ApiError } from "../../src/client/ApiError.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as Reward from "../../src/workflow/Reward.js"
import type { Draft } from "../../src/workflow/Rollout.js"
import { TINY, WorkflowBackend } from "./support.js"

const choice = (content: string): Choice => ({
  index: 0,
  message: { role: "assistant", content },
  finish_reason: "stop"
})

const completion = (content: string | null): ChatCompletion => ({
  model: "judge",
  choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
  usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 }
})

/** A judge model that answers from a script and records what it was asked. */
const scripted = (answers: ReadonlyArray<string | null | ApiError>) => {
  const requests: Array<ChatCompletionRequest> = []
  const policy = Policy.make({
    name: "scripted-judge",
    complete: (request) =>
      Effect.suspend(() => {
        const answer = answers[requests.length]
        requests.push(request)
        if (answer === undefined) return Effect.dieMessage("the script ran out of answers")
        return answer instanceof ApiError ? Effect.fail(answer) : Effect.succeed(completion(answer))
      })
  })
  return { policy, requests }
}

const SYSTEM = "You are a careful math tutor. Answer with a number."
const QUESTION = "What is 17 * 3? Think step by step."

const draft = (...rest: ReadonlyArray<Draft["messages_and_choices"][number]>): Draft => ({
  messages_and_choices: [{ role: "system", content: SYSTEM }, { role: "user", content: QUESTION }, ...rest]
})

/** Three rollouts of one scenario: same system and user messages, then each its own turns. */
const group: ReadonlyArray<Reward.Scoring<{ readonly id: string }, string>> = [
  { scenario: { id: "q1" }, value: "51", trajectory: draft(choice("17 * 3 = 51")), score: { reward: 1 } },
  {
    scenario: { id: "q1" },
    value: "41",
    trajectory: draft(
      choice("Let me use the calculator."),
      { role: "tool", content: "41", tool_call_id: "call_7" },
      choice("It is 41.")
    ),
    score: { reward: 0, metrics: { turns: 2 } }
  },
  { scenario: { id: "q1" }, value: "?", trajectory: draft(choice("I don't know.")), score: { reward: 0 } }
]

const good = JSON.stringify({
  "trajectory 1": { explanation: "correct", score: 1 },
  "trajectory 2": { explanation: "wrong", score: 0.2 },
  "trajectory 3": { explanation: "no answer", score: 0 }
})

const textOf = (message: Message | undefined): string =>
  message !== undefined && "content" in message && typeof message.content === "string" ? message.content : ""

const occurrences = (text: string, part: string) => text.split(part).length - 1

describe("Reward.judge", () => {
  it.effect("sends the shared prefix once and each trajectory's rest labelled, asking for structured output", () =>
    Effect.gen(function* () {
      const { policy, requests } = scripted([good])
      const scores = yield* Reward.judge<{ readonly id: string }>({
        policy,
        rubric: (scenario) => `Reward correct answers to ${scenario.id}.`,
        request: { temperature: 0 }
      })(group)
      expect(requests).toHaveLength(1)
      const request = requests[0]!
      expect(request.model).toBe("scripted-judge")
      expect(request.temperature).toBe(0)
      const [system, user] = request.messages
      expect(textOf(system)).toContain("Rubric: Reward correct answers to q1.")
      expect(textOf(system)).toContain("from 0 to 1")
      const prompt = textOf(user)
      expect(occurrences(prompt, SYSTEM)).toBe(1)
      expect(occurrences(prompt, QUESTION)).toBe(1)
      // The shared context comes first, then each trajectory's own turns under its label, in order.
      expect(prompt.indexOf(QUESTION)).toBeLessThan(prompt.indexOf("trajectory 1:"))
      expect(prompt).toContain("trajectory 1:\nassistant: 17 * 3 = 51")
      expect(prompt).toContain(
        "trajectory 2:\nassistant: Let me use the calculator.\ntool (call_7): 41\nassistant: It is 41."
      )
      expect(prompt).toContain("trajectory 3:\nassistant: I don't know.")
      expect(occurrences(prompt, "trajectory ")).toBe(3)
      // One verdict per label, each required, nothing else allowed.
      const format = request.response_format
      expect(format?.type).toBe("json_schema")
      const schema = (format && "json_schema" in format ? format.json_schema?.schema : undefined) as JsonObject
      expect(Object.keys(schema.properties as JsonObject)).toEqual(["trajectory 1", "trajectory 2", "trajectory 3"])
      expect(schema.required).toEqual(["trajectory 1", "trajectory 2", "trajectory 3"])
      expect(schema.additionalProperties).toBe(false)
      expect((schema.properties as JsonObject)["trajectory 2"]).toMatchObject({
        properties: { explanation: { type: "string" }, score: { type: "number" } },
        required: ["explanation", "score"]
      })
      // The judged score is the reward; the original reward and the rollout's metrics are kept.
      expect(scores).toEqual([
        { reward: 1, metrics: { original_reward: 1 } },
        { reward: 0.2, metrics: { turns: 2, original_reward: 0 } },
        { reward: 0, metrics: { original_reward: 0 } }
      ])
    })
  )

  it.effect("retries malformed answers (not JSON, a trajectory missing, a score out of range), saying why", () =>
    Effect.gen(function* () {
      const missing = JSON.stringify({
        "trajectory 1": { explanation: "ok", score: 1 },
        "trajectory 2": { explanation: "no", score: 0 }
      })
      const outOfRange = JSON.stringify({
        "trajectory 1": { explanation: "ok", score: 1 },
        "trajectory 2": { explanation: "no", score: 1.5 },
        "trajectory 3": { explanation: "no", score: 0 }
      })
      const { policy, requests } = scripted(["Sure! Here are my scores: 1, 0, 0", missing, outOfRange, good])
      const scores = yield* Reward.judge({ policy, rubric: "Correct answers.", maxAttempts: 4 })(group)
      expect(scores.map((s) => s.reward)).toEqual([1, 0.2, 0])
      expect(requests).toHaveLength(4)
      const feedback = requests.slice(1).map((r) => r.messages.slice(-2))
      // Each retry sends the previous answer back and says what was wrong with it.
      expect(feedback.map(([answer]) => textOf(answer))).toEqual([
        "Sure! Here are my scores: 1, 0, 0",
        missing,
        outOfRange
      ])
      expect(textOf(feedback[0]![1])).toMatch(/not JSON/)
      expect(textOf(feedback[1]![1])).toMatch(/trajectory 3/)
      expect(textOf(feedback[2]![1])).toMatch(/trajectory 2: the score 1\.5 is not within 0 to 1/)
      // The first request's messages are resent unchanged.
      for (const r of requests) expect(r.messages.slice(0, 2)).toEqual(requests[0]!.messages)
    })
  )

  it.effect("an extra trajectory, a missing score or a non-object answer is malformed too", () =>
    Effect.gen(function* () {
      const extra = JSON.stringify({ ...JSON.parse(good), "trajectory 4": { explanation: "?", score: 1 } })
      const noScore = JSON.stringify({ ...JSON.parse(good), "trajectory 1": { explanation: "?" } })
      const { policy } = scripted([extra, noScore, "[1, 0, 0]"])
      const error = yield* Effect.flip(Reward.judge({ policy, rubric: "Correct answers." })(group))
      expect(error._tag).toBe("JudgeError")
      expect(error.reason).toBe("Malformed")
      expect(error.attempts).toBe(3)
      expect(error.excerpt).toBe("[1, 0, 0]")
      const { policy: p2 } = scripted([extra])
      const first = yield* Effect.flip(Reward.judge({ policy: p2, rubric: "x", maxAttempts: 1 })(group))
      expect(first.description).toMatch(/trajectory 4/)
      const { policy: p3 } = scripted([noScore])
      const second = yield* Effect.flip(Reward.judge({ policy: p3, rubric: "x", maxAttempts: 1 })(group))
      expect(second.description).toMatch(/trajectory 1\.score/)
    })
  )

  it.effect("fails with Malformed after maxAttempts, keeping an excerpt of the last answer", () =>
    Effect.gen(function* () {
      const long = `not json ${"x".repeat(2000)}`
      const { policy, requests } = scripted(["nope", long, "never used"])
      const error = yield* Effect.flip(Reward.judge({ policy, rubric: "Correct answers.", maxAttempts: 2 })(group))
      expect(requests).toHaveLength(2)
      expect(error).toMatchObject({ _tag: "JudgeError", reason: "Malformed", attempts: 2 })
      expect(error.excerpt).toBe(long.slice(0, 500))
      expect(error.message).toMatch(/after 2 attempt\(s\): Malformed/)
    })
  )

  it.effect("a failed completion is an Api error at once, not retried", () =>
    Effect.gen(function* () {
      const cause = new ApiError({
        reason: "RateLimited",
        method: "POST",
        path: "/v1/chat/completions",
        status: 429,
        description: "slow down",
        retryable: true
      })
      const { policy, requests } = scripted([cause, good])
      const error = yield* Effect.flip(Reward.judge({ policy, rubric: "Correct answers." })(group))
      expect(requests).toHaveLength(1)
      expect([error.reason, error.attempts]).toEqual(["Api", 1])
      // The cause is the policy's ApiError (Effect wraps a failure raised inside a span in a proxy, so compare fields).
      expect([error.cause?._tag, error.cause?.reason, error.cause?.status]).toEqual(["ApiError", "RateLimited", 429])
      expect(error.description).toMatch(/RateLimited: slow down/)
    })
  )

  it.effect("no content, and a fenced answer", () =>
    Effect.gen(function* () {
      const { policy } = scripted([null, `\`\`\`json\n${good}\n\`\`\``])
      const scores = yield* Reward.judge({ policy, rubric: "Correct answers." })(group)
      expect(scores.map((s) => s.reward)).toEqual([1, 0.2, 0])
      const { policy: silent } = scripted([null])
      const error = yield* Effect.flip(Reward.judge({ policy: silent, rubric: "x", maxAttempts: 1 })(group))
      expect(error.description).toMatch(/no content/)
    })
  )

  it.effect("levels are an enum in the schema and the only scores accepted; a custom range is checked", () =>
    Effect.gen(function* () {
      const answer = (scores: ReadonlyArray<number>) =>
        JSON.stringify(Object.fromEntries(scores.map((score, i) => [`trajectory ${i + 1}`, { score }])))
      const { policy, requests } = scripted([answer([1, 0.3, 0]), answer([1, 0.5, 0])])
      const scores = yield* Reward.judge({ policy, rubric: "x", levels: [0, 0.5, 1], explain: false })(group)
      expect(scores.map((s) => s.reward)).toEqual([1, 0.5, 0])
      const schema = (requests[0]!.response_format as { json_schema: { schema: JsonObject } }).json_schema.schema
      expect((schema.properties as JsonObject)["trajectory 1"]).toEqual({
        type: "object",
        properties: { score: { type: "number", enum: [0, 0.5, 1] } },
        required: ["score"],
        additionalProperties: false
      })
      expect(textOf(requests[0]!.messages[0])).toContain("with one of 0, 0.5, 1")
      expect(textOf(requests[1]!.messages.at(-1))).toMatch(/0\.3 is not one of 0, 0\.5, 1/)

      const ranged = scripted([answer([10, -1, 3]), answer([10, 1, 3])])
      const out = yield* Reward.judge({ policy: ranged.policy, rubric: "x", range: { min: 1, max: 10 } })(group)
      expect(out.map((s) => s.reward)).toEqual([10, 1, 3])
      expect(ranged.requests).toHaveLength(2)
    })
  )

  it.effect("a group of one has no shared context; an empty group makes no call", () =>
    Effect.gen(function* () {
      const { policy, requests } = scripted([JSON.stringify({ "trajectory 1": { explanation: "ok", score: 0.7 } })])
      const scores = yield* Reward.judge({ policy, rubric: "x" })(group.slice(0, 1))
      expect(scores).toEqual([{ reward: 0.7, metrics: { original_reward: 1 } }])
      const prompt = textOf(requests[0]!.messages[1])
      expect(prompt).not.toContain("Shared context")
      expect(prompt).toContain(`trajectory 1:\nsystem: ${SYSTEM}\nuser: ${QUESTION}\nassistant: 17 * 3 = 51`)
      expect(yield* Reward.judge({ policy, rubric: "x" })([])).toEqual([])
      expect(requests).toHaveLength(1)
    })
  )

  it.effect(
    "then made group-relative: the reward is the judged score, trained on centered, original_reward the first",
    () =>
      Effect.gen(function* () {
        const { policy } = scripted([good])
        const scorer: Reward.GroupScorer<{ readonly id: string }, string, Reward.JudgeError> = Reward.sequence(
          Reward.judge({ policy, rubric: "Correct answers." }),
          Reward.groupRelative({ mode: "centered" })
        )
        const scores = yield* scorer(group)
        const center = (1 + 0.2 + 0) / 3
        expect(scores.map((s) => s.reward)).toEqual([1, 0.2, 0])
        expect(scores.map((s) => s.metrics?.relative_reward)).toEqual([1 - center, 0.2 - center, 0 - center])
        expect(scores.map((s) => s.metrics?.original_reward)).toEqual([1, 0, 0])
      })
  )

  it("refuses a range whose min is above its max", () => {
    const { policy } = scripted([])
    expect(() => Reward.judge({ policy, rubric: "x", range: { min: 1, max: 0 } })).toThrow(RangeError)
  })

  it.layer(WorkflowBackend, { timeout: "60 seconds" })("against the embedded backend", (it) => {
    const polite: ReadonlyArray<Reward.Scoring<unknown, string>> = [
      {
        scenario: null,
        value: "",
        trajectory: { messages_and_choices: [{ role: "user", content: "say hi" }, choice("hello!")] },
        score: { reward: 0.25 }
      },
      {
        scenario: null,
        value: "",
        trajectory: { messages_and_choices: [{ role: "user", content: "say hi" }, choice("go away")] },
        score: { reward: 0.75, metrics: { rude: true } }
      }
    ]

    it.effect("the tiny model's constrained decoding answers a discrete-scale judge in one call", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.base(TINY)
        const calls: Array<number> = []
        const counted = Policy.make({
          name: TINY,
          complete: (request) => Effect.tap(policy.complete(request), () => Effect.sync(() => calls.push(1)))
        })
        const levels = [0, 0.5, 1]
        const scores = yield* Reward.judge({
          policy: counted,
          rubric: "Is the reply polite?",
          levels,
          explain: false,
          maxAttempts: 1,
          request: { max_completion_tokens: 96, seed: 3 }
        })(polite)
        expect(calls).toHaveLength(1)
        expect(scores).toHaveLength(2)
        for (const score of scores) expect(levels).toContain(score.reward)
        expect(scores.map((s) => s.metrics)).toEqual([{ original_reward: 0.25 }, { rude: true, original_reward: 0.75 }])
      })
    )

    it.effect("the default schema (explanations, a number score) is within the engine's subset", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.base(TINY)
        // The engine cannot bound a number, so the range is wide: any number it writes is a valid score.
        const scores = yield* Reward.judge({
          policy,
          rubric: "Is the reply polite?",
          range: { min: -Number.MAX_VALUE, max: Number.MAX_VALUE },
          maxExplanationLength: 4,
          // The tiny model's context is 512 tokens; the shortest valid answer here is 90 bytes.
          request: { max_completion_tokens: 100, seed: 5 }
        })(polite)
        expect(scores).toHaveLength(2)
        for (const score of scores) expect(Number.isFinite(score.reward)).toBe(true)
      })
    )
  })
})
