/**
 * Starting a worker thread on a module of this package (the training thread, the decoding thread).
 *
 * @internal
 */
import { Worker, type WorkerOptions } from "node:worker_threads"

/**
 * The `execArgv` for a thread: `undefined` (the thread inherits the parent's options, V8's included, as Node does
 * by default) unless the parent ran with `--input-type`, which Node refuses for a module file's thread ("--input-type
 * can only be used with string input") and a program run as `node --input-type=module -e ...` has; then the parent's
 * options without it.
 */
export const threadExecArgv = (execArgv: ReadonlyArray<string> = process.execArgv): Array<string> | undefined => {
  const out: Array<string> = []
  for (let i = 0; i < execArgv.length; i++) {
    const arg = execArgv[i]!
    if (arg === "--input-type") i++
    else if (!arg.startsWith("--input-type=")) out.push(arg)
  }
  return out.length === execArgv.length ? undefined : out
}

/** An option's name as Node compares it: before any `=`, with `_` as `-` (`--expose_gc` is `--expose-gc`). */
const optionName = (arg: string): string => arg.split("=", 1)[0]!.replaceAll("_", "-")

/**
 * `execArgv` without the options a refusal (`ERR_WORKER_INVALID_EXEC_ARGV`, "... invalid execArgv flags: a, b")
 * names. Given explicitly, a thread's options may not hold V8's (`--max-old-space-size=...`, `--expose-gc`) or
 * those of the whole process (`--title`); the thread runs under V8's anyway, as they are the process's.
 */
export const withoutRefused = (execArgv: ReadonlyArray<string>, refusal: string): Array<string> => {
  const listed = refusal.slice(refusal.indexOf(": ") + 2).split(", ")
  const refused = new Set(listed.map(optionName))
  return execArgv.filter((arg) => !refused.has(optionName(arg)))
}

/**
 * A worker thread on the module at `url`: the compiled `.js` as it is; the `.ts` source (tests, tsx) through
 * tsx's loader, registered in the thread before the module is imported (a worker does not inherit its parent's
 * loaders). It starts under any options the parent ran with: a run as `node --max-old-space-size=8192 train.js`
 * had every training job fail with "Initiated Worker with invalid execArgv flags" (see {@link withoutRefused}).
 */
export const startModuleThread = (url: string, options: WorkerOptions = {}): Worker => {
  const self = new URL(url)
  const boot = `import("tsx/esm/api").then((tsx) => { tsx.register(); return import(${JSON.stringify(self.href)}) })`
  const start = (execArgv: Array<string> | undefined): Worker => {
    const threadOptions = execArgv === undefined ? options : { ...options, execArgv }
    return self.pathname.endsWith(".ts")
      ? new Worker(boot, { ...threadOptions, eval: true })
      : new Worker(self, threadOptions)
  }
  const execArgv = threadExecArgv()
  try {
    return start(execArgv)
  } catch (error) {
    const code = (error as { readonly code?: unknown }).code
    if (execArgv === undefined || code !== "ERR_WORKER_INVALID_EXEC_ARGV") throw error
    return start(withoutRefused(execArgv, (error as Error).message))
  }
}
