/**
 * The tool agents of `bench/rlHolds.ts` and the slow test that RL holds its gains, each a lookup (call the right tool with the right argument), then an
 * answer with the tool's value, rewarded 0.5 for the right answer and 0.25 each for the right tool and argument
 * (every part also a metric; `correct` is the one the goal counts):
 *
 * - `shop`: tools `price` and `stock` of six items; "How much is the lamp?" / "How many pen are in stock?";
 *   the answer `{"answer": <integer>}` under a JSON schema (the agent of issue 37 and of `bench/base.ts`).
 * - `directory`: written for the check and never tuned on: an office directory of five people with tools `room`
 *   (a room number, 100-499) and `extension` (a phone extension, 1000-9999); "Which room is Mia in?" / "What is
 *   the phone extension of Leo?"; the answer `{"number": <integer>}` under a JSON schema.
 * - `weather`: `examples/tools.ts`'s agent, copied (tools `weather` and `clock` of four cities, the answer one of eight
 *   values under `structured_outputs.choice`), the tool agent that a random-init base can learn from scratch.
 */
import { Effect, Schema } from "effect"
import { Rng } from "../../src/local/engine/Random.js"
import * as Reward from "../../src/workflow/Reward.js"
import type * as Rollout from "../../src/workflow/Rollout.js"
import * as Tools from "../../src/workflow/Tools.js"

/** What a lookup agent did: its first call's tool, argument and result, and its answer. */
export interface Played {
  readonly tool: string | undefined
  readonly argument: string | undefined
  readonly answer: unknown
}

/** A benchmark agent: its scenarios (seeded), one rollout, and its reward. */
export interface Agent<S> {
  readonly name: string
  readonly scenarios: (count: number, seed: number) => ReadonlyArray<S>
  readonly rollout: (scenario: S) => Effect.Effect<Played, unknown, Rollout.Current>
  readonly reward: Reward.Reward<S, Played>
}

/** A lookup scenario: the right tool and argument and the value the answer should be. */
interface Lookup {
  readonly tool: string
  readonly argument: string
  readonly value: unknown
}

const part = <S extends Lookup>(score: (s: S, p: Played) => boolean): Reward.Reward<S, Played> =>
  Reward.fromFunction(({ scenario, value }) => (score(scenario, value) ? 1 : 0))

/** 0.5 for the right answer, 0.25 each for the right tool and argument; `right_call` is a metric only. */
const lookupReward = <S extends Lookup>(argumentName: string): Reward.Reward<S, Played> =>
  Reward.weighted(
    { name: "correct", reward: part<S>((s, p) => p.answer === s.value), weight: 0.5 },
    { name: "right_tool", reward: part<S>((s, p) => p.tool === s.tool), weight: 0.25 },
    { name: `right_${argumentName}`, reward: part<S>((s, p) => p.argument === s.argument), weight: 0.25 },
    { name: "right_call", reward: part<S>((s, p) => p.tool === s.tool && p.argument === s.argument), weight: 0 }
  )

const integerAnswer = (field: string) => ({
  type: "json_schema" as const,
  json_schema: {
    name: "answer",
    schema: { type: "object", required: [field], properties: { [field]: { type: "integer" } } }
  }
})

const fieldOf = (text: string | null, field: string): unknown => {
  try {
    return (JSON.parse(text ?? "") as Record<string, unknown>)[field]
  } catch {
    return undefined
  }
}

/** Two tools of one argument over a table, turn 1 a required call, turn 2 an integer answer under `field`. */
const lookupAgent = <K extends string>(options: {
  readonly keys: ReadonlyArray<K>
  readonly argumentName: string
  readonly tools: readonly [
    { readonly name: string; readonly description: string },
    { readonly name: string; readonly description: string }
  ]
  readonly field: string
}) => {
  const Argument = Schema.Struct({
    [options.argumentName]: Schema.Literal(...options.keys)
  }) as unknown as Schema.Schema<Record<string, K>>
  return (table: ReadonlyArray<Readonly<Record<K, number>>>, prompt: string) =>
    Effect.gen(function* () {
      const tools = options.tools.map((t, i) =>
        Tools.make(t.name, {
          description: t.description,
          parameters: Argument,
          handler: (args: Record<string, K>) => Effect.succeed(String(table[i]![args[options.argumentName]!]))
        })
      )
      const outcome = yield* Tools.run({
        tools,
        prompt,
        maxTurns: 2,
        request: (turn) =>
          turn === 1
            ? { tool_choice: "required", parallel_tool_calls: false, max_completion_tokens: 100 }
            : { tool_choice: "none", response_format: integerAnswer(options.field), max_completion_tokens: 16 }
      })
      const call = outcome.calls[0]
      const argument =
        call === undefined ? undefined : (JSON.parse(call.arguments) as Record<string, string>)[options.argumentName]
      return { tool: call?.name, argument, answer: fieldOf(outcome.answer, options.field) } satisfies Played
    })
}

// The shop ---------------------------------------------------------------------------------------------------

const ITEMS = ["apple", "bread", "lamp", "milk", "pen", "plum"] as const
type Item = (typeof ITEMS)[number]

/** A shop: a price and a stock per item, and the question asked about one item. */
export interface Shop extends Lookup {
  readonly price: Readonly<Record<Item, number>>
  readonly stock: Readonly<Record<Item, number>>
  readonly asks: "price" | "stock"
  readonly item: Item
}

const shopLookup = lookupAgent({
  keys: ITEMS,
  argumentName: "item",
  tools: [
    { name: "price", description: "Price of an item" },
    { name: "stock", description: "Units of an item in stock" }
  ],
  field: "answer"
})

/** The shop agent (as `bench/base.ts`'s). */
export const shop: Agent<Shop> = {
  name: "shop",
  scenarios: (count, seed) => {
    const rng = new Rng(seed)
    return Array.from({ length: count }, () => {
      const price = Object.fromEntries(ITEMS.map((item) => [item, 1 + rng.int(99)])) as Record<Item, number>
      const stock = Object.fromEntries(ITEMS.map((item) => [item, rng.int(500)])) as Record<Item, number>
      const asks = rng.int(2) === 0 ? "price" : "stock"
      const item = ITEMS[rng.int(ITEMS.length)]!
      return { price, stock, asks, item, tool: asks, argument: item, value: (asks === "price" ? price : stock)[item] }
    })
  },
  rollout: (s) =>
    shopLookup(
      [s.price, s.stock],
      s.asks === "price" ? `How much is the ${s.item}?` : `How many ${s.item} are in stock?`
    ),
  reward: lookupReward<Shop>("item")
}

// The directory (not tuned on) ---------------------------------------------------------------------------------

const PEOPLE = ["Ana", "Ben", "Mia", "Leo", "Zoe"] as const
type Person = (typeof PEOPLE)[number]

/** An office directory: a room and an extension per person, and the question asked about one person. */
export interface Office extends Lookup {
  readonly room: Readonly<Record<Person, number>>
  readonly extension: Readonly<Record<Person, number>>
  readonly person: Person
}

const officeLookup = lookupAgent({
  keys: PEOPLE,
  argumentName: "name",
  tools: [
    { name: "room", description: "The room number of a person" },
    { name: "extension", description: "The phone extension of a person" }
  ],
  field: "number"
})

/** The directory agent. */
export const directory: Agent<Office> = {
  name: "directory",
  scenarios: (count, seed) => {
    const rng = new Rng(seed + 7919)
    return Array.from({ length: count }, () => {
      const room = Object.fromEntries(PEOPLE.map((p) => [p, 100 + rng.int(400)])) as Record<Person, number>
      const extension = Object.fromEntries(PEOPLE.map((p) => [p, 1000 + rng.int(9000)])) as Record<Person, number>
      const tool = rng.int(2) === 0 ? "room" : "extension"
      const person = PEOPLE[rng.int(PEOPLE.length)]!
      return { room, extension, person, tool, argument: person, value: (tool === "room" ? room : extension)[person] }
    })
  },
  rollout: (s) =>
    officeLookup(
      [s.room, s.extension],
      s.tool === "room" ? `Which room is ${s.person} in?` : `What is the phone extension of ${s.person}?`
    ),
  reward: lookupReward<Office>("name")
}

// The weather agent of examples/tools.ts -------------------------------------------------------------------------

const CITIES = ["Oslo", "Paris", "Lima", "Cairo"] as const
type City = (typeof CITIES)[number]
const WEATHERS = ["sunny", "rainy", "windy", "foggy"] as const
const TIMES = ["1am", "3pm", "7am", "9pm"] as const
const CityArgument = Schema.Struct({ city: Schema.Literal(...CITIES) })

/** A scenario of `examples/tools.ts` (a world of four cities and a question about one). */
export interface Weather extends Lookup {
  readonly weather: Readonly<Record<City, string>>
  readonly time: Readonly<Record<City, string>>
  readonly city: City
}

/**
 * `examples/tools.ts`'s agent (copied: the example imports the package by its name): turn 1 calls `weather` or
 * `clock`, turn 2 answers with one of the eight values under `structured_outputs.choice`.
 */
export const weather: Agent<Weather> = {
  name: "weather",
  scenarios: (count, seed) => {
    const rng = new Rng(seed + 104729)
    return Array.from({ length: count }, () => {
      const w = Object.fromEntries(CITIES.map((c) => [c, WEATHERS[rng.int(WEATHERS.length)]!])) as Record<City, string>
      const t = Object.fromEntries(CITIES.map((c) => [c, TIMES[rng.int(TIMES.length)]!])) as Record<City, string>
      const tool = rng.int(2) === 0 ? "weather" : "clock"
      const city = CITIES[rng.int(CITIES.length)]!
      return { weather: w, time: t, city, tool, argument: city, value: (tool === "weather" ? w : t)[city] }
    })
  },
  rollout: (s) =>
    Effect.gen(function* () {
      const tools = [
        Tools.make("weather", {
          description: "Weather in a city",
          parameters: CityArgument,
          handler: ({ city }) => Effect.succeed(s.weather[city])
        }),
        Tools.make("clock", {
          description: "Time in a city",
          parameters: CityArgument,
          handler: ({ city }) => Effect.succeed(s.time[city])
        })
      ]
      const outcome = yield* Tools.run({
        tools,
        prompt: s.tool === "weather" ? `What is the weather in ${s.city}?` : `What time is it in ${s.city}?`,
        maxTurns: 2,
        request: (turn) =>
          turn === 1
            ? { tool_choice: "required", parallel_tool_calls: false, max_completion_tokens: 80 }
            : {
                tool_choice: "none",
                structured_outputs: { choice: [...WEATHERS, ...TIMES] },
                max_completion_tokens: 8
              }
      })
      const call = outcome.calls[0]
      const argument = call === undefined ? undefined : (JSON.parse(call.arguments) as { city?: string }).city
      return { tool: call?.name, argument, answer: outcome.answer } satisfies Played
    }),
  reward: lookupReward<Weather>("city")
}

/** The agents by name. */
export const agents: Readonly<Record<string, Agent<never>>> = {
  shop: shop as unknown as Agent<never>,
  directory: directory as unknown as Agent<never>,
  weather: weather as unknown as Agent<never>
}
