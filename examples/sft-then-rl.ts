/**
 * Example: a supervised warm start, then RL. The task is the one of `arithmetic.ts` (small sums answered
 * `7.`; reward = exact 1 + closeness 0.5, minus 0.25 for a leading zero). Before any RL, the policy is
 * fine-tuned (SFT) on generated conversations answering each sum correctly; then `TrainingLoop.run` carries
 * on from the checkpoint the SFT job made, with RL on the same task.
 *
 * What it shows: `Trainer.trainSft` on conversations built in code (the 25 problems, 12 epochs: 300 lines,
 * 60 gradient steps of 5), their JSONL stored through the `SftData` the backend layer provides (on the
 * embedded backend, `Backend.local` uploads it to the backend's own files; with no `SftData` provided, a
 * temporary directory through `SftData.directory`, removed afterwards), and an RL loop resuming
 * from the SFT checkpoint at a lower learning rate (1e-3), so it refines the warm start. The base policy's
 * reward is measured first (`Gather.groups` + `Metrics.compute`) and logged, to compare with.
 *
 * What to expect on the embedded backend (a 2-core machine; measured over 4 runs): the loop takes 6-15 s;
 * before the SFT the mean reward is about 0 (mostly two-digit answers, far off); after it the policy answers
 * one digit near the sum, often the sum itself, so the first RL step's reward is already 0.62-0.75, and the
 * last three steps average 0.71-0.80 (each step draws 8 of the 25 problems, so the per-step reward is noisy). `--steps n` counts the RL steps
 * after the warm start. The period ending each answer marks its end in the answer format itself (SFT also
 * learns each turn's end-of-turn token), so a one-digit answer is as easy to write as a two-digit one.
 *
 * On the hosted service the SFT data must be an artifact (`wandb-artifact:///...`), not a `file://` URL:
 * provide `SftData.fromFunction` with your upload.
 *
 * Run: `effect-rl train sft-then-rl [--steps n]`, or `npx tsx examples/sft-then-rl.ts [--steps n]`.
 */
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Option } from "effect"
import { Example, Gather, Metrics, Policy, SftData, Trainer, TrainingLoop } from "effect-rl"
import { type Problem, problems, question, reward, solve } from "./arithmetic.js"

/** The SFT conversation of a problem: its question and the right answer, written as the task asks (`7.`). */
export const conversation = (problem: Problem): SftData.Conversation => ({
  messages: [
    { role: "user", content: question(problem) },
    { role: "assistant", content: `${problem.a + problem.b}.` }
  ]
})

/** The SFT data: the 25 problems' conversations, `epochs` times over (one job goes through its data once). */
export const sftData = (epochs: number): ReadonlyArray<SftData.Conversation> =>
  Array.from({ length: epochs }, () => problems.map(conversation)).flat()

/** A temporary directory for the SFT data, removed when the scope closes. */
const temporaryDirectory = Effect.acquireRelease(
  Effect.promise(() => mkdtemp(join(tmpdir(), "effect-rl-sft-"))),
  (dir) => Effect.promise(() => rm(dir, { recursive: true, force: true }))
)

/** The example: the base policy measured, one SFT job, then 6 RL steps of 8 problems x 8 rollouts. */
export const example: Example.Example = {
  name: "sft-then-rl",
  description:
    "SFT on generated right answers to small sums, then RL on the same task (the arithmetic example's reward).\n" +
    "Expect the first RL step's reward to be well above the untrained policy's (logged before the SFT).",
  train: (options) =>
    Effect.gen(function* () {
      const policy = yield* Policy.trainable({
        project: "examples",
        name: Example.modelNameOf("sft-then-rl", options),
        base_model: Example.baseModelOf(options)
      })

      const before = Metrics.compute(
        Gather.trajectoryGroups(
          yield* Gather.groups({ policy, scenarios: problems, rolloutsPerGroup: 2, rollout: solve, reward })
        )
      )
      yield* Effect.logInfo(
        `before SFT: mean reward ${before.reward?.toFixed(3) ?? "-"} over the ${problems.length} problems`
      )

      const data = sftData(12)
      const train = Trainer.trainSft(policy, data, { config: { batch_size: 5, learning_rate: 3e-3 } })
      const provided = yield* Effect.serviceOption(SftData.SftData)
      const sft = yield* Option.isSome(provided)
        ? Effect.provideService(train, SftData.SftData, provided.value)
        : Effect.scoped(Effect.flatMap(temporaryDirectory, (dir) => train.pipe(Effect.provide(SftData.directory(dir)))))
      yield* Effect.logInfo(
        `SFT: ${data.length} conversations, ${sft.gradientSteps} gradient steps, checkpoint step ${sft.step}`
      )

      const summary = yield* TrainingLoop.run({
        policy,
        scenarios: problems,
        rollout: solve,
        reward,
        groupsPerStep: 8,
        rolloutsPerGroup: 8,
        steps: sft.step + (options.steps ?? 6),
        // Below the embedded default (3e-3): RL refines the warm start instead of shaking it up.
        config: { learning_rate: 1e-3 }
      })
      return { summary, policy }
    })
}

Example.main(example, import.meta.url)
