/**
 * Rollouts: what is recorded (context messages, choices with logprobs and token ids, additional histories,
 * tools, metrics, metadata, logs, timing, policy versions), first with a scripted policy (to see exactly
 * what the recorder does with each request) and then against the real embedded backend.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as TestClock from "effect/TestClock"
import type { ChatCompletion, ChatCompletionRequest } from "../../src/api/ChatCompletion.js"
import type { Message, Tool } from "../../src/api/ChatMessage.js"
import { isChoice } from "../../src/api/Trajectory.js"
import { TrainingClient } from "../../src/client/TrainingClient.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as Rollout from "../../src/workflow/Rollout.js"
import { TINY, WorkflowBackend } from "./support.js"

/**
 * A policy answering each request with `reply <k>` (k counts requests), recording what it was sent. A
 * scripted double: these tests are about what the recorder makes of the requests, not about the engine.
 */
const scripted = Effect.gen(function* () {
  const sent = yield* Ref.make<ReadonlyArray<ChatCompletionRequest>>([])
  const version = yield* Ref.make(3)
  const policy = Policy.make({
    name: "scripted",
    version: Ref.get(version),
    complete: (request) =>
      Effect.gen(function* () {
        const all = yield* Ref.updateAndGet(sent, (xs) => [...xs, request])
        const completion: ChatCompletion = {
          id: `chatcmpl-${all.length}`,
          object: "chat.completion",
          created: 0,
          model: request.model ?? "",
          choices: [
            {
              index: 0,
              message: { role: "assistant", content: `reply ${all.length}` },
              finish_reason: "stop",
              logprobs: { content: [{ token: "r", logprob: -0.5, bytes: [114], top_logprobs: [] }] },
              token_ids: [114]
            }
          ],
          usage: { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12 }
        } as unknown as ChatCompletion
        return completion
      })
  })
  return { policy, sent, version }
})

const user = (content: string): Message => ({ role: "user", content }) as Message

const tool: Tool = {
  type: "function",
  function: { name: "lookup", description: "look up a word", parameters: { type: "object", properties: {} } }
}

describe("Rollout", () => {
  it.effect("records context messages and choices, asks for logprobs and token ids", () =>
    Effect.gen(function* () {
      const { policy, sent } = yield* scripted
      const finished = yield* Rollout.run(
        policy,
        Effect.gen(function* () {
          const first = yield* Rollout.chat({ messages: [user("hi")] })
          const answer = first.choices[0]!.message.content!
          yield* Rollout.chat({
            messages: [user("hi"), { role: "assistant", content: answer } as Message, user("again")]
          })
          return answer
        })
      )
      expect(finished.value).toBe("reply 1")
      const requests = yield* Ref.get(sent)
      expect(requests.map((r) => [r.model, r.logprobs, r.return_token_ids])).toEqual([
        ["scripted", true, true],
        ["scripted", true, true]
      ])
      const entries = finished.trajectory.messages_and_choices
      expect(
        entries.map((e) => (isChoice(e) ? `choice:${e.message.content}` : (e as { readonly role: string }).role))
      ).toEqual(["user", "choice:reply 1", "user", "choice:reply 2"])
      expect(finished.trajectory.additional_histories).toBeUndefined()
      // What the rollout measured, in `metrics` (the hosted service drops `auto_metrics`).
      expect(finished.trajectory.metrics).toEqual({
        duration_seconds: 0,
        completions: 2,
        prompt_tokens: 20,
        completion_tokens: 4
      })
      expect(finished.trajectory.auto_metrics).toBeUndefined()
    })
  )

  it.effect("a conversation that does not continue the main one is an additional history, with its tools", () =>
    Effect.gen(function* () {
      const { policy } = yield* scripted
      const finished = yield* Rollout.run(
        policy,
        Effect.gen(function* () {
          const main = yield* Rollout.conversation({ system: "main agent" })
          yield* main.user("task")
          yield* main.reply()
          // A sub-agent with its own conversation and tools.
          const sub = yield* Rollout.conversation({ system: "sub agent", tools: [tool] })
          yield* sub.user("look it up")
          yield* sub.reply()
          yield* main.user("and now?")
          yield* main.reply()
          yield* sub.user("more")
          yield* sub.reply()
        })
      )
      const roles = (entries: ReadonlyArray<unknown>) =>
        entries.map((e) => (isChoice(e as never) ? "choice" : (e as { role: string }).role))
      expect(roles(finished.trajectory.messages_and_choices)).toEqual(["system", "user", "choice", "user", "choice"])
      expect(finished.trajectory.tools).toBeUndefined()
      expect(finished.trajectory.additional_histories).toHaveLength(1)
      const sub = finished.trajectory.additional_histories![0]!
      expect(roles(sub.messages_and_choices)).toEqual(["system", "user", "choice", "user", "choice"])
      expect(sub.tools).toEqual([tool])
    })
  )

  it.effect("an agent that edits what the model said starts a new history rather than rewriting the old", () =>
    Effect.gen(function* () {
      const { policy } = yield* scripted
      const finished = yield* Rollout.run(
        policy,
        Effect.gen(function* () {
          yield* Rollout.chat({ messages: [user("hi")] })
          yield* Rollout.chat({ messages: [user("hi"), { role: "assistant", content: "edited" } as Message] })
        })
      )
      expect(finished.trajectory.messages_and_choices).toHaveLength(2)
      expect(finished.trajectory.additional_histories).toHaveLength(1)
      expect(finished.trajectory.additional_histories![0]!.messages_and_choices).toHaveLength(3)
    })
  )

  it.effect("metrics, metadata, logs, appended messages, timing and the policy version at start and end", () =>
    Effect.gen(function* () {
      const { policy, version } = yield* scripted
      yield* TestClock.setTime(Date.parse("2026-01-02T03:04:05.000Z"))
      const finished = yield* Rollout.run(
        policy,
        Effect.gen(function* () {
          yield* Rollout.chat({ messages: [user("hi")] })
          yield* Rollout.metric("moves", 3)
          yield* Rollout.metric("moves", 4)
          yield* Rollout.metric("won", true)
          yield* Rollout.metadata("opponent", "random")
          yield* Rollout.log("started")
          yield* Rollout.append(user("game over"))
          yield* TestClock.adjust("1500 millis")
          yield* Ref.set(version, 4)
        }),
        { metadata: { scenario: "s1" } }
      )
      const t = finished.trajectory
      expect(t.metrics).toEqual({
        duration_seconds: 1.5,
        completions: 1,
        prompt_tokens: 10,
        completion_tokens: 2,
        moves: 4,
        won: true
      })
      expect(t.metadata).toEqual({ scenario: "s1", opponent: "random" })
      expect(t.logs).toEqual(["started"])
      expect(t.messages_and_choices).toHaveLength(3)
      expect(t.start_time).toBe("2026-01-02T03:04:05.000Z")
      expect([t.initial_policy_version, t.final_policy_version]).toEqual([3, 4])
    })
  )

  it.effect("a message a trajectory cannot take fails the turn before the request is sent, naming it", () =>
    Effect.gen(function* () {
      const { policy, sent } = yield* scripted
      const error = yield* Effect.flip(
        Rollout.run(
          policy,
          Effect.gen(function* () {
            yield* Rollout.chat({ messages: [user("hi")] })
            // A custom role: chat completions take it, trajectories on the training service do not.
            return yield* Rollout.chat({ messages: [user("hi"), { role: "grader", content: "be brief" } as Message] })
          })
        )
      )
      expect(error).toBeInstanceOf(Rollout.InvalidTurn)
      expect(error).toMatchObject({ _tag: "InvalidTurn", reason: "Message", index: 1 })
      expect(error.message).toContain(`role "grader"`)
      // Only the first request went out.
      expect(yield* Ref.get(sent)).toHaveLength(1)
      const appended = yield* Effect.flip(
        Rollout.run(policy, Rollout.append({ author: { role: "tool" }, content: [] } as unknown as Message))
      )
      expect(appended).toMatchObject({ _tag: "InvalidTurn", reason: "Message", index: 0 })
      expect(appended.message).toContain("generic")
    })
  )

  it.effect("a choice whose finish_reason the training service refuses fails the turn when it comes", () =>
    Effect.gen(function* () {
      const policy = Policy.make({
        name: "aborting",
        complete: () =>
          Effect.succeed({
            id: "chatcmpl-x",
            object: "chat.completion",
            created: 0,
            model: "aborting",
            choices: [{ index: 0, message: { role: "assistant", content: "par" }, finish_reason: "abort" }],
            usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 }
          } as ChatCompletion)
      })
      const error = yield* Effect.flip(Rollout.run(policy, Rollout.chat({ messages: [user("hi")] })))
      expect(error).toMatchObject({ _tag: "InvalidTurn", reason: "Choice" })
      expect(error.message).toContain(`finish_reason "abort"`)
      expect(error.message).toContain("stop, length, tool_calls, content_filter, function_call")
    })
  )

  it.effect("a metric of the agent's own wins over a measured one of the same name", () =>
    Effect.gen(function* () {
      const { policy } = yield* scripted
      const finished = yield* Rollout.run(
        policy,
        Effect.zipRight(Rollout.chat({ messages: [user("hi")] }), Rollout.metric("completions", 7))
      )
      expect(finished.trajectory.metrics).toMatchObject({ completions: 7, prompt_tokens: 10 })
    })
  )

  it.effect("a failing agent fails the rollout with its own error", () =>
    Effect.gen(function* () {
      const { policy } = yield* scripted
      const error = yield* Rollout.run(policy, Effect.fail("bad move" as const)).pipe(Effect.flip)
      expect(error).toBe("bad move")
    })
  )
})

/**
 * A policy answering the k-th request (from 1) with the assistant message `answer(k)`, `finish_reason` "stop"
 * (or "tool_calls" with tool calls), and usage unless `usage` is false. A scripted double, as above.
 */
const answering = (answer: (k: number) => Record<string, unknown>, options: { readonly usage?: boolean } = {}) => {
  let k = 0
  return Policy.make({
    name: "answering",
    complete: () =>
      Effect.sync(() => {
        const message = { role: "assistant", ...answer(++k) }
        return {
          id: `chatcmpl-${k}`,
          object: "chat.completion",
          created: 0,
          model: "answering",
          choices: [{ index: 0, message, finish_reason: "tool_calls" in message ? "tool_calls" : "stop" }],
          ...(options.usage === false ? {} : { usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } })
        } as unknown as ChatCompletion
      })
  })
}

const assistant = (fields: Record<string, unknown>): Message => ({ role: "assistant", ...fields }) as Message
const call = (id: string, name: string, args: string) => ({ id, type: "function", function: { name, arguments: args } })

/** The main history and the additional ones, each as the keys of its entries (a choice as `choice:<text>`). */
const shape = (trajectory: Rollout.Finished<unknown>["trajectory"]) => {
  const of = (entries: ReadonlyArray<unknown>) =>
    entries.map((e) => {
      const m = (isChoice(e as never) ? (e as { message: unknown }).message : e) as Record<string, unknown>
      const text = typeof m.content === "string" ? m.content : JSON.stringify(m.tool_calls ?? null)
      return `${isChoice(e as never) ? "choice" : m.role}:${text}`
    })
  return [
    of(trajectory.messages_and_choices),
    ...(trajectory.additional_histories ?? []).map((h) => of(h.messages_and_choices))
  ]
}

describe("Rollout: the history a request continues", () => {
  it.effect("the model's answer sent back in another form continues it: content parts, a name, tool_calls: []", () =>
    Effect.gen(function* () {
      const finished = yield* Rollout.run(
        answering((k) => ({ content: `a${k}` })),
        Effect.gen(function* () {
          yield* Rollout.chat({ messages: [user("q")] })
          const back = [
            assistant({ content: [{ type: "text", text: "a1" }] }),
            assistant({ content: "a1", name: "bot", tool_calls: [] })
          ]
          yield* Rollout.chat({ messages: [user("q"), back[0]!, user("more")] })
          yield* Rollout.chat({
            messages: [user("q"), back[1]!, user("more"), assistant({ content: "a2" }), user("m")]
          })
        })
      )
      expect(shape(finished.trajectory)).toEqual([
        ["user:q", "choice:a1", "user:more", "choice:a2", "user:m", "choice:a3"]
      ])
    })
  )

  it.effect("a request that ends with the model's last answer continues its history", () =>
    Effect.gen(function* () {
      const finished = yield* Rollout.run(
        answering((k) => ({ content: `a${k}` })),
        Effect.gen(function* () {
          yield* Rollout.chat({ messages: [user("q")] })
          yield* Rollout.chat({ messages: [user("q"), assistant({ content: "a1" })] })
        })
      )
      expect(shape(finished.trajectory)).toEqual([["user:q", "choice:a1", "choice:a2"]])
    })
  )

  it.effect("tool calls are matched by name and arguments, not by id; a tool result by its call id", () =>
    Effect.gen(function* () {
      const calls = [call("c1", "add", '{"a":1}')]
      const finished = yield* Rollout.run(
        answering((k) => (k === 1 ? { content: null, tool_calls: calls } : { content: `a${k}` })),
        Effect.gen(function* () {
          const q = user("q")
          yield* Rollout.chat({ messages: [q] })
          const result = (id: string) => ({ role: "tool", tool_call_id: id, content: "2" }) as Message
          // Edited arguments, another tool: each a history of its own.
          yield* Rollout.chat({
            messages: [q, assistant({ content: null, tool_calls: [call("c1", "add", '{"a":2}')] }), result("c1")]
          })
          yield* Rollout.chat({
            messages: [q, assistant({ content: null, tool_calls: [call("c1", "sub", '{"a":1}')] }), result("c1")]
          })
          // The SDK's own id for the call: the same call.
          const sent = assistant({ content: null, tool_calls: [call("other-id", "add", '{"a":1}')] })
          yield* Rollout.chat({ messages: [q, sent, result("c1")] })
          // The result of another call: another history.
          yield* Rollout.chat({ messages: [q, sent, result("c2"), assistant({ content: "a4" }), user("u")] })
        })
      )
      const tools = (args: string, name = "add", id = "c1") =>
        JSON.stringify([{ id, type: "function", function: { name, arguments: args } }])
      expect(shape(finished.trajectory)).toEqual([
        ["user:q", `choice:${tools('{"a":1}')}`, "tool:2", "choice:a4"],
        ["user:q", `assistant:${tools('{"a":2}')}`, "tool:2", "choice:a2"],
        ["user:q", `assistant:${tools('{"a":1}', "sub")}`, "tool:2", "choice:a3"],
        ["user:q", `assistant:${tools('{"a":1}', "add", "other-id")}`, "tool:2", "assistant:a4", "user:u", "choice:a5"]
      ])
    })
  )

  it.effect("custom tool calls are matched by name and input", () =>
    Effect.gen(function* () {
      const custom = (input: string, name = "shell") => ({ id: "c1", type: "custom", custom: { name, input } })
      const finished = yield* Rollout.run(
        answering((k) => (k === 1 ? { content: null, tool_calls: [custom("ls")] } : { content: `a${k}` })),
        Effect.gen(function* () {
          yield* Rollout.chat({ messages: [user("q")] })
          const result = { role: "tool", tool_call_id: "c1", content: "x" } as Message
          const back = (sent: ReturnType<typeof custom>) => [
            user("q"),
            assistant({ content: null, tool_calls: [sent] }),
            result
          ]
          yield* Rollout.chat({ messages: back(custom("rm")) })
          yield* Rollout.chat({ messages: back(custom("ls", "python")) })
          yield* Rollout.chat({ messages: back(custom("ls")) })
        })
      )
      expect(shape(finished.trajectory)).toEqual([
        ["user:q", `choice:${JSON.stringify([custom("ls")])}`, "tool:x", "choice:a4"],
        ["user:q", `assistant:${JSON.stringify([custom("rm")])}`, "tool:x", "choice:a2"],
        ["user:q", `assistant:${JSON.stringify([custom("ls", "python")])}`, "tool:x", "choice:a3"]
      ])
    })
  )

  it.effect("a user message's name tells two speakers apart", () =>
    Effect.gen(function* () {
      const named = (name: string, content: string) => ({ role: "user", name, content }) as Message
      const finished = yield* Rollout.run(
        answering((k) => ({ content: `a${k}` })),
        Effect.gen(function* () {
          yield* Rollout.chat({ messages: [named("alice", "hi")] })
          yield* Rollout.chat({ messages: [named("bob", "hi"), assistant({ content: "a1" }), user("u")] })
        })
      )
      expect(shape(finished.trajectory)).toEqual([
        ["user:hi", "choice:a1"],
        ["user:hi", "assistant:a1", "user:u", "choice:a2"]
      ])
    })
  )

  it.effect("of two histories a request continues, the longer, and on a tie the earlier (the main one)", () =>
    Effect.gen(function* () {
      const finished = yield* Rollout.run(
        answering((k) => ({ content: k <= 2 ? "same" : `a${k}` })),
        Effect.gen(function* () {
          // The same question twice: two histories alike ([q, same]), the second additional.
          yield* Rollout.chat({ messages: [user("q")] })
          yield* Rollout.chat({ messages: [user("q")] })
          const same = assistant({ content: "same" })
          yield* Rollout.chat({ messages: [user("q"), same, user("m")] })
          yield* Rollout.chat({ messages: [user("q"), same, user("m"), assistant({ content: "a3" }), user("n")] })
        })
      )
      expect(shape(finished.trajectory)).toEqual([
        ["user:q", "choice:same", "user:m", "choice:a3", "user:n", "choice:a4"],
        ["user:q", "choice:same"]
      ])
    })
  )

  it.effect("a turn without tools keeps the tools of the history; usage left out counts 0", () =>
    Effect.gen(function* () {
      const finished = yield* Rollout.run(
        answering((k) => ({ content: `a${k}` }), { usage: false }),
        Effect.gen(function* () {
          yield* Rollout.chat({ messages: [user("q")], tools: [tool] })
          yield* Rollout.chat({ messages: [user("q"), assistant({ content: "a1" }), user("r")] })
        })
      )
      expect(finished.trajectory.tools).toEqual([tool])
      expect(finished.trajectory.metrics).toMatchObject({ completions: 2, prompt_tokens: 0, completion_tokens: 0 })
    })
  )

  it.effect("what a trajectory cannot take is named: the message, its index, and why", () =>
    Effect.gen(function* () {
      const policy = answering((k) => ({ content: `a${k}` }))
      const noCallId = yield* Effect.flip(
        Rollout.run(policy, Rollout.chat({ messages: [user("q"), { role: "tool", content: "2" } as Message] }))
      )
      expect(noCallId).toMatchObject({ _tag: "InvalidTurn", reason: "Message", index: 1 })
      expect(noCallId.message).toMatch(/^message 1 of the request cannot be recorded in a trajectory: .*tool_call_id/s)
      expect(noCallId.message).not.toContain("which trajectories do not take")
      const role = yield* Effect.flip(
        Rollout.run(policy, Rollout.append(user("ok"), { role: "grader", content: "x" } as Message))
      )
      expect(role.message).toBe(
        `message 1 cannot be appended to a trajectory: role "grader", which trajectories do not take (only ` +
          "developer, system, user, assistant, tool and function)"
      )
      // Nothing of a refused append is appended, the valid message before it neither.
      const kept = yield* Rollout.run(
        policy,
        Effect.either(Rollout.append(user("ok"), { role: "grader", content: "x" } as Message))
      )
      expect(kept.trajectory.messages_and_choices).toEqual([])
      // A choice whose tool call has no id (a backend that leaves ids out): the message, not the finish_reason.
      const noId = yield* Effect.flip(
        Rollout.run(
          answering(() => ({
            content: null,
            tool_calls: [{ type: "function", function: { name: "f", arguments: "{}" } }]
          })),
          Rollout.chat({ messages: [user("q")] })
        )
      )
      expect(noId).toMatchObject({ _tag: "InvalidTurn", reason: "Choice" })
      // A completion without an id (the field is optional) is named as one.
      const anonymous = Policy.make({
        name: "anonymous",
        complete: () =>
          Effect.succeed({
            model: "anonymous",
            choices: [{ index: 0, message: { role: "assistant", content: "x" }, finish_reason: "abort" }],
            usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 }
          } as unknown as ChatCompletion)
      })
      const unnamed = yield* Effect.flip(Rollout.run(anonymous, Rollout.chat({ messages: [user("q")] })))
      expect(unnamed.message).toMatch(
        /^the choice of a chat completion cannot be recorded in a trajectory: finish_reason "abort"/
      )
      expect(noId.message).toMatch(/^the choice of chat completion chatcmpl-1 cannot be recorded in a trajectory: /)
      expect(noId.message).toMatch(/: its message does not fit a trajectory: /)
    })
  )
})

describe("Rollout against the embedded backend", () => {
  it.layer(WorkflowBackend, { timeout: 60_000 })((it) => {
    it.effect("a trainable policy records real choices with logprobs and token ids, at step 0", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.trainable({ project: "rollout", name: "agent", base_model: TINY })
        expect(policy.name).toBe(`wandb-artifact:///${policy.record.entity}/rollout/agent`)
        expect(yield* policy.step).toBe(0)
        const finished = yield* Rollout.run(
          policy,
          Effect.gen(function* () {
            const convo = yield* Rollout.conversation({ request: { max_completion_tokens: 4, seed: 7 } })
            yield* convo.user("pick")
            const first = yield* convo.reply({ structured_outputs: { choice: ["left", "right"] } })
            yield* convo.user("again")
            yield* convo.reply()
            return first.message.content
          })
        )
        expect(["left", "right"]).toContain(finished.value)
        const choices = finished.trajectory.messages_and_choices.filter(isChoice)
        expect(choices).toHaveLength(2)
        for (const choice of choices) {
          expect(choice.logprobs?.content?.length).toBeGreaterThan(0)
          expect(choice.token_ids?.length).toBe(choice.logprobs?.content?.length)
        }
        expect([finished.trajectory.initial_policy_version, finished.trajectory.final_policy_version]).toEqual([0, 0])
        expect(finished.trajectory.metrics?.completion_tokens).toBeGreaterThan(0)
      })
    )

    it.effect("the policy follows its step; a pinned one stays; the same name finds the same model", () =>
      Effect.gen(function* () {
        const client = yield* TrainingClient
        const policy = yield* Policy.trainable({ project: "rollout", name: "follow", base_model: TINY })
        const again = yield* Policy.trainable({ project: "rollout", name: "follow", base_model: TINY })
        expect(again.record.id).toBe(policy.record.id)
        yield* policy.setStep(5)
        expect(yield* policy.version).toBe(5)
        // Step 5 does not exist on the backend: the completion names it, so the service answers 404.
        const error = yield* policy.complete({ messages: [user("x")], max_completion_tokens: 1 }).pipe(Effect.flip)
        expect(error.reason).toBe("NotFound")
        const pinned = yield* Policy.fromModel(policy.record, { step: 0 })
        yield* pinned.setStep(9)
        expect(yield* pinned.step).toBe(0)
        const completion = yield* pinned.complete({ messages: [user("x")], max_completion_tokens: 1 })
        expect(completion.model).toContain(":step0")
        expect(Option.isSome(yield* client.latestCheckpoint(policy.record.id))).toBe(true)
      })
    )

    it.effect("a base policy answers through the inference client", () =>
      Effect.gen(function* () {
        const policy = yield* Policy.base(TINY)
        const finished = yield* Rollout.run(policy, Rollout.chat({ messages: [user("x")], max_completion_tokens: 2 }))
        expect(finished.trajectory.initial_policy_version).toBeNull()
        expect(finished.value.model).toBe(TINY)
      })
    )
  })
})
