/**
 * `effect-rl train-agent` as a user runs it, on the embedded backend: a failing agent is one sentence with its
 * exit code and the end of its stderr (exit code 1), and `--max-failures` tolerates some; a scenarios file that is not JSONL is refused (exit code
 * 2); Ctrl-C mid-step leaves no agent process behind. (The agents learning: `train-agent.slow.test.ts`.)
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import * as Effect from "effect/Effect"
import { describe, expect, it } from "vitest"
import { agentName } from "../../src/cli/agentCommand.js"
import { alive, dir, root, scenarios, summaryOf, trainAgent } from "./trainAgentSupport.js"

describe("effect-rl train-agent", () => {
  it("its agent's name (what a cluster's runner knows it by) is a digest of command, reward module and time limit", async () => {
    const rewardA = join(dir, "reward-a.mjs")
    const rewardB = join(dir, "reward-b.mjs")
    const rewardA2 = join(dir, "reward-a-copy.mjs")
    writeFileSync(rewardA, "export const reward = () => 1\n")
    writeFileSync(rewardA2, "export const reward = () => 1\n")
    writeFileSync(rewardB, "export const reward = () => 0\n")
    const name = (command: string, reward?: string, timeout?: number) =>
      Effect.runPromise(agentName({ command, reward, timeout }))
    const base = await name("python3 agent.py")
    expect(base).toMatch(/^agent-[0-9a-f]{12}$/)
    expect(await name("python3 agent.py")).toBe(base)
    const others = await Promise.all([
      name("python3 agent.py --fast"),
      name("python3 agent.py", undefined, 60),
      name("python3 agent.py", rewardA),
      name("python3 agent.py", rewardB)
    ])
    expect(new Set([base, ...others]).size).toBe(5)
    // The module's contents, not its path (which may differ between machines).
    expect(await name("python3 agent.py", rewardA2)).toBe(others[2])
  })

  it("a failing agent is one sentence with its exit code and stderr; bad scenarios are refused", async () => {
    const bad = join(dir, "bad.jsonl")
    writeFileSync(bad, '{"question": "ok"}\n{not json\n')
    // The Python agent, except on one of the three scenarios, where it fails: 8 of the step's 24 runs.
    const agent = join(root, "examples/agents/python/agent.py")
    const sometimes = `input=$(cat); case "$input" in *Ready*) echo "not ready" >&2; exit 3;; esac; printf %s "$input" | python3 ${agent}`
    const [failing, refused, tolerated, noBackend] = await Promise.all([
      // With its progress lines (shown when not under a test runner): every run fails at once.
      trainAgent(["python3 -c 'import sys; sys.exit(\"the agent broke\")'", "--scenarios", scenarios, "--steps", "1"], {
        VITEST: undefined
      }),
      trainAgent(["python3 agent.py", "--scenarios", bad]),
      trainAgent([sometimes, "--scenarios", scenarios, "--steps", "1", "--max-failures", "8"]),
      // On a cluster the runners must reach the backend: not the embedded one inside this command.
      trainAgent(["python3 agent.py", "--scenarios", scenarios, "--cluster", `sqlite:${join(dir, "c.db")}`])
    ])
    expect(failing.code, failing.out).toBe(1)
    expect(failing.out).toMatch(
      /effect-rl train-agent: .*the agent command python3 exited with code 1[\s\S]*the agent broke/
    )
    expect(failing.out).toContain("more than the 0 tolerated")
    // The counts agree: the last progress line's failures and finished runs are the sentence's.
    const sentence =
      /\((?:the first of (\d+) failed runs|(1) failed run) of the agent, .*; (\d+) of 24 finished\)/.exec(failing.out)
    const progress = [...failing.out.matchAll(/^gather (\d+)\/24 rollouts, .* \| exceptions (\d+) \|/gm)].at(-1)
    expect(sentence, failing.out).not.toBeNull()
    expect(progress, failing.out).toBeDefined()
    expect([progress![1], progress![2]]).toEqual([sentence![3], sentence![1] ?? sentence![2]])
    expect(failing.out).toContain("to tolerate some, pass --max-failures <n>")
    expect(failing.out).not.toMatch(/\n\s+at /)
    expect(failing.out).not.toContain("summary:")
    // With --max-failures 8 the step trains on the two scenarios whose runs succeeded.
    expect(tolerated.code, tolerated.out).toBe(0)
    expect(summaryOf(tolerated.out).steps).toBe(1)
    expect(noBackend.code, noBackend.out).toBe(2)
    expect(noBackend.out).toContain("effect-rl train-agent: --cluster needs a backend the runners reach too")
    expect(refused.code, refused.out).toBe(2)
    expect(refused.out).toContain(`effect-rl train-agent: line 2 of ${bad} is not JSON`)
  }, 120_000)

  it("Ctrl-C mid-step stops the command and leaves no agent process behind", async () => {
    const one = join(dir, "one.jsonl")
    writeFileSync(one, '{"question": "q"}\n')
    const pidFile = join(dir, "pids.json")
    let pids: ReadonlyArray<number> = []
    const run = await trainAgent(
      [`python3 ${join(root, "test/workflow/fixtures/external_agent.py")}`, "--scenarios", one, "--group-size", "1"],
      // The agent ignores SIGTERM and leaves a grandchild: only the process group's SIGKILL ends both.
      { MODE: "hang", PID_FILE: pidFile },
      (child, output) => {
        const started = Date.now()
        const poll = setInterval(() => {
          if (existsSync(pidFile)) {
            clearInterval(poll)
            pids = JSON.parse(readFileSync(pidFile, "utf8")) as ReadonlyArray<number>
            child.kill("SIGINT")
          } else if (Date.now() - started > 90_000) {
            clearInterval(poll)
            child.kill("SIGKILL")
            throw new Error(`the agent never started:\n${output()}`)
          }
        }, 50)
      }
    )
    expect(pids).toHaveLength(2)
    // Interrupted, not failed (as `effect-rl train` on SIGINT).
    expect(run.code === 0 || run.code === 130, run.out).toBe(true)
    expect(run.out).not.toMatch(/\n\s+at |Error:/)
    expect(run.out).not.toContain("summary:")
    // The command ends once the agent's pipes close; python and its grandchild, killed with the group, may leave the
    // process table a moment later (as in ExternalAgent.test.ts), so each is given up to 2 s.
    const ended = Date.now()
    for (const pid of pids) {
      while (alive(pid) && Date.now() - ended < 2_000) await new Promise((resolve) => setTimeout(resolve, 10))
      expect(alive(pid)).toBe(false)
    }
  }, 120_000)
})
