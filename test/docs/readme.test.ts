import { readdirSync, readFileSync } from "node:fs"
import { describe, expect, it } from "@effect/vitest"

const root = new URL("../../", import.meta.url)
const readme = readFileSync(new URL("README.md", root), "utf8")
const pages = readdirSync(new URL("docs/", root))
  .filter((name) => name.endsWith(".md"))
  .map((name) => `docs/${name}`)
const examples = readdirSync(new URL("examples/", root))
  .filter((name) => name.endsWith(".ts"))
  .map((name) => readFileSync(new URL(`examples/${name}`, root), "utf8"))

const blocksOf = (text: string) => [...text.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!.trimEnd())

describe("README and docs/", () => {
  // The TypeScript blocks of the README and of every page under docs/ are type-checked by being verbatim parts of
  // examples/, which `npm test` type-checks.
  const blocks = ["README.md", ...pages].flatMap((file) =>
    blocksOf(readFileSync(new URL(file, root), "utf8")).map((block, i) => [`${file} block ${i}`, block] as const)
  )

  it("has TypeScript examples", () => {
    expect(blocksOf(readme).length).toBeGreaterThan(0)
    expect(blocks.length).toBeGreaterThan(blocksOf(readme).length)
  })

  it.each(blocks)("%s is part of a type-checked example", (_, block) => {
    expect(examples.some((source) => source.includes(block))).toBe(true)
  })

  it("shows the commands CI runs", () => {
    const ci = readFileSync(new URL(".ci/run", root), "utf8")
    for (const command of ["npm ci", "npm test", "npm run test:slow"]) {
      expect(ci).toContain(command)
      expect(readme).toContain(command)
    }
  })
})
