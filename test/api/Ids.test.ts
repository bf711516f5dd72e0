import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { CheckpointId, Model, ModelCreate, ModelId } from "../../src/api/Model.js"
import { CreateTrainingJob, TrainingJob, TrainingJobId } from "../../src/api/TrainingJob.js"

const uuid = "3f1c9a52-7d2e-4b8a-9c61-0e5f4d3b2a19"

describe("ids", () => {
  it("ModelId accepts a UUID and rejects anything else", () => {
    expect(Schema.decodeUnknownSync(ModelId)(uuid)).toBe(uuid)
    for (const bad of [
      "",
      "model-1",
      "3f1c9a52-7d2e-4b8a-9c61",
      `${uuid}x`,
      "3f1c9a52_7d2e_4b8a_9c61_0e5f4d3b2a19",
      42
    ]) {
      expect(Either.isLeft(Schema.decodeUnknownEither(ModelId)(bad)), String(bad)).toBe(true)
    }
  })

  it("the other ids are UUIDs too", () => {
    for (const schema of [CheckpointId, TrainingJobId]) {
      expect(Schema.decodeUnknownSync(schema)(uuid)).toBe(uuid)
      expect(Either.isLeft(Schema.decodeUnknownEither(schema)("job-1"))).toBe(true)
    }
  })

  it("a record with a bad id fails at the id", () => {
    const model = { id: "not-a-uuid", entity: "team", project: "p", name: "agent", base_model: "Qwen/Qwen3-8B" }
    expect(() => Schema.decodeUnknownSync(Model)(model)).toThrow(/\["id"\]/)
    expect(() => Schema.decodeUnknownSync(TrainingJob)({ id: "job-1" })).toThrow(/\["id"\]/)
    expect(() => Schema.decodeUnknownSync(CreateTrainingJob)({ model_id: "m", trajectory_groups: [] })).toThrow(
      /\["model_id"\]/
    )
  })

  it("model creation needs no id, and entity may be null", () => {
    const body = { entity: null, project: "p", name: "agent", base_model: "Qwen/Qwen3-8B", return_existing: true }
    expect(Schema.decodeUnknownSync(ModelCreate)(body)).toStrictEqual(body)
  })
})
