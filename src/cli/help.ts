/**
 * The command's `--help`, rendered here from each command's own table of options and arguments (see
 * {@link table}); @effect/cli stays the parser. What a page shows comes from the parsers themselves
 * (`Options.getUsage`, `Args.getUsage`): the flags, their values by pseudo-name (`--port <port>`), optional ones
 * in brackets. Descriptions are wrapped to the terminal (80 columns when stdout is not one, 100 at most), and
 * headings are bold only in a terminal without `NO_COLOR`: no escape codes reach a pipe.
 *
 * @since 0.1.0
 */
import * as Args from "@effect/cli/Args"
import * as Options from "@effect/cli/Options"
import type * as Usage from "@effect/cli/Usage"
import * as Option from "effect/Option"

/** What a command parses: an option (a flag) or a positional argument. */
export type Parser = Options.Options<unknown> | Args.Args<unknown>

/** One entry of a command's table: its parser and the sentence its help shows. */
export interface Described<P extends Parser> {
  readonly parser: P
  readonly description: string
}

/** Describes a parser (also for @effect/cli, whose completions show it): `Options.text("host").pipe(describe("..."))`. */
export const describe =
  (description: string) =>
  <P extends Parser>(parser: P): Described<P> => ({
    parser: (Options.isOptions(parser)
      ? Options.withDescription(parser, description)
      : Args.withDescription(parser as Args.Args<unknown>, description)) as P,
    description
  })

/** A command's help page: its name under `effect-rl`, what it does, and its entries in order. */
export interface CommandHelp {
  readonly name: string
  readonly description: string
  readonly entries: ReadonlyArray<Described<Parser>>
}

/**
 * A command's table: the config @effect/cli's `Command.make` takes (each entry's parser, under its key) and the
 * help rendered from the same entries, so that the help cannot drift from what is parsed.
 */
export const table = <const T extends Readonly<Record<string, Described<Parser>>>>(
  name: string,
  description: string,
  entries: T
): { readonly config: { readonly [K in keyof T]: T[K]["parser"] }; readonly help: CommandHelp } => ({
  config: Object.fromEntries(Object.entries(entries).map(([key, entry]) => [key, entry.parser])) as {
    readonly [K in keyof T]: T[K]["parser"]
  },
  help: { name, description, entries: Object.values(entries) }
})

/** A flag of a command as the invocation check sees it: its names and whether it takes a value. */
export interface Flag {
  readonly names: ReadonlyArray<string>
  readonly valued: boolean
}

const named = (usage: Usage.Usage): ReadonlyArray<Usage.Named> => {
  switch (usage._tag) {
    case "Named":
      return [usage]
    case "Optional":
    case "Repeated":
      return named(usage.usage)
    case "Alternation":
    case "Concat":
      return [...named(usage.left), ...named(usage.right)]
    default:
      return []
  }
}

/** The flags a command's help lists (its options, not its arguments). */
export const flagsOf = (help: CommandHelp): ReadonlyArray<Flag> =>
  help.entries.flatMap((entry) =>
    Options.isOptions(entry.parser)
      ? named(Options.getUsage(entry.parser)).map((usage) => ({
          names: usage.names,
          valued: Option.isSome(usage.acceptedValues)
        }))
      : []
  )

const value = (accepted: string) => (accepted.includes("|") ? `{${accepted.replace(/ \| /g, "|")}}` : `<${accepted}>`)

/**
 * A parser's usage as the help shows it: `--port <port>`, `[--steps <n>]` when it may be left out, `<example>`,
 * `[--allow-dir <dir>]...` for a repeatable flag (every one here may also be left out: `Options.repeated` takes
 * zero or more).
 */
export const usageOf = (usage: Usage.Usage): string => {
  switch (usage._tag) {
    case "Empty":
      return ""
    case "Mixed":
      return "<command>"
    case "Named": {
      // A flag is named and shown with its value (`--port <port>`); an argument by its name alone (`<example>`).
      if (!(usage.names[0]?.startsWith("-") ?? false)) {
        return usage.names.map((name) => (name.startsWith("<") ? name : `<${name}>`)).join(", ")
      }
      const names = usage.names.join(", ")
      return Option.isNone(usage.acceptedValues) ? names : `${names} ${value(usage.acceptedValues.value)}`
    }
    case "Optional": {
      const inner = usageOf(usage.usage)
      return inner.startsWith("[") ? inner : `[${inner}]`
    }
    case "Repeated": {
      const inner = usageOf(usage.usage)
      return `${inner.startsWith("[") ? inner : `[${inner}]`}...`
    }
    case "Alternation":
      return `(${usageOf(usage.left)} | ${usageOf(usage.right)})`
    case "Concat":
      return [usageOf(usage.left), usageOf(usage.right)].filter((part) => part !== "").join(" ")
  }
}

const entryUsage = (entry: Described<Parser>): string =>
  usageOf(
    Options.isOptions(entry.parser) ? Options.getUsage(entry.parser) : Args.getUsage(entry.parser as Args.Args<unknown>)
  )

/** Where a page is printed: its width, and whether it may carry ANSI colour. */
export interface Terminal {
  readonly width: number
  readonly colour: boolean
}

/**
 * The terminal stdout is: its width (80 when it is not a terminal or does not say, 100 at most, 40 at least)
 * and whether to colour (a terminal that has colours, and `NO_COLOR` unset or empty: https://no-color.org).
 */
export const terminalOf = (
  stdout: { readonly isTTY?: boolean | undefined; readonly columns?: number | undefined; hasColors?(): boolean },
  env: Readonly<Record<string, string | undefined>>
): Terminal => {
  const tty = stdout.isTTY === true
  const columns = tty && stdout.columns !== undefined && stdout.columns > 0 ? stdout.columns : 80
  const noColor = env.NO_COLOR !== undefined && env.NO_COLOR !== ""
  return {
    width: Math.max(40, Math.min(100, columns)),
    colour: tty && !noColor && (stdout.hasColors?.() ?? true)
  }
}

/** Words of `text` in lines of at most `width` columns (a longer word stands alone on its line). */
export const wrap = (text: string, width: number): ReadonlyArray<string> => {
  const lines: Array<string> = []
  let line = ""
  for (const word of text.split(/\s+/).filter((w) => w !== "")) {
    if (line === "") line = word
    else if (line.length + 1 + word.length <= width) line += ` ${word}`
    else {
      lines.push(line)
      line = word
    }
  }
  if (line !== "") lines.push(line)
  return lines
}

/** Terms and their descriptions in two columns, descriptions wrapped; a long term puts its description below. */
const columns = (rows: ReadonlyArray<readonly [string, string]>, width: number, strong: (s: string) => string) => {
  const indent = 2
  const termWidth = Math.min(Math.max(...rows.map(([term]) => term.length)), 28)
  const at = indent + termWidth + 2
  return rows.flatMap(([term, description]) => {
    const lines = wrap(description, Math.max(20, width - at))
    const head = " ".repeat(indent) + strong(term)
    if (term.length > termWidth) return [head, ...lines.map((line) => " ".repeat(at) + line)]
    const [first = "", ...rest] = lines
    return [
      `${head}${" ".repeat(at - indent - term.length)}${first}`.trimEnd(),
      ...rest.map((line) => " ".repeat(at) + line)
    ]
  })
}

/** `effect-rl <command> <usages>`, wrapped at whole usages, later lines indented under the first usage. */
const usageLines = (prefix: string, usages: ReadonlyArray<string>, width: number) => {
  const lines: Array<string> = []
  const indent = " ".repeat(Math.min(prefix.length + 3, 24))
  let line = `  ${prefix}`
  usages.forEach((usage, i) => {
    if (i > 0 && line.length + 1 + usage.length > width) {
      lines.push(line)
      line = `${indent}${usage}`
    } else line = `${line} ${usage}`
  })
  lines.push(line)
  return lines
}

const styling = (terminal: Terminal) => (text: string) => (terminal.colour ? `\u001b[1m${text}\u001b[0m` : text)

/** The options every command takes (@effect/cli's built-ins the help names, and the command's own `--verbose`). */
const COMMON: ReadonlyArray<readonly [string, string]> = [
  ["-h, --help", "show this help"],
  ["--verbose", "on a failure, the whole cause too"]
]

/** A command's help page: what it does, its usage, its arguments and its options. */
export const commandPage = (help: CommandHelp, terminal: Terminal): string => {
  const strong = styling(terminal)
  const options = help.entries.filter((entry) => Options.isOptions(entry.parser))
  const args = help.entries.filter((entry) => !Options.isOptions(entry.parser))
  const usages = [...args, ...options].map(entryUsage)
  // Listed without their brackets; one that must be given says so.
  const rows = (entries: ReadonlyArray<Described<Parser>>) =>
    entries.map((entry) => {
      const usage = entryUsage(entry)
      const optional = /^\[.*\](\.\.\.)?$/.test(usage)
      return [
        optional ? usage.replace(/^\[(.*)\](\.\.\.)?$/, "$1$2") : usage,
        optional ? entry.description : `${entry.description} (required)`
      ] as const
    })
  return [
    ...wrap(`effect-rl ${help.name}: ${help.description}`, terminal.width),
    "",
    strong("USAGE"),
    ...usageLines(`effect-rl ${help.name}`, usages, terminal.width),
    ...(args.length === 0 ? [] : ["", strong("ARGUMENTS"), ...columns(rows(args), terminal.width, strong)]),
    "",
    strong("OPTIONS"),
    ...columns([...rows(options), ...COMMON], terminal.width, strong)
  ].join("\n")
}

/** The command's own page: its version, its commands with what each does, and the common options. */
export const rootPage = (version: string, commands: ReadonlyArray<CommandHelp>, terminal: Terminal): string => {
  const strong = styling(terminal)
  return [
    ...wrap(
      `effect-rl ${version}: reinforcement-learning training for LLM agents, on the hosted service or an embedded local backend`,
      terminal.width
    ),
    "",
    strong("USAGE"),
    "  effect-rl <command> [options]",
    "  effect-rl <command> --help",
    "  effect-rl help [<command>]",
    "",
    strong("COMMANDS"),
    ...columns(
      commands.map((command) => [command.name, command.description] as const),
      terminal.width,
      strong
    ),
    "",
    strong("OPTIONS"),
    ...columns(
      [
        ...COMMON,
        ["--version", "print the version"],
        ["--completions {sh|bash|fish|zsh}", "print a completion script for the shell"]
      ],
      terminal.width,
      strong
    )
  ].join("\n")
}
