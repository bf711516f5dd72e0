/**
 * What a step of `effect-rl train-agent` costs on a large scenarios file: the agent runs a step makes, counted
 * (each run appends its scenario's number to a file), and the seconds a step takes.
 *
 *   npx tsx bench/train-agent-dataset.ts [--lines=1000] [--groups-per-step=4] [--group-size=8] [--steps=3]
 *
 * The command as a user runs it (`src/cli/main.ts` through tsx), on the embedded backend in a temporary data
 * directory, the agent the Python agent of `examples/agents` (standard library only). Reported: runs per step
 * (expected: groups per step x group size, whatever the file's length), the distinct scenarios a step drew
 * and whether any was drawn twice in the run, and each step's seconds from the command's log.
 */
import { spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const arg = (name: string, fallback: number) => {
  const given = process.argv.find((a) => a.startsWith(`--${name}=`))
  return given === undefined ? fallback : Number(given.slice(name.length + 3))
}
const lines = arg("lines", 1000)
const groupsPerStep = arg("groups-per-step", 4)
const groupSize = arg("group-size", 8)
const steps = arg("steps", 3)

const root = new URL("../", import.meta.url).pathname
const dir = mkdtempSync(join(tmpdir(), "effect-rl-bench-train-agent-"))
const scenarios = join(dir, "scenarios.jsonl")
const log = join(dir, "runs.log")
writeFileSync(
  scenarios,
  Array.from({ length: lines }, (_, n) =>
    JSON.stringify({ question: `Is ${n} even?`, expected: n % 2 === 0 ? "yes" : "no", n })
  ).join("\n")
)
writeFileSync(log, "")
const agent = join(root, "examples/agents/python/agent.py")
const command = `input=$(cat); printf '%s\\n' "$input" >> ${log}; printf %s "$input" | python3 ${agent}`

const { WANDB_API_KEY: _, VITEST: __, ...env } = process.env
const child = spawn(
  process.execPath,
  [
    "--import",
    "tsx",
    join(root, "src/cli/main.ts"),
    "train-agent",
    command,
    "--scenarios",
    scenarios,
    "--groups-per-step",
    String(groupsPerStep),
    "--group-size",
    String(groupSize),
    "--steps",
    String(steps),
    "--data-dir",
    join(dir, "data")
  ],
  { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] }
)
let out = ""
child.stdout.on("data", (chunk) => {
  out += chunk
})
child.stderr.on("data", (chunk) => {
  out += chunk
})
const started = Date.now()
const code = await new Promise<number | null>((resolve) => child.once("exit", resolve))
const seconds = (Date.now() - started) / 1000
try {
  if (code !== 0) throw new Error(`train-agent exited ${code}:\n${out}`)
  const runs = readFileSync(log, "utf8")
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => (JSON.parse(line) as { n: number }).n)
  const perStep = runs.length / steps
  const stepSeconds = [...out.matchAll(/step (\d+) -> \d+: reward \S+ \(([\d.]+) s\)/g)].map((m) => Number(m[2]))
  const drawn = Array.from({ length: steps }, (_, k) => new Set(runs.slice(k * perStep, (k + 1) * perStep)).size)
  console.log(`train-agent on ${lines} scenarios, --groups-per-step ${groupsPerStep}, --group-size ${groupSize}:`)
  console.log(
    `  agent runs: ${runs.length} in ${steps} steps = ${perStep} a step (${groupsPerStep} x ${groupSize} = ${groupsPerStep * groupSize} expected)`
  )
  console.log(
    `  scenarios a step: ${drawn.join(", ")}; drawn twice in the run: ${runs.length / groupSize - new Set(runs).size}`
  )
  console.log(`  seconds a step: ${stepSeconds.join(", ")} (the command: ${seconds.toFixed(1)} s, start-up included)`)
} finally {
  rmSync(dir, { recursive: true, force: true })
}
