/**
 * The default learning rate of a job comes from its model's base model: on the real server, an RL job without
 * `learning_rate` on a model trained from the pretrained `effect-rl/base-2k` applies (and reports in its
 * `gradient_step` events) that base's rate, one on a model from the random-init `effect-rl/tiny` the engine's;
 * a `learning_rate` in the config still wins, and an SFT job without one applies its base's SFT rate.
 */
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { describe, expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { ExperimentalConfig, TrainingJobEvent } from "../../src/api/TrainingJob.js"
import { DEFAULT_RL_LEARNING_RATE, DEFAULT_SFT_LEARNING_RATE } from "../../src/local/engine/Trainer.js"
import {
  BASE_MODEL,
  learningRatesOf,
  PRETRAINED_MODEL,
  WIDE_PRETRAINED_MODEL
} from "../../src/local/server/internal/baseModels.js"
import { eventsToEnd, sampledGroups, trainingClient, WORDS } from "../contract/support.js"
import { backendWith, dataFilesDir } from "./support.js"

/** The `learning_rate` of every `gradient_step` event. */
const learningRates = (events: ReadonlyArray<TrainingJobEvent>): ReadonlyArray<unknown> =>
  events.flatMap((event) => (event.type === "gradient_step" ? [event.data.learning_rate] : []))

/** A model from `base` trained by one RL job with `config`: the learning rates its events report. */
const rlJobRates = (name: string, base: string, config?: ExperimentalConfig) =>
  Effect.gen(function* () {
    const c = yield* trainingClient()
    const model = yield* c.createModel({ project: "lr", name, base_model: base })
    const groups = yield* sampledGroups(c, `wandb-artifact:///local/lr/${name}`, 70)
    const job = yield* c.createTrainingJob({
      model_id: model.id,
      trajectory_groups: groups,
      ...(config === undefined ? {} : { experimental_config: config })
    })
    const events = yield* eventsToEnd(c, job.id)
    expect(events.at(-1)?.type).toBe("training_ended")
    return learningRates(events)
  })

describe("a job's default learning rate is its base model's", () => {
  layer(backendWith(), { excludeTestServices: true })("on the real server", (it) => {
    it("the pretrained base's RL rate is smaller than the engine's, made for random weights", () => {
      expect(learningRatesOf(PRETRAINED_MODEL)).toEqual({ rl: 1e-3, sft: DEFAULT_SFT_LEARNING_RATE })
      expect(learningRatesOf(WIDE_PRETRAINED_MODEL)).toEqual({ rl: 2e-4, sft: 5e-4 })
      expect(learningRatesOf(BASE_MODEL)).toEqual({ rl: DEFAULT_RL_LEARNING_RATE, sft: DEFAULT_SFT_LEARNING_RATE })
      expect(learningRatesOf("effect-rl/tiny-2k")).toEqual(learningRatesOf(BASE_MODEL))
      expect(learningRatesOf("no/such-model")).toBeUndefined()
    })

    it.scoped(
      "RL without learning_rate: 1e-3 from effect-rl/base-2k, 2e-4 from base-wide-2k, 3e-3 from tiny; a given rate wins",
      () =>
        Effect.gen(function* () {
          const pretrained = yield* rlJobRates("from-base-2k", PRETRAINED_MODEL)
          expect(pretrained.length).toBeGreaterThan(0)
          expect(new Set(pretrained)).toEqual(new Set([1e-3]))

          const wide = yield* rlJobRates("from-base-wide-2k", WIDE_PRETRAINED_MODEL)
          expect(wide.length).toBeGreaterThan(0)
          expect(new Set(wide)).toEqual(new Set([2e-4]))

          const tiny = yield* rlJobRates("from-tiny", BASE_MODEL, {})
          expect(tiny.length).toBeGreaterThan(0)
          expect(new Set(tiny)).toEqual(new Set([3e-3]))

          const given = yield* rlJobRates("given", PRETRAINED_MODEL, { learning_rate: 2e-3 })
          expect(new Set(given)).toEqual(new Set([2e-3]))
        }),
      { timeout: 60_000 }
    )

    it.scoped(
      "SFT without learning_rate: the base model's SFT rate",
      () =>
        Effect.gen(function* () {
          const c = yield* trainingClient()
          const file = join(dataFilesDir("lr-"), "train.jsonl")
          const lines = WORDS.map((word) =>
            JSON.stringify({
              messages: [
                { role: "user", content: `Colour ${word}?` },
                { role: "assistant", content: word }
              ]
            })
          )
          writeFileSync(file, `${lines.join("\n")}\n`)
          const model = yield* c.createModel({ project: "lr", name: "sft-base-2k", base_model: PRETRAINED_MODEL })
          const job = yield* c.createSftTrainingJob({ model_id: model.id, training_data_url: pathToFileURL(file).href })
          const events = yield* eventsToEnd(c, job.id)
          expect(events.at(-1)?.type).toBe("training_ended")
          const rates = learningRates(events)
          expect(rates.length).toBeGreaterThan(0)
          expect(new Set(rates)).toEqual(new Set([learningRatesOf(PRETRAINED_MODEL)!.sft]))
        }),
      { timeout: 60_000 }
    )
  })
})
