/**
 * Stream a chat completion: print its text as it arrives, then the whole message joined from the chunks.
 *
 * Run against the hosted service with `WANDB_API_KEY` set, or against the embedded backend: start `effect-rl serve`,
 * then set `EFFECT_RL_INFERENCE_URL` to the URL it prints and `WANDB_API_KEY` to its key, and run
 * `npx tsx examples/streaming.ts`. Expect the text, then `finish_reason` and the token counts. The model is
 * `EFFECT_RL_MODEL`, else the first one the service lists (the embedded backend's base models write random text).
 */
import { NodeHttpClient, NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Layer } from "effect"
import { ChatStream, InferenceClient } from "effect-rl"

const program = Effect.gen(function* () {
  const client = yield* InferenceClient.InferenceClient
  const model = process.env.EFFECT_RL_MODEL ?? (yield* client.listModels()).data[0]?.id
  if (model === undefined) return yield* Console.error("the service lists no model")

  // The chunks joined into the completion the same request returns unstreamed, the text printed as it comes.
  const completion = yield* client
    .streamChatCompletion({
      model,
      messages: [{ role: "user", content: "Say something." }],
      max_completion_tokens: 40,
      stream_options: { include_usage: true }
    })
    .pipe(ChatStream.collect({ onChunk: (chunk) => process.stdout.write(chunk.choices[0]?.delta.content ?? "") }))

  const choice = completion.choices[0]
  yield* Console.log(`\nfinish_reason ${choice?.finish_reason}, ${completion.usage.completion_tokens} tokens`)
})

const MainLayer = InferenceClient.layerConfig().pipe(Layer.provide(NodeHttpClient.layerUndici))

program.pipe(Effect.provide(MainLayer), NodeRuntime.runMain)
