/**
 * SFT data: conversations serialized as JSONL, and stored where a training job reads them (a directory on
 * this machine, as `file://` URLs, or a function of the caller's).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { basename, join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as SftData from "../../src/workflow/SftData.js"

const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "effect-rl-sft-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

const conversations: ReadonlyArray<SftData.Conversation> = [
  {
    messages: [
      { role: "system", content: "Answer with a colour." },
      { role: "user", content: "Sky?" },
      { role: "assistant", content: "blue" }
    ]
  },
  {
    messages: [
      { role: "user", content: "Weather in Paris?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c1", type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } }]
      },
      { role: "tool", tool_call_id: "c1", content: "sunny" },
      { role: "assistant", content: "Sunny." }
    ],
    tools: [{ type: "function", function: { name: "weather", parameters: { type: "object" } } }]
  }
]

const upload = (jsonl: string) => Effect.flatMap(SftData.SftData, (data) => data.upload(jsonl))

describe("SftData", () => {
  it.effect("toJsonl writes one conversation per line, each line ended by a newline", () =>
    Effect.gen(function* () {
      const jsonl = yield* SftData.toJsonl(conversations)
      expect(jsonl.endsWith("\n")).toBe(true)
      const lines = jsonl.split("\n").slice(0, -1)
      expect(lines).toHaveLength(2)
      expect(lines.map((line) => JSON.parse(line))).toEqual(conversations)
    })
  )

  it.effect("toJsonl refuses a conversation that is not one, naming it", () =>
    Effect.gen(function* () {
      const bad = [conversations[0], { messages: [{ role: 42 }] }] as unknown as ReadonlyArray<SftData.Conversation>
      const error = yield* Effect.flip(SftData.toJsonl(bad))
      expect(error).toMatchObject({ _tag: "SftDataError", reason: "Encode" })
      expect(error.description).toMatch(/^conversation 1: /)
    })
  )

  it.scoped("directory writes atomically under a content name and answers its file:// URL", () =>
    Effect.gen(function* () {
      const dir = join(yield* tempDir, "nested")
      const jsonl = yield* SftData.toJsonl(conversations)
      const url = yield* upload(jsonl).pipe(Effect.provide(SftData.directory(dir)))
      expect(url.startsWith("file://")).toBe(true)
      const path = fileURLToPath(url)
      expect(readFileSync(path, "utf8")).toBe(jsonl)
      // No temporary file is left beside it.
      expect(readdirSync(dir)).toEqual([basename(path)])
      // The same content gets the same URL; other content another one.
      expect(yield* upload(jsonl).pipe(Effect.provide(SftData.directory(dir)))).toBe(url)
      const other = yield* upload(`${jsonl}${jsonl}`).pipe(Effect.provide(SftData.directory(dir)))
      expect(other).not.toBe(url)
      expect(readdirSync(dir).sort()).toEqual([basename(path), basename(fileURLToPath(other))].sort())
    })
  )

  it.scoped("directory fails with an Upload error when it cannot write", () =>
    Effect.gen(function* () {
      const file = join(yield* tempDir, "a-file")
      writeFileSync(file, "")
      // A directory path that runs through a regular file cannot be created.
      const error = yield* Effect.flip(upload("y\n").pipe(Effect.provide(SftData.directory(join(file, "below")))))
      expect(error).toMatchObject({ _tag: "SftDataError", reason: "Upload" })
    })
  )

  it.effect("fromFunction hands the JSONL to the caller's upload", () =>
    Effect.gen(function* () {
      const got: Array<string> = []
      const layer = SftData.fromFunction((jsonl) =>
        Effect.sync(() => {
          got.push(jsonl)
          return "wandb-artifact:///me/p/sft:v0"
        })
      )
      const jsonl = yield* SftData.toJsonl(conversations)
      expect(yield* upload(jsonl).pipe(Effect.provide(layer))).toBe("wandb-artifact:///me/p/sft:v0")
      expect(got).toEqual([jsonl])
    })
  )
})
