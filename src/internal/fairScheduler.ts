/**
 * An Effect scheduler that gives the event loop back after a slice of time, for the embedded backend's server.
 *
 * Effect's default scheduler runs fibers' continuations as microtasks and falls back to a macrotask only after
 * 2,048 drains in a row; Node polls sockets only once the microtask queue is empty. Fifty streamed requests
 * arriving together (each parsed, checked, admitted and answered in microtasks) held the embedded backend's
 * event loop for 115-250 ms at a time (a 2 ms heartbeat timer in the server), and a `/v1/health` probe behind
 * them waited as long. Here fibers run as microtasks while the current slice lasts ({@link SLICE_MS}); past it,
 * their drains wait in a queue that runs from one `setImmediate` per turn of the event loop, a slice at a time,
 * so pending I/O is polled between slices whatever the number of fibers.
 *
 * Two queues. A fiber at a scheduling priority of 1 or more (`Effect.withSchedulingPriority`; the server gives
 * it to requests that read, whose work is short) runs at once while the slice lasts even when others wait, and
 * its queued drains run first in a turn; each turn still runs the first of the other queue, so neither starves.
 * A first version (one queue, set as a layer, which makes it the scheduler of the whole program that provides
 * the layer, the caller's own fibers included) held the first `/v1/health` probe behind 64 admissions for
 * 550-800 ms in training-thread.test; set on each request's fiber with reads urgent, 24-29 ms. (The share of
 * each of the two changes was not measured apart.)
 *
 * A slice starts when work comes after the loop was idle (no drain ran in the last {@link IDLE_MS}) or when a
 * queued turn begins. Within a queue order is kept: drains run first in, first out.
 *
 * @since 0.4.0
 */
import * as Scheduler from "effect/Scheduler"

/** How long fibers may run as microtasks before the event loop gets a turn, in milliseconds. */
export const SLICE_MS = 5

/** The scheduling priority from which a fiber's drains go first ({@link FairScheduler}). */
export const URGENT_PRIORITY = 1

/** A gap between drains longer than this means the loop was idle: the next drain starts a new slice. */
const IDLE_MS = 1

type Drain = (depth: number) => void

/** A scheduler whose fibers yield to the event loop at least every `sliceMs` of running (see the module). */
export class FairScheduler implements Scheduler.Scheduler {
  private sliceStart = 0
  private lastDrainEnd = Number.NEGATIVE_INFINITY
  private readonly waiting: Array<Drain> = []
  private readonly urgent: Array<Drain> = []
  private turnScheduled = false
  private draining = false

  constructor(readonly sliceMs: number = SLICE_MS) {}

  private startSliceIfIdle(now: number): void {
    // Idle: nothing queued, no drain running (a drain schedules its fiber's next one before it ends) and none
    // ended lately.
    if (this.waiting.length === 0 && this.urgent.length === 0 && !this.draining && now - this.lastDrainEnd > IDLE_MS) {
      this.sliceStart = now
    }
  }

  private schedule(queue: Array<Drain>, ahead: number, depth: number, drain: Drain): void {
    const now = performance.now()
    this.startSliceIfIdle(now)
    if (ahead === 0 && now - this.sliceStart < this.sliceMs) {
      queueMicrotask(() => this.run(drain, depth + 1))
      return
    }
    queue.push(drain)
    if (!this.turnScheduled) {
      this.turnScheduled = true
      setImmediate(this.turn)
    }
  }

  private readonly normalRunner = Scheduler.SchedulerRunner.cached((depth, drain) =>
    this.schedule(this.waiting, this.waiting.length + this.urgent.length, depth, drain)
  )

  private readonly urgentRunner = Scheduler.SchedulerRunner.cached((depth, drain) =>
    this.schedule(this.urgent, this.urgent.length, depth, drain)
  )

  private run(drain: Drain, depth: number): void {
    this.draining = true
    try {
      drain(depth)
    } finally {
      this.draining = false
      this.lastDrainEnd = performance.now()
    }
  }

  /** Runs a queue's drains in order while the slice lasts, and its first one whatever the time. */
  private runQueue(queue: Array<Drain>): void {
    let ran = 0
    while (ran < queue.length && (ran === 0 || performance.now() - this.sliceStart < this.sliceMs)) {
      this.run(queue[ran]!, 0)
      ran += 1
    }
    queue.splice(0, ran)
  }

  /** One turn: the urgent drains, then the others, in order while the slice lasts; the rest wait a turn. */
  private readonly turn = (): void => {
    this.turnScheduled = false
    this.sliceStart = performance.now()
    this.runQueue(this.urgent)
    // The first waiting drain runs even when the urgent ones took the slice: neither queue starves the other.
    this.runQueue(this.waiting)
    if ((this.waiting.length > 0 || this.urgent.length > 0) && !this.turnScheduled) {
      this.turnScheduled = true
      setImmediate(this.turn)
    }
  }

  shouldYield(fiber: Parameters<Scheduler.Scheduler["shouldYield"]>[0]): number | false {
    return Scheduler.defaultScheduler.shouldYield(fiber)
  }

  scheduleTask(task: Scheduler.Task, priority: number, fiber?: Parameters<Scheduler.Scheduler["scheduleTask"]>[2]) {
    const runner = priority >= URGENT_PRIORITY ? this.urgentRunner : this.normalRunner
    runner(fiber).scheduleTask(task, priority)
  }
}

/** The process's one fair scheduler: every server in the process shares the event loop, so one slice. */
export const fairScheduler = new FairScheduler()
