/**
 * Every link of the README and of the pages under docs/ resolves inside the repository, so the docs stand alone
 * (in a clone and in the package): a relative link `[x](path)` or `[x](path#anchor)` names a file or directory
 * that exists, and its anchor a heading of that file (as GitHub makes anchors of headings); a bare `*.md`
 * name in backticks (`docs/rl-math.md`, `rl-math.md`) names a file, beside the page or from the repository's
 * root; a repository path in backticks (`examples/minimal.ts`, `src/local/engine/`) exists. Code blocks are
 * not read.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, normalize } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "@effect/vitest"

const root = fileURLToPath(new URL("../../", import.meta.url))

/** The directories of the repository's sources: a path in backticks that begins with one of them is checked. */
const SOURCE_DIRS = [".ci", "bench", "docs", "examples", "scripts", "src", "test", "ui"]

/** The text of a Markdown page without its fenced code blocks. */
const prose = (text: string): string => text.replace(/^```[^\n]*\n[\s\S]*?^```[ \t]*$/gm, "")

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
const slug = (heading: string): string =>
  heading
    .replace(/`/g, "")
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
    .replace(/ /g, "-")

/** The anchors of a page's headings (a repeated heading's anchor gets `-1`, `-2`, ... as on GitHub). */
const anchorsOf = (text: string): ReadonlySet<string> => {
  const seen = new Map<string, number>()
  const anchors = new Set<string>()
  for (const [, heading] of prose(text).matchAll(/^#{1,6}[ \t]+(.+?)[ \t#]*$/gm)) {
    const base = slug(heading!)
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    anchors.add(n === 0 ? base : `${base}-${n}`)
  }
  return anchors
}

/** A reference a page makes: what it wrote, and the file (relative to the root) and anchor it names. */
interface Reference {
  readonly written: string
  readonly candidates: ReadonlyArray<string>
  readonly anchor: string | undefined
}

const split = (target: string): [string, string | undefined] => {
  const hash = target.indexOf("#")
  return hash === -1 ? [target, undefined] : [target.slice(0, hash), target.slice(hash + 1)]
}

/** The references of a page at `file` (a path relative to the root). */
const referencesOf = (file: string, text: string): Array<Reference> => {
  const here = dirname(file)
  const body = prose(text)
  const refs: Array<Reference> = []
  // Links and images: [x](target "title"), leaving out other sites and mail.
  for (const [written, target] of body.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target!)) continue
    const [path, anchor] = split(target!)
    refs.push({ written: written!, candidates: [path === "" ? file : normalize(join(here, path))], anchor })
  }
  // Names and paths in backticks (inline code).
  for (const [, code] of body.matchAll(/`([^`\n]+)`/g)) {
    const [path, anchor] = split(code!.trim())
    if (/^[\w./-]+\.md$/.test(path)) {
      refs.push({
        written: `\`${code}\``,
        candidates: [normalize(join(here, path)), normalize(path)],
        anchor
      })
    } else if (/^[\w.-]+(\/[\w.-]+)*\/?$/.test(path) && SOURCE_DIRS.includes(path.split("/")[0]!)) {
      refs.push({ written: `\`${code}\``, candidates: [normalize(path)], anchor })
    }
  }
  return refs
}

/** What is wrong with a reference: undefined when it resolves. */
const problemOf = (ref: Reference, readPage: (file: string) => string | undefined): string | undefined => {
  const found = ref.candidates.find((candidate) => !candidate.startsWith("..") && existsSync(join(root, candidate)))
  if (found === undefined) return `${ref.written}: no ${ref.candidates.join(" or ")} in the repository`
  if (ref.anchor === undefined || ref.anchor === "") return undefined
  if (statSync(join(root, found)).isDirectory()) return `${ref.written}: ${found} is a directory; it has no headings`
  const text = readPage(found)
  if (text === undefined || !anchorsOf(text).has(ref.anchor))
    return `${ref.written}: ${found} has no heading #${ref.anchor}`
  return undefined
}

const read = (file: string): string | undefined => {
  try {
    return readFileSync(join(root, file), "utf8")
  } catch {
    return undefined
  }
}

const pages = [
  "README.md",
  ...readdirSync(join(root, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => `docs/${name}`)
]

describe("links of README.md and docs/", () => {
  it.each(pages)("%s: every link and file name resolves in the repository", (page) => {
    const refs = referencesOf(page, read(page)!)
    const problems = refs.flatMap((ref) => problemOf(ref, read) ?? [])
    expect(problems).toEqual([])
  })

  it("the README links every page under docs/", () => {
    const linked = new Set(referencesOf("README.md", read("README.md")!).flatMap((ref) => ref.candidates))
    expect(pages.filter((page) => page !== "README.md" && !linked.has(page))).toEqual([])
  })

  it("finds what is broken: a missing file, a missing heading, a bare name", () => {
    const text = [
      "# A page",
      "## Its part, in `code`",
      "[ok](#its-part-in-code) [ok too](rl-math.md#4-the-loss) [gone](missing.md) [no heading](command.md#nowhere)",
      "[elsewhere](https://example.com/missing.md) `gone.md` `examples/gone.ts` `docs/rl-math.md`",
      "```sh",
      "[in a block](missing-too.md)",
      "```"
    ].join("\n")
    const pageOf = (file: string) => (file === "docs/page.md" ? text : read(file))
    const problems = referencesOf("docs/page.md", text).flatMap((ref) =>
      ref.candidates[0] === "docs/page.md"
        ? anchorsOf(text).has(ref.anchor!)
          ? []
          : [ref.written]
        : (problemOf(ref, pageOf) ?? [])
    )
    expect(problems).toEqual([
      "[gone](missing.md): no docs/missing.md in the repository",
      "[no heading](command.md#nowhere): docs/command.md has no heading #nowhere",
      "`gone.md`: no docs/gone.md or gone.md in the repository",
      "`examples/gone.ts`: no examples/gone.ts in the repository"
    ])
  })
})
