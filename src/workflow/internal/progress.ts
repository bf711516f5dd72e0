/**
 * The progress display of a gather: counters the gather updates as rollouts and groups finish, and a
 * renderer fiber that shows them. On a terminal, one line redrawn in place (`\r`, a bar, done/total, the
 * running reward mean, exceptions, completion tokens per second); elsewhere (a log file, CI), a plain line
 * at most every `interval`. A last line is written when the gather ends, however it ends.
 *
 * The renderer sleeps on the `Clock`, so a test drives it with `TestClock`; the sink is injectable.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"

/** Where and how progress is shown. */
export interface ProgressOptions {
  /** Writes a piece of text (default: `process.stderr.write`). */
  readonly write?: ((text: string) => void) | undefined
  /** Redraw one line in place (default: whether stderr is a terminal). */
  readonly tty?: boolean | undefined
  /** How often the display is refreshed (default 200 ms on a terminal, 10 seconds otherwise). */
  readonly interval?: Duration.DurationInput | undefined
  /** The label at the start of each line (default `gather`). */
  readonly label?: string | undefined
}

/** The `progress` option of a gather: `"auto"` (the default), on, off, or on with options. */
export type ProgressSetting = "auto" | boolean | ProgressOptions

/**
 * What the display shows, updated by the gather. Once the gather has failed ({@link Counters.stop}) they no
 * longer change: what rollouts still end while the failure stops them is not shown, so the last line counts
 * what the gather's error counts.
 */
export class Counters {
  /** Rollouts finished (with a trajectory or an exception). */
  done = 0
  /** Rollouts that failed. */
  exceptions = 0
  /** Groups finished. */
  groupsDone = 0
  /** Completion tokens of finished rollouts. */
  completionTokens = 0
  /** The sum and count of the rewards of finished groups. */
  rewardSum = 0
  rewardCount = 0
  /** Whether the gather has failed: the counts are final. */
  stopped = false

  constructor(
    readonly total: number,
    readonly groups: number
  ) {}

  /** A rollout finished with a trajectory that sampled `tokens` completion tokens. */
  succeeded(tokens: number): void {
    if (this.stopped) return
    this.done++
    this.completionTokens += tokens
  }

  /** A rollout failed. */
  failed(): void {
    if (this.stopped) return
    this.done++
    this.exceptions++
  }

  /** A group finished with these (final) rewards. */
  group(rewards: ReadonlyArray<number>): void {
    if (this.stopped) return
    this.groupsDone++
    for (const r of rewards) this.rewardSum += r
    this.rewardCount += rewards.length
  }

  /** The gather failed: the counts stay as they are. */
  stop(): void {
    this.stopped = true
  }
}

const BAR_WIDTH = 20

/** One line of progress, without line ending. */
export const render = (
  counters: Counters,
  elapsedMillis: number,
  options: { readonly label: string; readonly bar: boolean }
): string => {
  const { done, total } = counters
  const seconds = elapsedMillis / 1000
  const parts: Array<string> = []
  const fraction = total === 0 ? 1 : done / total
  const bar = options.bar ? ` [${"#".repeat(Math.round(fraction * BAR_WIDTH)).padEnd(BAR_WIDTH, ".")}]` : ""
  parts.push(`${options.label}${bar} ${done}/${total} rollouts, ${counters.groupsDone}/${counters.groups} groups`)
  parts.push(
    counters.rewardCount === 0 ? "reward -" : `reward ${(counters.rewardSum / counters.rewardCount).toFixed(3)}`
  )
  parts.push(`exceptions ${counters.exceptions}`)
  parts.push(`${seconds > 0 ? Math.round(counters.completionTokens / seconds) : 0} tok/s`)
  parts.push(`${seconds.toFixed(1)}s`)
  return parts.join(" | ")
}

interface Resolved {
  readonly write: (text: string) => void
  readonly tty: boolean
  readonly interval: Duration.Duration
  readonly label: string
}

const stderrWrite = (text: string): void => {
  process.stderr.write(text)
}

/**
 * The display a setting asks for, or none. `"auto"` shows progress on stderr (a bar on a terminal, plain
 * lines otherwise), except under a test runner (`VITEST` set), where it stays quiet unless asked.
 */
export const resolve = (setting: ProgressSetting | undefined): Resolved | undefined => {
  if (setting === false) return undefined
  if ((setting === undefined || setting === "auto") && process.env.VITEST !== undefined) return undefined
  const options: ProgressOptions = typeof setting === "object" ? setting : {}
  const tty = options.tty ?? process.stderr.isTTY === true
  return {
    write: options.write ?? stderrWrite,
    tty,
    interval: Duration.decode(options.interval ?? (tty ? "200 millis" : "10 seconds")),
    label: options.label ?? "gather"
  }
}

/**
 * Starts showing `counters` in the current scope: a fiber redraws them every interval, and the last line is
 * written when the scope closes.
 */
export const start = (
  setting: ProgressSetting | undefined,
  counters: Counters
): Effect.Effect<void, never, Scope.Scope> => {
  const resolved = resolve(setting)
  if (resolved === undefined) return Effect.void
  const { write, tty, interval, label } = resolved
  return Effect.gen(function* () {
    const startedAt = yield* Clock.currentTimeMillis
    const show = (final: boolean) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const line = render(counters, now - startedAt, { label, bar: tty })
        // On a terminal: back to the start of the line, draw, clear what a longer line left behind.
        write(tty ? `\r${line}\x1b[K${final ? "\n" : ""}` : `${line}\n`)
      })
    yield* Effect.addFinalizer(() => show(true))
    yield* Effect.forkScoped(Effect.forever(Effect.zipRight(Effect.sleep(interval), show(false))))
  })
}
