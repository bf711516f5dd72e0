/**
 * Small timing helpers shared by the benchmarks: warm-up, repeated runs timed with `performance.now()`,
 * median, and a plain-text table.
 */
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"

/** The timings of one measured path. */
export interface Measurement {
  readonly name: string
  readonly warmup: number
  readonly samples: ReadonlyArray<number>
  readonly median: number
  readonly min: number
}

// A full GC before each run, so that no run pays for the garbage of the one before: `gc` is exposed here, so
// that `npx tsx bench/encode.ts` needs no node flag.
setFlagsFromString("--expose-gc")
const collect = runInNewContext("gc") as () => void

export const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/**
 * Run `fn` `warmup` times untimed, then `iterations` times timed (`fn` is told which). `check` sees each result (to keep it alive
 * and to assert on it) outside the timed region.
 */
export const measure = <A>(
  name: string,
  fn: (timed: boolean) => A,
  options: { readonly warmup: number; readonly iterations: number; readonly check?: ((result: A) => void) | undefined }
): Measurement => {
  for (let i = 0; i < options.warmup; i++) {
    collect()
    options.check?.(fn(false))
  }
  const samples: Array<number> = []
  for (let i = 0; i < options.iterations; i++) {
    collect()
    const start = performance.now()
    const result = fn(true)
    samples.push(performance.now() - start)
    options.check?.(result)
  }
  return { name, warmup: options.warmup, samples, median: median(samples), min: Math.min(...samples) }
}

/** One path of {@link interleave}. */
export interface Path {
  readonly name: string
  readonly run: (timed: boolean) => unknown
  readonly check?: ((result: unknown) => void) | undefined
  /** Fewer warm-up rounds than the others (it joins the last ones). */
  readonly warmup?: number | undefined
  /** Fewer timed rounds than the others (it is timed in the first ones). */
  readonly iterations?: number | undefined
}

/** The timings of one path of {@link interleave}, with its ratios to the first path in the same rounds. */
export interface InterleavedMeasurement extends Measurement {
  /** Median over the rounds of (this path's time / the first path's time in that round). */
  readonly ratio: number
  /** This path's fastest run over the first path's fastest run: the least disturbed by other load. */
  readonly minRatio: number
}

/**
 * Time several paths in rounds, each round running every path once (a GC before each run when exposed), so that
 * a change of machine load over the run hits every path alike; the ratio to the first path is taken round by
 * round. `warmup` untimed rounds come first.
 */
export const interleave = (
  paths: ReadonlyArray<Path>,
  options: { readonly warmup: number; readonly iterations: number }
): Array<InterleavedMeasurement> => {
  const samples = paths.map((): Array<number> => [])
  for (let round = 0; round < options.warmup; round++) {
    paths.forEach((path) => {
      if (round < options.warmup - (path.warmup ?? options.warmup)) return
      collect()
      path.check?.(path.run(false))
    })
  }
  for (let round = 0; round < options.iterations; round++) {
    paths.forEach((path, i) => {
      if (round >= (path.iterations ?? options.iterations)) return
      collect()
      const start = performance.now()
      const result = path.run(true)
      samples[i]!.push(performance.now() - start)
      path.check?.(result)
    })
  }
  const first = samples[0]!
  return paths.map((path, i) => {
    const own = samples[i]!
    return {
      name: path.name,
      warmup: Math.min(path.warmup ?? options.warmup, options.warmup),
      samples: own,
      median: median(own),
      min: Math.min(...own),
      ratio: median(own.map((ms, round) => ms / first[round]!)),
      minRatio: Math.min(...own) / Math.min(...first)
    }
  })
}

/** Print rows as an aligned table: the first row is the header. Numeric-looking cells are right-aligned. */
export const printTable = (rows: ReadonlyArray<ReadonlyArray<string>>): void => {
  const widths = rows[0]!.map((_, col) => Math.max(...rows.map((row) => (row[col] ?? "").length)))
  const numeric = /^[-+]?[\d.,]+( ?[a-zA-Z/%]+)?$|^x[\d.]+$|^[\d.]+x$/
  const line = (row: ReadonlyArray<string>) =>
    row
      .map((cell, col) => (numeric.test(cell) && col > 0 ? cell.padStart(widths[col]!) : cell.padEnd(widths[col]!)))
      .join("  ")
      .trimEnd()
  console.log(line(rows[0]!))
  console.log(widths.map((w) => "-".repeat(w)).join("  "))
  for (const row of rows.slice(1)) console.log(line(row))
}

export const fmt = (value: number, digits = 1): string => value.toFixed(digits)

/** Parse `--name=value` integer flags. */
export const intFlag = (name: string, fallback: number): number => {
  const prefix = `--${name}=`
  const arg = process.argv.find((a) => a.startsWith(prefix))
  if (arg === undefined) return fallback
  const value = Number(arg.slice(prefix.length))
  if (!Number.isInteger(value) || value < 0) throw new Error(`--${name} must be a non-negative integer`)
  return value
}
