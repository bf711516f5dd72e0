import { readdirSync, readFileSync, statSync } from "node:fs"
import { describe, expect, it } from "@effect/vitest"

const root = new URL("../../", import.meta.url)

const files = (dir: string): Array<string> =>
  readdirSync(new URL(dir, root)).flatMap((name) => {
    const path = `${dir}${name}`
    if (statSync(new URL(path, root)).isDirectory()) return name === "internal" ? [] : files(`${path}/`)
    return name.endsWith(".ts") ? [path] : []
  })

describe("public API", () => {
  it("every module of the entry point is a subpath export of the package", () => {
    const pkg = JSON.parse(readFileSync(new URL("package.json", root), "utf8")) as {
      exports: Record<string, { default: string } | string>
    }
    const index = readFileSync(new URL("src/index.ts", root), "utf8")
    const modules = [...index.matchAll(/export \* as (\w+) from "\.\/([\w/]+)\.js"/g)]
    expect(modules.length).toBeGreaterThan(5)
    for (const [, name, path] of modules) {
      expect(pkg.exports[`./${name}`]).toEqual({ types: `./dist/${path}.d.ts`, default: `./dist/${path}.js` })
    }
  })

  it("every exported name of a public module has a doc comment", () => {
    const undocumented: Array<string> = []
    for (const file of files("src/")) {
      const lines = readFileSync(new URL(file, root), "utf8").split("\n")
      lines.forEach((line, i) => {
        if (!/^export (declare )?(const|let|function|class|interface|type|\* as) /.test(line)) return
        // The closest non-blank line above must end a doc comment.
        let j = i - 1
        while (j >= 0 && lines[j]!.trim() === "") j--
        if (!(lines[j]?.trim().endsWith("*/") ?? false)) undocumented.push(`${file}:${i + 1}: ${line}`)
      })
    }
    expect(undocumented).toEqual([])
  })
})
