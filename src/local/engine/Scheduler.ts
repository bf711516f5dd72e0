/**
 * The decoding scheduler: the one place where CPU-bound decoding runs on the server's event loop, a little
 * at a time and fairly.
 *
 * Every in-flight completion is a task that decodes in steps (a step is one decoding round of its choices,
 * or one chunk of a stream). On each turn of the event loop the scheduler runs steps of the tasks in turn,
 * round-robin, for at most {@link TURN_MS} in all, then gives the event loop back (a macrotask), so pending
 * I/O (a `/v1/health` probe, a socket write, a new request) waits at most one turn whatever the number of
 * completions in flight. (Each completion giving the loop a turn on its own did not bound that: sixty-four of
 * them, each running its 10 ms before yielding, held a probe for most of a second.)
 *
 * Completions on a model decode in batches (`sampler/Batcher.ts`): a completion's step asks the batcher, itself a
 * task here, for its next token and pauses; one step of the batcher advances every completion that asked.
 *
 * @since 0.1.0
 */

/** How long one turn of the event loop may decode, in milliseconds. */
export const TURN_MS = 10

/** Work done in steps: `step` does a little and says whether the task is done. */
export interface Task {
  /** Runs one step; true when the task has finished (it is then dropped). */
  readonly step: () => boolean
  /** Called when a step throws (the task is dropped). */
  readonly fail: (error: unknown) => void
}

/** Runs tasks in steps, round-robin, at most {@link TURN_MS} per turn of the event loop. */
export class Scheduler {
  private tasks: Array<Task> = []
  private cursor = 0
  private scheduled = false
  private inTurn = false

  constructor(readonly turnMs: number = TURN_MS) {}

  /** Whether a step of this scheduler's tasks is running now (the caller is inside one). */
  get running(): boolean {
    return this.inTurn
  }

  /** Adds a task; its first step runs on a later turn. */
  add(task: Task): void {
    this.tasks.push(task)
    this.schedule()
  }

  /** Drops a task (an interrupted request): none of its steps runs after this. */
  remove(task: Task): void {
    const at = this.tasks.indexOf(task)
    if (at === -1) return
    this.tasks.splice(at, 1)
    if (at < this.cursor) this.cursor -= 1
  }

  private schedule(): void {
    if (this.scheduled) return
    this.scheduled = true
    setImmediate(this.turn)
  }

  private readonly turn = (): void => {
    this.scheduled = false
    const until = performance.now() + this.turnMs
    while (this.tasks.length > 0) {
      if (this.cursor >= this.tasks.length) this.cursor = 0
      const task = this.tasks[this.cursor]!
      let done: boolean
      try {
        this.inTurn = true
        done = task.step()
      } catch (error) {
        this.remove(task)
        task.fail(error)
        continue
      } finally {
        this.inTurn = false
      }
      if (done) this.remove(task)
      else this.cursor += 1
      if (performance.now() >= until) break
    }
    if (this.tasks.length > 0) this.schedule()
  }
}

/** Runs work done in steps (a generator that pauses between them) to its end at once: its result. */
export const runToEnd = <A>(steps: Generator<unknown, A>): A => {
  for (;;) {
    const next = steps.next()
    if (next.done === true) return next.value
  }
}

/** The scheduler of this process's decoding (every server in the process shares the CPU, so one). */
export const decoding = new Scheduler()
