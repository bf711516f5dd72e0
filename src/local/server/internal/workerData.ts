/**
 * SFT training data for the job worker: reading `training_data_url` (a `file://` path, or an http(s) URL
 * fetched with a plain `fetch`) and decoding its JSONL, one `{messages, tools?}` per line.
 *
 * @since 0.1.0
 */
import { readFile } from "node:fs/promises"
import { fileURLToPath } from "node:url"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { Message, Tool } from "../../../api/ChatMessage.js"
import type { SftExample } from "../../engine/Batches.js"

/** A job that cannot be trained (bad data, a bad request), with the message its `training_failed` event carries. */
export class JobFailure extends Data.TaggedError("JobFailure")<{ readonly message: string }> {}

/** Reads the text at a training data URL. */
export type ReadTrainingData = (url: string) => Effect.Effect<string, JobFailure>

/** One line of SFT training data. */
export const SftLine = Schema.Struct({
  messages: Schema.Array(Message),
  tools: Schema.optional(Schema.NullOr(Schema.Array(Tool)))
})

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

const fail = (message: string) => new JobFailure({ message })

/**
 * The default reader: a `file://` URL is read from disk, an http(s) URL is fetched (a non-2xx status fails);
 * any other scheme fails.
 */
export const readTrainingData: ReadTrainingData = (url) => {
  if (url.startsWith("file:")) {
    return Effect.tryPromise({
      try: () => readFile(fileURLToPath(url), "utf8"),
      catch: (error) => fail(`cannot read training data at ${url}: ${messageOf(error)}`)
    })
  }
  if (url.startsWith("http://") || url.startsWith("https://")) {
    return Effect.tryPromise({
      try: async (signal) => {
        const response = await fetch(url, { signal })
        if (!response.ok) throw new Error(`HTTP ${response.status}`)
        return await response.text()
      },
      catch: (error) => fail(`cannot fetch training data at ${url}: ${messageOf(error)}`)
    })
  }
  return Effect.fail(fail(`unsupported training_data_url ${url}: expected a file:// or http(s) URL`))
}

const decodeLine = Schema.decodeUnknownEither(SftLine)

/** Decodes JSONL training data (blank lines skipped); fails naming the first bad line (1-based). */
export const decodeSftLines = (text: string): Effect.Effect<ReadonlyArray<SftExample>, JobFailure> =>
  Effect.suspend(() => {
    const examples: Array<SftExample> = []
    const lines = text.split("\n")
    for (const [index, raw] of lines.entries()) {
      const line = raw.trim()
      if (line === "") continue
      let json: unknown
      try {
        json = JSON.parse(line)
      } catch (error) {
        return Effect.fail(fail(`training data line ${index + 1} is not JSON: ${messageOf(error)}`))
      }
      const decoded = decodeLine(json)
      if (decoded._tag === "Left") {
        const detail = ParseResult.TreeFormatter.formatErrorSync(decoded.left)
        return Effect.fail(fail(`training data line ${index + 1} is not a {messages, tools?} example: ${detail}`))
      }
      examples.push(decoded.right)
    }
    if (examples.length === 0) return Effect.fail(fail("the training data has no examples"))
    return Effect.succeed(examples)
  })
