/**
 * The command's invocation as a user meets it (issue 25, part 5): every refused invocation is one line
 * `effect-rl <command>: ...` on stderr with exit code 2, @effect/cli's own refusals included; `--help` piped
 * has no escape codes, typed values (`--port <port>`), optional flags in brackets, lines within 80 columns and
 * usage lines beginning `effect-rl`; in a terminal it is bold and fits the terminal's width, unless `NO_COLOR`
 * is set; an empty `WANDB_API_KEY=` counts as unset (the embedded backend, not the hosted service). Each case is
 * a real `effect-rl` process (`test/support/cli.ts`); the terminal ones run under util-linux `script`, which
 * gives the process a pseudo-terminal.
 */
import { spawn, spawnSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { type CliOutcome, cliShell, runCli } from "../support/cli.js"

const root = join(import.meta.dirname, "..", "..")
const dirs: Array<string> = []
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "effect-rl-cli-usage-"))
  dirs.push(dir)
  return dir
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

type Outcome = CliOutcome

/** The environment without the service's settings or colour preferences, and a HOME of its own. */
const baseEnv = () => {
  const {
    WANDB_API_KEY: _key,
    EFFECT_RL_TRAINING_URL: _training,
    EFFECT_RL_INFERENCE_URL: _inference,
    NO_COLOR: _noColor,
    FORCE_COLOR: _forceColor,
    ...inherited
  } = process.env
  return { ...inherited, HOME: tempDir() }
}

/** Runs `effect-rl <args>` with `env`, stdout and stderr piped. */
const run = (args: ReadonlyArray<string>, env: Record<string, string> = {}): Promise<Outcome> =>
  runCli(args, { ...baseEnv(), ...env })

const ESCAPE = "\u001b"

describe("effect-rl: refused invocations", () => {
  it("one line 'effect-rl <command>: ...' on stderr, exit code 2, nothing on stdout", async () => {
    const scenarios = join(tempDir(), "s.jsonl")
    writeFileSync(scenarios, '{"q": 1}\n')
    const cases: ReadonlyArray<readonly [ReadonlyArray<string>, string]> = [
      // An unknown flag, with the one meant (@effect/cli took `--stepz` for the example and refused the '3').
      [["train", "--stepz", "3"], "effect-rl train: unknown option '--stepz'; did you mean --steps?"],
      [["serve", "--verbos"], "effect-rl serve: unknown option '--verbos'; did you mean --verbose?"],
      [["runner", "--zzz"], "effect-rl runner: unknown option '--zzz'; `effect-rl runner --help` lists the options"],
      // A flag without its value, last or before another flag.
      [["serve", "--port"], "effect-rl serve: --port needs a value"],
      [["train", "minimal", "--steps", "--model", "m"], "effect-rl train: --steps needs a value"],
      // A required option or argument missing (@effect/cli's "Expected to find option: '--cluster'").
      [["runner"], "effect-rl runner: --cluster is required"],
      [["train-agent", "python3 agent.py"], "effect-rl train-agent: --scenarios is required"],
      [["train-agent", "--scenarios", scenarios], "effect-rl train-agent: <command> is required"],
      // Other refusals of the parser, in the same form.
      [["health", "extra"], "effect-rl health: unexpected argument 'extra'"],
      [["serve", "--data-dir", "package.json"], "effect-rl serve: 'package.json' is not a directory"],
      [["runner", "--cluster", "sqlite:x.db", "--agents", "nope.js"], "effect-rl runner: 'nope.js' does not exist"],
      [["serve", "--port", "http"], "effect-rl serve: --port must be a port from 0 to 65535, got 'http'"],
      // An external agent's flags without the agent.
      [
        ["runner", "--cluster", "sqlite:x.db", "--timeout", "5"],
        "effect-rl runner: --reward and --timeout go with --agent-command (the agent they belong to)"
      ],
      // A command that is not one.
      [
        ["trian"],
        "effect-rl: unknown command 'trian'; did you mean train? the commands: health, models, base-models, train, train-agent, train-mcp, serve, check, backup, runner"
      ]
    ]
    const outcomes = await Promise.all(cases.map(([args]) => run(args)))
    for (const [i, outcome] of outcomes.entries()) {
      const [args, said] = cases[i]!
      expect({ args, code: outcome.code, stderr: outcome.stderr, stdout: outcome.stdout }).toEqual({
        args,
        code: 2,
        stderr: `${said}\n`,
        stdout: ""
      })
    }
  }, 120_000)
})

/** The commands, each with flags its help must show typed, and how. */
const PAGES: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
  ["health", []],
  ["models", ["[--project <team/project>]"]],
  ["base-models", []],
  ["train", ["[<example>]", "[--steps <n>]", "[--data-dir <dir>]", "[--trace <entity/project>]", "[--cluster <url>]"]],
  [
    "train-agent",
    [
      "<command>",
      "--scenarios <file>",
      "[--group-size <n>]",
      "[--groups-per-step <n>]",
      "[--epochs <n>]",
      "[--reward <module>]",
      "[--timeout <seconds>]",
      "[--cluster <url>]"
    ]
  ],
  [
    "serve",
    [
      "[--host <host>]",
      "[--port <port>]",
      "[--data-dir <dir>]",
      "[--api-key <key>]",
      "[--max-body-size <bytes>]",
      "[--allow-dir <dir>]...",
      "[--allow-http]"
    ]
  ],
  [
    "runner",
    [
      "--cluster <url>",
      "[--agents <file>]",
      "[--port <port>]",
      "[--capacity <n>]",
      "[--agent-command <command>]",
      "[--reward <module>]",
      "[--timeout <seconds>]"
    ]
  ],
  ["check", ["[--data-dir <dir>]"]],
  ["backup", ["<file>", "[--data-dir <dir>]"]]
]

/** The usage lines of a page: from `USAGE` to the blank line, joined. */
const usageOf = (page: string) => {
  const lines = page.split(/\r?\n/)
  const start = lines.indexOf("USAGE")
  const end = lines.indexOf("", start)
  return lines
    .slice(start + 1, end)
    .map((line) => line.trim())
    .join(" ")
}

describe("effect-rl --help", () => {
  it("piped: no escape codes, lines within 80 columns, typed values, optional flags in brackets, usage beginning effect-rl", async () => {
    const [top, ...outcomes] = await Promise.all([run(["--help"]), ...PAGES.map(([name]) => run([name, "--help"]))])
    for (const [i, outcome] of [top!, ...outcomes].entries()) {
      expect(outcome.code, outcome.stderr).toBe(0)
      expect(outcome.stderr).toBe("")
      expect(outcome.stdout).not.toContain(ESCAPE)
      const long = outcome.stdout.split("\n").filter((line) => line.length > 80)
      expect(long, `page ${i}`).toEqual([])
      // @effect/cli's own help said "text" / "A user-defined piece of text." of every option.
      expect(outcome.stdout).not.toMatch(/A user-defined piece of text|\btext\]|--\w[\w-]* text\b/)
    }
    expect(top!.stdout).toContain("COMMANDS")
    for (const [name] of PAGES) expect(top!.stdout).toMatch(new RegExp(`\\n  ${name} +\\S`))
    for (const [i, [name, shown]] of PAGES.entries()) {
      const usage = usageOf(outcomes[i]!.stdout)
      expect(usage.startsWith(`effect-rl ${name}`), usage).toBe(true)
      for (const flag of shown) expect(usage, name).toContain(flag)
    }
    // A required option is listed without brackets and says so.
    expect(outcomes[6]!.stdout).toMatch(/\n {2}--cluster <url> +the cluster's storage.*\(required\)/s)
    expect(usageOf(outcomes[6]!.stdout)).not.toContain("[--cluster")
    // `train --help` on a command line with a mistake in it is still the help.
    const helped = await run(["train", "--stepz", "--help"])
    expect(helped.code).toBe(0)
    expect(usageOf(helped.stdout).startsWith("effect-rl train")).toBe(true)
  }, 120_000)

  const hasScript = process.platform === "linux" && spawnSync("script", ["--version"]).status === 0

  /** `effect-rl serve --help` in a pseudo-terminal `columns` wide (util-linux `script`), with `env`. */
  const inTerminal = (columns: number, env: Record<string, string>) =>
    new Promise<Outcome>((resolve) => {
      const command = `stty cols ${columns}; exec ${cliShell("serve", "--help")}`
      // A person's terminal: TERM says it has colours, and no CI variable (with CI set, Node's hasColors() says 2).
      const person: Record<string, string | undefined> = { ...baseEnv() }
      delete person.CI
      const child = spawn("script", ["-qec", command, "/dev/null"], {
        cwd: root,
        env: { ...person, TERM: "xterm-256color", ...env },
        stdio: ["ignore", "pipe", "pipe"]
      })
      let stdout = ""
      child.stdout.on("data", (chunk) => {
        stdout += chunk
      })
      child.once("exit", (code) => resolve({ code, stdout, stderr: "" }))
    })

  it.skipIf(!hasScript)(
    "in a terminal: bold headings, wrapped to its width; with NO_COLOR, no escape codes",
    async () => {
      const [coloured, plain] = await Promise.all([inTerminal(60, {}), inTerminal(60, { NO_COLOR: "1" })])
      expect(coloured.code).toBe(0)
      expect(plain.code).toBe(0)
      expect(coloured.stdout).toContain(`${ESCAPE}[1mUSAGE${ESCAPE}[0m`)
      expect(plain.stdout).toContain("USAGE")
      expect(plain.stdout).not.toContain(ESCAPE)
      // Wrapped to the terminal's 60 columns, not 80.
      const lines = plain.stdout.split(/\r?\n/)
      expect(lines.filter((line) => line.length > 60)).toEqual([])
      expect(lines.some((line) => line.length > 50)).toBe(true)
    },
    60_000
  )
})

describe("an empty setting counts as unset", () => {
  it("health says no key is set; train (empty key, URL and base model) runs on the embedded backend to its summary", async () => {
    const [health, train] = await Promise.all([
      run(["health"], { WANDB_API_KEY: "" }),
      run(["train", "minimal", "--steps", "1"], {
        WANDB_API_KEY: "",
        EFFECT_RL_TRAINING_URL: " ",
        EFFECT_RL_BASE_MODEL: ""
      })
    ])
    expect(health.code).toBe(1)
    expect(health.stderr).toMatch(/^effect-rl health: no WANDB_API_KEY is set/)
    expect(train.code, train.stderr).toBe(0)
    expect(train.stderr).not.toContain("ENOTFOUND")
    const last = train.stdout.trim().split("\n").at(-1)!
    expect(last).toMatch(/^summary: \{"steps":1,/)
    expect(train.stdout).toMatch(/dashboard: http:\/\/127\.0\.0\.1:\d+\/ui\//)
  }, 180_000)
})
