/**
 * The modules `npm run test:mutation` mutates (`test/mutation/*.json`) still name what they meant: every file and
 * test exists, and a line range (Stryker's `file.ts:from-to`, for a part of a file) still starts and ends at the
 * lines its `anchors` give, so that an edit above it, which shifts the lines, fails here rather than leaving the
 * range on other code.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { describe, expect, it } from "@effect/vitest"

const root = new URL("../../", import.meta.url)
const folder = new URL("test/mutation/", root)

interface Module {
  readonly about: string
  readonly mutate: ReadonlyArray<string>
  readonly anchors?: Readonly<Record<string, readonly [string, string]>>
  readonly tests: ReadonlyArray<string>
}

const modules = readdirSync(folder)
  .filter((file) => file.endsWith(".json"))
  .map((file) => [file, JSON.parse(readFileSync(new URL(file, folder), "utf8")) as Module] as const)

describe("test/mutation modules", () => {
  it("exist, with their files, their tests and their line ranges where their anchors say", () => {
    expect(modules.length).toBeGreaterThanOrEqual(8)
    const problems: Array<string> = []
    for (const [file, module] of modules) {
      if (module.about.length === 0) problems.push(`${file}: no about`)
      if (module.tests.length === 0) problems.push(`${file}: no tests`)
      for (const test of module.tests) if (!existsSync(new URL(test, root))) problems.push(`${file}: no ${test}`)
      for (const target of module.mutate) {
        const range = /^(.*):(\d+)-(\d+)$/.exec(target)
        const path = range === null ? target : range[1]!
        if (!existsSync(new URL(path, root))) {
          problems.push(`${file}: no ${path}`)
          continue
        }
        if (range === null) continue
        const anchor = module.anchors?.[target]
        if (anchor === undefined) {
          problems.push(`${file}: ${target} has no anchors (its first and last lines)`)
          continue
        }
        const lines = readFileSync(new URL(path, root), "utf8").split("\n")
        const [first, last] = [lines[Number(range[2]) - 1]?.trim(), lines[Number(range[3]) - 1]?.trim()]
        if (first !== anchor[0] || last !== anchor[1]) {
          problems.push(
            `${file}: ${target} now runs from ${JSON.stringify(first)} to ${JSON.stringify(last)}, not from ` +
              `${JSON.stringify(anchor[0])} to ${JSON.stringify(anchor[1])}: the file changed; move the range`
          )
        }
      }
      for (const target of Object.keys(module.anchors ?? {})) {
        if (!module.mutate.includes(target)) problems.push(`${file}: anchors for ${target}, which it does not mutate`)
      }
    }
    expect(problems).toEqual([])
  })
})
