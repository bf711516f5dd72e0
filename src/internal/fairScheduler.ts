/**
 * An Effect scheduler that gives the event loop back after a slice of time, for the package's HTTP servers.
 *
 * Effect's default scheduler runs fibers' continuations as microtasks and falls back to a macrotask only after
 * 2,048 drains in a row; Node polls sockets only once the microtask queue is empty. Fifty streamed requests
 * arriving together (each parsed, checked, admitted and answered in microtasks) held the embedded backend's
 * event loop for 75-165 ms, and a `/v1/health` probe behind them waited as long. Here fibers run as
 * microtasks while the current slice lasts ({@link SLICE_MS}); past it, the drains wait in a queue that runs
 * from one `setImmediate` per turn of the event loop, a slice at a time, so pending I/O is polled between
 * slices whatever the number of fibers.
 *
 * A slice starts when work comes after the loop was idle (no drain ran in the last {@link IDLE_MS}) or when a
 * queued turn begins. Order is kept: drains run first in, first out.
 *
 * @since 0.4.0
 */
import * as Scheduler from "effect/Scheduler"

/** How long fibers may run as microtasks before the event loop gets a turn, in milliseconds. */
export const SLICE_MS = 5

/** A gap between drains longer than this means the loop was idle: the next drain starts a new slice. */
const IDLE_MS = 1

type Drain = (depth: number) => void

/** A scheduler whose fibers yield to the event loop at least every `sliceMs` of running (see the module). */
export class FairScheduler implements Scheduler.Scheduler {
  private sliceStart = 0
  private lastDrainEnd = Number.NEGATIVE_INFINITY
  private readonly waiting: Array<Drain> = []
  private turnScheduled = false
  private draining = false

  constructor(readonly sliceMs: number = SLICE_MS) {}

  private readonly getRunner = Scheduler.SchedulerRunner.cached((depth, drain) => {
    const now = performance.now()
    // Idle: no drain running (a drain schedules its fiber's next one before it ends) and none ended lately.
    if (this.waiting.length === 0 && !this.draining && now - this.lastDrainEnd > IDLE_MS) this.sliceStart = now
    if (this.waiting.length === 0 && now - this.sliceStart < this.sliceMs) {
      queueMicrotask(() => this.run(drain, depth + 1))
      return
    }
    this.waiting.push(drain)
    if (!this.turnScheduled) {
      this.turnScheduled = true
      setImmediate(this.turn)
    }
  })

  private run(drain: Drain, depth: number): void {
    this.draining = true
    try {
      drain(depth)
    } finally {
      this.draining = false
      this.lastDrainEnd = performance.now()
    }
  }

  /** One turn: queued drains in order while the slice lasts; the rest wait for the next turn. */
  private readonly turn = (): void => {
    this.turnScheduled = false
    this.sliceStart = performance.now()
    let ran = 0
    while (ran < this.waiting.length && performance.now() - this.sliceStart < this.sliceMs) {
      this.run(this.waiting[ran]!, 0)
      ran += 1
    }
    this.waiting.splice(0, ran)
    if (this.waiting.length > 0 && !this.turnScheduled) {
      this.turnScheduled = true
      setImmediate(this.turn)
    }
  }

  shouldYield(fiber: Parameters<Scheduler.Scheduler["shouldYield"]>[0]): number | false {
    return Scheduler.defaultScheduler.shouldYield(fiber)
  }

  scheduleTask(task: Scheduler.Task, priority: number, fiber?: Parameters<Scheduler.Scheduler["scheduleTask"]>[2]) {
    this.getRunner(fiber).scheduleTask(task, priority)
  }
}

/** The process's one fair scheduler: every server in the process shares the event loop, so one slice. */
export const fairScheduler = new FairScheduler()
