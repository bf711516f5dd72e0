/**
 * Gather: scheduling (overall and per-group concurrency), injected failures and time-outs against count and
 * fraction limits, group scoring and hooks, streaming order, progress output, cancellation (no HTTP request
 * left running on a real socket), and a real gather of the embedded backend's tiny policy.
 *
 * The failure and time-out logic runs on scripted policies (`Policy.make`) and the TestClock: the point is the
 * gather's bookkeeping, which a real model would make slow and nondeterministic.
 */
import { createServer, type IncomingMessage, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { describe, expect, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import type { ChatCompletion, ChatCompletionRequest } from "../../src/api/ChatCompletion.js"
import { isChoice } from "../../src/api/Trajectory.js"
import type { ApiError } from "../../src/client/ApiError.js"
import { InferenceClient } from "../../src/client/InferenceClient.js"
import * as Gather from "../../src/workflow/Gather.js"
import { resolve as resolveProgress } from "../../src/workflow/internal/progress.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as Rollout from "../../src/workflow/Rollout.js"
import { inference } from "../support/clients.js"
import { TINY, WorkflowBackend } from "./support.js"

class Boom extends Data.TaggedError("Boom")<{ readonly message: string }> {}

/** A valid completion answering `text`, with `tokens` completion tokens. */
const completion = (text: string, tokens = 2): ChatCompletion => ({
  id: "cmpl-test",
  object: "chat.completion",
  created: 0,
  model: "scripted",
  choices: [
    {
      index: 0,
      message: { role: "assistant", content: text },
      finish_reason: "stop",
      logprobs: { content: [{ token: text, logprob: -0.25 }] },
      token_ids: [7]
    }
  ],
  usage: { prompt_tokens: 3, completion_tokens: tokens, total_tokens: 3 + tokens }
})

/** A scripted policy: echoes the last user message back, after `delay` (on the Clock). */
const echo = (
  delay: (request: ChatCompletionRequest) => number = () => 0,
  onRequest: (request: ChatCompletionRequest) => Effect.Effect<void> = () => Effect.void
) =>
  Policy.make({
    name: "scripted",
    complete: (request): Effect.Effect<ChatCompletion, ApiError> => {
      const last = request.messages.at(-1)
      const text = typeof last?.content === "string" ? last.content : ""
      return onRequest(request).pipe(
        Effect.zipRight(Effect.sleep(Duration.millis(delay(request)))),
        Effect.as(completion(text))
      )
    }
  })

/** Asks `s:i` and returns the answer. */
const ask = (scenario: number, i: number) =>
  Effect.map(
    Rollout.chat({ messages: [{ role: "user", content: `${scenario}:${i}` }] }),
    (c) => c.choices[0]?.message.content ?? ""
  )

const rewardOne = () => Effect.succeed(1)

/** Runs `effect` forked, moving the TestClock on by `step` until it ends (at most `steps` times). */
const drive = <A, E>(effect: Effect.Effect<A, E>, step: Duration.DurationInput = "1 second", steps = 120) =>
  Effect.gen(function* () {
    const fiber = yield* Effect.fork(effect)
    for (let k = 0; k < steps; k++) {
      if ((yield* fiber.poll)._tag === "Some") break
      yield* TestClock.adjust(step)
    }
    return yield* Fiber.await(fiber)
  })

/** What the rollout measures of one scripted completion (3 prompt and 2 completion tokens, no time passing). */
const measured = { duration_seconds: 0, completions: 1, prompt_tokens: 3, completion_tokens: 2 }

describe("Gather", () => {
  it.effect("gathers M x N groups in scenario order, with rewards, score metrics and metadata", () =>
    Effect.gen(function* () {
      const groups = yield* Gather.groups({
        policy: echo(),
        scenarios: [10, 20, 30],
        rolloutsPerGroup: 4,
        rollout: ask,
        reward: ({ scenario, value, trajectory }) =>
          Effect.succeed({
            reward: value === `${scenario}:0` ? 1 : 0,
            metrics: { choices: trajectory.messages_and_choices.filter(isChoice).length, long: value.length > 4 }
          }),
        metadata: (scenario, index) => ({ scenario, index }),
        progress: false
      })
      expect(groups.map((g) => g.scenario)).toEqual([10, 20, 30])
      expect(groups.map((g) => g.index)).toEqual([0, 1, 2])
      for (const g of groups) {
        expect(g.group.trajectories.map((t) => t.reward)).toEqual([1, 0, 0, 0])
        expect(g.rollouts.map((r) => r.value)).toEqual([0, 1, 2, 3].map((i) => `${g.scenario}:${i}`))
        expect(g.rollouts.map((r) => r.trajectory)).toEqual(g.group.trajectories)
        expect(g.group.metadata).toEqual({ scenario: g.scenario, index: g.index })
        expect(g.group.exceptions).toBeUndefined()
        for (const t of g.group.trajectories) {
          // The agent's and the score's metrics, with what the rollout measured (one completion of 3 + 2 tokens).
          expect(t.metrics).toEqual({ ...measured, choices: 1, long: false })
          expect(t.metadata).toEqual({ scenario: g.scenario, index: g.index })
          expect(t.auto_metrics).toBeUndefined()
          expect(t.messages_and_choices.filter(isChoice)[0]?.logprobs?.content?.[0]?.logprob).toBe(-0.25)
        }
      }
      expect(Gather.trajectoryGroups(groups)).toEqual(groups.map((g) => g.group))
    })
  )

  it.effect("keeps at most `concurrency` rollouts in flight overall and `groupConcurrency` per group", () =>
    Effect.gen(function* () {
      let overall = 0
      let maxOverall = 0
      const perGroup = new Map<string, number>()
      let maxPerGroup = 0
      const policy = Policy.make({
        name: "scripted",
        complete: (request) => {
          const scenario = String(request.messages[0]?.content).split(":")[0]!
          return Effect.acquireUseRelease(
            Effect.sync(() => {
              overall++
              maxOverall = Math.max(maxOverall, overall)
              const n = (perGroup.get(scenario) ?? 0) + 1
              perGroup.set(scenario, n)
              maxPerGroup = Math.max(maxPerGroup, n)
            }),
            () => Effect.as(Effect.sleep("1 second"), completion("x")),
            () =>
              Effect.sync(() => {
                overall--
                perGroup.set(scenario, perGroup.get(scenario)! - 1)
              })
          )
        }
      })
      const exit = yield* drive(
        Gather.groups({
          policy,
          scenarios: [0, 1, 2, 3, 4],
          rolloutsPerGroup: 3,
          rollout: ask,
          reward: rewardOne,
          concurrency: 4,
          groupConcurrency: 2,
          progress: false
        })
      )
      expect(Exit.isSuccess(exit)).toBe(true)
      if (Exit.isSuccess(exit)) expect(exit.value.flatMap((g) => g.group.trajectories).length).toBe(15)
      expect(maxOverall).toBe(4)
      expect(maxPerGroup).toBe(2)
      expect(overall).toBe(0)
    })
  )

  describe("failed rollouts", () => {
    // Scenario s, rollout i fails with a typed error when (s, i) is listed.
    const failing =
      (fails: ReadonlyArray<readonly [number, number]>) =>
      (scenario: number, i: number): Effect.Effect<string, Boom | ApiError | Rollout.InvalidTurn, Rollout.Current> =>
        fails.some(([s, k]) => s === scenario && k === i)
          ? Effect.zipRight(ask(scenario, i), Effect.fail(new Boom({ message: `no ${scenario}:${i}` })))
          : ask(scenario, i)

    const options = (fails: ReadonlyArray<readonly [number, number]>, maxExceptions?: Gather.MaxExceptions) => ({
      policy: echo(),
      scenarios: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
      rolloutsPerGroup: 2,
      rollout: failing(fails),
      reward: rewardOne,
      maxExceptions,
      progress: false as const
    })

    it.effect("are recorded in their group's exceptions, up to a count", () =>
      Effect.gen(function* () {
        const groups = yield* Gather.groups(
          options(
            [
              [1, 0],
              [4, 1]
            ],
            2
          )
        )
        expect(groups.map((g) => g.group.trajectories.length)).toEqual([2, 1, 2, 2, 1, 2, 2, 2, 2, 2])
        expect(groups[1]!.rollouts.map((r) => r.index)).toEqual([1])
        expect(groups[4]!.rollouts.map((r) => r.index)).toEqual([0])
        expect(groups[1]!.group.exceptions?.map(({ type, message }) => ({ type, message }))).toEqual([
          { type: "Boom", message: "no 1:0" }
        ])
        expect(groups[1]!.group.exceptions?.[0]?.traceback).toContain("no 1:0")
        expect(groups[4]!.group.exceptions?.map((e) => e.message)).toEqual(["no 4:1"])
        expect(groups.filter((g) => g.group.exceptions !== undefined).map((g) => g.index)).toEqual([1, 4])
      })
    )

    it.effect("fail the gather past a count, with every exception so far", () =>
      Effect.gen(function* () {
        const error = yield* Effect.flip(
          Gather.groups(
            options(
              [
                [1, 0],
                [4, 1]
              ],
              1
            )
          )
        )
        expect(error).toBeInstanceOf(Gather.GatherError)
        expect(error.reason).toBe("TooManyExceptions")
        expect(error.exceptions.map((e) => e.message).sort()).toEqual(["no 1:0", "no 4:1"])
        expect(error.limit).toBe(1)
        expect(error.planned).toBe(20)
        expect(error.message).toMatch(
          /^Boom: no [14]:[01] \(the first of 2 failed rollouts, more than the 1 tolerated;/
        )
        expect(error.message).toContain("set maxExceptions")
      })
    )

    it.effect("fail the first one by default", () =>
      Effect.gen(function* () {
        const error = yield* Effect.flip(Gather.groups(options([[7, 1]])))
        expect(error.limit).toBe(0)
        expect(error.exceptions.map((e) => e.message)).toEqual(["no 7:1"])
      })
    )

    it.effect("of a Promise agent lead the failure with their own error, not UnknownException", () =>
      Effect.gen(function* () {
        const agent = async (scenario: number): Promise<string> => {
          if (scenario === 2) throw new Error("context too long")
          if (scenario === 3) throw new Error("the agent gave up", { cause: new Error("rate limited") })
          return "ok"
        }
        const run = (rollout: (scenario: number) => Effect.Effect<string, unknown>, scenarios: ReadonlyArray<number>) =>
          Effect.flip(
            Gather.groups({
              policy: echo(),
              scenarios,
              rolloutsPerGroup: 1,
              rollout,
              reward: rewardOne,
              progress: false
            })
          )
        // `Effect.tryPromise(() => ...)`: the rejection hides in an UnknownException; its own message is recorded.
        const bare = yield* run((scenario) => Effect.tryPromise(() => agent(scenario)), [0, 2])
        expect(bare.exceptions.map(({ type, message }) => ({ type, message }))).toEqual([
          { type: "Error", message: "context too long" }
        ])
        expect(bare.message).toMatch(/^Error: context too long \(1 failed rollout, more than the 0 tolerated; /)
        expect(bare.message).toContain("To tolerate failed rollouts, set maxExceptions")
        expect(bare.exceptions[0]?.traceback).toContain("context too long")
        // `Effect.tryPromise({ try, catch })` keeping the cause, and an error that wraps another.
        const kept = yield* run(
          (scenario) => Effect.tryPromise({ try: () => agent(scenario), catch: (cause) => cause as Error }),
          [3]
        )
        expect(kept.message).toMatch(/^Error: the agent gave up: rate limited \(1 failed rollout/)
      })
    )

    it.effect("are tolerated up to a fraction of all planned rollouts", () =>
      Effect.gen(function* () {
        const fails = [
          [2, 0],
          [3, 0]
        ] as const
        // 2 of 20 planned: within 10%, over 5% (limit 1).
        const groups = yield* Gather.groups(options(fails, { fraction: 0.1 }))
        expect(groups.flatMap((g) => g.group.exceptions ?? []).length).toBe(2)
        const error = yield* Effect.flip(Gather.groups(options(fails, { fraction: 0.05 })))
        expect(error.limit).toBe(1)
        expect(error.exceptions.length).toBe(2)
      })
    )

    it.effect("include defects and failed or invalid rewards", () =>
      Effect.gen(function* () {
        const groups = yield* Gather.groups({
          policy: echo(),
          scenarios: [0, 1, 2],
          rolloutsPerGroup: 1,
          rollout: (scenario, i) => (scenario === 0 ? Effect.die(new TypeError("kaput")) : ask(scenario, i)),
          reward: ({ scenario }) =>
            scenario === 1 ? Effect.fail(new Boom({ message: "judge down" })) : Effect.succeed(Number.NaN),
          maxExceptions: 3,
          progress: false
        })
        expect(groups.map((g) => g.group.exceptions?.map(({ type, message }) => ({ type, message })))).toEqual([
          [{ type: "TypeError", message: "kaput" }],
          [{ type: "Boom", message: "judge down" }],
          [{ type: "RangeError", message: "the reward is not a finite number: NaN" }]
        ])
        expect(groups.every((g) => g.group.trajectories.length === 0)).toBe(true)
      })
    )

    it.effect("time out one by one, and the time-out interrupts the rollout", () =>
      Effect.gen(function* () {
        let interrupted = 0
        const slow = (scenario: number, i: number) =>
          i === 1
            ? Effect.zipRight(ask(scenario, i), Effect.never).pipe(
                Effect.onInterrupt(() => Effect.sync(() => interrupted++))
              )
            : ask(scenario, i)
        const gather = (maxExceptions: Gather.MaxExceptions) =>
          Gather.groups({
            policy: echo(() => 1000),
            scenarios: [0, 1, 2],
            rolloutsPerGroup: 3,
            rollout: slow,
            reward: rewardOne,
            timeout: "10 seconds",
            maxExceptions,
            progress: false
          })
        const exit = yield* drive(gather({ fraction: 1 / 3 }))
        expect(Exit.isSuccess(exit)).toBe(true)
        if (Exit.isSuccess(exit)) {
          for (const g of exit.value) {
            expect(g.rollouts.map((r) => r.index)).toEqual([0, 2])
            expect(g.group.exceptions?.map(({ type, message }) => ({ type, message }))).toEqual([
              { type: "TimeoutException", message: "the rollout did not finish within 10s" }
            ])
          }
        }
        expect(interrupted).toBe(3)
        const failed = yield* drive(gather(2))
        expect(Exit.isFailure(failed)).toBe(true)
        if (Exit.isFailure(failed)) {
          const error = Cause.failureOption(failed.cause)
          expect(error._tag === "Some" && error.value._tag === "GatherError" && error.value.exceptions.length).toBe(3)
        }
      })
    )

    it.effect("past the limit, interrupt every rollout in flight", () =>
      Effect.gen(function* () {
        let interrupted = 0
        let completed = 0
        const exit = yield* drive(
          Gather.groups({
            policy: echo(),
            scenarios: [0, 1, 2],
            rolloutsPerGroup: 2,
            rollout: (scenario, i): Effect.Effect<string, ApiError | Rollout.InvalidTurn | Boom, Rollout.Current> =>
              scenario === 0 && i === 0
                ? Effect.zipRight(Effect.sleep("1 second"), Effect.fail(new Boom({ message: "first" })))
                : Effect.zipRight(Effect.sleep("1 minute"), ask(scenario, i)).pipe(
                    Effect.tap(() => Effect.sync(() => completed++)),
                    Effect.onInterrupt(() => Effect.sync(() => interrupted++))
                  ),
            reward: rewardOne,
            concurrency: 6,
            progress: false
          })
        )
        expect(Exit.isFailure(exit)).toBe(true)
        expect(interrupted).toBe(5)
        expect(completed).toBe(0)
      })
    )

    it.effect("an interruption is no exception: it propagates", () =>
      Effect.gen(function* () {
        const exit = yield* Effect.exit(
          Gather.groups({
            policy: echo(),
            scenarios: [0, 1],
            rolloutsPerGroup: 2,
            rollout: (scenario, i) => (scenario === 1 && i === 0 ? Effect.interrupt : ask(scenario, i)),
            reward: rewardOne,
            maxExceptions: 10,
            progress: false
          })
        )
        expect(Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause)).toBe(true)
      })
    )
  })

  it.effect("re-scores groups with a group scorer, then runs the hook, whose failure is the gather's", () =>
    Effect.gen(function* () {
      const groups = yield* Gather.groups({
        policy: echo(),
        scenarios: [0, 1],
        rolloutsPerGroup: 3,
        rollout: (scenario, i) => Effect.as(ask(scenario, i), i),
        reward: ({ value }) => Effect.succeed({ reward: value, metrics: { raw: value } }),
        scoreGroup: (group) => {
          const mean = group.reduce((a, s) => a + s.score.reward, 0) / group.length
          return Effect.succeed(group.map((s) => ({ reward: s.score.reward - mean, metrics: { centered: true } })))
        },
        afterGroup: (gathered) =>
          Effect.succeed({ ...gathered, group: { ...gathered.group, metrics: { size: gathered.rollouts.length } } }),
        progress: false
      })
      for (const g of groups) {
        expect(g.group.trajectories.map((t) => t.reward)).toEqual([-1, 0, 1])
        expect(g.group.trajectories.map((t) => t.metrics)).toEqual(
          [0, 1, 2].map((raw) => ({ ...measured, raw, centered: true }))
        )
        expect(g.group.metrics).toEqual({ size: 3 })
      }
      const error = yield* Effect.flip(
        Gather.groups({
          policy: echo(),
          scenarios: [0, 1],
          rolloutsPerGroup: 1,
          rollout: ask,
          reward: rewardOne,
          afterGroup: (gathered) => (gathered.index === 1 ? Effect.fail(new Boom({ message: "hook" })) : Effect.void),
          progress: false
        })
      )
      expect(error).toEqual(new Boom({ message: "hook" }))
    })
  )

  it.effect("streams groups as they complete; `groups` keeps scenario order", () =>
    Effect.gen(function* () {
      // Scenario 0 answers after 5 s, scenario 1 after 1 s.
      const options = {
        policy: echo((request) => (String(request.messages[0]?.content).startsWith("0:") ? 5000 : 1000)),
        scenarios: [0, 1],
        rolloutsPerGroup: 2,
        rollout: ask,
        reward: rewardOne,
        progress: false as const
      }
      const streamed = yield* drive(Stream.runCollect(Gather.stream(options)))
      expect(Exit.map(streamed, (c) => Chunk.toArray(c).map((g) => g.index))).toEqual(Exit.succeed([1, 0]))
      const collected = yield* drive(Gather.groups(options))
      expect(Exit.map(collected, (gs) => gs.map((g) => g.index))).toEqual(Exit.succeed([0, 1]))
    })
  )

  it.effect("shows progress: plain lines every interval off a terminal, a redrawn line on one", () =>
    Effect.gen(function* () {
      const run = (tty: boolean) =>
        Effect.gen(function* () {
          const out: Array<string> = []
          const fiber = yield* Effect.fork(
            Gather.groups({
              // Every rollout takes 1.5 s, two at a time: group 0 ends at 1.5 s, group 1 at 3 s.
              policy: echo(() => 1500),
              scenarios: [0, 1],
              rolloutsPerGroup: 2,
              rollout: (scenario, i) =>
                scenario === 1 && i === 1
                  ? Effect.zipRight(ask(scenario, i), Effect.fail(new Boom({ message: "x" })))
                  : ask(scenario, i),
              reward: ({ value }) => Effect.succeed(value === "0:0" ? 1 : 0.5),
              concurrency: 2,
              maxExceptions: 1,
              progress: { write: (text) => out.push(text), tty, interval: "1 second", label: "test" }
            })
          )
          for (let k = 0; k < 3; k++) yield* TestClock.adjust("1 second")
          expect((yield* Fiber.join(fiber)).length).toBe(2)
          return out
        })
      const plain = yield* run(false)
      expect(plain[0]).toBe("test 0/4 rollouts, 0/2 groups | reward - | exceptions 0 | 0 tok/s | 1.0s\n")
      expect(plain[1]).toBe("test 2/4 rollouts, 1/2 groups | reward 0.750 | exceptions 0 | 2 tok/s | 2.0s\n")
      expect(plain.at(-1)).toBe("test 4/4 rollouts, 2/2 groups | reward 0.667 | exceptions 1 | 2 tok/s | 3.0s\n")
      const tty = yield* run(true)
      expect(tty[0]).toBe(
        "\rtest [....................] 0/4 rollouts, 0/2 groups | reward - | exceptions 0 | 0 tok/s | 1.0s\x1b[K"
      )
      expect(tty.at(-1)).toBe(
        "\rtest [####################] 4/4 rollouts, 2/2 groups | reward 0.667 | exceptions 1 | 2 tok/s | 3.0s\x1b[K\n"
      )
    })
  )

  it.effect("a gather failed for its exceptions: the last progress line counts what the error counts", () =>
    Effect.gen(function* () {
      // Every rollout fails at once (one latch opens them all), in three groups: with one failure tolerated, the
      // second fails the gather while others are failing in the same instant, in its group and the other groups.
      const out: Array<string> = []
      const latch = yield* Effect.makeLatch(false)
      const fiber = yield* Effect.fork(
        Gather.groups({
          policy: echo(),
          scenarios: [0, 1, 2],
          rolloutsPerGroup: 4,
          rollout: (scenario, i) =>
            Effect.zipRight(latch.await, Effect.fail(new Boom({ message: `no ${scenario}:${i}` }))),
          reward: rewardOne,
          concurrency: 12,
          maxExceptions: 1,
          progress: { write: (text) => out.push(text), tty: false, interval: "1 hour", label: "test" }
        })
      )
      yield* Effect.yieldNow()
      yield* latch.open
      const error = yield* Effect.flip(Fiber.join(fiber))
      expect(error.exceptions.length).toBeGreaterThanOrEqual(2)
      expect(out.at(-1)).toBe(
        `test ${error.finished}/12 rollouts, 0/3 groups | reward - | exceptions ${error.exceptions.length} | 0 tok/s | 0.0s\n`
      )
      expect(error.finished).toBe(error.exceptions.length)
    })
  )

  it("progress is off under a test runner unless asked, on a terminal or not", () => {
    expect(process.env.VITEST).toBeDefined()
    expect(resolveProgress("auto")).toBeUndefined()
    expect(resolveProgress(undefined)).toBeUndefined()
    expect(resolveProgress(false)).toBeUndefined()
    expect(resolveProgress(true)?.interval).toEqual(Duration.decode(process.stderr.isTTY ? "200 millis" : "10 seconds"))
    expect(resolveProgress({ tty: false })?.tty).toBe(false)
  })

  it.scopedLive("cancellation aborts every HTTP request in flight", () =>
    Effect.gen(function* () {
      // A real server that never answers: it counts the requests it got and those still open.
      const server = yield* Effect.acquireRelease(
        Effect.async<{
          readonly http: Server
          readonly url: string
          readonly open: () => number
          readonly seen: () => number
        }>((resume) => {
          const open = new Set<IncomingMessage>()
          let seen = 0
          const http = createServer((req, res) => {
            seen++
            open.add(req)
            res.on("close", () => open.delete(req))
          })
          http.listen(0, "127.0.0.1", () =>
            resume(
              Effect.succeed({
                url: `http://127.0.0.1:${(http.address() as AddressInfo).port}`,
                open: () => open.size,
                seen: () => seen,
                http
              })
            )
          )
        }),
        ({ http }) =>
          Effect.async<void>((resume) => {
            http.closeAllConnections()
            http.close(() => resume(Effect.void))
          })
      )
      const client = yield* inference(server.url)
      const policy = yield* Effect.provideService(Policy.base(TINY), InferenceClient, client)
      const until = (done: () => boolean) =>
        Effect.suspend(() => (done() ? Effect.void : Effect.fail("not yet"))).pipe(
          Effect.retry({ schedule: Schedule.spaced("10 millis"), times: 500 })
        )
      const fiber = yield* Effect.fork(
        Gather.groups({
          policy,
          scenarios: [0, 1, 2],
          rolloutsPerGroup: 3,
          rollout: ask,
          reward: rewardOne,
          concurrency: 4,
          progress: false
        })
      )
      yield* until(() => server.open() === 4)
      yield* Fiber.interrupt(fiber)
      yield* until(() => server.open() === 0)
      expect(server.seen()).toBe(4)
      expect(server.open()).toBe(0)
    })
  )

  it.live(
    "gathers 2 x 2 rollouts of the embedded backend's tiny policy, with logprobs",
    () =>
      Effect.gen(function* () {
        const policy = yield* Policy.base(TINY)
        const words = ["yes", "no"]
        const groups = yield* Gather.groups({
          policy,
          scenarios: ["Say yes", "Say no"],
          rolloutsPerGroup: 2,
          rollout: (scenario, i) =>
            Effect.map(
              Rollout.chat({
                messages: [{ role: "user", content: scenario }],
                max_completion_tokens: 4,
                temperature: 1,
                seed: i,
                structured_outputs: { choice: words }
              }),
              (c) => c.choices[0]?.message.content ?? ""
            ),
          reward: ({ scenario, value }) => Effect.succeed(scenario.endsWith(value) ? 1 : 0),
          progress: false
        })
        expect(groups.map((g) => g.scenario)).toEqual(["Say yes", "Say no"])
        for (const g of groups) {
          expect(g.group.trajectories.length).toBe(2)
          g.rollouts.forEach((r) => {
            expect(words).toContain(r.value)
            expect(r.trajectory.reward).toBe(g.scenario.endsWith(r.value) ? 1 : 0)
            const choices = r.trajectory.messages_and_choices.filter(isChoice)
            expect(choices.length).toBe(1)
            expect(choices[0]!.message.content).toBe(r.value)
            expect(choices[0]!.logprobs?.content?.length).toBeGreaterThan(0)
            expect(choices[0]!.logprobs?.content?.every((l) => Number.isFinite(l.logprob) && l.logprob <= 0)).toBe(true)
            expect(choices[0]!.token_ids?.length).toBeGreaterThan(0)
          })
        }
      }).pipe(Effect.provide(WorkflowBackend)),
    30_000
  )
})
