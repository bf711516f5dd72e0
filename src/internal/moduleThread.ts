/**
 * Starting a worker thread on a module of this package (the training thread, the decoding thread).
 *
 * @internal
 */
import { Worker, type WorkerOptions } from "node:worker_threads"

/**
 * The parent's `execArgv` for a thread, without `--input-type`: Node refuses to start a module file under it
 * ("--input-type can only be used with string input"), and a program run as `node --input-type=module -e ...`
 * has it.
 */
export const threadExecArgv = (execArgv: ReadonlyArray<string> = process.execArgv): Array<string> => {
  const out: Array<string> = []
  for (let i = 0; i < execArgv.length; i++) {
    const arg = execArgv[i]!
    if (arg === "--input-type") i++
    else if (!arg.startsWith("--input-type=")) out.push(arg)
  }
  return out
}

/**
 * A worker thread on the module at `url`: the compiled `.js` as it is; the `.ts` source (tests, tsx) through
 * tsx's loader, registered in the thread before the module is imported (a worker does not inherit its parent's
 * loaders).
 */
export const startModuleThread = (url: string, options: WorkerOptions = {}): Worker => {
  const self = new URL(url)
  const execArgv = threadExecArgv()
  if (!self.pathname.endsWith(".ts")) return new Worker(self, { ...options, execArgv })
  const boot = `import("tsx/esm/api").then((tsx) => { tsx.register(); return import(${JSON.stringify(self.href)}) })`
  return new Worker(boot, { ...options, execArgv, eval: true })
}
