/**
 * A traced training loop: the minimal loop with `Tracing.layer` added. Every step becomes a call of the trace
 * service, its rollouts calls under it (inputs the scenario, output the messages and the reward), their chat
 * completions calls under those, and each reward feedback on its rollout's call. On the embedded backend the
 * traces land in its own trace surface; the program reads them back and prints what it finds. It prints a
 * sign-in link to the backend's dashboard when it starts, and in a terminal keeps it up after the end until
 * Ctrl-C.
 *
 * Run: `npx tsx examples/traced.ts`. Against the hosted service, swap `Backend.local()` for `Backend.hosted()`
 * (the trace client then reads `WANDB_API_KEY` and `EFFECT_RL_TRACE_URL`, default `https://trace.wandb.ai`)
 * and the project for one of yours. Any example runs traced with `effect-rl train <name> --trace <entity/project>`.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Chunk, Console, Effect, Stream } from "effect"
import { Backend, Policy, Reward, Rollout, TraceClient, Tracing, TrainingLoop } from "effect-rl"

const rollout = (question: string) =>
  Effect.gen(function* () {
    const completion = yield* Rollout.chat({
      messages: [{ role: "user", content: question }],
      structured_outputs: { choice: ["yes", "no"] },
      max_completion_tokens: 4
    })
    return completion.choices[0]?.message.content ?? ""
  })

const reward = Reward.fromFunction<string, string>(({ value }) => (value === "yes" ? 1 : 0))

const program = Effect.gen(function* () {
  const policy = yield* Policy.trainable({ project: "traced", name: "yes-agent", base_model: "effect-rl/tiny" })
  // The loop, traced into a project of the backend's trace service (sent when the layer closes at the latest).
  yield* TrainingLoop.run({
    policy,
    scenarios: ["Shall we?", "Ready?", "Is it on?"],
    rollout,
    reward,
    groupsPerStep: 3,
    rolloutsPerGroup: 4,
    steps: 2
  }).pipe(Effect.provide(Tracing.layer({ project: "my-team/traced" })))

  // Read the traces back: a call per step, per rollout and per chat completion.
  const client = yield* TraceClient.TraceClient
  const calls = yield* Stream.runCollect(client.callsStreamQuery({ project_id: "my-team/traced" }))
  for (const op of [Tracing.STEP_OP, Tracing.ROLLOUT_OP, Tracing.CHAT_OP]) {
    yield* Console.log(`${op}: ${Chunk.filter(calls, (call) => call.op_name === op).length} calls`)
  }
})

// The backend prints a sign-in link to its dashboard (the steps, the traces) and, in a terminal, stays up after
// the program until Ctrl-C, so that they can be looked at.
const backend = Backend.local({ printSignInLink: true, keepServing: process.stdout.isTTY === true })
program.pipe(Effect.provide(backend), NodeRuntime.runMain)
