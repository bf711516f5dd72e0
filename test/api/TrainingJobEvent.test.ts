import { assert, describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { TrainingJobEventPage } from "../../src/api/TrainingApi.js"
import { isTerminal, TrainingJobEvent } from "../../src/api/TrainingJob.js"

const id = "c2d4e6f8-0a1b-4c3d-8e5f-7a9b1c3d5e7f"
const decode = Schema.decodeUnknownSync(TrainingJobEvent)

const issuePaths = (input: unknown) =>
  Either.match(Schema.decodeUnknownEither(TrainingJobEvent)(input), {
    onLeft: (error) => ParseResult.ArrayFormatter.formatErrorSync(error).map((issue) => issue.path),
    onRight: () => []
  })

describe("TrainingJobEvent", () => {
  it("training_started: num_sequences", () => {
    const event = decode({ id, type: "training_started", data: { num_sequences: 12 } })
    assert(event.type === "training_started")
    const sequences: number | null | undefined = event.data.num_sequences
    expect(sequences).toBe(12)
    expect(isTerminal(event)).toBe(false)
    expect(issuePaths({ id, type: "training_started", data: { num_sequences: "12" } })).toContainEqual([
      "data",
      "num_sequences"
    ])
    expect(issuePaths({ id, type: "training_started", data: { num_sequences: 1.5 } })).toContainEqual([
      "data",
      "num_sequences"
    ])
  })

  it("gradient_step: the named metrics are numbers, the others kept", () => {
    const data = {
      loss: 0.42,
      policy_loss: 0.4,
      entropy: 1.3,
      kl_div: 0.01,
      grad_norm: 2.5,
      learning_rate: 5e-6,
      reward: 0.75,
      reward_std_dev: 0.2,
      exception_rate: 0,
      num_trajectories: 32,
      num_trainable_tokens: 4096,
      tokens_per_second: 1500.5,
      group_metric_accuracy: 0.5
    }
    const event = decode({ id, type: "gradient_step", data })
    assert(event.type === "gradient_step")
    const loss: number | null | undefined = event.data.loss
    expect(loss).toBe(0.42)
    expect(event.data.grad_norm).toBe(2.5)
    expect(event.data.tokens_per_second).toBe(1500.5)
    expect(event.data.group_metric_accuracy).toBe(0.5)
    expect(event.data).toStrictEqual(data)
    expect(isTerminal(event)).toBe(false)
    expect(issuePaths({ id, type: "gradient_step", data: { loss: "0.4" } })).toContainEqual(["data", "loss"])
    // A metric the service could not compute comes as null; the page still decodes.
    const nulls = decode({ id, type: "gradient_step", data: { loss: null, grad_norm: 1 } })
    assert(nulls.type === "gradient_step")
    expect(nulls.data.loss).toBeNull()
  })

  it("training_ended: terminal, data free-form", () => {
    const event = decode({ id, type: "training_ended", data: {} })
    expect(event.type).toBe("training_ended")
    expect(isTerminal(event)).toBe(true)
  })

  it("training_failed: error_message optional and nullable", () => {
    const event = decode({ id, type: "training_failed", data: { error_message: "CUDA out of memory" } })
    assert(event.type === "training_failed")
    const message: string | null | undefined = event.data.error_message
    expect(message).toBe("CUDA out of memory")
    expect(isTerminal(event)).toBe(true)
    expect(decode({ id, type: "training_failed", data: {} }).data).toStrictEqual({})
    expect(decode({ id, type: "training_failed", data: { error_message: null } }).data).toStrictEqual({
      error_message: null
    })
    expect(issuePaths({ id, type: "training_failed", data: { error_message: 42 } })).toContainEqual([
      "data",
      "error_message"
    ])
  })

  it("an event of a type it does not know: passed on as unknown, with the service's type, and encoded back", () => {
    const wire = { id, type: "training_paused", data: { reason: "preempted", at: 3 } }
    const event = decode(wire)
    assert(event.type === "unknown")
    expect(event).toStrictEqual({ id, type: "unknown", event_type: "training_paused", data: wire.data })
    expect(isTerminal(event)).toBe(false)
    expect(Schema.encodeSync(TrainingJobEvent)(event)).toStrictEqual(wire)
    // Its data must still be an object, and its id a non-empty string.
    expect(issuePaths({ id, type: "training_paused", data: [] })).not.toStrictEqual([])
    expect(issuePaths({ id: "", type: "training_paused", data: {} })).not.toStrictEqual([])
    expect(issuePaths({ id: 7, type: "training_paused", data: {} })).not.toStrictEqual([])
  })

  it("gradient_step: non-finite metrics as a Python service writes them decode to null", () => {
    const event = decode({
      id,
      type: "gradient_step",
      data: { loss: "NaN", grad_norm: "Infinity", entropy: "-Infinity", kl_div: null, reward: 1 }
    })
    assert(event.type === "gradient_step")
    expect(event.data).toStrictEqual({ loss: null, grad_norm: null, entropy: null, kl_div: null, reward: 1 })
    expect(issuePaths({ id, type: "gradient_step", data: { loss: "nan" } })).toContainEqual(["data", "loss"])
  })

  it("rejects a missing type, a bad id and missing data", () => {
    // Each fails the known variant and the unknown one alike: every issue is at the one bad field.
    expect(new Set(issuePaths({ id, data: {} }).map(String))).toStrictEqual(new Set(["type"]))
    for (const bad of ["", 42, null]) {
      expect(new Set(issuePaths({ id: bad, type: "training_ended", data: {} }).map(String))).toStrictEqual(
        new Set(["id"])
      )
    }
    expect(new Set(issuePaths({ id, type: "training_ended" }).map(String))).toStrictEqual(new Set(["data"]))
  })

  it("an id need not be a UUID: the reference client types event ids as plain strings", () => {
    for (const other of ["event-1", "evt_01HV3K9Z", "1718031234567-0"]) {
      const wire = { id: other, type: "training_ended", data: {} }
      expect(decode(wire)).toStrictEqual(wire)
      expect(decode({ id: other, type: "training_paused", data: {} }).id).toBe(other)
    }
  })

  it("a page decodes each event to its variant", () => {
    const page = Schema.decodeUnknownSync(TrainingJobEventPage)({
      data: [
        { id, type: "training_started", data: { num_sequences: 2 } },
        { id, type: "gradient_step", data: { loss: 1 } },
        { id, type: "gradient_step", data: { loss: 0.5 } },
        { id, type: "training_ended", data: {} }
      ],
      has_more: false
    })
    expect(page.data.map((event) => event.type)).toStrictEqual([
      "training_started",
      "gradient_step",
      "gradient_step",
      "training_ended"
    ])
    expect(page.data.filter(isTerminal)).toHaveLength(1)
  })
})
