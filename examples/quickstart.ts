/**
 * Create a model, submit an RL training job, and follow its events: the training client on its own.
 *
 * Run against the hosted service with `WANDB_API_KEY` set, or against the embedded backend: start
 * `effect-rl serve`, then set `EFFECT_RL_TRAINING_URL` to the URL it prints and `WANDB_API_KEY` to its key, and
 * run `npx tsx examples/quickstart.ts`. Expect the model's id, the job's id, then its events from
 * `training_started` to `training_ended` (the group has no sampled turn, so there is nothing to learn: no
 * `gradient_step` on the embedded backend).
 */
import { NodeHttpClient, NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Layer, Stream } from "effect"
import { TrainingClient } from "effect-rl"

const program = Effect.gen(function* () {
  const client = yield* TrainingClient.TrainingClient

  // A base model the service trains: EFFECT_RL_BASE_MODEL, else the first one it lists.
  const baseModel = process.env.EFFECT_RL_BASE_MODEL ?? (yield* client.listBaseModels)[0]
  if (baseModel === undefined) return yield* Console.error("the service lists no trainable base model")

  const model = yield* client.createModel({
    project: "quickstart",
    name: "agent-001",
    base_model: baseModel,
    return_existing: true
  })
  yield* Console.log(`model ${model.id} (${model.entity}/${model.project}/${model.name})`)

  // One group: two rollouts of the same scenario, the better one rewarded.
  const job = yield* client.createTrainingJob(
    {
      model_id: model.id,
      trajectory_groups: [
        {
          trajectories: [
            { messages_and_choices: [{ role: "user", content: "Say hi" }], reward: 1 },
            { messages_and_choices: [{ role: "user", content: "Say hi" }], reward: 0 }
          ]
        }
      ],
      experimental_config: { learning_rate: 5e-6 }
    },
    // With a key, the submission is retried safely: the service answers a repeat with the first job.
    { idempotencyKey: `${model.id}-step-1` }
  )
  yield* Console.log(`job ${job.id}`)

  // Follow the job until `training_ended` (or `training_failed`), each event once.
  yield* client
    .followTrainingJobEvents(job.id)
    .pipe(Stream.runForEach((event) => Console.log(event.type, JSON.stringify(event.data))))
})

const MainLayer = TrainingClient.layerConfig().pipe(Layer.provide(NodeHttpClient.layerUndici))

program.pipe(Effect.provide(MainLayer), NodeRuntime.runMain)
