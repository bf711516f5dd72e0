/**
 * Tool calls in the local engine (issue 12, part 2): the grammar of each `tool_choice`, the parse of the
 * sampled text into `message.tool_calls`, and the same calls as stream deltas. A scripted model (it prefers
 * to write a given text, byte by byte) drives the paths a fresh model would rarely take; a seeded random
 * model over many seeds and random schemas checks that every call the engine returns parses and fits its
 * tool's schema.
 */
import { describe, expect, it } from "@effect/vitest"
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionRequest,
  ToolChoice
} from "../../src/api/ChatCompletion.js"
import type { Tool } from "../../src/api/ChatMessage.js"
import type { JsonValue } from "../../src/api/Json.js"
import { ByteAutomaton } from "../../src/local/engine/constraint/Automaton.js"
import { toolCallsNode, toolModeOf } from "../../src/local/engine/constraint/ToolCalls.js"
import { Rng } from "../../src/local/engine/Random.js"
import { complete, completeStream } from "../../src/local/engine/Sampler.js"
import { encode, IM_END } from "../../src/local/engine/Tokenizer.js"
import { parseToolCalls, ToolCallStream } from "../../src/local/engine/ToolCallText.js"
import { accepts, randomSchema, validates } from "../support/schemas.js"
import { TableModel } from "./support/TableModel.js"

const add: Tool = {
  type: "function",
  function: {
    name: "add",
    parameters: {
      type: "object",
      properties: { a: { type: "integer" }, b: { type: "integer" } },
      required: ["a", "b"],
      additionalProperties: false
    }
  }
}
const weather: Tool = {
  type: "function",
  function: {
    name: "get_weather",
    parameters: { type: "object", properties: { city: { type: "string", maxLength: 10 } }, required: ["city"] }
  }
}
const tools = [add, weather]

/** A model that writes `script` (then ends the turn) wherever the mask lets it. */
const scripted = (script: string): TableModel => {
  const bytes = encode(script)
  return new TableModel((ids) => {
    // The longest suffix of the ids that is a prefix of the script says where it is.
    let k = Math.min(bytes.length, ids.length)
    for (; k > 0; k--) {
      let match = true
      for (let i = 0; i < k && match; i++) match = ids[ids.length - k + i] === bytes[i]
      if (match) break
    }
    const out = new Float32Array(TableModel.constant([]).vocabSize).fill(-20)
    out[k < bytes.length ? bytes[k]! : IM_END] = 20
    return out
  })
}

const call = (name: string, args: string) => `<tool_call>\n{"name":"${name}","arguments":${args}}\n</tool_call>`

const request = (fields: Partial<ChatCompletionRequest>): ChatCompletionRequest => ({
  messages: [{ role: "user", content: "What is 1 + 2?" }],
  tools,
  max_tokens: 200,
  seed: 7,
  ...fields
})

const run = (model: TableModel, fields: Partial<ChatCompletionRequest>): ChatCompletion =>
  complete(model, request(fields), { modelName: "test" })

/** The calls and content of a stream, assembled as the openai SDK does. */
const assemble = (chunks: ReadonlyArray<ChatCompletionChunk>) => {
  let content = ""
  const calls: Array<{ id?: string; name: string; arguments: string }> = []
  let finish: string | null | undefined = null
  for (const chunk of chunks) {
    for (const choice of chunk.choices) {
      content += choice.delta.content ?? ""
      for (const fragment of choice.delta.tool_calls ?? []) {
        calls[fragment.index] ??= { name: "", arguments: "" }
        const entry = calls[fragment.index]!
        if (fragment.id != null) entry.id = fragment.id
        entry.name += fragment.function?.name ?? ""
        entry.arguments += fragment.function?.arguments ?? ""
      }
      if (choice.finish_reason != null) finish = choice.finish_reason
    }
  }
  return { content, calls, finish }
}

const streamOf = (model: TableModel, fields: Partial<ChatCompletionRequest>) =>
  assemble([...completeStream(model, request({ ...fields, stream: true }), { modelName: "test" })])

describe("tool calls in the engine", () => {
  it("auto: text then a call becomes content and tool_calls, finish_reason tool_calls; streamed alike", () => {
    const model = scripted(`Let me add.\n${call("add", '{"a":1,"b":2}')}`)
    const response = run(model, { tool_choice: "auto" })
    const choice = response.choices[0]!
    expect(choice.finish_reason).toBe("tool_calls")
    expect(choice.message.content).toBe("Let me add.")
    expect(choice.message.tool_calls).toEqual([
      {
        id: expect.stringMatching(/^call_[0-9a-z]{24}$/),
        type: "function",
        function: { name: "add", arguments: '{"a":1,"b":2}' }
      }
    ])
    const streamed = streamOf(model, { tool_choice: "auto" })
    expect(streamed).toMatchObject({
      content: "Let me add.",
      calls: [{ id: expect.stringMatching(/^call_/), name: "add", arguments: '{"a":1,"b":2}' }],
      finish: "tool_calls"
    })
  })

  it("auto is the default with tools; text alone stays text", () => {
    const response = run(scripted("Three."), {})
    expect(response.choices[0]).toMatchObject({ finish_reason: "stop", message: { content: "Three." } })
    expect(response.choices[0]!.message.tool_calls).toBeUndefined()
  })

  it("auto: the opener cannot appear in text; once written, the rest is a valid call", () => {
    // The script glues the opener to the text (no newline) and names no tool: neither may come out.
    const model = scripted(`Sure<tool_call>\n{"name":"mul","arguments":{"x":1}}\n</tool_call>`)
    for (let seed = 0; seed < 20; seed++) {
      const choice = run(model, { tool_choice: "auto", seed, temperature: 1 }).choices[0]!
      const text = choice.message.content ?? ""
      expect(text.includes("<tool_call>")).toBe(false)
      for (const c of choice.message.tool_calls ?? []) expect(["add", "get_weather"]).toContain(c.function.name)
    }
  })

  it("required: a call even from a model that would write text; named: exactly that tool", () => {
    const chatty = scripted("No tools today.")
    const required = run(chatty, { tool_choice: "required" }).choices[0]!
    expect(required.finish_reason).toBe("tool_calls")
    expect(required.message.content).toBeNull()
    expect(required.message.tool_calls?.length).toBeGreaterThanOrEqual(1)
    const named = run(chatty, { tool_choice: { type: "function", function: { name: "get_weather" } } }).choices[0]!
    expect(named.message.tool_calls?.map((c) => c.function.name)).toEqual(["get_weather"])
    const args: unknown = JSON.parse(named.message.tool_calls![0]!.function.arguments)
    expect(validates(weather.function.parameters as JsonValue, args)).toBe(true)
  })

  it("parallel calls by default; parallel_tool_calls: false allows one", () => {
    const model = scripted(`${call("add", '{"a":1,"b":2}')}\n${call("add", '{"a":3,"b":4}')}`)
    const two = run(model, { tool_choice: "required" }).choices[0]!
    expect(two.message.tool_calls?.map((c) => c.function.arguments)).toEqual(['{"a":1,"b":2}', '{"a":3,"b":4}'])
    const streamed = streamOf(model, { tool_choice: "required" })
    expect(streamed.calls.map((c) => [c.name, c.arguments])).toEqual([
      ["add", '{"a":1,"b":2}'],
      ["add", '{"a":3,"b":4}']
    ])
    const one = run(model, { tool_choice: "required", parallel_tool_calls: false }).choices[0]!
    expect(one.message.tool_calls?.map((c) => c.function.arguments)).toEqual(['{"a":1,"b":2}'])
  })

  it("none: the output is never parsed for calls, even when it is a call's text", () => {
    const text = call("add", '{"a":1,"b":2}')
    for (const tool_choice of ["none", undefined] as const) {
      const fields = tool_choice === undefined ? { tools: [] } : { tool_choice }
      const choice = run(scripted(text), fields).choices[0]!
      expect(choice.message.content).toBe(text)
      expect(choice.message.tool_calls).toBeUndefined()
      expect(choice.finish_reason).toBe("stop")
    }
  })

  it("every call over many seeds, temperatures and random schemas parses and fits its schema", () => {
    const rng = new Rng(12)
    let calls = 0
    for (let round = 0; round < 40; round++) {
      const generated: Array<Tool> = [0, 1, 2].map((i) => ({
        type: "function",
        function: {
          name: `tool_${round}_${i}`,
          parameters: { type: "object", properties: { v: randomSchema(rng, 1) }, required: ["v"] }
        }
      }))
      const choices: ReadonlyArray<ToolChoice> = [
        "required",
        "auto",
        { type: "function", function: { name: generated[1]!.function.name } }
      ]
      const tool_choice = choices[round % 3]!
      const model = TableModel.keyed(round, 3)
      const response = complete(
        model,
        request({
          tools: generated,
          tool_choice,
          n: 3,
          seed: round,
          temperature: 1 + (round % 3) / 2,
          max_tokens: 300
        }),
        { modelName: "test" }
      )
      for (const choice of response.choices) {
        for (const c of choice.message.tool_calls ?? []) {
          const tool = generated.find((t) => t.function.name === c.function.name)
          expect(tool).toBeDefined()
          expect(validates(tool!.function.parameters as JsonValue, JSON.parse(c.function.arguments))).toBe(true)
          calls++
        }
        if (choice.finish_reason === "tool_calls") expect(choice.message.tool_calls?.length).toBeGreaterThan(0)
        if (tool_choice !== "auto" && choice.finish_reason !== "length") expect(choice.finish_reason).toBe("tool_calls")
      }
    }
    expect(calls).toBeGreaterThan(40)
  })

  it("the grammar: text with a call after a newline, calls only of the tools; never the opener in text", () => {
    const automaton = (tool_choice: ToolChoice, parallel?: boolean) => {
      const r = request({ tool_choice, ...(parallel === undefined ? {} : { parallel_tool_calls: parallel }) })
      return new ByteAutomaton(toolCallsNode(r, toolModeOf(r)!))
    }
    const auto = automaton("auto")
    const ok = call("add", '{"a":1,"b":2}')
    expect(accepts(auto, "plain text < with <tool_cal and <tool_call not closed")).toBe(true)
    expect(accepts(auto, `hi\n${ok}`)).toBe(true)
    expect(accepts(auto, ok)).toBe(true)
    expect(accepts(auto, `hi${ok}`)).toBe(false)
    expect(accepts(auto, "a <tool_call> b")).toBe(false)
    expect(accepts(auto, `<<tool_call>`)).toBe(false)
    expect(accepts(auto, call("mul", '{"a":1}'))).toBe(false)
    expect(accepts(auto, call("add", '{"a":"1","b":2}'))).toBe(false)
    expect(accepts(automaton("required"), "hi")).toBe(false)
    expect(accepts(automaton("required"), `${ok}\n${ok}`)).toBe(true)
    expect(accepts(automaton("required", false), `${ok}\n${ok}`)).toBe(false)
    const named = automaton({ type: "function", function: { name: "get_weather" } })
    expect(accepts(named, ok)).toBe(false)
    expect(accepts(named, call("get_weather", '{"city":"Paris"}'))).toBe(true)
  })

  it("the parser and the stream agree on any split of the text", () => {
    const text = `Checking.\n${call("add", '{"a":1,"b":{"c":[1,"}"]}}')}\n${call("get_weather", '{"city":"a\\"b"}')}`
    const whole = parseToolCalls(text)
    expect(whole).toEqual({
      content: "Checking.",
      calls: [
        { name: "add", arguments: '{"a":1,"b":{"c":[1,"}"]}}' },
        { name: "get_weather", arguments: '{"city":"a\\"b"}' }
      ]
    })
    const rng = new Rng(3)
    for (let trial = 0; trial < 50; trial++) {
      const stream = new ToolCallStream()
      let content = ""
      const calls: Array<{ name: string; arguments: string }> = []
      let at = 0
      while (at < text.length) {
        const next = Math.min(text.length, at + 1 + Math.floor(rng.float() * 8))
        const delta = stream.push(text.slice(at, next))
        content += delta.content
        for (const f of delta.toolCalls) {
          calls[f.index] ??= { name: "", arguments: "" }
          const entry = calls[f.index]!
          entry.name += f.function?.name ?? ""
          entry.arguments += f.function?.arguments ?? ""
        }
        at = next
      }
      content += stream.finish()
      expect({ content, calls }).toEqual({ content: "Checking.", calls: whole!.calls })
    }
    expect(parseToolCalls(`${call("add", '{"a":1')}`)).toBeNull()
    expect(parseToolCalls("no calls")).toBeNull()
  })
})
