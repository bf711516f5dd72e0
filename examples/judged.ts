/**
 * Example: a judge-scored task. The policy answers a customer's message in a few words; there is no
 * verifiable answer, so a judge model scores each group of replies together against a rubric
 * (`Reward.judge` as the loop's `scoreGroup`), on a discrete scale (0, 0.5, 1) it gives with structured
 * output.
 *
 * What it shows: a group scorer wired into `TrainingLoop.run`, the judge being any chat-completions model
 * (`Policy.base`): the model named by `EFFECT_RL_JUDGE_MODEL`, by default the base model the policy starts
 * from (on the embedded backend, its own `effect-rl/tiny`). The per-rollout reward (`Reward.constant(0)`) is only
 * the starting score the judge replaces; the judge keeps it as the metric `original_reward`.
 *
 * What to expect on the embedded backend (a 2-core machine; measured over 4 runs): the loop takes 5-7 s; the run
 * completes and every group is judged, but the default judge is the same tiny untrained model, which cannot
 * read: its verdicts do not follow the rubric (asked greedily, it gives most replies the top score), so the
 * reward sits near 1 with noise (first step 0.92-1.0, last three 0.92-0.97) and shows no trend. The example shows the wiring. With a real judge model
 * (`EFFECT_RL_JUDGE_MODEL`, and a real policy on the hosted service) the scores follow the rubric and the
 * reward rises as the replies get polite and on topic. The tiny model reads at most 512 tokens, so rollouts
 * are short (at most 12 tokens, letters and punctuation), a group is 3 rollouts, the rubric is one line,
 * and each distinct reply is judged once: the judge's prompt (about 400 tokens) and answer (about 90) fit.
 *
 * Run: `effect-rl train judged [--steps n]`, or `npx tsx examples/judged.ts [--steps n]`; set
 * `EFFECT_RL_JUDGE_MODEL=<model>` for another judge.
 */
import { Effect } from "effect"
import { Example, Policy, Reward, Rollout, TrainingLoop } from "effect-rl"

/** A scenario: a customer's message. */
export interface Ticket {
  readonly message: string
}

/** The customers' messages (at most 20 characters: the judge reads a group's replies to one at once). */
export const tickets: ReadonlyArray<Ticket> = [
  "My order is late.",
  "Thanks, it works!",
  "Where is my refund?",
  "The box was damaged.",
  "Can I pay later?",
  "Wrong size, sorry.",
  "Do you ship abroad?",
  "Love the product!"
].map((message) => ({ message }))

/** The rubric the judge scores by (short: it is part of every judge prompt). */
export const RUBRIC = "Polite, on topic and brief."

/** One rollout: a reply of at most 12 tokens, in letters and punctuation. */
export const reply = (ticket: Ticket) =>
  Effect.gen(function* () {
    const completion = yield* Rollout.chat({
      messages: [{ role: "user", content: ticket.message }],
      max_completion_tokens: 12,
      structured_outputs: { regex: "[A-Za-z ,.!?']{1,12}" }
    })
    return completion.choices[0]?.message.content ?? ""
  })

/**
 * A group scorer that asks `scorer` about each distinct reply once (the first rollout giving it stands for
 * the others) and gives every rollout the score of its reply: identical replies cost nothing more, and the
 * judge's prompt stays short.
 */
export const distinctReplies =
  <S, E, R>(scorer: Reward.GroupScorer<S, string, E, R>): Reward.GroupScorer<S, string, E, R> =>
  (group) => {
    const first = new Map<string, number>()
    const unique: Array<Reward.Scoring<S, string>> = []
    const slot = group.map((item) => {
      let at = first.get(item.value)
      if (at === undefined) {
        at = unique.length
        first.set(item.value, at)
        unique.push(item)
      }
      return at
    })
    return Effect.map(scorer(unique), (scores) => slot.map((at) => scores[at]!))
  }

/** The judge model: `EFFECT_RL_JUDGE_MODEL`, else the base model the policy starts from (locally `effect-rl/tiny`). */
export const judgeModel = (options: Example.TrainOptions): string =>
  process.env.EFFECT_RL_JUDGE_MODEL ?? Example.baseModelOf(options)

/** The example: 8 steps of 4 tickets x 3 replies, each group scored by the judge. */
export const example: Example.Example = {
  name: "judged",
  description:
    "Replies to customers scored by a judge model against a rubric, on a 0/0.5/1 scale (EFFECT_RL_JUDGE_MODEL,\n" +
    "default: the base model). With the local tiny judge the scores are noise (the example shows the\n" +
    "wiring); with a real judge model they follow the rubric.",
  train: (options) =>
    Effect.gen(function* () {
      const policy = yield* Policy.trainable({
        project: "examples",
        name: Example.modelNameOf("judged", options),
        base_model: Example.baseModelOf(options)
      })
      const judge = yield* Policy.base(judgeModel(options))
      yield* Effect.logInfo(`judge: ${judge.name}`)
      const summary = yield* TrainingLoop.run({
        policy,
        scenarios: tickets,
        rollout: reply,
        // Only the starting score: the judge replaces it (and keeps it as the metric `original_reward`).
        reward: Reward.constant(0),
        scoreGroup: distinctReplies(
          Reward.judge<Ticket>({
            policy: judge,
            rubric: RUBRIC,
            levels: [0, 0.5, 1],
            explain: false,
            // Three verdicts take under 90 tokens; greedy, so the same replies get the same scores.
            request: { max_completion_tokens: 100, temperature: 0 }
          })
        ),
        groupsPerStep: 4,
        rolloutsPerGroup: 3,
        steps: options.steps ?? 8
      })
      return { summary, policy }
    })
}

Example.main(example, import.meta.url)
