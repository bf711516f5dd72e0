/**
 * An agent command run as a child process in a process group of its own: the scenario on stdin, the endpoint
 * in its environment, its stdout's last line and the tail of its stderr kept; on interruption the whole group
 * is sent SIGTERM, then SIGKILL after a grace period, and the interruption waits for the process to be gone.
 * After a normal exit the group is killed too, so nothing the agent left running in the background survives
 * it. The rollout's key is redacted from both outputs before their tails are cut (`secretTail.ts`).
 *
 * **Agents die with their parent.** A process that is killed outright (SIGKILL, the OOM killer, a machine's
 * runner gone mid-step) runs no finalizer: its agents' groups, each a session of its own, would live on. So
 * each group is also handed to a guard ({@link GUARD}): one small `sh` per process, in a session of its own,
 * that holds the read end of a pipe from this process and is told each group as it starts (`+<pgid>`) and ends
 * (`-<pgid>`). The kernel closes the pipe when this process dies, however it dies; the guard then SIGKILLs the
 * groups still running and exits. (A group started in the instant between its spawn and its line to the guard
 * is not covered.)
 */
import { type ChildProcess, spawn } from "node:child_process"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { SecretTail } from "./secretTail.js"

/** How the command ended. */
export interface Ended {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  /** The last non-empty line of its stdout (at most the last 64 KiB are kept), the key redacted. */
  readonly lastLine: string | undefined
  /** The tail of its stderr, the key redacted. */
  readonly stderr: string
}

/** What to run and how. */
export interface Spawn {
  /** A shell command line (run with `sh -c`), or a program and its arguments. */
  readonly command: string | ReadonlyArray<string>
  readonly env: NodeJS.ProcessEnv
  readonly cwd?: string | undefined
  readonly stdin: string
  readonly stderrTail: number
  /** The rollout's key: redacted from what is kept of stdout and stderr before either is cut. */
  readonly secret: string
  readonly killGrace: Duration.DurationInput
  /** Called with the pid once the process runs (tests watch it). */
  readonly onSpawn?: ((pid: number) => void) | undefined
}

const STDOUT_KEPT = 64 * 1024

const killGroup = (pid: number, signal: NodeJS.Signals) => {
  try {
    process.kill(-pid, signal)
  } catch {
    // The group is gone already.
  }
}

/**
 * The guard's script (see the module): the groups told (`+<pgid>`, `-<pgid>` lines on its stdin) in a list; at
 * the end of its stdin (this process exited or was killed), SIGKILL to each group still listed.
 */
export const GUARD = `trap '' HUP INT
g=" "
while IFS= read -r line; do
  id=\${line#?}
  case $line in
    +*) g="$g$id " ;;
    -*) case $g in *" $id "*) g="\${g%%" $id "*} \${g#*" $id "}" ;; esac ;;
  esac
done
for id in $g; do kill -KILL -"$id" 2>/dev/null; done`

/** The groups of the agents running, and this process's guard (started with the first, again if it died). */
const running = new Set<number>()
let guard: ChildProcess | undefined

const tellGuard = (line: string) => {
  if (guard === undefined || guard.exitCode !== null || guard.signalCode !== null) {
    if (line.startsWith("-")) return
    const started = spawn("/bin/sh", ["-c", GUARD], { detached: true, stdio: ["pipe", "ignore", "ignore"] })
    const gone = () => {
      if (guard === started) guard = undefined
    }
    started.once("error", gone)
    started.once("exit", gone)
    started.stdin?.on("error", gone)
    // Neither the guard nor its pipe keeps this process alive; the pipe closes when it exits.
    started.unref()
    ;(started.stdin as unknown as { unref?: () => void } | null)?.unref?.()
    guard = started
    // A guard started again (the last one died) is told every group still running; this one among them.
    for (const pgid of running) started.stdin?.write(`+${pgid}\n`)
    return
  }
  guard.stdin?.write(`${line}\n`)
}

/** A group started: the guard kills it if this process dies first. */
export const guarded = (pgid: number) => {
  running.add(pgid)
  tellGuard(`+${pgid}`)
}

/** A group ended (and was killed): the guard forgets it. */
export const unguarded = (pgid: number) => {
  if (running.delete(pgid)) tellGuard(`-${pgid}`)
}

/** The process id of this process's guard, if it runs (for tests). */
export const guardPid = (): number | undefined => guard?.pid

const lastLineOf = (text: string): string | undefined => {
  const lines = text.split("\n")
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i]!.trim()
    if (line !== "") return line
  }
  return undefined
}

/** Runs the command to its end; fails with the spawn error (no such program, no such directory). */
export const run = (options: Spawn): Effect.Effect<Ended, Error> =>
  Effect.async<Ended, Error>((resume) => {
    const [program, args, shell] =
      typeof options.command === "string"
        ? [options.command, [] as ReadonlyArray<string>, true]
        : [options.command[0] ?? "", options.command.slice(1), false]
    const child = spawn(program, args, {
      shell,
      detached: true,
      env: options.env,
      ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
      stdio: ["pipe", "pipe", "pipe"]
    })
    const stdout = new SecretTail(STDOUT_KEPT, options.secret)
    const stderr = new SecretTail(options.stderrTail, options.secret)
    let done = false
    let settled = false
    const settle = (effect: Effect.Effect<Ended, Error>) => {
      if (settled) return
      settled = true
      resume(effect)
    }
    child.stdout.setEncoding("utf8")
    child.stderr.setEncoding("utf8")
    child.stdout.on("data", (chunk: string) => stdout.push(chunk))
    child.stderr.on("data", (chunk: string) => stderr.push(chunk))
    // An agent that does not read its stdin (or exits early) must not fail the write.
    child.stdin.on("error", () => {})
    child.stdin.end(options.stdin)
    const closed = new Promise<void>((resolve) => {
      child.once("close", (code, signal) => {
        done = true
        if (child.pid !== undefined) {
          killGroup(child.pid, "SIGKILL")
          unguarded(child.pid)
        }
        settle(Effect.succeed({ code, signal, lastLine: lastLineOf(stdout.value()), stderr: stderr.value() }))
        resolve()
      })
    })
    child.once("error", (error) => {
      done = true
      settle(Effect.fail(error))
    })
    if (child.pid !== undefined) {
      guarded(child.pid)
      options.onSpawn?.(child.pid)
    }
    return Effect.suspend(() => {
      const pid = child.pid
      if (done || pid === undefined) return Effect.void
      killGroup(pid, "SIGTERM")
      // Interruptible, so that the grace period can cut the wait short (a canceler runs uninterruptibly).
      return Effect.promise(() => closed).pipe(
        Effect.interruptible,
        Effect.timeout(options.killGrace),
        Effect.catchAll(() =>
          Effect.sync(() => killGroup(pid, "SIGKILL")).pipe(Effect.zipRight(Effect.promise(() => closed)))
        )
      )
    })
  })
