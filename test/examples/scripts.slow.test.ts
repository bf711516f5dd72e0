/**
 * The docs' script examples, each run as a user runs it (a real `npx tsx` process): the client example
 * (`examples/quickstart.ts`, docs/client.md) unchanged against the embedded backend (`EFFECT_RL_TRAINING_URL`
 * and `WANDB_API_KEY` pointing at a running backend, its base model the first one the backend lists), and the
 * traced loop (`examples/traced.ts`, docs/tracing.md), which reads its traces back; the streamed completion
 * (`examples/streaming.ts`, docs/client.md) against the embedded backend's pretrained base.
 */
import { spawn } from "node:child_process"
import { join } from "node:path"
import { describe, expect, it, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as LocalBackend from "../../src/LocalBackend.js"

const root = join(import.meta.dirname, "..", "..")

const runScript = (file: string, env: Record<string, string>) =>
  Effect.async<{ readonly code: number | null; readonly output: string }>((resume) => {
    const { EFFECT_RL_BASE_MODEL: _, ...inherited } = process.env
    const child = spawn(process.execPath, ["--import", "tsx", file], {
      cwd: root,
      env: { ...inherited, ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (chunk) => {
      output += chunk
    })
    child.stderr.on("data", (chunk) => {
      output += chunk
    })
    child.once("exit", (code) => resume(Effect.succeed({ code, output })))
    return Effect.sync(() => child.kill())
  })

describe("examples/quickstart.ts", () => {
  layer(LocalBackend.layer(), { excludeTestServices: true, timeout: "60 seconds" })(
    "against the embedded backend",
    (it) => {
      it.effect("creates a model on the listed base model, trains one job and follows it to its end", () =>
        Effect.gen(function* () {
          const backend = yield* LocalBackend.LocalBackend
          const { code, output } = yield* runScript("examples/quickstart.ts", {
            EFFECT_RL_TRAINING_URL: backend.url,
            WANDB_API_KEY: Redacted.value(backend.apiKey)
          })
          expect(code, output).toBe(0)
          expect(output).toMatch(/model [0-9a-f-]{36} \(\S+\/quickstart\/agent-001\)/)
          expect(output).toMatch(/^training_started /m)
          expect(output).toMatch(/^training_ended /m)
        })
      )
    }
  )
})

describe("examples/streaming.ts", () => {
  layer(LocalBackend.layer(), { excludeTestServices: true, timeout: "60 seconds" })(
    "against the embedded backend",
    (it) => {
      it.effect("prints the streamed text as it comes, then the joined completion's finish reason and usage", () =>
        Effect.gen(function* () {
          const backend = yield* LocalBackend.LocalBackend
          const { code, output } = yield* runScript("examples/streaming.ts", {
            EFFECT_RL_INFERENCE_URL: backend.url,
            WANDB_API_KEY: Redacted.value(backend.apiKey),
            EFFECT_RL_MODEL: "effect-rl/base-2k"
          })
          expect(code, output).toBe(0)
          // 40 tokens asked for: the text, then the line the joined completion gives.
          expect(output).toMatch(/\S+[\s\S]*\nfinish_reason (stop|length), \d+ tokens\n$/)
          const tokens = Number(/, (\d+) tokens/.exec(output)?.[1])
          expect(tokens).toBeGreaterThan(0)
          expect(tokens).toBeLessThanOrEqual(40)
          expect(output).not.toContain(Redacted.value(backend.apiKey))
        })
      )
    }
  )
})

describe("examples/traced.ts", () => {
  it.live("trains two steps traced on its own embedded backend and finds every call; piped, it ends", () =>
    Effect.gen(function* () {
      const { code, output } = yield* runScript("examples/traced.ts", {})
      expect(code, output).toBe(0)
      // The dashboard's sign-in link first; not in a terminal, the backend does not wait for Ctrl-C after the end.
      expect(output).toMatch(
        /^dashboard: http:\/\/127\.0\.0\.1:\d+\/ui\/#token=[\w-]{43}\n {2}\(a one-time sign-in link/
      )
      expect(output).not.toContain("until you press Ctrl-C")
      expect(output).toContain("effect-rl.step: 2 calls")
      expect(output).toContain("effect-rl.rollout: 24 calls")
      expect(output).toContain("effect-rl.chat: 24 calls")
    })
  )
})
