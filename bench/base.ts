/**
 * What the pretrained base model (`effect-rl/base-2k`) does before any RL, beside a random-init model of the
 * same shape, all at temperature 1 with fixed seeds; then, unless `--rl=0`, a shop agent
 * trained with RL from it.
 *
 *   npx tsx bench/base.ts [--weights=file.erlp] [--eval=0|1] [--random=0|1] [--rl=0|1] [--rl-steps=20]
 *     [--rl-base=effect-rl/base-2k] [--rl-lr=x] [--rl-seed=1] [--rl-groups=6] [--rl-rollouts=8]
 *     [--rl-reward=correct|faithful] [--rl-packed=tokens] [--rl-temperature=1] [--rl-eval=5]
 *
 * 1. Free text: the share of printable ASCII bytes (and newlines) in completions of chat prompts it was and
 *    was not pretrained on (goal: at least 95%).
 * 2. JSON-schema strings: completions under `response_format: json_schema` with string and integer fields; the
 *    share of string values that are words (letters, single spaces) or numbers, and of whole objects.
 * 3. Copying a tool result into a constrained answer: a question, the call of its tool and the tool's result
 *    are in the prompt (held-out worlds drawn here, not by the corpus); the answer is constrained (a choice of
 *    eight values as in `examples/tools.ts`, a JSON string, a JSON integer) and counted right when it is the
 *    result. Chance: 1/8 for the choice, about 0 for the free string and integer.
 * 4. The call itself: with `tool_choice: "required"`, the share of calls of the right tool with the right
 *    argument (the question names both).
 * 5. RL: a shop agent (tools `price` and `stock` of six items; turn 1 calls one, turn 2 answers with
 *    `{"answer": <integer>}`), 20 steps of 6 groups x 8 rollouts on the embedded backend from `--rl-base`; per
 *    step the mean reward and the share of right answers (goal: at least 0.8 within 20 steps). The jobs'
 *    `learning_rate` is `--rl-lr`; without it the jobs give none and the base model's default applies (1e-3
 *    for `effect-rl/base-2k`; 3e-3, the engine's, for the random-init models: from the pretrained base 3e-3
 *    unlearned the copying, correct 0.29 -> 0.00 in 20 steps). `--rl-seed` seeds the shops (default 1);
 *    `--rl-groups` and `--rl-rollouts` split a step's rollouts. The figures vary a lot from run to run (6 shops a
 *    step, sampling unseeded): compare rates over several seeds.
 *    Per step it also prints the right calls (tool and item) and the share of them whose answer copied the result;
 *    `--rl-reward=faithful` pays half for copying whichever result came back (see docs/embedded-backend.md).
 *    Every `--rl-eval` steps (default 5; 0: never) and at the end, 48 held-out shops are answered greedily
 *    (temperature 0), as the trained agent would be used: their right answers and calls are printed.
 *    `--rl-temperature` sets the training rollouts' temperature (default 1).
 *
 * `--eval=0` skips sections 1-4 of the pretrained base, `--random=0` those of the random-init model.
 * `--weights` evaluates a checkpoint file instead of the shipped base (a snapshot of `scripts/pretrain.ts`).
 */
import { readFileSync } from "node:fs"
import { loadavg } from "node:os"
import { Effect, Schema } from "effect"
import type { ChatCompletionRequest } from "../src/api/ChatCompletion.js"
import type { Message, Tool } from "../src/api/ChatMessage.js"
import * as Backend from "../src/Backend.js"
import { loadCheckpoint } from "../src/local/engine/policy/Checkpoint.js"
import { Policy as EnginePolicy } from "../src/local/engine/policy/Policy.js"
import { Rng } from "../src/local/engine/Random.js"
import { complete } from "../src/local/engine/Sampler.js"
import { basePolicy, PRETRAINED_MODEL } from "../src/local/server/internal/baseModels.js"
import * as Policy from "../src/workflow/Policy.js"
import * as Reward from "../src/workflow/Reward.js"
import * as Tools from "../src/workflow/Tools.js"
import * as TrainingLoop from "../src/workflow/TrainingLoop.js"

const args = new Map(
  process.argv.slice(2).map((a) => {
    const [k, v] = a.replace(/^--/, "").split("=")
    return [k!, v ?? "1"] as const
  })
)
const weightsFile = args.get("weights")
const base: EnginePolicy =
  weightsFile === undefined
    ? basePolicy(PRETRAINED_MODEL)!
    : loadCheckpoint(new Uint8Array(readFileSync(weightsFile))).policy
// The random-init model of the evaluated base's shape (seed 0, as the random-init base models).
const random: EnginePolicy = EnginePolicy.create(base.config, { seed: 0 })

const ask = (policy: EnginePolicy, request: ChatCompletionRequest) =>
  complete(policy, { temperature: 1, ...request }, { modelName: "bench" })

const pct = (x: number) => `${(100 * x).toFixed(1)}%`

// 1. Free text ----------------------------------------------------------------------------------------------

const FREE_PROMPTS = [
  "Hello!",
  "Tell me a short story.",
  "Name 3 fruits.",
  "How are you today?",
  "What can you do?",
  "Describe your house.",
  "Why is the sky blue?",
  "Write a poem about the sea."
]

const printableShare = (policy: EnginePolicy): { readonly share: number; readonly sample: string } => {
  let printable = 0
  let total = 0
  let sample = ""
  FREE_PROMPTS.forEach((content, i) => {
    const response = ask(policy, { messages: [{ role: "user", content }], n: 8, max_tokens: 64, seed: 100 + i })
    for (const choice of response.choices) {
      const text = choice.message.content ?? ""
      for (const byte of new TextEncoder().encode(text)) {
        total++
        if ((byte >= 0x20 && byte < 0x7f) || byte === 0x0a) printable++
      }
      if (choice.index === 0 && i < 4) sample += `\n    ${JSON.stringify(content)} -> ${JSON.stringify(text)}`
    }
  })
  return { share: printable / Math.max(1, total), sample }
}

// 2. JSON-schema strings ------------------------------------------------------------------------------------

const SCHEMAS: ReadonlyArray<readonly [string, Record<string, unknown>]> = [
  [
    "Describe a person as JSON.",
    { type: "object", properties: { name: { type: "string" }, city: { type: "string" }, age: { type: "integer" } } }
  ],
  ["Give me a JSON object.", { type: "object", properties: { color: { type: "string" }, fruit: { type: "string" } } }],
  ["A product, as JSON.", { type: "object", properties: { item: { type: "string" }, price: { type: "number" } } }]
]

const WORD_OR_NUMBER = /^(?:[A-Za-z]+(?: [A-Za-z]+)*|-?\d+(?:\.\d+)?)$/

const jsonStrings = (policy: EnginePolicy) => {
  let objects = 0
  let parsed = 0
  let strings = 0
  let words = 0
  const samples: Array<string> = []
  SCHEMAS.forEach(([content, schema], i) => {
    for (let round = 0; round < 2; round++) {
      const response = ask(policy, {
        messages: [{ role: "user", content }],
        response_format: { type: "json_schema", json_schema: { name: "answer", schema: schema as never } },
        n: 8,
        max_tokens: 60,
        seed: 200 + 10 * i + round
      })
      for (const choice of response.choices) {
        objects++
        const text = choice.message.content ?? ""
        if (samples.length < 4 && choice.index === 0) samples.push(text)
        let value: unknown
        try {
          value = JSON.parse(text)
        } catch {
          continue
        }
        parsed++
        for (const v of Object.values(value as Record<string, unknown>)) {
          if (typeof v !== "string") continue
          strings++
          if (WORD_OR_NUMBER.test(v)) words++
        }
      }
    }
  })
  return { whole: parsed / objects, words: words / Math.max(1, strings), strings, samples }
}

// 3-4. Tool results copied into answers, and calls --------------------------------------------------------

const CITIES = ["Oslo", "Paris", "Lima", "Cairo"] as const
const WEATHERS = ["sunny", "rainy", "windy", "foggy"] as const
const TIMES = ["1am", "3pm", "7am", "9pm"] as const
const ITEMS = ["apple", "bread", "lamp", "milk", "pen", "plum"] as const
const CODES = ["kiwi", "maple", "falcon", "orbit", "pixel", "delta", "ember", "lotus"] as const

const cityParam = { type: "object", required: ["city"], properties: { city: { type: "string", enum: [...CITIES] } } }
const itemParam = { type: "object", required: ["item"], properties: { item: { type: "string", enum: [...ITEMS] } } }
const fn = (name: string, description: string, parameters: Record<string, unknown>): Tool =>
  ({
    type: "function",
    function: { name, description, parameters: { ...parameters, additionalProperties: false } }
  }) as Tool

const WEATHER_TOOLS = [fn("weather", "Weather in a city", cityParam), fn("clock", "Time in a city", cityParam)]
const SHOP_TOOLS = [fn("price", "Price of an item", itemParam), fn("stock", "Units of an item in stock", itemParam)]
const CODE_TOOLS = [
  fn("lookup", "Look up a code word", {
    type: "object",
    required: ["name"],
    properties: { name: { type: "string" } }
  })
]

/** A held-out tool task: tools, the question, the right call, the tool's result. */
interface ToolTask {
  readonly tools: ReadonlyArray<Tool>
  readonly question: string
  readonly call: { readonly name: string; readonly arguments: string }
  readonly result: string
}

const toolTask = (rng: Rng, kind: "weather" | "shop" | "code"): ToolTask => {
  const pick = <A>(xs: ReadonlyArray<A>): A => xs[rng.int(xs.length)]!
  if (kind === "weather") {
    const city = pick(CITIES)
    const weather = rng.int(2) === 0
    return {
      tools: WEATHER_TOOLS,
      question: weather ? `What is the weather in ${city}?` : `What time is it in ${city}?`,
      call: { name: weather ? "weather" : "clock", arguments: JSON.stringify({ city }) },
      result: weather ? pick(WEATHERS) : pick(TIMES)
    }
  }
  if (kind === "shop") {
    const item = pick(ITEMS)
    const price = rng.int(2) === 0
    return {
      tools: SHOP_TOOLS,
      question: price ? `How much is the ${item}?` : `How many ${item} are in stock?`,
      call: { name: price ? "price" : "stock", arguments: JSON.stringify({ item }) },
      result: String(rng.int(500))
    }
  }
  const name = pick(["Ana", "Ben", "Mia", "Leo"])
  return {
    tools: CODE_TOOLS,
    question: `What is the code of ${name}?`,
    call: { name: "lookup", arguments: JSON.stringify({ name }) },
    result: pick(CODES)
  }
}

const afterResult = (task: ToolTask): Array<Message> => [
  { role: "user", content: task.question },
  {
    role: "assistant",
    content: null,
    tool_calls: [{ id: "call_1", type: "function", function: task.call }]
  } as Message,
  { role: "tool", tool_call_id: "call_1", content: task.result } as Message
]

const copyRates = (policy: EnginePolicy) => {
  const rng = new Rng(7)
  const tasks = 40
  let choice = 0
  let string = 0
  let integer = 0
  for (let i = 0; i < tasks; i++) {
    const w = toolTask(rng, "weather")
    const answer = ask(policy, {
      messages: afterResult(w),
      tools: w.tools,
      tool_choice: "none",
      structured_outputs: { choice: [...WEATHERS, ...TIMES] },
      max_tokens: 8,
      seed: 300 + i
    })
    if (answer.choices[0]?.message.content === w.result) choice++
    const c = toolTask(rng, "code")
    const asString = ask(policy, {
      messages: afterResult(c),
      tools: c.tools,
      tool_choice: "none",
      response_format: {
        type: "json_schema",
        json_schema: {
          name: "answer",
          schema: { type: "object", required: ["answer"], properties: { answer: { type: "string" } } }
        }
      },
      max_tokens: 24,
      seed: 400 + i
    })
    if (parsedAnswer(asString.choices[0]?.message.content) === c.result) string++
    const s = toolTask(rng, "shop")
    const asInteger = ask(policy, {
      messages: afterResult(s),
      tools: s.tools,
      tool_choice: "none",
      response_format: {
        type: "json_schema",
        json_schema: {
          name: "answer",
          schema: { type: "object", required: ["answer"], properties: { answer: { type: "integer" } } }
        }
      },
      max_tokens: 16,
      seed: 500 + i
    })
    if (String(parsedAnswer(asInteger.choices[0]?.message.content)) === s.result) integer++
  }
  return { choice: choice / tasks, string: string / tasks, integer: integer / tasks }
}

const parsedAnswer = (text: string | null | undefined): unknown => {
  try {
    return (JSON.parse(text ?? "") as { answer?: unknown }).answer
  } catch {
    return undefined
  }
}

const callRate = (policy: EnginePolicy) => {
  const rng = new Rng(11)
  const tasks = 48
  let right = 0
  for (let i = 0; i < tasks; i++) {
    const task = toolTask(rng, i % 2 === 0 ? "weather" : "shop")
    const response = ask(policy, {
      messages: [{ role: "user", content: task.question }],
      tools: task.tools,
      tool_choice: "required",
      parallel_tool_calls: false,
      max_tokens: 100,
      seed: 600 + i
    })
    const call = response.choices[0]?.message.tool_calls?.[0]
    if (
      call?.type === "function" &&
      call.function.name === task.call.name &&
      call.function.arguments === task.call.arguments
    ) {
      right++
    }
  }
  return right / tasks
}

const report = (label: string, policy: EnginePolicy) => {
  const t0 = performance.now()
  const free = printableShare(policy)
  const json = jsonStrings(policy)
  const copy = copyRates(policy)
  const calls = callRate(policy)
  console.log(`${label} (${((performance.now() - t0) / 1000).toFixed(0)} s)`)
  console.log(`  free text, printable ASCII: ${pct(free.share)}${free.sample}`)
  console.log(
    `  json_schema: ${pct(json.whole)} whole objects; ${pct(json.words)} of ${json.strings} strings are words or numbers; e.g. ${json.samples.join("  ")}`
  )
  console.log(
    `  tool result copied into the answer: choice of 8 ${pct(copy.choice)} (chance 12.5%), JSON string ${pct(copy.string)}, JSON integer ${pct(copy.integer)}`
  )
  console.log(`  required call, right tool and argument: ${pct(calls)} (chance 12.5% for the 2 x 4 enumerated calls)`)
}

console.log(`load average ${loadavg()[0]!.toFixed(2)}; temperature 1`)
if (args.get("eval") !== "0") {
  report(weightsFile === undefined ? PRETRAINED_MODEL : `${PRETRAINED_MODEL} from ${weightsFile}`, base)
}
if (args.get("random") !== "0") report("random init, same shape", random)

// 5. RL: a shop agent ----------------------------------------------------------------------------------------

/** A shop: a price and a stock per item, and the question asked about one item. */
interface Shop {
  readonly price: Readonly<Record<string, number>>
  readonly stock: Readonly<Record<string, number>>
  readonly asks: "price" | "stock"
  readonly item: (typeof ITEMS)[number]
  /** The rollouts' sampling temperature: `--rl-temperature` for training shops, 0 for validation ones. */
  readonly temperature?: number
}

const shops = (count: number, seed: number): ReadonlyArray<Shop> => {
  const rng = new Rng(seed)
  return Array.from({ length: count }, () => ({
    price: Object.fromEntries(ITEMS.map((item) => [item, 1 + rng.int(99)])),
    stock: Object.fromEntries(ITEMS.map((item) => [item, rng.int(500)])),
    asks: rng.int(2) === 0 ? "price" : "stock",
    item: ITEMS[rng.int(ITEMS.length)]!
  }))
}

interface Played {
  readonly tool: string | undefined
  readonly item: string | undefined
  /** The text the call's tool returned (the value an answer should copy), when a call was made. */
  readonly result: string | undefined
  readonly answer: unknown
}

const Item = Schema.Struct({ item: Schema.Literal(...ITEMS) })

/** `--rl-temperature`: the training rollouts' sampling temperature (the engine's default, 1, without it). */
const trainingTemperature = args.has("rl-temperature") ? Number(args.get("rl-temperature")) : undefined

const playShop = (shop: Shop) =>
  Effect.gen(function* () {
    const sampling = shop.temperature === undefined ? {} : { temperature: shop.temperature }
    const price = Tools.make("price", {
      description: "Price of an item",
      parameters: Item,
      handler: ({ item }) => Effect.succeed(String(shop.price[item]))
    })
    const stock = Tools.make("stock", {
      description: "Units of an item in stock",
      parameters: Item,
      handler: ({ item }) => Effect.succeed(String(shop.stock[item]))
    })
    const outcome = yield* Tools.run({
      tools: [price, stock],
      prompt: shop.asks === "price" ? `How much is the ${shop.item}?` : `How many ${shop.item} are in stock?`,
      maxTurns: 2,
      request: (turn) =>
        turn === 1
          ? { tool_choice: "required", parallel_tool_calls: false, max_completion_tokens: 100, ...sampling }
          : {
              ...sampling,
              tool_choice: "none",
              response_format: {
                type: "json_schema",
                json_schema: {
                  name: "answer",
                  schema: { type: "object", required: ["answer"], properties: { answer: { type: "integer" } } }
                }
              },
              max_completion_tokens: 16
            }
    })
    const call = outcome.calls[0]
    const item = call === undefined ? undefined : (JSON.parse(call.arguments) as { item?: string }).item
    return { tool: call?.name, item, result: call?.result, answer: parsedAnswer(outcome.answer) } satisfies Played
  })

const part = (score: (shop: Shop, played: Played) => boolean): Reward.Reward<Shop, Played> =>
  Reward.fromFunction(({ scenario, value }) => (score(scenario, value) ? 1 : 0))

/** The right call's result in the answer: the metric the goal counts. */
const correct = part((s, p) => p.answer === s[s.asks][s.item])
const rightTool = part((s, p) => p.tool === s.asks)
const rightItem = part((s, p) => p.item === s.item)
// Weight 0, a diagnostic: the right tool of the right item, the call the answer has to copy from.
const rightCall = part((s, p) => p.tool === s.asks && p.item === s.item)

/** The reward: half for the right answer, a quarter each for the right tool and the right item. */
const shopReward: Reward.Reward<Shop, Played> = Reward.weighted(
  { name: "correct", reward: correct, weight: 0.5 },
  { name: "right_tool", reward: rightTool, weight: 0.25 },
  { name: "right_item", reward: rightItem, weight: 0.25 },
  { name: "right_call", reward: rightCall, weight: 0 }
)

/**
 * `--rl-reward=faithful`: half for an answer that is the value the call returned, whichever call was made, a
 * quarter each for the right tool and item (all three: the right answer). Each decision gets its own credit: under
 * `correct`, a faithful copy of a wrong call's result scores as a wrong copy, which teaches the model not to copy.
 */
const faithfulReward: Reward.Reward<Shop, Played> = Reward.weighted(
  {
    name: "faithful",
    reward: part((_, p) => p.result !== undefined && p.answer === Number(p.result)),
    weight: 0.5
  },
  { name: "right_tool", reward: rightTool, weight: 0.25 },
  { name: "right_item", reward: rightItem, weight: 0.25 },
  { name: "correct", reward: correct, weight: 0 },
  { name: "right_call", reward: rightCall, weight: 0 }
)

/** One RL run of the shop agent. */
interface ShopRun {
  readonly baseModel: string
  readonly steps: number
  /** The jobs' `learning_rate`; without it the base model's default applies. */
  readonly learningRate: number | undefined
  readonly seed: number
  readonly groups: number
  readonly rollouts: number
  /** Evaluate greedily on held-out shops every this many steps (and at the end); 0: never. */
  readonly evalEvery: number
}

const trainShop = ({ baseModel, steps, learningRate, seed, groups, rollouts, evalEvery }: ShopRun) =>
  Effect.gen(function* () {
    const policy = yield* Policy.trainable({ project: "bench", name: `shop-${Date.now()}`, base_model: baseModel })
    const t0 = performance.now()
    const summary = yield* TrainingLoop.run({
      policy,
      scenarios: shops(120, seed).map((shop) =>
        trainingTemperature === undefined ? shop : { ...shop, temperature: trainingTemperature }
      ),
      // Held-out shops answered greedily (temperature 0), as the trained agent would be used.
      ...(evalEvery > 0
        ? {
            validation: shops(48, seed + 1000).map((shop) => ({ ...shop, temperature: 0 })),
            evalEvery
          }
        : {}),
      rollout: playShop,
      reward: args.get("rl-reward") === "faithful" ? faithfulReward : shopReward,
      groupsPerStep: groups,
      rolloutsPerGroup: rollouts,
      steps,
      config: {
        ...(learningRate === undefined ? {} : { learning_rate: learningRate }),
        ...(args.has("rl-packed") ? { packed_sequence_length: Number(args.get("rl-packed")) } : {})
      }
    })
    const seconds = (performance.now() - t0) / 1000
    /** A metric of a step (under the names the loop may give it), and as printed. */
    const value = (m: Record<string, number>, name: string) =>
      m[name] ?? m[`reward/${name}`] ?? m[`metrics/${name}`] ?? Number.NaN
    const shown = (m: Record<string, number>, name: string) => value(m, name).toFixed(2)
    const row = (name: string) => summary.steps.map((s) => shown(s.train, name)).join(" ")
    const applied = [...new Set(summary.steps.map((s) => s.training.learning_rate).filter((x) => x !== undefined))]
    console.log(
      `RL from ${baseModel}, shops seed ${seed}: ${steps} steps of ${groups} x ${rollouts} rollouts in ${seconds.toFixed(0)} s, learning rate ${learningRate ?? "the base model's default"}, temperature ${trainingTemperature ?? 1} (applied: ${applied.join(", ")}); load average ${loadavg()[0]!.toFixed(2)}`
    )
    console.log(`  reward:  ${row("reward")}`)
    console.log(`  correct: ${row("correct")}`)
    console.log(`  tool:    ${row("right_tool")}`)
    console.log(`  call:    ${row("right_call")}`)
    const copied = (m: Record<string, number>) => (value(m, "correct") / value(m, "right_call")).toFixed(2)
    console.log(`  copied of right calls: ${summary.steps.map((s) => copied(s.train)).join(" ")}`)
    const validated = summary.steps.flatMap((s, i) => (s.validation === undefined ? [] : [[i, s.validation] as const]))
    if (summary.finalValidation !== undefined) validated.push([summary.steps.length, summary.finalValidation])
    if (validated.length > 0) {
      console.log(
        `  greedy on 48 held-out shops (before step; correct/call): ${validated.map(([i, m]) => `${i}: ${shown(m, "correct")}/${shown(m, "right_call")}`).join("  ")}`
      )
    }
    const first = summary.steps.findIndex((s) => value(s.train, "correct") >= 0.8)
    const lastThree = summary.steps.slice(-3).map((s) => value(s.train, "correct"))
    console.log(
      `  first step with correct >= 0.8: ${first === -1 ? "none" : first + 1}; correct over the last three steps ${(lastThree.reduce((a, b) => a + b, 0) / lastThree.length).toFixed(2)}`
    )
  })

if (args.get("rl") !== "0") {
  const steps = Number(args.get("rl-steps") ?? 20)
  await Effect.runPromise(
    trainShop({
      baseModel: args.get("rl-base") ?? PRETRAINED_MODEL,
      steps,
      learningRate: args.has("rl-lr") ? Number(args.get("rl-lr")) : undefined,
      seed: Number(args.get("rl-seed") ?? 1),
      groups: Number(args.get("rl-groups") ?? 6),
      rollouts: Number(args.get("rl-rollouts") ?? 8),
      evalEvery: Number(args.get("rl-eval") ?? 5)
    }).pipe(Effect.provide(Backend.local()))
  )
}
