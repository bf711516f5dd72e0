/**
 * The tool loop: first with a scripted policy (to see exactly which calls run, what goes back and what is
 * recorded), then against the real embedded backend, whose calls are constrained to the tools' schemas, with
 * the trajectory trained on.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import type { ResponseToolCall } from "../../src/api/ChatCompletion.js"
import { isChoice } from "../../src/api/Trajectory.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as Rollout from "../../src/workflow/Rollout.js"
import * as Tools from "../../src/workflow/Tools.js"
import * as Trainer from "../../src/workflow/Trainer.js"
import { scripted } from "./scripted.js"
import { WorkflowBackend } from "./support.js"

const add = Tools.make("add", {
  description: "Adds two numbers",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  handler: ({ a, b }) => Effect.succeed(a + b)
})

class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { key: Schema.String }) {
  override get message() {
    return `no entry for ${this.key}`
  }
}

const lookup = Tools.make("lookup", {
  description: "Looks a word up",
  parameters: Schema.Struct({ key: Schema.Literal("sky", "grass", "void") }),
  handler: ({ key }) =>
    key === "void" ? Effect.fail(new NotFound({ key })) : Effect.succeed({ colour: key === "sky" ? "blue" : "green" })
})

describe("Tools.run with a scripted policy", () => {
  it.effect("runs the calls of a turn concurrently, sends results back in order and stops at the answer", () =>
    Effect.gen(function* () {
      const { policy, sent } = yield* scripted([
        {
          calls: [
            ["wait", "{}"],
            ["open", "{}"]
          ]
        },
        { content: "done" }
      ])
      // `wait` finishes only once `open` ran: the two calls of the turn must run at the same time.
      const gate = yield* Deferred.make<void>()
      const wait = Tools.make("wait", {
        parameters: Schema.Struct({}),
        handler: () => Effect.as(Deferred.await(gate), "waited")
      })
      const open = Tools.make("open", {
        parameters: Schema.Struct({}),
        handler: () => Effect.as(Deferred.succeed(gate, undefined), "opened")
      })
      const finished = yield* Rollout.run(
        policy,
        Tools.run({ tools: [wait, open], system: "be brief", prompt: "go", request: { max_completion_tokens: 9 } })
      )
      const outcome = finished.value
      expect([outcome.answer, outcome.stop, outcome.turns]).toEqual(["done", "answer", 2])
      expect(outcome.calls.map((c) => [c.name, c.result, c.failed])).toEqual([
        ["wait", "waited", false],
        ["open", "opened", false]
      ])
      const requests = yield* Ref.get(sent)
      expect(requests[0]!.tools?.map((t) => t.function.name)).toEqual(["wait", "open"])
      expect(requests[0]!.max_completion_tokens).toBe(9)
      expect(requests[1]!.messages.slice(3)).toEqual([
        { role: "tool", tool_call_id: "call_1_0", content: "waited" },
        { role: "tool", tool_call_id: "call_1_1", content: "opened" }
      ])
      const entries = finished.trajectory.messages_and_choices
      expect(entries.map((e) => (isChoice(e) ? "choice" : (e as { role: string }).role))).toEqual([
        "system",
        "user",
        "choice",
        "tool",
        "tool",
        "choice"
      ])
      expect(finished.trajectory.additional_histories).toBeUndefined()
      expect(finished.trajectory.tools?.map((t) => t.function.name)).toEqual(["wait", "open"])
      expect(finished.trajectory.metrics).toMatchObject({ tool_calls: 2, tool_errors: 0, tool_turns: 2 })
    })
  )

  it.effect("offers each tool's parameters as the JSON Schema of its Schema, and decodes and renders results", () =>
    Effect.gen(function* () {
      const { policy, sent } = yield* scripted([{ calls: [["add", '{"a":1.50,"b":2}']] }, { content: "3.5" }])
      const finished = yield* Rollout.run(policy, Tools.run({ tools: [add, lookup], prompt: "1.5 + 2?" }))
      expect(finished.value.calls[0]).toMatchObject({ name: "add", arguments: '{"a":1.50,"b":2}', result: "3.5" })
      const offered = (yield* Ref.get(sent))[0]!.tools!
      expect(offered[0]!.function).toEqual({
        name: "add",
        description: "Adds two numbers",
        parameters: {
          type: "object",
          required: ["a", "b"],
          properties: { a: { type: "number" }, b: { type: "number" } },
          additionalProperties: false
        }
      })
      expect(offered[1]!.function.parameters).toMatchObject({
        properties: { key: { type: "string", enum: ["sky", "grass", "void"] } }
      })
      // The arguments go back to the model exactly as it wrote them, so the trajectory's turns line up.
      const second = (yield* Ref.get(sent))[1]!.messages[1] as { tool_calls: ReadonlyArray<ResponseToolCall> }
      expect(second.tool_calls[0]!.function.arguments).toBe('{"a":1.50,"b":2}')
    })
  )

  it.effect("a call that cannot run is a result the model sees and a metric, not a failed rollout", () =>
    Effect.gen(function* () {
      const { policy, sent } = yield* scripted([
        {
          calls: [
            ["search", '{"q":"x"}'],
            ["add", '{"a":1}'],
            ["add", "not json"],
            ["lookup", '{"key":"void"}'],
            ["lookup", '{"key":"sky"}']
          ]
        },
        { content: "blue" }
      ])
      const finished = yield* Rollout.run(policy, Tools.run({ tools: [add, lookup], prompt: "sky?" }))
      const results = finished.value.calls.map((c) => [c.failed, c.result])
      expect(results[0]).toEqual([true, 'Error: there is no tool "search" (the tools are "add", "lookup")'])
      expect(results[1]![0]).toBe(true)
      expect(results[1]![1]).toMatch(/^Error: the arguments of add do not fit its parameters: .*\n?.*\["b"\]/s)
      expect(results[2]![0]).toBe(true)
      expect(results[2]![1]).toMatch(/^Error: the arguments of add do not fit/)
      expect(results[3]).toEqual([true, "Error: no entry for void"])
      expect(results[4]).toEqual([false, '{"colour":"blue"}'])
      expect(finished.value.answer).toBe("blue")
      expect(finished.trajectory.metrics).toMatchObject({ tool_calls: 5, tool_errors: 4, tool_turns: 2 })
      const tools = (yield* Ref.get(sent))[1]!.messages.filter((m) => "role" in m && m.role === "tool")
      expect(tools).toHaveLength(5)
    })
  )

  it.effect('onToolError "fail" fails the rollout: a ToolCallError naming the call, or the handler\'s own error', () =>
    Effect.gen(function* () {
      const badArgs = yield* scripted([{ calls: [["add", '{"a":"one","b":2}']] }])
      const error = yield* Rollout.run(
        badArgs.policy,
        Tools.run({ tools: [add, lookup], prompt: "?", onToolError: "fail" })
      ).pipe(Effect.flip)
      expect(error._tag).toBe("ToolCallError")
      expect(error).toMatchObject({ reason: "Arguments", tool: "add", callId: "call_1_0" })
      expect(error.message).toContain('["a"]')

      const unknown = yield* scripted([{ calls: [["nope", "{}"]] }])
      const refused = yield* Rollout.run(
        unknown.policy,
        Tools.run({ tools: [add], prompt: "?", onToolError: "fail" })
      ).pipe(Effect.flip)
      expect(refused).toMatchObject({ _tag: "ToolCallError", reason: "UnknownTool", tool: "nope" })

      const failing = yield* scripted([{ calls: [["lookup", '{"key":"void"}']] }])
      const own = yield* Rollout.run(
        failing.policy,
        Tools.run({ tools: [lookup], prompt: "?", onToolError: "fail" })
      ).pipe(Effect.flip)
      expect(own).toBeInstanceOf(NotFound)
    })
  )

  it.effect("request fields may depend on the turn", () =>
    Effect.gen(function* () {
      const { policy, sent } = yield* scripted([{ calls: [["add", '{"a":1,"b":1}']] }, { content: "2" }])
      yield* Rollout.run(
        policy,
        Tools.run({
          tools: [add],
          prompt: "1 + 1?",
          request: (turn) =>
            turn === 1 ? { tool_choice: "required" } : { tool_choice: "none", structured_outputs: { choice: ["2"] } }
        })
      )
      const requests = yield* Ref.get(sent)
      expect(requests.map((r) => [r.tool_choice, r.structured_outputs?.choice])).toEqual([
        ["required", undefined],
        ["none", ["2"]]
      ])
    })
  )

  it.effect("stops at the turn limit, keeping the last turn's results in the trajectory", () =>
    Effect.gen(function* () {
      const { policy, sent } = yield* scripted([{ calls: [["add", '{"a":1,"b":1}']] }])
      const finished = yield* Rollout.run(policy, Tools.run({ tools: [add], prompt: "loop", maxTurns: 3 }))
      expect([finished.value.answer, finished.value.stop, finished.value.turns]).toEqual([null, "turns", 3])
      expect((yield* Ref.get(sent)).length).toBe(3)
      const entries = finished.trajectory.messages_and_choices
      expect(entries.at(-1)).toEqual({ role: "tool", tool_call_id: "call_3_0", content: "2" })
      expect(entries.filter(isChoice)).toHaveLength(3)
      expect(finished.trajectory.metrics).toMatchObject({ tool_calls: 3, tool_errors: 0, tool_turns: 3 })
    })
  )
})

describe("Tools.run against the embedded backend", () => {
  it.layer(WorkflowBackend, { timeout: 120_000 })((it) => {
    it.effect("every call the policy makes fits its tool; the trajectory trains", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "tools", name: "agent", base_model: "effect-rl/tiny-2k" })
        const rollout = (seed: number) =>
          Rollout.run(
            policy,
            Tools.run({
              tools: [add, lookup],
              prompt: "What colour is the sky?",
              maxTurns: 2,
              request: { tool_choice: "required", max_completion_tokens: 120, seed }
            })
          )
        const finished = yield* Effect.forEach([1, 2, 3, 4], rollout, { concurrency: 2 })
        for (const { value, trajectory } of finished) {
          expect(value.stop).toBe("turns")
          expect(value.calls.length).toBeGreaterThanOrEqual(2)
          // Constrained decoding: every call names an offered tool and its arguments decode.
          for (const call of value.calls) {
            expect(["add", "lookup"]).toContain(call.name)
            expect(call.result.startsWith("Error: the arguments") || call.result.startsWith("Error: there is")).toBe(
              false
            )
          }
          const choices = trajectory.messages_and_choices.filter(isChoice)
          expect(choices).toHaveLength(2)
          for (const choice of choices) {
            expect(choice.finish_reason).toBe("tool_calls")
            expect(choice.token_ids?.length).toBe(choice.logprobs?.content?.length)
          }
        }
        const result = yield* Trainer.train(policy, [
          {
            trajectories: finished.map(({ trajectory, value }, i) => ({
              ...trajectory,
              reward: value.calls[0]!.name === "lookup" ? 1 : i / 10
            }))
          }
        ])
        expect(result.step).toBe(1)
        expect(yield* policy.step).toBe(1)
      })
    )
  })
})
