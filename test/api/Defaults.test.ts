import { describe, expect, it } from "@effect/vitest"
import * as Schema from "effect/Schema"
import { ChatCompletion, ChatCompletionChunk, Usage } from "../../src/api/ChatCompletion.js"
import { CheckpointPage, CursorPage } from "../../src/api/Model.js"
import { TrainingJobEventPage } from "../../src/api/TrainingApi.js"

const decodeUsage = Schema.decodeUnknownSync(Usage)
const zero = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 }

describe("Usage", () => {
  it("counts default to 0 when missing", () => {
    expect(decodeUsage({})).toStrictEqual(zero)
    expect(decodeUsage({ prompt_tokens: 7 })).toStrictEqual({ ...zero, prompt_tokens: 7 })
  })

  it("counts default to 0 when null", () => {
    expect(decodeUsage({ prompt_tokens: null, completion_tokens: null, total_tokens: null })).toStrictEqual(zero)
    expect(decodeUsage({ prompt_tokens: 3, completion_tokens: null, total_tokens: 3 })).toStrictEqual({
      prompt_tokens: 3,
      completion_tokens: 0,
      total_tokens: 3
    })
  })

  it("encodes every count", () => {
    expect(Schema.encodeSync(Usage)(decodeUsage({}))).toStrictEqual(zero)
  })

  it("keeps prompt_tokens_details and rejects a non-integer count", () => {
    const usage = { ...zero, prompt_tokens_details: { cached_tokens: null } }
    expect(decodeUsage(usage)).toStrictEqual(usage)
    expect(() => decodeUsage({ prompt_tokens: 1.5 })).toThrow(/prompt_tokens/)
    expect(() => decodeUsage({ prompt_tokens: "1" })).toThrow(/prompt_tokens/)
  })

  it("applies inside a completion and a chunk", () => {
    const completion = Schema.decodeUnknownSync(ChatCompletion)({ model: "m", choices: [], usage: {} })
    expect(completion.usage).toStrictEqual(zero)
    const chunk = Schema.decodeUnknownSync(ChatCompletionChunk)({
      id: "chatcmpl-1",
      object: "chat.completion.chunk",
      created: 1,
      model: "m",
      choices: [],
      usage: { completion_tokens: null }
    })
    expect(chunk.usage).toStrictEqual(zero)
  })
})

describe("CursorPage", () => {
  const Page = CursorPage(Schema.String)

  it("defaults object, first_id and last_id", () => {
    expect(Schema.decodeUnknownSync(Page)({ data: [], has_more: false })).toStrictEqual({
      object: "list",
      data: [],
      first_id: "",
      last_id: "",
      has_more: false
    })
  })

  it("keeps them when given, and encodes them", () => {
    const page = { object: "list", data: ["a", "b"], first_id: "a", last_id: "b", has_more: true }
    expect(Schema.decodeUnknownSync(Page)(page)).toStrictEqual(page)
    expect(Schema.encodeSync(Page)(Schema.decodeUnknownSync(Page)({ data: [], has_more: true }))).toStrictEqual({
      object: "list",
      data: [],
      first_id: "",
      last_id: "",
      has_more: true
    })
  })

  it("needs data and has_more", () => {
    expect(() => Schema.decodeUnknownSync(Page)({ data: [] })).toThrow(/has_more/)
    expect(() => Schema.decodeUnknownSync(Page)({ has_more: false })).toThrow(/data/)
  })

  it("the checkpoint and event pages", () => {
    const checkpoints = Schema.decodeUnknownSync(CheckpointPage)({
      data: [{ id: "0b5e8f3a-1c2d-4e6f-8a9b-0c1d2e3f4a5b", step: 3, metrics: { loss: 0.1 } }],
      has_more: false
    })
    expect([checkpoints.object, checkpoints.first_id, checkpoints.last_id]).toStrictEqual(["list", "", ""])
    expect(checkpoints.data[0]?.step).toBe(3)
    const events = Schema.decodeUnknownSync(TrainingJobEventPage)({ data: [], has_more: false })
    expect([events.object, events.first_id, events.last_id]).toStrictEqual(["list", "", ""])
  })
})
