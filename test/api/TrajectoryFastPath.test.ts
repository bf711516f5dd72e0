/**
 * The fast path of a trajectory's entries (`internal/trajectoryFastPath.ts`): `MessageOrChoice` with it decodes and
 * encodes every value exactly as the same schema without it (the same keys in the same order, or the same issues),
 * valid or not; the common entries take it; and a whole trajectory decodes as before.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Arbitrary from "effect/Arbitrary"
import * as FastCheck from "effect/FastCheck"
import * as Schema from "effect/Schema"
import { Choice } from "../../src/api/ChatCompletion.js"
import { AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage } from "../../src/api/ChatMessage.js"
import { checked } from "../../src/api/internal/checked.js"
import { entry } from "../../src/api/internal/trajectoryFastPath.js"
import { EntryChoice, entryIssue, MessageOrChoice, Trajectory } from "../../src/api/Trajectory.js"
import { engineChoice, expectSameParse, hasProtoKey, MESSAGE_KEYS } from "./parity.js"

type Loose = Record<string, unknown>

/** `MessageOrChoice` as it is without the fast path: the plain union, with the same check. */
const PlainMessageOrChoice = checked(Schema.Union(EntryChoice, Message), entryIssue)
/** `Trajectory` over the plain entries. */
const PlainTrajectory = Schema.Struct({
  ...Trajectory.fields,
  messages_and_choices: Schema.optionalWith(Schema.Array(PlainMessageOrChoice), { default: () => [] })
})

/** Both schemas decode and encode `value` alike, alone, inside a trajectory, and validated. */
const sameAs = (value: unknown) => {
  // A trajectory has defaults (a transformation): its entries are decoded and encoded on the type side as well.
  const trajectory = { messages_and_choices: [value, value], reward: 1 }
  expectSameParse(Schema.decodeUnknownEither(MessageOrChoice), Schema.decodeUnknownEither(PlainMessageOrChoice), value)
  expectSameParse(Schema.encodeUnknownEither(MessageOrChoice), Schema.encodeUnknownEither(PlainMessageOrChoice), value)
  expectSameParse(Schema.decodeUnknownEither(Trajectory), Schema.decodeUnknownEither(PlainTrajectory), trajectory)
  expectSameParse(Schema.encodeUnknownEither(Trajectory), Schema.encodeUnknownEither(PlainTrajectory), trajectory)
  expectSameParse(Schema.validateEither(MessageOrChoice), Schema.validateEither(PlainMessageOrChoice), value)
}

/** A choice as the engine returns it, with a finish reason the training service takes (mostly). */
const choice = Arbitrary.make(Choice).map((c) => ({
  ...c,
  message: { ...c.message, role: "assistant" },
  finish_reason: c.index % 5 === 0 ? c.finish_reason : "stop"
}))
const message = FastCheck.oneof(
  Arbitrary.make(SystemMessage),
  Arbitrary.make(UserMessage),
  Arbitrary.make(AssistantMessage),
  Arbitrary.make(ToolMessage)
)
const anyEntry = FastCheck.oneof(Arbitrary.make(EntryChoice), Arbitrary.make(Message))

const EDGE_VALUES: ReadonlyArray<unknown> = [
  0,
  -1,
  1.5,
  Number.NaN,
  "",
  "x",
  "stop",
  "assistant",
  "user",
  "function",
  true,
  null,
  undefined,
  [],
  [1],
  {},
  { role: "assistant" },
  { type: "text", text: "a" },
  { name: "f", arguments: "{}" },
  [{ id: "c", type: "function", function: { name: "f", arguments: "" } }],
  [{ id: "c", type: "custom", custom: { name: "f", input: "" } }],
  { content: [{ token: "a", logprob: 0, bytes: null, top_logprobs: [] }] }
]
const odd = FastCheck.constantFrom(...EDGE_VALUES)
const CHOICE_KEYS = ["index", "message", "logprobs", "finish_reason", "stop_reason", "token_ids", "role", "extra"]
const ENTRY_MESSAGE_KEYS = [...MESSAGE_KEYS, "index", "message", "extra"]

const nearEntry = FastCheck.oneof(
  { weight: 4, arbitrary: choice.map((c) => c as unknown) },
  { weight: 4, arbitrary: message.map((m) => m as unknown) },
  { weight: 2, arbitrary: anyEntry.map((e) => e as unknown) },
  FastCheck.tuple(choice, FastCheck.constantFrom(...CHOICE_KEYS), odd).map(([c, key, value]) => ({
    ...c,
    [key]: value
  })),
  FastCheck.tuple(choice, FastCheck.constantFrom(...ENTRY_MESSAGE_KEYS), odd).map(([c, key, value]) => ({
    ...c,
    message: { ...c.message, [key]: value }
  })),
  FastCheck.tuple(message, FastCheck.constantFrom(...ENTRY_MESSAGE_KEYS), odd).map(([m, key, value]) => ({
    ...m,
    [key]: value
  })),
  // Both a choice and a message: which member the union gives is its own to decide.
  FastCheck.tuple(choice, message).map(([c, m]) => ({ ...c, ...m })),
  FastCheck.constant(null),
  FastCheck.anything()
)

describe("the fast path of trajectory entries", () => {
  it("decodes and encodes exactly as the schema without it (the same keys in the same order), valid or not", () => {
    let fastOnes = 0
    FastCheck.assert(
      FastCheck.property(nearEntry, (value) => {
        if (hasProtoKey(value)) return
        if (entry(value) !== undefined) fastOnes++
        sameAs(value)
      }),
      { numRuns: 1500 }
    )
    // The common shapes take the fast path.
    expect(fastOnes).toBeGreaterThan(400)
  })

  it("takes a tic-tac-toe turn's entries, and a trajectory of them decodes as before", () => {
    const turn: ReadonlyArray<Loose> = JSON.parse(
      JSON.stringify([
        { role: "system", content: "You play tic-tac-toe." },
        { role: "user", content: "Board: x.o ... ... Your move." },
        engineChoice(),
        { role: "tool", content: "ok", tool_call_id: "call_1" }
      ])
    )
    for (const value of turn) {
      expect(entry(value)).toBeDefined()
      sameAs(value)
    }
    // The logprob entries and token ids are kept as given (the plain schema copies them): the fast path ran, here
    // and inside a trajectory (whose defaults make it decode and encode its entries on their type side too).
    const decoded = Schema.decodeUnknownSync(MessageOrChoice)(turn[2]) as Loose
    expect(decoded.token_ids).toBe(turn[2]!.token_ids)
    expect((Schema.decodeUnknownSync(PlainMessageOrChoice)(turn[2]) as Loose).token_ids).not.toBe(turn[2]!.token_ids)
    const trajectory = Schema.decodeUnknownSync(Trajectory)({ messages_and_choices: turn, reward: 1 })
    expect((trajectory.messages_and_choices[2] as Loose).token_ids).toBe(turn[2]!.token_ids)
    const encoded = Schema.encodeSync(Trajectory)(trajectory)
    expect((encoded.messages_and_choices![2] as Loose).token_ids).toBe(turn[2]!.token_ids)
    // What the training service refuses is still refused, naming the field.
    const refused = Schema.decodeUnknownEither(MessageOrChoice)({ ...turn[2], finish_reason: "abort" })
    expect(refused._tag).toBe("Left")
    // Encoding checks what the service would refuse before the value's shape: a malformed choice is an issue, not a
    // TypeError thrown from the check.
    for (const message of [{ role: "assistant", tool_calls: 0 }, null, { role: "assistant", tool_calls: [null] }]) {
      expect(Schema.encodeUnknownEither(MessageOrChoice)({ ...turn[2], message })._tag).toBe("Left")
    }
    // A custom tool call is the union's: the fast path declines it, and the schema takes it.
    const custom = {
      ...turn[2],
      message: {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c", type: "custom", custom: { name: "f", input: "x" } }]
      },
      finish_reason: "tool_calls"
    }
    expect(entry(custom)).toBeUndefined()
    expect(Schema.decodeUnknownEither(MessageOrChoice)(custom)._tag).toBe("Right")
  })
})
