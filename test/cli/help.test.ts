/**
 * The command's help and invocation check as functions (the processes: `test/examples/cli-usage.slow.test.ts`):
 * where a page goes (width, colour), how it wraps and shows each kind of flag, and how the command line is read
 * before @effect/cli parses it.
 */
import * as Args from "@effect/cli/Args"
import * as Options from "@effect/cli/Options"
import { describe, expect, it } from "vitest"
import { commandPage, describe as described, table, terminalOf, wrap } from "../../src/cli/help.js"
import { nearest, read } from "../../src/cli/invocation.js"

const demo = table("demo", "a command to show every kind of entry, with a description long enough to be wrapped", {
  name: Args.text({ name: "name" }).pipe(Args.optional, described("who to greet")),
  port: Options.text("port").pipe(Options.withPseudoName("port"), Options.withDefault("0"), described("the port")),
  url: Options.text("url").pipe(Options.withPseudoName("url"), described("where it goes")),
  dirs: Options.directory("dir").pipe(Options.withPseudoName("dir"), Options.repeated, described("a directory")),
  loud: Options.boolean("loud").pipe(described("shout"))
})

describe("terminalOf", () => {
  it("a pipe: 80 columns, no colour; a terminal: its width (40 to 100), colour unless NO_COLOR is set", () => {
    expect(terminalOf({ isTTY: false, columns: 200 }, {})).toEqual({ width: 80, colour: false })
    expect(terminalOf({}, {})).toEqual({ width: 80, colour: false })
    expect(terminalOf({ isTTY: true, columns: 60, hasColors: () => true }, {})).toEqual({ width: 60, colour: true })
    expect(terminalOf({ isTTY: true, columns: 300, hasColors: () => true }, {}).width).toBe(100)
    expect(terminalOf({ isTTY: true, columns: 0 }, {}).width).toBe(80)
    expect(terminalOf({ isTTY: true, columns: 60, hasColors: () => true }, { NO_COLOR: "1" }).colour).toBe(false)
    // https://no-color.org: an empty NO_COLOR is as if unset.
    expect(terminalOf({ isTTY: true, columns: 60, hasColors: () => true }, { NO_COLOR: "" }).colour).toBe(true)
    expect(terminalOf({ isTTY: true, columns: 60, hasColors: () => false }, {}).colour).toBe(false)
  })
})

describe("commandPage", () => {
  it("usage from the parsers: <pseudo> values, brackets for what may be left out, wrapped to the width", () => {
    const page = commandPage(demo.help, { width: 50, colour: false })
    const lines = page.split("\n")
    expect(lines.filter((line) => line.length > 50)).toEqual([])
    const usage = lines.slice(lines.indexOf("USAGE") + 1, lines.indexOf("", lines.indexOf("USAGE")))
    expect(usage[0]!.startsWith("  effect-rl demo [<name>]")).toBe(true)
    expect(usage.join(" ").replace(/\s+/g, " ")).toContain("[--port <port>] --url <url> [--dir <dir>]... [--loud]")
    expect(page).toMatch(/\n {2}--url <url> +where it goes \(required\)\n/)
    expect(page).toMatch(/\n {2}--dir <dir>\.\.\. +a directory\n/)
    expect(page).not.toContain("\u001b")
    expect(commandPage(demo.help, { width: 80, colour: true })).toContain("\u001b[1mOPTIONS\u001b[0m")
  })

  it("wrap: whole words within the width; a longer word alone on its line", () => {
    expect(wrap("one two three four", 9)).toEqual(["one two", "three", "four"])
    expect(wrap("a postgres://user:password@host:port/db b", 10)).toEqual([
      "a",
      "postgres://user:password@host:port/db",
      "b"
    ])
  })
})

describe("read", () => {
  it("the command, --help and --verbose; values after their flag, inline or negative, left to the parser", () => {
    const ok = read(["--verbose", "demo", "--port=5", "--url", "-5", "--loud", "x", "--help"], [demo.help])
    expect(ok).toMatchObject({ verbose: true, help: true, refusal: undefined })
    expect(ok.command?.name).toBe("demo")
    expect(ok.args).toEqual(["demo", "--port=5", "--url", "-5", "--loud", "x", "--help"])
    // After `--`, everything is an argument.
    expect(read(["demo", "--", "--nope"], [demo.help]).refusal).toBeUndefined()
  })

  it("refuses an unknown command or option (naming the nearest) and a flag without its value", () => {
    expect(read(["dmeo"], [demo.help]).refusal).toBe("unknown command 'dmeo'; did you mean demo? the commands: demo")
    // `help` as the first word is --help: the whole page, or one command's.
    expect(read(["help"], [demo.help])).toMatchObject({ help: true, command: undefined, refusal: undefined })
    expect(read(["help", "demo", "--verbose"], [demo.help])).toMatchObject({
      help: true,
      verbose: true,
      command: { name: "demo" },
      refusal: undefined,
      args: ["demo", "--help"]
    })
    expect(read(["help", "dmeo"], [demo.help]).refusal).toBe(
      "unknown command 'dmeo'; did you mean demo? the commands: demo"
    )
    expect(read(["help", "demo", "x"], [demo.help]).refusal).toBe("`effect-rl help` takes one command, got 'demo x'")
    expect(read(["demo", "--urll", "x"], [demo.help]).refusal).toBe("unknown option '--urll'; did you mean --url?")
    expect(read(["demo", "--zz"], [demo.help]).refusal).toBe(
      "unknown option '--zz'; `effect-rl demo --help` lists the options"
    )
    expect(read(["demo", "--url"], [demo.help]).refusal).toBe("--url needs a value")
    expect(read(["demo", "--url", "--loud"], [demo.help]).refusal).toBe("--url needs a value")
    // A flag of one command is not one of the command line before the command is named.
    expect(read(["--url", "x", "demo"], [demo.help]).refusal).toMatch(/^unknown option '--url'/)
  })

  it("nearest: a slip of a letter or two, not a different word", () => {
    expect(nearest("--stepz", ["--steps", "--model"])).toBe("--steps")
    expect(nearest("trian", ["train", "serve"])).toBe("train")
    expect(nearest("--x", ["-h", "--help"])).toBeUndefined()
    expect(nearest("fly", ["health", "models", "serve"])).toBeUndefined()
  })
})
