/**
 * The training loop sequential and pipelined (`offPolicy: { maxStaleness: 1 }`).
 *
 *   npx tsx bench/loop.ts [--gather-s=60] [--train-s=45] [--scale=100] [--steps=6] [--ttt-steps=12] [--ttt=1]
 *                         [--ttt-runs=1]
 *
 * 1. Against a scripted service (`test/support/ScriptedService.ts`, on the real clock): every step gathers
 *    2 groups x 4 rollouts of 4 turns, all at once, each turn taking `gather-s / 4 / scale` seconds, and its
 *    job trains `train-s / scale` seconds (defaults: 60 s and 45 s, as on the hosted service, scaled down
 *    100x). Printed per mode: wall time, mean wall time per step, the steady state (steps after the first), and
 *    its ratio to the ideal max(gather, train) (the sequential loop's ideal being gather + train).
 * 2. On the embedded backend (`--ttt=0` skips it): the tic-tac-toe example (`examples/tictactoe.ts`, 8 games x
 *    8 rollouts a step, evaluated every 5 steps) for `--ttt-steps` steps both ways, with wall time, the first
 *    step's reward and the mean of the last three; with `--ttt-runs` > 1 the modes alternate, run after run, and
 *    the median wall time of each is printed too (other work on the machine moves single runs). "main busy" is the
 *    event loop's utilisation over the run (the main thread serves HTTP, decodes and runs the loop; training runs
 *    on its own thread), "cores" the process's CPU time over wall time: on 2 cores a pipelined loop is bounded by
 *    the main thread (near 100% busy) where the sequential one leaves it idle while a job trains.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as KeyValueStore from "@effect/platform/KeyValueStore"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Backend from "../src/Backend.js"
import * as Policy from "../src/workflow/Policy.js"
import * as Reward from "../src/workflow/Reward.js"
import * as Rollout from "../src/workflow/Rollout.js"
import * as TrainingLoop from "../src/workflow/TrainingLoop.js"
import * as ScriptedService from "../test/support/ScriptedService.js"
import { fmt, intFlag, median, printTable } from "./harness.js"

const GATHER_S = intFlag("gather-s", 60)
const TRAIN_S = intFlag("train-s", 45)
const SCALE = Math.max(1, intFlag("scale", 100))
const STEPS = intFlag("steps", 6)
const TTT_STEPS = intFlag("ttt-steps", 12)
const TTT = intFlag("ttt", 1) !== 0
const TTT_RUNS = Math.max(1, intFlag("ttt-runs", 1))
const TURNS = 4

const gatherMs = (GATHER_S * 1000) / SCALE
const trainMs = (TRAIN_S * 1000) / SCALE

const play = () =>
  Effect.gen(function* () {
    const convo = yield* Rollout.conversation()
    for (let turn = 0; turn < TURNS; turn++) {
      yield* convo.user(`turn ${turn}`)
      yield* convo.reply()
    }
  })

const scripted = (offPolicy: TrainingLoop.OffPolicy | undefined) =>
  Effect.gen(function* () {
    const service = ScriptedService.make({
      completion: () => Duration.millis(gatherMs / TURNS),
      train: Duration.millis(trainMs)
    })
    const state = yield* Effect.provide(KeyValueStore.KeyValueStore, KeyValueStore.layerMemory)
    const started = performance.now()
    const summary = yield* Effect.gen(function* () {
      const policy = yield* Policy.trainable({ project: "bench", name: "loop", base_model: "base" })
      return yield* TrainingLoop.run({
        policy,
        scenarios: Array.from({ length: 10 }, (_, i) => i),
        rollout: play,
        reward: Reward.fromFunction<number, void>(({ scenario }) => scenario % 2),
        groupsPerStep: 2,
        rolloutsPerGroup: 4,
        steps: STEPS,
        state,
        gather: { progress: false },
        follow: { onEvent: () => Effect.void },
        ...(offPolicy === undefined ? {} : { offPolicy })
      })
    }).pipe(Effect.provide(service.layer))
    return { seconds: (performance.now() - started) / 1000, summary }
  })

const tictactoe = (offPolicy: TrainingLoop.OffPolicy | undefined, name: string) =>
  Effect.gen(function* () {
    const { train } = yield* Effect.promise(() => import("../examples/tictactoe.js"))
    const dir = mkdtempSync(join(tmpdir(), "effect-rl-bench-loop-"))
    const elu = performance.eventLoopUtilization()
    const cpu = process.cpuUsage()
    const started = performance.now()
    const { summary } = yield* train(
      { steps: TTT_STEPS, modelName: name },
      {
        state: join(dir, "submissions"),
        gather: { progress: false },
        ...(offPolicy === undefined ? {} : { offPolicy })
      }
    ).pipe(Effect.provide(Backend.local({ dataDir: join(dir, "data") })))
    const seconds = (performance.now() - started) / 1000
    const mainBusy = performance.eventLoopUtilization(elu).utilization
    const used = process.cpuUsage(cpu)
    const cores = (used.user + used.system) / 1e6 / seconds
    rmSync(dir, { recursive: true, force: true })
    const rewards = summary.steps.map((s) => s.train.reward ?? 0)
    const last3 = rewards.slice(-3)
    return {
      seconds,
      first: rewards[0] ?? Number.NaN,
      last3: last3.reduce((a, b) => a + b, 0) / last3.length,
      rewards,
      mainBusy,
      cores
    }
  })

const main = Effect.gen(function* () {
  const modes = [
    ["sequential", undefined],
    ["pipelined", { maxStaleness: 1 }]
  ] as const
  console.log(
    `scripted service: gather ${GATHER_S} s, train ${TRAIN_S} s, scaled down ${SCALE}x ` +
      `(${fmt(gatherMs / 1000, 2)} s, ${fmt(trainMs / 1000, 2)} s), ${STEPS} steps`
  )
  const rows: Array<Array<string>> = [
    ["mode", "wall s", "s/step", "steady s/step", "ideal s/step", "steady / max(g,t)", "steady / ideal"]
  ]
  const best = Math.max(gatherMs, trainMs) / 1000
  for (const [mode, offPolicy] of modes) {
    const { seconds, summary } = yield* scripted(offPolicy)
    const perStep = summary.steps.map((s) => s.seconds)
    const steady = perStep.slice(1)
    const steadyMean = steady.reduce((a, b) => a + b, 0) / Math.max(1, steady.length)
    const ideal = offPolicy === undefined ? (gatherMs + trainMs) / 1000 : best
    rows.push([
      mode,
      fmt(seconds, 2),
      fmt(seconds / summary.steps.length, 3),
      fmt(steadyMean, 3),
      fmt(ideal, 3),
      fmt(steadyMean / best, 3),
      fmt(steadyMean / ideal, 3)
    ])
  }
  printTable(rows)

  if (TTT) {
    console.log(`\nembedded backend: tic-tac-toe, ${TTT_STEPS} steps`)
    const ttt: Array<Array<string>> = [
      ["mode", "wall s", "s/step", "main busy", "cores", "first reward", "last-3 reward", "rewards"]
    ]
    const walls: Record<string, Array<number>> = { sequential: [], pipelined: [] }
    for (let run = 0; run < TTT_RUNS; run++) {
      for (const [mode, offPolicy] of modes) {
        const r = yield* tictactoe(offPolicy, `bench-loop-${mode}-${run}`)
        walls[mode]!.push(r.seconds)
        ttt.push([
          mode,
          fmt(r.seconds, 1),
          fmt(r.seconds / TTT_STEPS, 2),
          `${fmt(100 * r.mainBusy, 0)}%`,
          fmt(r.cores, 2),
          fmt(r.first, 3),
          fmt(r.last3, 3),
          r.rewards.map((x) => x.toFixed(2)).join(" ")
        ])
      }
    }
    if (TTT_RUNS > 1) {
      for (const [mode] of modes) ttt.push([`${mode} median`, fmt(median(walls[mode]!), 1), "", "", "", "", "", ""])
    }
    printTable(ttt)
  }
}).pipe(Logger.withMinimumLogLevel(LogLevel.Warning))

Effect.runPromise(main).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
