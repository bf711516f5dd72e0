import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { CheckpointId, Model, ModelCreate, ModelId } from "../../src/api/Model.js"
import { CreateTrainingJob, TrainingJob, TrainingJobEventId, TrainingJobId } from "../../src/api/TrainingJob.js"

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

  it("a training job id is a UUID too (the service checks it in the job's paths)", () => {
    expect(Schema.decodeUnknownSync(TrainingJobId)(uuid)).toBe(uuid)
    expect(Either.isLeft(Schema.decodeUnknownEither(TrainingJobId)("job-1"))).toBe(true)
  })

  it("checkpoint and event ids are non-empty strings, as the reference client types them", () => {
    for (const schema of [CheckpointId, TrainingJobEventId]) {
      for (const good of [uuid, "ckpt-7", "evt_01HV3K9Z"]) expect(Schema.decodeUnknownSync(schema)(good)).toBe(good)
      for (const bad of ["", 42, null]) {
        expect(Either.isLeft(Schema.decodeUnknownEither(schema)(bad)), String(bad)).toBe(true)
      }
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
