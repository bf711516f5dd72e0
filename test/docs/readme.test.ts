import { readdirSync, readFileSync } from "node:fs"
import { describe, expect, it } from "@effect/vitest"

const root = new URL("../../", import.meta.url)
const readme = readFileSync(new URL("README.md", root), "utf8")
const examples = readdirSync(new URL("examples/", root))
  .filter((name) => name.endsWith(".ts"))
  .map((name) => readFileSync(new URL(`examples/${name}`, root), "utf8"))

describe("README", () => {
  // The TypeScript blocks of the README are type-checked by being verbatim parts of examples/, which
  // `npm test` type-checks.
  const blocks = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!.trimEnd())

  it("has TypeScript examples", () => {
    expect(blocks.length).toBeGreaterThan(0)
  })

  it.each(blocks.map((block, i) => [i, block] as const))("block %i is part of a type-checked example", (_, block) => {
    expect(examples.some((source) => source.includes(block))).toBe(true)
  })

  it("shows the commands CI runs", () => {
    const ci = readFileSync(new URL(".ci/run", root), "utf8")
    expect(ci).toContain("npm ci")
    expect(ci).toContain("npm test")
    expect(readme).toContain("npm ci")
    expect(readme).toContain("npm test")
  })
})
