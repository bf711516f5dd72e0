import { describe, expect, it } from "@effect/vitest"
import type { Choice } from "../../src/api/ChatCompletion.js"
import type { Message, Tool } from "../../src/api/ChatMessage.js"
import { GENERATION_PROMPT, renderPrompt, renderTrajectory } from "../../src/local/engine/ChatTemplate.js"
import { EngineError } from "../../src/local/engine/EngineError.js"
import { complete } from "../../src/local/engine/Sampler.js"
import { BOS, decode, EOS, encode, IM_END, IM_START } from "../../src/local/engine/Tokenizer.js"
import { TableModel } from "./support/TableModel.js"

const text = (ids: ArrayLike<number>): string => decode(ids, { skipSpecialTokens: false })
const render = (messages: ReadonlyArray<Message>, options?: Parameters<typeof renderPrompt>[1]) =>
  text(renderPrompt(messages, options).ids)

const thrown = (f: () => unknown): EngineError => {
  try {
    f()
  } catch (error) {
    if (error instanceof EngineError) return error
    throw error
  }
  throw new Error("expected an EngineError")
}

const tool: Tool = {
  type: "function",
  function: { name: "get_weather", description: "Weather", parameters: { type: "object" } }
}

describe("renderPrompt: message kinds", () => {
  it("renders developer, system, user (string and parts) in the chat format", () => {
    expect(
      render(
        [
          { role: "developer", content: "Be terse." },
          {
            role: "system",
            content: [
              { type: "text", text: "You are " },
              { type: "text", text: "kind." }
            ]
          },
          {
            role: "user",
            name: "ann",
            content: [
              { type: "text", text: "Look: " },
              { type: "image_url", image_url: { url: "http://x/y.png" } },
              { type: "input_audio", input_audio: { data: "AAAA", format: "wav" } },
              { type: "file", file: { filename: "a.pdf" } }
            ]
          }
        ],
        { addGenerationPrompt: false }
      )
    ).toBe(
      "<|im_start|>developer\nBe terse.<|im_end|>\n" +
        "<|im_start|>system\nYou are kind.<|im_end|>\n" +
        "<|im_start|>user name=ann\nLook: [image_url: http://x/y.png][input_audio: wav][file: a.pdf]<|im_end|>\n"
    )
  })

  it("renders an assistant message with reasoning, tool calls, a function call and a refusal", () => {
    expect(
      render(
        [
          {
            role: "assistant",
            content: "Checking.",
            reasoning: "Need weather.",
            tool_calls: [
              { id: "c1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } },
              { id: "c2", type: "custom", custom: { name: "shell", input: "ls" } }
            ]
          },
          { role: "assistant", content: null, function_call: { name: "f", arguments: "not json" } },
          { role: "assistant", content: null, refusal: "I can't." }
        ],
        { addGenerationPrompt: false }
      )
    ).toBe(
      "<|im_start|>assistant\n<think>\nNeed weather.\n</think>\n\nChecking.\n" +
        '<tool_call>\n{"name":"get_weather","arguments":{"city":"Oslo"}}\n</tool_call>\n' +
        '<tool_call>\n{"name":"shell","input":"ls"}\n</tool_call><|im_end|>\n' +
        '<|im_start|>assistant\n<tool_call>\n{"name":"f","arguments":"not json"}\n</tool_call><|im_end|>\n' +
        "<|im_start|>assistant\nI can't.<|im_end|>\n"
    )
  })

  it("renders tool, function, custom-role and generic messages", () => {
    expect(
      render(
        [
          { role: "tool", content: "12C", tool_call_id: "c1" },
          { role: "function", content: "sunny", name: "get_weather" },
          {
            role: "critic",
            content: ["Good ", { type: "thinking", text: "hmm" }, { type: "video_url" }],
            tools: [tool]
          },
          {
            author: { role: "assistant", name: "bot" },
            channel: "analysis",
            recipient: "functions.f",
            content: [
              { type: "text", text: "plan" },
              { type: "other", value: 1 }
            ]
          }
        ],
        { addGenerationPrompt: false }
      )
    ).toBe(
      "<|im_start|>tool\n12C<|im_end|>\n" +
        "<|im_start|>function name=get_weather\nsunny<|im_end|>\n" +
        `<|im_start|>critic\nGood hmm[video_url]\n\n# Tools\n${JSON.stringify(tool)}<|im_end|>\n` +
        '<|im_start|>assistant name=bot channel=analysis recipient=functions.f\nplan{"type":"other","value":1}<|im_end|>\n'
    )
  })

  it("puts tools and documents in a leading system block", () => {
    const doc = { title: "Oslo", text: "Capital of Norway." }
    expect(render([{ role: "user", content: "Hi" }], { tools: [tool], documents: [doc] })).toBe(
      `<|im_start|>system\n# Tools\n${JSON.stringify(tool)}\n\n# Documents\n${JSON.stringify(doc)}<|im_end|>\n` +
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )
  })

  it("tokenizes message text literally: special-token texts in content stay text", () => {
    const ids = renderPrompt([{ role: "user", content: "<|im_end|>" }], { addGenerationPrompt: false }).ids
    expect(ids.filter((id) => id === IM_END)).toHaveLength(1)
    expect(ids[0]).toBe(IM_START)
  })
})

describe("renderPrompt: options", () => {
  const messages: ReadonlyArray<Message> = [
    { role: "user", content: "Hi" },
    { role: "assistant", content: "The answer is" }
  ]

  it("appends the generation prompt by default, not when asked not to", () => {
    expect(render([{ role: "user", content: "Hi" }])).toBe("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    expect(render([{ role: "user", content: "Hi" }], { addGenerationPrompt: false })).toBe(
      "<|im_start|>user\nHi<|im_end|>\n"
    )
    expect(renderPrompt([]).ids).toEqual([...GENERATION_PROMPT])
  })

  it("leaves the final message open with continue_final_message, and refuses it with the generation prompt", () => {
    expect(render(messages, { addGenerationPrompt: false, continueFinalMessage: true })).toBe(
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nThe answer is"
    )
    const error = thrown(() => renderPrompt(messages, { continueFinalMessage: true }))
    expect(error.kind).toBe("BadRequest")
    expect(error.param).toBe("continue_final_message")
    expect(thrown(() => renderPrompt([], { continueFinalMessage: true, addGenerationPrompt: false })).param).toBe(
      "continue_final_message"
    )
  })

  it("prepends BOS with add_special_tokens", () => {
    const ids = renderPrompt(messages, { addSpecialTokens: true }).ids
    expect(ids[0]).toBe(BOS)
    expect(ids.slice(1)).toEqual(renderPrompt(messages).ids)
  })

  it("exposes the response role and the echo text", () => {
    // With the generation prompt the response is an assistant turn: echo repeats a final assistant message.
    expect(renderPrompt(messages)).toMatchObject({ role: "assistant", echo: "The answer is" })
    expect(renderPrompt([{ role: "user", content: "Hi" }])).toMatchObject({ role: "assistant", echo: "" })
    // Without it the model continues the last message, whatever its role.
    expect(renderPrompt([{ role: "user", content: "Hi" }], { addGenerationPrompt: false })).toMatchObject({
      role: "user",
      echo: "Hi"
    })
  })
})

describe("renderPrompt: Jinja templates", () => {
  const template =
    "{{ bos_token }}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ greeting }}, {{ m.content }}<|im_end|>\n{% endfor %}" +
    "{% if tools %}TOOLS {{ tools | length }}\n{% endif %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"

  it("renders a caller's template with chat_template_kwargs; its special-token texts become special tokens", () => {
    const rendered = renderPrompt([{ role: "user", content: "Hi" }], {
      chatTemplate: template,
      chatTemplateKwargs: { greeting: "Hello" },
      tools: [tool]
    })
    expect(text(rendered.ids)).toBe("<|bos|><|im_start|>user\nHello, Hi<|im_end|>\nTOOLS 1\n<|im_start|>assistant\n")
    expect(rendered.ids[0]).toBe(BOS)
    expect(rendered.ids[1]).toBe(IM_START)
    expect(rendered.ids.filter((id) => id === IM_END)).toHaveLength(1)
  })

  it("passes add_generation_prompt and eos_token, and cuts after the final message when continuing it", () => {
    const t =
      "{% for m in messages %}[{{ m.role }}]{{ m.content }}{{ eos_token }}{% endfor %}{% if add_generation_prompt %}>{% endif %}"
    const messages: ReadonlyArray<Message> = [
      { role: "user", content: "Hi" },
      { role: "assistant", content: "Partial" }
    ]
    expect(text(renderPrompt(messages, { chatTemplate: t, addGenerationPrompt: false }).ids)).toBe(
      "[user]Hi<|eos|>[assistant]Partial<|eos|>"
    )
    expect(
      text(renderPrompt(messages, { chatTemplate: t, addGenerationPrompt: false, continueFinalMessage: true }).ids)
    ).toBe("[user]Hi<|eos|>[assistant]Partial")
    expect(text(renderPrompt(messages, { chatTemplate: t }).ids)).toBe("[user]Hi<|eos|>[assistant]Partial<|eos|>>")
  })

  it("turns a template that does not parse or fails into a typed error naming chat_template", () => {
    for (const broken of [
      "{% for m in messages %}",
      "{{ raise_exception('no system role') }}",
      "{% if %}x{% endif %}"
    ]) {
      const error = thrown(() => renderPrompt([{ role: "user", content: "Hi" }], { chatTemplate: broken }))
      expect(error).toBeInstanceOf(EngineError)
      expect(error.kind).toBe("BadRequest")
      expect(error.param).toBe("chat_template")
      expect(error.message).toMatch(/chat template could not be/)
    }
    expect(
      thrown(() => renderPrompt([{ role: "user", content: "Hi" }], { chatTemplate: "{{ raise_exception('nope') }}" }))
        .message
    ).toContain("nope")
  })
})

describe("renderTrajectory", () => {
  const model = TableModel.keyed(11, 2)
  const system: Message = { role: "system", content: "Answer briefly." }
  const user: Message = { role: "user", content: "Name a colour." }
  /** A model that answers "red" then ends the turn. */
  const answer = new TableModel((ids) => {
    const logits = new Float32Array(261).fill(0)
    let start = ids.length
    for (let i = ids.length - 1; i >= 0; i--) {
      if (ids[i] === IM_START) {
        start = i + GENERATION_PROMPT.length
        break
      }
    }
    const k = ids.length - start
    const script = [...encode("red"), IM_END]
    logits[script[Math.min(k, script.length - 1)]!] = 5
    return logits
  })

  it("lines up the sampled tokens, their mask and their logprobs with what the sampler produced", () => {
    const response = complete(
      model,
      { messages: [system, user], seed: 3, max_tokens: 12, logprobs: true, return_token_ids: true },
      { modelName: "m" }
    )
    const choice = response.choices[0]!
    const sequence = renderTrajectory([system, user, choice])
    const prompt = response.prompt_token_ids!
    const sampled = choice.token_ids!
    expect(Array.from(sequence.ids.subarray(0, prompt.length))).toEqual(prompt)
    expect(Array.from(sequence.ids.subarray(prompt.length, prompt.length + sampled.length))).toEqual(sampled)
    expect(Array.from(sequence.mask)).toEqual([
      ...prompt.map(() => 0),
      ...sampled.map(() => 1),
      ...Array.from({ length: sequence.ids.length - prompt.length - sampled.length }, () => 0)
    ])
    const scores = model.scoreTokens(sequence.ids, 1)
    choice.logprobs!.content!.forEach((entry, i) => {
      const t = prompt.length + i
      expect(sequence.logprobs[t]).toBeCloseTo(entry.logprob, 5)
      expect(scores[t - 1]).toBeCloseTo(entry.logprob, 4)
    })
    for (let t = 0; t < sequence.ids.length; t++) if (sequence.mask[t] === 0) expect(sequence.logprobs[t]).toBeNaN()
    // A length-limited choice gets no end of turn, just the newline.
    expect(choice.finish_reason).toBe("length")
    expect(sequence.ids.length).toBe(prompt.length + sampled.length + 1)
  })

  it("ends a stopped turn as the next prompt renders it, so the second turn's positions line up", () => {
    const first = complete(
      answer,
      { messages: [user], temperature: 0, logprobs: true, return_token_ids: true },
      {
        modelName: "m"
      }
    ).choices[0]!
    expect(first.message.content).toBe("red")
    expect(first.token_ids).toEqual([...encode("red"), IM_END])
    const followUp: Message = { role: "user", content: "Another." }
    const second = complete(
      answer,
      {
        messages: [user, { role: "assistant", content: first.message.content! }, followUp],
        temperature: 0,
        logprobs: true,
        return_token_ids: true
      },
      { modelName: "m" }
    )
    const sequence = renderTrajectory([user, first, followUp, second.choices[0]!])
    const prompt2 = second.prompt_token_ids!
    expect(Array.from(sequence.ids.subarray(0, prompt2.length))).toEqual(prompt2)
    expect(Array.from(sequence.ids.subarray(prompt2.length))).toEqual([...second.choices[0]!.token_ids!, 0x0a])
    expect(sequence.mask.reduce((a, b) => a + b, 0)).toBe(8)
  })

  it("maps tokens from logprobs when token_ids are absent, and falls back to the content without either", () => {
    const choice = complete(answer, { messages: [user], temperature: 0, logprobs: true }, { modelName: "m" })
      .choices[0]!
    expect(choice.token_ids).toBeUndefined()
    const fromLogprobs = renderTrajectory([user, choice])
    const plain: Choice = { index: 0, message: { role: "assistant", content: "red" }, finish_reason: "stop" }
    const fromContent = renderTrajectory([user, plain])
    expect(Array.from(fromContent.ids)).toEqual(Array.from(fromLogprobs.ids))
    // From logprobs the end of turn was sampled (mask 1, its logprob known); a turn written as content (SFT
    // data) learns its end of turn too (mask 1), with no logprob.
    const n = fromContent.ids.length
    expect(fromContent.ids[n - 2]).toBe(IM_END)
    expect(Array.from(fromLogprobs.mask.subarray(n - 6))).toEqual([0, 1, 1, 1, 1, 0])
    expect(Array.from(fromContent.mask.subarray(n - 6))).toEqual([0, 1, 1, 1, 1, 0])
    expect(Array.from(fromContent.logprobs).every(Number.isNaN)).toBe(true)
    expect(fromLogprobs.logprobs[n - 2]).toBeCloseTo(choice.logprobs!.content![3]!.logprob, 6)
  })

  it("renders tools first and keeps EOS-ended turns as sampled", () => {
    const choice: Choice = {
      index: 0,
      message: { role: "assistant", content: "ok" },
      finish_reason: "stop",
      token_ids: [...encode("ok"), EOS]
    }
    const sequence = renderTrajectory([user, choice], [tool])
    const prompt = renderPrompt([user], { tools: [tool] }).ids
    expect(Array.from(sequence.ids)).toEqual([...prompt, ...encode("ok"), EOS, 0x0a])
  })

  it("a tool agent's turns: the call the engine sampled is rendered back byte for byte in the next prompt", () => {
    const tools: ReadonlyArray<Tool> = [
      {
        type: "function",
        function: {
          name: "add",
          parameters: { type: "object", properties: { a: { type: "number" } }, required: ["a"] }
        }
      }
    ]
    const agent = TableModel.keyed(4, 3)
    // The turn ends with <|im_end|>, as the next prompt renders it (an EOS-ended turn is kept as sampled).
    const ask = {
      tools,
      logprobs: true,
      return_token_ids: true,
      max_tokens: 80,
      temperature: 1.5,
      logit_bias: { [EOS]: -100 }
    } as const
    for (let seed = 0; seed < 10; seed++) {
      const first = complete(agent, { ...ask, messages: [user], tool_choice: "required", seed }, { modelName: "m" })
        .choices[0]!
      const calls = first.message.tool_calls ?? []
      expect(calls.length).toBeGreaterThan(0)
      const results: Array<Message> = calls.map((call) => ({ role: "tool", tool_call_id: call.id!, content: "4" }))
      // The assistant message goes back as a client sends it: no content, the calls.
      const sentBack: Message = {
        role: "assistant",
        content: null,
        tool_calls: calls.map((c) => ({ ...c, id: c.id! }))
      }
      const second = complete(
        agent,
        { ...ask, messages: [user, sentBack, ...results], tool_choice: "none", max_tokens: 6, seed },
        { modelName: "m" }
      )
      const sequence = renderTrajectory([user, first, ...results, second.choices[0]!], tools)
      expect(sequence.ids.length).toBeGreaterThan(0)
      const prompt = second.prompt_token_ids!
      expect(Array.from(sequence.ids.subarray(0, prompt.length))).toEqual(prompt)
      expect(
        Array.from(sequence.ids.subarray(prompt.length, prompt.length + second.choices[0]!.token_ids!.length))
      ).toEqual(second.choices[0]!.token_ids)
    }
  })

  it("writes a call's JSON arguments verbatim (numbers as written), and other arguments as a string", () => {
    const call = (args: string): Message => ({
      role: "assistant",
      content: null,
      tool_calls: [{ id: "call_1", type: "function", function: { name: "add", arguments: args } }]
    })
    const text = (args: string) => decode(renderPrompt([user, call(args)], { addGenerationPrompt: false }).ids)
    expect(text('{"a":1.50,"b":-0,"c":1e5}')).toContain('{"name":"add","arguments":{"a":1.50,"b":-0,"c":1e5}}')
    expect(text("not json")).toContain('{"name":"add","arguments":"not json"}')
  })

  it("turns an unmappable recorded token into a typed error", () => {
    const choice: Choice = {
      index: 0,
      message: { role: "assistant", content: "x" },
      finish_reason: "stop",
      logprobs: { content: [{ token: "not-a-token", logprob: -1, bytes: [] }] }
    }
    const error = thrown(() => renderTrajectory([user, choice]))
    expect(error.param).toBe("messages_and_choices")
  })
})
