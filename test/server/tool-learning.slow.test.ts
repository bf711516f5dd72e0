/**
 * Learning to pick a tool (issue 12), end to end on the real server: from a fresh model, RL through the HTTP
 * training API teaches it to call the tool a prompt names, from chance to >= 0.9 within 30 steps.
 *
 * Each step samples, through the `openai` SDK used unchanged, one group of 16 completions per tool from the
 * model's latest checkpoint, with the four tools offered, `tool_choice: "required"` and
 * `parallel_tool_calls: false`, for the prompt "Use the <tool> tool."; a completion earns 1 when its call names
 * that tool. The groups go to an RL job (the trajectories carry the tools, as the sampler saw them), the job is
 * followed to its end, and the next step samples the checkpoint it made. The curve is the mean reward of each
 * step's samples (the accuracy of the checkpoint sampled); once two steps in a row reach 0.9, fresh samples of
 * the last checkpoint (other seeds) must reach 0.9 as well. Seeds: a request's choices take `seed`, `seed + 1`,
 * ..., so the groups' seeds are 100 apart (groups whose seeds overlap share their random draws, and a whole
 * step is then lucky or unlucky at once).
 *
 * Measured (this seed, 2 cores): 0.22 0.28 0.52 0.59 0.70 0.69 0.80 0.88 0.95 0.97, final 0.97, in about 20 s;
 * with the sampling seeds shifted by 7 or by 5,000 the curve reaches 0.9 twice in 11 steps.
 *
 * Why this set-up. The policy is a 2-layer byte-level transformer from scratch, and the tools block puts some
 * 200 tokens of tool JSON (every name included) before the prompt. At initialisation, a changed word that far
 * back barely moves the logits where the name is chosen (by about 0.01), while a change in the word's length
 * shifts the position of every later token and moves them by 0.2 to 0.8. So names of equal length
 * (`add`/`sub`/`mul`/`div`, `read`/`list`/`move`/`copy`, `alpha`/`beta`/`gamma`/`delta`) are told apart late or
 * not at all within 30 steps, and names that share a length are typically confused for good (a prompt whose
 * group is all wrong has no reward variance, hence no gradient); names of four different lengths are learned
 * within about ten steps. What this test shows is RL over HTTP teaching the policy to choose its call from what
 * its prompt says, not that this small model can read any name in a long context. The groups are 16 rather
 * than 8 and the learning rate is 1e-2 (the trainer's default is 3e-3) because of the other obstacle: every
 * token of the call but the name's first letter is forced by the tools grammar, yet trained (the trainer
 * cannot tell a forced token from a chosen one), and a fresh model gives those tokens a probability near
 * 1/261, so each trajectory adds some 55 large gradients that are noise with respect to the reward (in an
 * engine-level run of this task, training the name's tokens only took it from 0.69 after 20 steps, one tool
 * never called, to 0.9 within 10). With 8 per group and the default rate, this run needs 27 steps to reach
 * 0.9 twice, and its final samples score 0.88.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as TestServices from "effect/TestServices"
import OpenAI from "openai"
import type { ChatCompletionTool } from "openai/resources/chat/completions"
import type { TrainingJobId } from "../../src/api/TrainingJob.js"
import * as LocalBackend from "../../src/LocalBackend.js"
import { API_KEY, training } from "../support/clients.js"
import { Backend, send } from "./support.js"

/** The tools: distinct first letters (so the name is chosen at one token) and four different lengths. */
const NAMES = ["sum", "echo", "clock", "weather"] as const
const tools: Array<ChatCompletionTool> = NAMES.map((name) => ({ type: "function", function: { name } }))

/** Completions per group (one group per tool per step). */
const N = 16
const MAX_STEPS = 30
/** The learning rate of each job (the trainer's default is 3e-3; see the module comment). */
const LEARNING_RATE = 1e-2

const clients = Effect.flatMap(LocalBackend.LocalBackend, ({ url }) =>
  Effect.map(training(url), (train) => ({
    train,
    sdk: new OpenAI({ apiKey: API_KEY, baseURL: `${url}/v1`, maxRetries: 0 })
  }))
)
const run = <A>(f: () => Promise<A>) => Effect.promise(f)

const userOf = (name: string) => ({ role: "user" as const, content: `Use the ${name} tool.` })

describe("learning to pick a tool over HTTP", () => {
  it.layer(Backend)("on the real server", (it) => {
    it.scoped(
      "RL through the training API teaches a fresh model to call the tool its prompt names: chance to >= 0.9 within 30 steps",
      () =>
        Effect.gen(function* () {
          const { train, sdk } = yield* clients
          const model = yield* train.createModel({ project: "tools", name: "picker", base_model: "effect-rl/tiny" })
          const latest = Effect.map(
            train.latestCheckpoint(model.id),
            (cp) => `wandb-artifact:///local/tools/picker:step${Option.getOrThrow(cp).step}`
          )

          /** One group per tool from `modelName`: its trajectories and their rewards. */
          const sample = (modelName: string, seedBase: number) =>
            Effect.forEach(NAMES, (name, g) =>
              Effect.gen(function* () {
                const user = userOf(name)
                const completion = yield* run(() =>
                  sdk.chat.completions.create({
                    model: modelName,
                    messages: [user],
                    tools,
                    tool_choice: "required",
                    parallel_tool_calls: false,
                    n: N,
                    seed: seedBase + 100 * g,
                    temperature: 1,
                    logprobs: true,
                    max_completion_tokens: 96
                  })
                )
                return completion.choices.map((choice) => {
                  const call = choice.message.tool_calls?.[0]
                  const called = call?.type === "function" ? call.function.name : undefined
                  return { messages_and_choices: [user, choice], tools, reward: called === name ? 1 : 0 }
                })
              })
            )
          const accuracy = (groups: ReadonlyArray<ReadonlyArray<{ readonly reward: number }>>) => {
            const rewards = groups.flat().map((t) => t.reward)
            return rewards.reduce((s, r) => s + r, 0) / rewards.length
          }

          const curve: Array<number> = []
          const started = Date.now()
          for (let step = 0; step < MAX_STEPS; step++) {
            const groups = yield* sample(yield* latest, 10_000 * step)
            curve.push(accuracy(groups))
            const n = curve.length
            if (n >= 2 && curve[n - 1]! >= 0.9 && curve[n - 2]! >= 0.9) break
            const created = yield* send("POST", "/v1/preview/training-jobs", {
              model_id: model.id,
              experimental_config: { learning_rate: LEARNING_RATE },
              trajectory_groups: groups.map((trajectories) => ({ trajectories }))
            })
            expect(created.status).toBe(200)
            const id = (created.json as { id: TrainingJobId }).id
            const events = yield* train
              .followTrainingJobEvents(id, { wait: "5 seconds" })
              .pipe(Stream.runCollect, Effect.timeout("20 seconds"))
            expect(Array.from(events).at(-1)?.type).toBe("training_ended")
          }
          const final = accuracy(yield* sample(yield* latest, 1_000_000))
          const show = `${curve.map((r) => r.toFixed(2)).join(" ")} | final ${final.toFixed(2)}`
          console.log(
            `tool picking (${NAMES.join(", ")}; ${NAMES.length} x ${N} per step): ${show}; ${((Date.now() - started) / 1000).toFixed(1)} s`
          )
          // Chance is 1/4: the fresh model's choice among the four names owes nothing to the prompt.
          expect(curve[0], show).toBeLessThanOrEqual(0.5)
          expect(curve.length, show).toBeLessThanOrEqual(MAX_STEPS)
          expect(curve.at(-1), show).toBeGreaterThanOrEqual(0.9)
          expect(final, show).toBeGreaterThanOrEqual(0.9)
        }).pipe(TestServices.provideLive),
      60_000
    )
  })
})
