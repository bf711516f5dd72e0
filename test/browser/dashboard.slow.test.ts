/**
 * The dashboard in a real browser: Debian's Chromium (`/usr/bin/chromium`, or `CHROMIUM_PATH`) driven by
 * `playwright-core` (no browser download), against a real embedded backend after a short real training run
 * (the `minimal` example, two steps), and a traced one (one step, `Tracing.layer`) for the traces pages and the
 * one-time sign-in link, and the `arithmetic` example (two steps) for the agent's own metrics charted per step.
 * Screenshots of each page go to `test-results/dashboard/` for a person to look at.
 * Without a Chromium the tests are skipped, loudly.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import type { BrowserContext, Page } from "playwright-core"
import { chromium } from "playwright-core"
import { example as arithmetic } from "../../examples/arithmetic.js"
import { example as minimal } from "../../examples/minimal.js"
import * as Backend from "../../src/Backend.js"
import { TrainingClient } from "../../src/client/TrainingClient.js"
import { LocalBackend } from "../../src/LocalBackend.js"
import * as Tracing from "../../src/workflow/Tracing.js"

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"
const SHOTS = "test-results/dashboard"
const MODEL = "dashboard-minimal"
const TRACED_MODEL = "dashboard-traced"
const TRACE_PROJECT = "dashboard/traced"
const METRICS_MODEL = "dashboard-arithmetic"

/** A log entry as the overview answers it. */
interface LogEntry {
  readonly id: string
  readonly split: string
  readonly step: number
  readonly metrics: Readonly<Record<string, number>>
}

/** What the model page reads: its logs and the names of the agent's own metrics among theirs. */
interface OverviewBody {
  readonly logs: ReadonlyArray<LogEntry>
  readonly agent_metrics: ReadonlyArray<string>
  readonly rollout_metrics: ReadonlyArray<string>
}

/** A chart's series (its columns), legend and numbers, as its hidden table and uPlot's legend show them. */
interface ChartTable {
  readonly labels: ReadonlyArray<string | null>
  readonly legend: ReadonlyArray<string>
  /** Per series, the x and value of each row that has one. */
  readonly series: Readonly<Record<string, ReadonlyArray<{ readonly x: number; readonly value: number }>>>
}

/** A chart's numbers as its hidden table holds them: per series (column header), the x and value of each row. */
const chartTable = (page: Page, chart: string): Effect.Effect<ChartTable> =>
  act(() =>
    page.$eval(`[data-chart='${chart}']`, (figure) => {
      const labels = [...figure.querySelectorAll("table.visually-hidden thead th")].slice(1).map((th) => th.textContent)
      const rows = [...figure.querySelectorAll("table.visually-hidden tbody tr")]
      const legend = [...figure.querySelectorAll(".u-legend .u-series")].map((s) => s.textContent?.trim() ?? "")
      return {
        labels,
        legend,
        series: Object.fromEntries(
          labels.map((label) => [
            label,
            rows.flatMap((row) => {
              const text = row.querySelector(`[data-series='${label}']`)?.textContent ?? ""
              const value = Number(text)
              return text === "" || Number.isNaN(value) ? [] : [{ x: Number(row.getAttribute("data-x")), value }]
            })
          ])
        )
      }
    })
  )

/** A stored trajectory with a tool call and its result, logged beside the run's own. */
const toolGame = {
  messages_and_choices: [
    { role: "system" as const, content: "You add numbers with the add tool." },
    { role: "user" as const, content: "What is 19 + 23?" },
    {
      role: "assistant" as const,
      content: null,
      tool_calls: [
        { id: "call_add_1", type: "function" as const, function: { name: "add", arguments: '{"a":19,"b":23}' } }
      ]
    },
    { role: "tool" as const, tool_call_id: "call_add_1", content: "42" },
    { role: "assistant" as const, content: "19 + 23 = 42." }
  ],
  reward: 1,
  metrics: { correct: true }
}

/** Chromium with a fresh profile (removed when it closes), kept off the network it cannot reach. */
const launch = (profile: string) =>
  chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    viewport: { width: 1280, height: 800 },
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync"
    ]
  })

/** A fresh Chromium (closed, its profile removed, with the scope) and a page that collects console errors. */
const openPage = Effect.gen(function* () {
  mkdirSync(SHOTS, { recursive: true })
  const profile = mkdtempSync(join(tmpdir(), "effect-rl-chromium-"))
  const browser = yield* Effect.acquireRelease(
    Effect.promise(() => launch(profile)),
    (b: BrowserContext) =>
      Effect.promise(() => b.close()).pipe(
        Effect.ensuring(Effect.sync(() => rmSync(profile, { recursive: true, force: true })))
      )
  )
  const page: Page = yield* Effect.promise(() => browser.newPage())
  const problems: Array<string> = []
  page.on("console", (message) => {
    if (message.type() === "error") problems.push(message.text())
  })
  page.on("pageerror", (error) => problems.push(error.message))
  return { browser, page, problems }
})

const act = <A>(f: () => Promise<A>) => Effect.promise(f)

/** The overview of a model, as the page reads it. */
const overviewOf = (url: string, apiKey: Redacted.Redacted<string>, modelId: string) =>
  act(
    () =>
      fetch(`${url}/v1/local/models/${modelId}/overview`, {
        headers: { authorization: `Bearer ${Redacted.value(apiKey)}` }
      }).then((response) => response.json()) as Promise<OverviewBody>
  )

if (!existsSync(CHROMIUM)) {
  console.warn(
    `\n*** The dashboard's browser tests are SKIPPED: no Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH) ***\n`
  )
  describe("dashboard in a browser", () => {
    it.skip(`SKIPPED: no Chromium found at ${CHROMIUM}; the dashboard was not tested in a browser`, () => {})
  })
} else {
  layer(Backend.local(), { excludeTestServices: true, timeout: "60 seconds" })("dashboard in a browser", (it) => {
    it.effect(
      "login, models, a model's live reward curve and a trajectory's messages and tool calls",
      () =>
        Effect.gen(function* () {
          const { apiKey, url } = yield* LocalBackend
          const client = yield* TrainingClient
          const run = yield* minimal.train({ steps: 2, modelName: MODEL })
          const modelId = run.policy.record.id
          yield* client.log(modelId, { split: "val", trajectory_groups: [{ trajectories: [toolGame] }] })

          const { page, problems } = yield* openPage

          // A wrong key is refused and the form stays.
          yield* act(() => page.goto(`${url}/ui/`))
          yield* act(() => page.fill("#key", "erl-not-the-key"))
          yield* act(() => page.click("button[type=submit]"))
          yield* act(() => page.getByRole("alert").waitFor())
          expect(yield* act(() => page.getByRole("alert").textContent())).toContain("refused")
          yield* act(() => page.screenshot({ path: `${SHOTS}/1-login-refused.png` }))
          // Chromium logs the refused check (a 401) as a console error: that one was asked for.
          expect(problems).toEqual([expect.stringContaining("401")])
          problems.length = 0

          // The right key opens the projects page, which lists the model.
          yield* act(() => page.fill("#key", Redacted.value(apiKey)))
          yield* act(() => page.click("button[type=submit]"))
          yield* act(() => page.getByRole("link", { name: MODEL }).waitFor())
          yield* act(() => page.screenshot({ path: `${SHOTS}/2-models.png` }))

          // Nothing is traced into this server yet: the traces page says how, its words apart.
          yield* act(() => page.getByRole("link", { name: "Traces" }).click())
          const empty = page.locator("p.empty").filter({ hasText: "No traces yet" })
          yield* act(() => empty.waitFor())
          expect(yield* act(() => empty.textContent())).toBe(
            "No traces yet: trace a loop into this server (Tracing.layer, or effect-rl train minimal --trace my-team/minimal)."
          )
          yield* act(() => page.getByRole("link", { name: "Models" }).click())

          // The model page: one point per logged train step, with the reward the log endpoint stored.
          yield* act(() => page.getByRole("link", { name: MODEL }).click())
          yield* act(() => page.locator(".live.on").waitFor())
          const overview = yield* overviewOf(url, apiKey, modelId)
          const trainLogs = overview.logs.filter((log) => log.split === "train")
          expect(trainLogs.length).toBe(2)
          const points = () =>
            act(() =>
              page.$$eval("[data-chart=reward] table.visually-hidden tbody tr", (rows) =>
                rows.map((row) => ({
                  step: Number(row.getAttribute("data-x")),
                  reward: Number(row.querySelector("[data-series='train reward']")?.textContent)
                }))
              )
            ).pipe(Effect.map((all) => all.filter((point) => !Number.isNaN(point.reward))))
          const shown = yield* points()
          expect(shown.map((p) => p.step)).toEqual(trainLogs.map((log) => log.step))
          shown.forEach((point, i) => {
            expect(point.reward).toBeCloseTo(trainLogs[i]!.metrics.reward!, 2)
          })
          // A val step was logged: the chart has its series and legend. Its trajectory's metric (`correct`,
          // logged in val only) has a chart of its own with that one series.
          const valLog = overview.logs.find((log) => log.split === "val")!
          const reward = yield* chartTable(page, "reward")
          expect(reward.labels).toEqual(["train reward", "val reward"])
          expect(reward.legend.some((text) => text.includes("val reward"))).toBe(true)
          expect(reward.series["val reward"]).toEqual([{ x: valLog.step, value: 1 }])
          expect(overview.agent_metrics).toEqual(["correct"])
          const correct = yield* chartTable(page, "metric:correct")
          expect(correct.labels).toEqual(["val correct"])
          expect(correct.series["val correct"]).toEqual([{ x: valLog.step, value: 1 }])
          yield* act(() => page.screenshot({ path: `${SHOTS}/3-model.png`, fullPage: true }))

          // Another step finishes (the loop resumes the model at its latest step; `steps` counts from 0): the
          // curve grows without a reload.
          yield* minimal.train({ steps: 3, modelName: MODEL })
          const trainStep = `[data-chart=reward] table.visually-hidden tbody tr[data-x="${shown.length}"] [data-series='train reward']`
          yield* act(() => page.locator(trainStep).filter({ hasText: /\d/ }).waitFor({ timeout: 20_000 }))
          expect((yield* points()).length).toBe(shown.length + 1)
          yield* act(() => page.locator(".jobs .row").first().click())
          yield* act(() => page.locator(".events .event").first().waitFor())
          yield* act(() => page.screenshot({ path: `${SHOTS}/4-model-live.png`, fullPage: true }))

          // A step page: the stored trajectory's messages, tool call and tool result, shown as such; its trail
          // names the model.
          yield* act(() => page.goto(`${url}/ui/#/logs/${valLog.id}`))
          yield* act(() => page.locator(".tool-call[data-tool=add]").waitFor())
          const roles = yield* act(() =>
            page.$$eval(".messages > li", (items) => items.map((li) => li.getAttribute("data-role")))
          )
          expect(roles).toEqual(["system", "user", "assistant", "tool", "assistant"])
          const text = yield* act(() => page.locator(".messages").textContent())
          expect(text).toContain("What is 19 + 23?")
          expect(text).toContain('"a": 19')
          expect(text).toContain("19 + 23 = 42.")
          expect(yield* act(() => page.locator("nav.crumbs").textContent())).toBe(
            `Projects / ${MODEL} / step ${valLog.step}`
          )
          expect(
            yield* act(() => page.locator("nav.crumbs").getByRole("link", { name: MODEL }).getAttribute("href"))
          ).toBe(`#/models/${modelId}`)
          yield* act(() => page.screenshot({ path: `${SHOTS}/5-step-tools.png`, fullPage: true }))

          // A step of the run itself, best first, with its sampled tokens coloured by logprob; then narrow.
          yield* act(() => page.goto(`${url}/ui/#/logs/${trainLogs[1]!.id}?sort=reward_desc`))
          yield* act(() => page.locator(".messages .sampled").first().waitFor())
          const rewards = yield* act(() =>
            page.$$eval(".trajectories .item", (items) => items.map((item) => Number(item.getAttribute("data-reward"))))
          )
          expect(rewards).toEqual([...rewards].sort((a, b) => b - a))
          yield* act(() => page.screenshot({ path: `${SHOTS}/6-step-best.png`, fullPage: true }))

          // A trajectory chosen, then another sort: the same trajectory stays shown, and chosen in the list when
          // the new order's first page holds it (all 24 fit on one).
          const third = page.locator(".trajectories .item").nth(2)
          const label = yield* act(() => third.locator(".muted").textContent())
          yield* act(() => third.click())
          const heading = page.locator(".detail h2")
          const [, group, index] = /^g(\d+)·(\d+)$/.exec(label ?? "")!
          const expected = `Group ${group}, trajectory ${index}`
          yield* act(() => heading.filter({ hasText: expected }).waitFor())
          yield* act(() =>
            Promise.all([
              page.waitForResponse((response) => response.url().includes("sort=reward_asc")),
              page.selectOption(".toolbar select", "reward_asc")
            ])
          )
          const lowest = Math.min(...rewards)
          // The new order is shown once the list starts with the lowest reward.
          yield* act(() => page.locator(`.trajectories li:first-child .item[data-reward="${lowest}"]`).waitFor())
          yield* act(() => page.locator(".messages").waitFor())
          const ascending = yield* act(() =>
            page.$$eval(".trajectories .item", (items) => items.map((item) => Number(item.getAttribute("data-reward"))))
          )
          expect(ascending).toEqual([...rewards].sort((a, b) => a - b))
          expect(yield* act(() => heading.textContent())).toBe(expected)
          expect(yield* act(() => page.locator(".trajectories .item.chosen .muted").textContent())).toBe(label)
          expect(yield* act(() => page.locator(".detail .empty").count())).toBe(0)
          yield* act(() => page.setViewportSize({ width: 420, height: 800 }))
          yield* act(() => page.screenshot({ path: `${SHOTS}/7-step-narrow.png`, fullPage: true }))

          expect(page.url()).not.toContain(Redacted.value(apiKey))
          expect(problems).toEqual([])
        }).pipe(Effect.scoped),
      60_000
    )

    it.effect(
      "a one-time sign-in link, the traces pages (step, rollouts, completions) and a trajectory's link to its trace",
      () =>
        Effect.gen(function* () {
          const { apiKey, signInLink, url } = yield* LocalBackend
          // One traced step: the layer's scope closing sends the last of the trace.
          const run = yield* minimal
            .train({ steps: 1, modelName: TRACED_MODEL })
            .pipe(Effect.provide(Tracing.layer({ project: TRACE_PROJECT, flushInterval: "100 millis" })))
          const modelId = run.policy.record.id
          const { page, problems } = yield* openPage

          // The printed link signs the tab in: the token leaves the address bar, the key is kept for the tab.
          const link = yield* signInLink
          yield* act(() => page.goto(link))
          yield* act(() => page.getByRole("button", { name: "Sign out" }).waitFor())
          expect(page.url()).toBe(`${url}/ui/`)
          const kept = yield* act(() => page.evaluate("sessionStorage.getItem('effect-rl-api-key')"))
          expect(kept).toBe(Redacted.value(apiKey))
          // Used once, the link is refused (the server's 401 is logged by Chromium), and the form says why.
          yield* act(() => page.evaluate("sessionStorage.clear()"))
          yield* act(() => page.goto(link))
          yield* act(() => page.getByRole("alert").waitFor())
          expect(yield* act(() => page.getByRole("alert").textContent())).toContain("used already")
          expect(page.url()).toBe(`${url}/ui/`)
          yield* act(() => page.screenshot({ path: `${SHOTS}/8-sign-in-link-used.png` }))
          expect(problems).toEqual([expect.stringContaining("401")])
          problems.length = 0
          const fresh = yield* signInLink
          yield* act(() => page.goto(fresh))
          yield* act(() => page.getByRole("button", { name: "Sign out" }).waitFor())

          // The traces: the project, its one trace (the step), then the trace as a tree.
          yield* act(() => page.getByRole("link", { name: "Traces" }).click())
          yield* act(() => page.getByRole("link", { name: TRACE_PROJECT }).click())
          yield* act(() => page.getByRole("link", { name: "step 0" }).waitFor())
          yield* act(() => page.screenshot({ path: `${SHOTS}/9-traces.png` }))
          yield* act(() => page.getByRole("link", { name: "step 0" }).click())
          const step = page.locator("[role=tree] > [role=treeitem][data-op='effect-rl.step']")
          yield* act(() => step.waitFor())
          const rollouts = step.locator(":scope > [role=group] > [role=treeitem][data-op='effect-rl.rollout']")
          expect(yield* act(() => rollouts.count())).toBe(3 * 8)
          const chats = rollouts.locator(":scope > [role=group] > [role=treeitem][data-op='effect-rl.chat']")
          expect(yield* act(() => chats.count())).toBe(3 * 8)
          // Each row shows its latency and tokens; a rollout its reward feedback.
          const firstRollout = rollouts.first()
          const row = firstRollout.locator(":scope > .row")
          expect(yield* act(() => row.locator(".lat").textContent())).toMatch(/^\d+(\.\d+)? (ms|s)$/)
          expect(yield* act(() => row.locator(".tok").textContent())).toMatch(/^\d+ tok$/)
          expect(yield* act(() => row.locator(".reward-tag").textContent())).toMatch(/^reward (0|1)$/)
          expect(yield* act(() => step.locator(":scope > .row .tok").textContent())).toMatch(/^\d+ tok$/)

          // The keyboard: from the step, down to its first rollout, whose call shows in full with its feedback.
          yield* act(() => step.locator(":scope > .row").click())
          yield* act(() => page.keyboard.press("ArrowDown"))
          const rolloutId = yield* act(() => row.getAttribute("data-id"))
          yield* act(() => page.locator(`.call-detail[data-call='${rolloutId}'] [data-feedback=reward]`).waitFor())
          const detail = page.locator(".call-detail")
          const tagged = yield* act(() => row.locator(".reward-tag").textContent())
          expect(yield* act(() => detail.locator(".reward-value").textContent())).toBe(tagged?.replace("reward ", ""))
          expect(yield* act(() => detail.locator("[data-json=inputs]").textContent())).toContain("scenario")
          // Right moves into the open rollout, to its completion; Left goes back up, and Left again closes it.
          yield* act(() => page.keyboard.press("ArrowRight"))
          yield* act(() => page.locator(".call-detail [data-json=inputs]").filter({ hasText: "messages" }).waitFor())
          expect(yield* act(() => page.locator(".call-tree .row.chosen").getAttribute("data-id"))).not.toBe(rolloutId)
          yield* act(() => page.keyboard.press("ArrowLeft"))
          expect(yield* act(() => page.locator(".call-tree .row.chosen").getAttribute("data-id"))).toBe(rolloutId)
          yield* act(() => page.keyboard.press("ArrowLeft"))
          expect(yield* act(() => firstRollout.getAttribute("aria-expanded"))).toBe("false")
          yield* act(() => page.screenshot({ path: `${SHOTS}/10-trace.png`, fullPage: true }))

          // This model logged no val step: its reward chart has no val series, and no legend for one.
          yield* act(() => page.goto(`${url}/ui/#/models/${modelId}`))
          yield* act(() => page.locator("[data-chart=reward] table.visually-hidden tbody tr").first().waitFor())
          const reward = yield* chartTable(page, "reward")
          expect(reward.labels).toEqual(["train reward"])
          expect(reward.legend.join(" ")).not.toContain("val")
          expect(yield* act(() => page.locator("[data-chart=reward]").textContent())).not.toContain("val")

          // The step page: a trajectory links to its rollout's trace, which opens with that rollout chosen.
          const overview = yield* overviewOf(url, apiKey, modelId)
          const train = overview.logs.find((log) => log.split === "train")!
          yield* act(() => page.goto(`${url}/ui/#/logs/${train.id}`))
          yield* act(() => page.getByRole("link", { name: "Open the rollout's trace ›" }).waitFor())
          yield* act(() => page.screenshot({ path: `${SHOTS}/11-step-trace-link.png` }))
          const trajectoryReward = yield* act(() =>
            page.locator(".trajectories .item.chosen").getAttribute("data-reward")
          )
          yield* act(() => page.getByRole("link", { name: "Open the rollout's trace ›" }).click())
          yield* act(() => page.locator(".call-tree .row.chosen").waitFor())
          const chosen = yield* act(() => page.locator(".call-tree .row.chosen").getAttribute("data-id"))
          const chosenItem = page.locator(`[role=treeitem]:has(> .row[data-id='${chosen}'])`)
          expect(yield* act(() => chosenItem.getAttribute("data-op"))).toBe("effect-rl.rollout")
          yield* act(() => page.locator(`.call-detail[data-call='${chosen}'] [data-feedback=reward]`).waitFor())
          // The trajectory's own rollout: its reward feedback is the trajectory's reward.
          expect(yield* act(() => page.locator(".call-detail .reward-value").textContent())).toBe(trajectoryReward)
          yield* act(() => page.screenshot({ path: `${SHOTS}/12-trace-from-step.png` }))
          yield* act(() => page.setViewportSize({ width: 420, height: 800 }))
          yield* act(() => page.screenshot({ path: `${SHOTS}/13-trace-narrow.png`, fullPage: true }))

          expect(page.url()).not.toContain(Redacted.value(apiKey))
          expect(problems).toEqual([])
        }).pipe(Effect.scoped),
      60_000
    )

    it.effect(
      "the agent's own metrics charted per step, each its mean over the step's trajectories",
      () =>
        Effect.gen(function* () {
          const { apiKey, signInLink, url } = yield* LocalBackend
          // Two steps of the arithmetic example: its reward records `correct`, `close` and `format_error` in each
          // trajectory, and it evaluates the held-out problems at the start and the end (val steps 0 and 2).
          const run = yield* arithmetic.train({ steps: 2, modelName: METRICS_MODEL })
          const modelId = run.policy.record.id
          const overview = yield* overviewOf(url, apiKey, modelId)
          expect(overview.agent_metrics).toEqual(expect.arrayContaining(["correct", "close", "format_error"]))
          expect(overview.agent_metrics).not.toContain("reward")
          expect(overview.agent_metrics).not.toContain("duration_seconds")
          expect(overview.rollout_metrics).toEqual(expect.arrayContaining(["duration_seconds", "completion_tokens"]))

          const { page, problems } = yield* openPage
          const link = yield* signInLink
          yield* act(() => page.goto(link))
          yield* act(() => page.getByRole("button", { name: "Sign out" }).waitFor())
          yield* act(() => page.goto(`${url}/ui/#/models/${modelId}`))
          yield* act(() => page.locator(".agent-metrics [data-chart='metric:correct'] tbody tr").first().waitFor())

          // One chart per metric of the agent, in the order logged; each point the step's logged mean.
          const charted = yield* act(() =>
            page.$$eval(".agent-metrics [data-chart]", (figures) => figures.map((f) => f.getAttribute("data-chart")))
          )
          expect(charted).toEqual(overview.agent_metrics.map((name) => `metric:${name}`))
          for (const name of ["correct", "close", "format_error"]) {
            const table = yield* chartTable(page, `metric:${name}`)
            expect(table.labels).toEqual([`train ${name}`, `val ${name}`])
            for (const split of ["train", "val"]) {
              const logged = overview.logs.filter((log) => log.split === split)
              expect(logged.length).toBeGreaterThan(0)
              const shown = table.series[`${split} ${name}`]!
              expect(shown.map((point) => point.x)).toEqual(logged.map((log) => log.step))
              shown.forEach((point, i) => {
                expect(point.value).toBeCloseTo(logged[i]!.metrics[name]!, 2)
              })
            }
          }
          // What the rollouts measured is charted apart, folded away.
          const measured = page.locator(".rollout-metrics")
          expect(yield* act(() => measured.getAttribute("open"))).toBeNull()
          expect(yield* act(() => measured.locator("[data-chart='metric:duration_seconds']").count())).toBe(1)
          yield* act(() => page.screenshot({ path: `${SHOTS}/14-agent-metrics.png`, fullPage: true }))
          expect(problems).toEqual([])
        }).pipe(Effect.scoped),
      60_000
    )
  })
}
