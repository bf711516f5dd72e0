/**
 * The command line as read before @effect/cli parses it: `--verbose` taken out, the command it names, whether
 * `--help` is asked for, and the refusals worded better here than by the parser: an unknown command or option
 * (with the nearest name), and a flag given no value. Everything else (values, required options, arguments) is
 * left to @effect/cli; the flags each command knows come from its help table (`help.ts`), so this reads the same
 * commands the parser does.
 *
 * @since 0.1.0
 */
import { type CommandHelp, flagsOf } from "./help.js"

/** What the command line asks for, before it is parsed. */
export interface Invocation {
  /** The arguments for @effect/cli (without `--verbose`). */
  readonly args: ReadonlyArray<string>
  /** `--verbose`: a failure's whole cause after its sentence. */
  readonly verbose: boolean
  /** The command named, when it is one of `commands`. */
  readonly command: CommandHelp | undefined
  /** `-h` or `--help` given. */
  readonly help: boolean
  /** Why the command line is refused, in a sentence, before the parser sees it. */
  readonly refusal: string | undefined
}

/** Flags every command takes: @effect/cli's built-ins (those followed by a value: `true`) and ours. */
const COMMON: ReadonlyMap<string, boolean> = new Map([
  ["-h", false],
  ["--help", false],
  ["--version", false],
  ["--wizard", false],
  ["--verbose", false],
  ["--completions", true],
  ["--log-level", true]
])

/** The edit distance of two short words: insertions, deletions, substitutions and swaps of neighbours. */
const distance = (a: string, b: string): number => {
  const d = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0))
  )
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1)
      }
    }
  }
  return d[a.length]![b.length]!
}

/** The candidate nearest to `word`, if it is near enough to be what was meant. */
export const nearest = (word: string, candidates: Iterable<string>): string | undefined => {
  let best: string | undefined
  let bestDistance = Number.POSITIVE_INFINITY
  for (const candidate of candidates) {
    const d = distance(word, candidate)
    if (d < bestDistance) {
      best = candidate
      bestDistance = d
    }
  }
  // Near enough: a slip of a letter or two, and less than half the candidate changed.
  return best !== undefined && bestDistance <= 2 && bestDistance < best.length / 2 ? best : undefined
}

/** An option-like word: `-x` or `--xyz`, not a negative number (a value such as `-5` is the parser's to judge). */
const isFlag = (arg: string) => /^--?[^\d-]/.test(arg)

/**
 * Reads `args` (the words after the script) against the `commands` of `effect-rl`. `help` as the first word is
 * `--help`: `effect-rl help` the whole page, `effect-rl help <command>` that command's.
 */
export const read = (args: ReadonlyArray<string>, commands: ReadonlyArray<CommandHelp>): Invocation => {
  const kept = args.filter((arg) => arg !== "--verbose")
  const verbose = kept.length !== args.length
  if (kept[0] === "help" && !commands.some((candidate) => candidate.name === "help")) {
    const [name, ...more] = kept.slice(1)
    if (name === undefined) return { args: ["--help"], verbose, command: undefined, help: true, refusal: undefined }
    const asked = read([name, "--help"], commands)
    const extra = more.length > 0 ? `\`effect-rl help\` takes one command, got '${kept.slice(1).join(" ")}'` : undefined
    return { ...asked, verbose, refusal: asked.refusal ?? extra }
  }
  let command: CommandHelp | undefined
  let help = false
  let refusal: string | undefined
  let known: ReadonlyMap<string, boolean> = COMMON
  const refuse = (sentence: string) => {
    refusal ??= sentence
  }
  for (let i = 0; i < kept.length; i++) {
    const arg = kept[i]!
    if (arg === "--") break
    if (isFlag(arg)) {
      const [name = arg, inline] = arg.split(/=(.*)/s)
      if (name === "-h" || name === "--help") help = true
      const valued = known.get(name)
      if (valued === undefined) {
        const suggestion = nearest(name, known.keys())
        const where = command === undefined ? "effect-rl --help" : `effect-rl ${command.name} --help`
        refuse(
          `unknown option '${name}'; ${suggestion === undefined ? `\`${where}\` lists the options` : `did you mean ${suggestion}?`}`
        )
      } else if (valued && inline === undefined) {
        const next = kept[i + 1]
        if (next === undefined || next.startsWith("--")) refuse(`${name} needs a value`)
        else i++
      }
    } else if (command === undefined) {
      command = commands.find((candidate) => candidate.name === arg)
      if (command === undefined) {
        const names = commands.map((candidate) => candidate.name)
        const suggestion = nearest(arg, names)
        return {
          args: kept,
          verbose,
          command,
          help,
          refusal:
            refusal ??
            `unknown command '${arg}'; ${suggestion === undefined ? "" : `did you mean ${suggestion}? `}the commands: ${names.join(", ")}`
        }
      }
      known = new Map([
        ...COMMON,
        ...flagsOf(command).flatMap((flag) => flag.names.map((name) => [name, flag.valued] as const))
      ])
    }
  }
  return { args: kept, verbose, command, help, refusal }
}
