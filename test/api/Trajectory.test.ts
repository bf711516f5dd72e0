import { describe, expect, it } from "@effect/vitest"
import * as Arbitrary from "effect/Arbitrary"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { Choice } from "../../src/api/ChatCompletion.js"
import {
  AssistantMessage,
  DeveloperMessage,
  FunctionMessage,
  Message,
  SystemMessage,
  ToolMessage,
  UserMessage
} from "../../src/api/ChatMessage.js"
import {
  entryIssue,
  isChoice,
  LogRequest,
  MessageOrChoice,
  Trajectory,
  TrajectoryChoice,
  TrajectoryMessage
} from "../../src/api/Trajectory.js"

const firstChoice = {
  index: 0,
  message: {
    role: "assistant",
    content: null,
    tool_calls: [{ id: "call_1", type: "function", function: { name: "add", arguments: '{"a":2,"b":2}' } }]
  },
  logprobs: {
    content: [
      { token: "add", logprob: -0.01, bytes: [97, 100, 100], top_logprobs: [{ token: "add", logprob: -0.01 }] },
      { token: "(", logprob: -0.5, bytes: [40], top_logprobs: [] }
    ]
  },
  finish_reason: "tool_calls"
}

const secondChoice = {
  index: 0,
  message: { role: "assistant", content: "2 + 2 = 4", reasoning_content: "Add them." },
  logprobs: { content: [{ token: "4", logprob: -0.001, bytes: [52], top_logprobs: [] }] },
  finish_reason: "stop",
  stop_reason: null,
  token_ids: [52]
}

const trajectory = {
  messages_and_choices: [
    { role: "system", content: "You add numbers." },
    { role: "user", content: "What is 2 + 2?" },
    firstChoice,
    { role: "tool", content: "4", tool_call_id: "call_1" },
    { role: "assistant", content: "Let me think" },
    { role: "developer", content: "be brief" },
    { role: "function", content: "4", name: "add" },
    secondChoice
  ],
  reward: 1,
  tools: [{ type: "function", function: { name: "add", parameters: { type: "object" } } }],
  additional_histories: [{ messages_and_choices: [{ role: "user", content: "sub-task" }, secondChoice] }],
  metrics: { correct: true, turns: 2 },
  metadata: { scenario: "sum", difficulty: 1, reviewed: null },
  logs: ["ok"],
  start_time: "2025-01-01T00:00:00Z"
}

describe("Trajectory", () => {
  it("takes a choice whose tool calls are custom ones, as the published schema does, and encodes it back", () => {
    const custom = {
      index: 0,
      message: {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "call_9", type: "custom", custom: { name: "shell", input: "ls -la" } },
          { id: "call_10", type: "function", function: { name: "add", arguments: "{}" } }
        ]
      },
      finish_reason: "tool_calls"
    }
    const wire = { messages_and_choices: [{ role: "user", content: "list files" }, custom], reward: 1 }
    const decoded = Schema.decodeUnknownSync(Trajectory)(wire)
    const [choice] = decoded.messages_and_choices.filter(isChoice)
    expect(choice?.message.tool_calls?.[0]).toStrictEqual({
      id: "call_9",
      type: "custom",
      custom: { name: "shell", input: "ls -la" }
    })
    expect(Schema.encodeSync(Trajectory)(decoded)).toStrictEqual(wire)
    expect(Schema.is(TrajectoryChoice)(custom)).toBe(true)
    // As the service does: a custom call needs its id, its name and its input.
    const without = (call: object) => ({ ...custom, message: { ...custom.message, tool_calls: [call] } })
    for (const bad of [
      { type: "custom", custom: { name: "shell", input: "ls" } },
      { id: "c", type: "custom", custom: { name: "shell" } },
      { id: "c", type: "custom", custom: { input: "ls" } }
    ]) {
      expect(Either.isLeft(Schema.decodeUnknownEither(MessageOrChoice)(without(bad))), JSON.stringify(bad)).toBe(true)
    }
  })

  it("decodes each entry of messages_and_choices to its kind", () => {
    const decoded = Schema.decodeUnknownSync(Trajectory)(trajectory)
    const entries = decoded.messages_and_choices
    expect(entries.map(isChoice)).toStrictEqual([false, false, true, false, false, false, false, true])
    const kinds = [
      Schema.is(SystemMessage),
      Schema.is(UserMessage),
      null,
      Schema.is(ToolMessage),
      Schema.is(AssistantMessage),
      Schema.is(DeveloperMessage),
      Schema.is(FunctionMessage)
    ]
    kinds.forEach((is, index) => {
      if (is !== null) expect(is(entries[index]), `entry ${index}`).toBe(true)
    })
    expect(decoded).toStrictEqual(trajectory)
  })

  it("keeps a choice's logprobs, tool calls and token ids", () => {
    const entries = Schema.decodeUnknownSync(Trajectory)(trajectory).messages_and_choices
    const choices = entries.filter(isChoice)
    expect(choices).toStrictEqual([firstChoice, secondChoice])
    expect(choices[0]?.logprobs?.content?.map((entry) => entry.logprob)).toStrictEqual([-0.01, -0.5])
    expect(choices[0]?.message.tool_calls?.[0]).toMatchObject({ type: "function", function: { name: "add" } })
    expect(choices[1]?.token_ids).toStrictEqual([52])
  })

  it("a plain assistant message is context, not a choice", () => {
    const entry = Schema.decodeUnknownSync(MessageOrChoice)({ role: "assistant", content: "prefill" })
    expect(isChoice(entry)).toBe(false)
  })

  it("encodes back to the same JSON, inside a log request", () => {
    const request = { split: "train", trajectory_groups: [{ trajectories: [trajectory] }] }
    const decoded = Schema.decodeUnknownSync(LogRequest)(request)
    expect(JSON.parse(JSON.stringify(Schema.encodeSync(LogRequest)(decoded)))).toStrictEqual(request)
  })

  it("takes the published defaults: no messages_and_choices is [], no reward is 0.0; a given reward is finite", () => {
    expect(Schema.decodeUnknownSync(Trajectory)({ reward: 1 })).toStrictEqual({ messages_and_choices: [], reward: 1 })
    expect(Schema.decodeUnknownSync(Trajectory)({})).toStrictEqual({ messages_and_choices: [], reward: 0 })
    expect(() => Schema.decodeUnknownSync(Trajectory)({ messages_and_choices: [], reward: null })).toThrow(/reward/)
    // Encoding writes the defaults out.
    expect(Schema.encodeSync(Trajectory)({ messages_and_choices: [], reward: 0 })).toStrictEqual({
      messages_and_choices: [],
      reward: 0
    })
  })

  it("takes a choice as openai-python dumps it, every unset optional field null", () => {
    const dumped = {
      finish_reason: "stop",
      index: 0,
      logprobs: { content: [{ token: "4", bytes: [52], logprob: -0.1, top_logprobs: [] }], refusal: null },
      message: {
        content: "4",
        refusal: null,
        role: "assistant",
        annotations: null,
        audio: null,
        function_call: null,
        tool_calls: null,
        reasoning_content: null
      },
      stop_reason: null,
      token_ids: null
    }
    const entry = Schema.decodeUnknownSync(MessageOrChoice)(dumped)
    expect(isChoice(entry)).toBe(true)
    expect(entry).toStrictEqual(dumped)
  })

  it("refuses what the training service refuses: a finish_reason, a role or a message shape it does not take", () => {
    const issue = (entry: unknown) =>
      Either.match(Schema.decodeUnknownEither(MessageOrChoice)(entry), {
        // The paths at fault, each once (a literal union reports one issue per literal).
        onLeft: (error) => [...new Set(ParseResult.ArrayFormatter.formatErrorSync(error).map((i) => i.path.join(".")))],
        onRight: () => []
      })
    const choice = { index: 0, message: { role: "assistant", content: "x" }, finish_reason: "stop" }
    expect(issue(choice)).toStrictEqual([])
    expect(issue({ ...choice, finish_reason: "abort" })).toStrictEqual(["finish_reason"])
    expect(issue({ ...choice, finish_reason: null })).toStrictEqual(["finish_reason"])
    expect(issue({ ...choice, message: { role: "tool", content: "x" } })).toStrictEqual(["message.role"])
    expect(issue({ role: "grader", content: "x" })).toStrictEqual(["role"])
    expect(issue({ author: { role: "assistant" }, content: [] })).toStrictEqual(["role"])
    expect(issue({ role: "assistant", content: "x", tool_calls: null })).toStrictEqual(["tool_calls"])
    // Encoding checks the same (a client refuses to send it).
    expect(() =>
      Schema.encodeSync(MessageOrChoice)({ role: "grader", content: "x" } as unknown as MessageOrChoice)
    ).toThrow(/role/)
  })

  it("takes an entry exactly when the strict schemas do (the plain checks in front of them agree)", () => {
    const strict = Schema.is(Schema.Union(TrajectoryChoice, TrajectoryMessage))
    // Choices and messages as chat completions take them, with the cases the plain checks look at made likely.
    const broad = FastCheck.oneof(
      Arbitrary.make(Schema.Union(Choice, Message)),
      Arbitrary.make(Choice).map((c) => ({ ...c, message: { ...c.message, role: "assistant" } })),
      Arbitrary.make(Choice).map((c) => ({
        ...c,
        finish_reason: "stop",
        message: { ...c.message, role: "assistant" }
      })),
      Arbitrary.make(TrajectoryMessage),
      Arbitrary.make(Message).map((m) => ({ ...m, role: "assistant" }))
    )
    FastCheck.assert(
      FastCheck.property(broad, (value) => {
        const decoded = Schema.decodeUnknownEither(Schema.Union(Choice, Message))(value)
        if (Either.isLeft(decoded)) return
        expect(entryIssue(decoded.right) === undefined, JSON.stringify(value)).toBe(strict(decoded.right))
      }),
      { numRuns: 2000 }
    )
  })
})
