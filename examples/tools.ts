/**
 * Example: a multi-turn tool agent. Each scenario is a little world (the weather and the local time of four
 * cities) and a question about one city ("What is the weather in Lima?", "What time is it in Oslo?"). The
 * agent has two tools, `weather` and `clock`, each taking a city; it must call the right one with the right
 * city, read the result, and answer with it. The world changes from scenario to scenario, so the answer
 * cannot be learned from the question: it has to come from the tool.
 *
 * What it shows: tools declared with `Schema` and handlers as Effects (`Tools.make`), the loop that runs them
 * (`Tools.run`) with a request per turn (turn 1 must call a tool; turn 2 answers, `tool_choice: "none"` with
 * the answer constrained to the possible values), and a reward with partial credit recorded as metrics
 * (`right_tool`, `right_city`, `correct`). The calls, their results and the answer are all in the trajectory;
 * on the embedded backend every call's arguments are constrained to the tool's schema.
 *
 * What to expect on the embedded backend (a 2-core machine, measured): 4 steps of 64 rollouts in about 30
 * seconds. It trains the pretrained base model `effect-rl/base-2k`, which already writes the call format, calls a
 * tool and copies a tool's result into its answer (see docs/embedded-backend.md). At its default RL learning rate
 * (1e-3) three runs went 0.91, 0.96, 1.00, 1.00 (25 s, the machine's load ~2.5), 0.82, 0.74, 1.00, 1.00 and 0.88,
 * 0.96, 1.00, 1.00 (49 and 37 s at a load of ~4.7). From the random-init `effect-rl/tiny-2k` of the same shape
 * (`--base-model effect-rl/tiny-2k --steps 8`) the task takes longer: 0.29, 0.43, 0.61, 0.72, 0.84, 0.88, 0.99,
 * 0.97 and 0.28, 0.49, 0.67, 0.68, 0.72, 0.81, 0.93, 0.98 in two runs.
 *
 * Run: `effect-rl train tools [--steps n]`, or `npx tsx examples/tools.ts [--steps n]`.
 */
import { Effect, Schema } from "effect"
import { Example, Policy, Reward, type Rollout, Tools, TrainingLoop } from "effect-rl"

/** The cities of every world (first letters differ, so one token tells them apart). */
export const CITIES = ["Oslo", "Paris", "Lima", "Cairo"] as const
/** A city. */
export type City = (typeof CITIES)[number]

const WEATHERS = ["sunny", "rainy", "windy", "foggy"] as const
const TIMES = ["1am", "3pm", "7am", "9pm"] as const
/** Every answer a tool can give (the final answer is constrained to them). */
export const ANSWERS = [...WEATHERS, ...TIMES] as const

/** A scenario: a world, and the question asked about it. */
export interface Scenario {
  readonly weather: Readonly<Record<City, string>>
  readonly time: Readonly<Record<City, string>>
  readonly asks: "weather" | "clock"
  readonly city: City
}

/** The scenarios: seeded, so runs are comparable. */
export const scenarios = (count: number, seed: number): ReadonlyArray<Scenario> => {
  let state = seed
  const next = (n: number) => {
    state = (state * 1103515245 + 12345) % 2147483648
    return state % n
  }
  return Array.from({ length: count }, () => ({
    weather: Object.fromEntries(CITIES.map((c) => [c, WEATHERS[next(WEATHERS.length)]!])) as Record<City, string>,
    time: Object.fromEntries(CITIES.map((c) => [c, TIMES[next(TIMES.length)]!])) as Record<City, string>,
    asks: next(2) === 0 ? "weather" : "clock",
    city: CITIES[next(CITIES.length)]!
  }))
}

/** The question of a scenario. */
export const question = (scenario: Scenario): string =>
  scenario.asks === "weather" ? `What is the weather in ${scenario.city}?` : `What time is it in ${scenario.city}?`

const City = Schema.Struct({ city: Schema.Literal(...CITIES) })

/** What the agent did: the tool and city of its first call, and its answer. */
export interface Played {
  readonly tool: string | undefined
  readonly city: string | undefined
  readonly answer: string | null
}

/** One rollout: the tools answer from the scenario's world; turn 1 calls one, turn 2 answers. */
export const play = (scenario: Scenario) =>
  Effect.gen(function* () {
    const weather = Tools.make("weather", {
      description: "Weather in a city",
      parameters: City,
      handler: ({ city }) => Effect.succeed(scenario.weather[city])
    })
    const clock = Tools.make("clock", {
      description: "Time in a city",
      parameters: City,
      handler: ({ city }) => Effect.succeed(scenario.time[city])
    })
    const outcome = yield* Tools.run({
      tools: [weather, clock],
      prompt: question(scenario),
      maxTurns: 2,
      request: (turn) =>
        turn === 1
          ? { tool_choice: "required", parallel_tool_calls: false, max_completion_tokens: 80 }
          : { tool_choice: "none", structured_outputs: { choice: [...ANSWERS] }, max_completion_tokens: 8 }
    })
    const call = outcome.calls[0]
    const city = call === undefined ? undefined : (JSON.parse(call.arguments) as { city?: string }).city
    return { tool: call?.name, city, answer: outcome.answer } satisfies Played
  })

const part = (score: (scenario: Scenario, played: Played) => boolean): Reward.Reward<Scenario, Played> =>
  Reward.fromFunction(({ scenario, value }) => (score(scenario, value) ? 1 : 0))

/** The right answer (weight 0.5), the right tool (0.25) and the right city (0.25), each recorded as a metric. */
export const reward: Reward.Reward<Scenario, Played> = Reward.weighted(
  {
    name: "correct",
    reward: part((s, p) => p.answer === (s.asks === "weather" ? s.weather : s.time)[s.city]),
    weight: 0.5
  },
  { name: "right_tool", reward: part((s, p) => p.tool === s.asks), weight: 0.25 },
  { name: "right_city", reward: part((s, p) => p.city === s.city), weight: 0.25 }
)

/**
 * The embedded backend's model the tool agents train: 2,048 tokens of context (their tools take room in a
 * byte-level prompt), pretrained, so the calls and answers start from text rather than noise.
 */
const LOCAL_BASE_MODEL = "effect-rl/base-2k"

/**
 * The example for one way of writing the agent: 64 seeded worlds, 8 groups of 8 rollouts per step, 4 steps,
 * evaluated on 32 other worlds at the start and the end, on the pretrained 2,048-token base model.
 */
export const exampleOf = <E>(
  name: string,
  description: string,
  rollout: (scenario: Scenario) => Effect.Effect<Played, E, Rollout.Current>
): Example.Example => ({
  name,
  description,
  localBaseModel: LOCAL_BASE_MODEL,
  train: (options) =>
    Effect.gen(function* () {
      const policy = yield* Policy.trainable({
        project: "examples",
        name: Example.modelNameOf(name, options),
        base_model: Example.baseModelOf(options, LOCAL_BASE_MODEL)
      })
      const steps = options.steps ?? 4
      const summary = yield* TrainingLoop.run({
        policy,
        scenarios: scenarios(64, 1),
        validation: scenarios(32, 2),
        rollout,
        reward,
        groupsPerStep: 8,
        rolloutsPerGroup: 8,
        steps,
        evalEvery: steps
      })
      return { summary, policy }
    })
})

/** The example, with the agent written with effect-rl's `Tools`. */
export const example: Example.Example = exampleOf(
  "tools",
  "A multi-turn tool agent: call the right tool (weather or clock) for the right city, then answer with\n" +
    "its result. Reward = 0.5 for the correct answer + 0.25 for the right tool + 0.25 for the right city.\n" +
    "Expect the mean reward to start near 0.8 (the pretrained base calls tools and copies results) and to\n" +
    "reach about 1.0 within two steps of four (about 30 seconds).",
  play
)

Example.main(example, import.meta.url)
