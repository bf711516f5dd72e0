/**
 * SFT training data for the job worker: reading `training_data_url` under the server's read policy and
 * decoding its JSONL, one `{messages, tools?}` per line.
 *
 * The policy (see {@link ReadPolicy}) is the owner's: a `file://` URL is read only under a directory given
 * to the server (`allowDirs`, symlinks and `..` resolved first), an http(s) URL fetched only when `allowHttp`;
 * by default neither is. (The server's own uploaded files are read from its store before this; see
 * `files.ts`.) No failure message quotes the data: a line that does not decode is named by its number and
 * the field at fault.
 *
 * @since 0.1.0
 */
import { constants } from "node:fs"
import { open, realpath } from "node:fs/promises"
import { isAbsolute, relative, resolve, sep } from "node:path"
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

/** What training data the worker may read besides the server's own uploads. */
export interface ReadPolicy {
  /** Directories whose files `file://` URLs may name (default none). */
  readonly allowDirs?: ReadonlyArray<string> | undefined
  /** Whether http(s) URLs are fetched (default false). */
  readonly allowHttp?: boolean | undefined
}

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

const fail = (message: string) => new JobFailure({ message })

/** Whether `path` is strictly inside `root` (both absolute and normalized). */
const isWithin = (root: string, path: string): boolean => {
  const rel = relative(root, path)
  return rel !== "" && rel !== ".." && !rel.startsWith(`..${sep}`) && !isAbsolute(rel)
}

/** An allowed directory as given (absolute, normalized) and with its symlinks resolved (when it exists). */
const rootsOf = (dirs: ReadonlyArray<string>) =>
  Effect.promise(() =>
    Promise.all(
      dirs.map(async (dir) => {
        const given = resolve(dir)
        const real = await realpath(given).catch(() => undefined)
        return { given, real }
      })
    )
  )

const refusedFile = (url: string) =>
  fail(
    `training_data_url ${url} is not under a directory this server may read: start it with --allow-dir (allowDirs) naming the data's directory, or upload the data to its /v1/local/files`
  )

/**
 * Reads a `file://` URL when the file is inside an allowed directory: refused without touching the file
 * system when its path (`..` resolved) is outside them all, and refused when its real path (symlinks resolved)
 * is; then opened without following a symlink, and read only if it is a regular file.
 */
const readAllowedFile = (url: string, dirs: ReadonlyArray<string>): Effect.Effect<string, JobFailure> =>
  Effect.gen(function* () {
    const path = yield* Effect.try({
      try: () => fileURLToPath(url),
      catch: (error) => fail(`training_data_url ${url} is not a file path: ${messageOf(error)}`)
    })
    const roots = yield* rootsOf(dirs)
    const lexical = resolve(path)
    if (!roots.some(({ given, real }) => isWithin(given, lexical) || (real !== undefined && isWithin(real, lexical)))) {
      return yield* refusedFile(url)
    }
    return yield* Effect.tryPromise({
      try: async () => {
        const real = await realpath(path)
        if (!roots.some((root) => root.real !== undefined && isWithin(root.real, real))) return undefined
        const handle = await open(real, constants.O_RDONLY | constants.O_NOFOLLOW)
        try {
          if (!(await handle.stat()).isFile()) throw new Error("not a regular file")
          return await handle.readFile("utf8")
        } finally {
          await handle.close()
        }
      },
      catch: (error) => fail(`cannot read training data at ${url}: ${messageOf(error)}`)
    }).pipe(Effect.flatMap((text) => (text === undefined ? Effect.fail(refusedFile(url)) : Effect.succeed(text))))
  })

/** Fetches an http(s) URL (a non-2xx status fails). */
const fetchText = (url: string): Effect.Effect<string, JobFailure> =>
  Effect.tryPromise({
    try: async (signal) => {
      const response = await fetch(url, { signal })
      if (!response.ok) throw new Error(`HTTP ${response.status}`)
      return await response.text()
    },
    catch: (error) => fail(`cannot fetch training data at ${url}: ${messageOf(error)}`)
  })

/**
 * A reader under a policy: a `file://` URL is read when inside `allowDirs`, an http(s) URL fetched when
 * `allowHttp`; anything else fails the job, saying what the server would need to read it.
 */
export const makeReader =
  (policy: ReadPolicy = {}): ReadTrainingData =>
  (url) => {
    if (url.startsWith("file:")) return readAllowedFile(url, policy.allowDirs ?? [])
    if (url.startsWith("http://") || url.startsWith("https://")) {
      return policy.allowHttp === true
        ? fetchText(url)
        : Effect.fail(
            fail(
              `training_data_url ${url} is not fetched: this server fetches http(s) training data only when started with --allow-http (allowHttp); upload the data to its /v1/local/files`
            )
          )
    }
    return Effect.fail(fail(`unsupported training_data_url ${url}: expected a file:// or http(s) URL`))
  }

/** The default reader: nothing allowed (every `file://` and http(s) URL fails the job). */
export const readTrainingData: ReadTrainingData = makeReader()

const decodeLine = Schema.decodeUnknownEither(SftLine)

/** A schema key or an index, as a path segment; anything else (a key taken from the data) as `[…]`. */
const segment = (key: PropertyKey): string => {
  if (typeof key === "number") return `[${key}]`
  if (typeof key === "string" && /^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(key)) return `.${key}`
  return "[…]"
}

/** The field at fault in a decoding error, e.g. `messages[0].role`, without any of the data's values. */
export const fieldOf = (error: ParseResult.ParseError): string => {
  const path = ParseResult.ArrayFormatter.formatErrorSync(error)[0]?.path ?? []
  const field = path.map(segment).join("").replace(/^\./, "")
  return field === "" ? "the line" : field
}

/**
 * Decodes JSONL training data (blank lines skipped); fails naming the first bad line (1-based) and, when it
 * is JSON, the field at fault, never quoting the line.
 */
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
      } catch {
        // JSON.parse's message quotes the text around the error: left out.
        return Effect.fail(fail(`training data line ${index + 1} is not JSON`))
      }
      const decoded = decodeLine(json)
      if (decoded._tag === "Left") {
        return Effect.fail(
          fail(
            `training data line ${index + 1} is not a {messages, tools?} example: ${fieldOf(decoded.left)} is invalid`
          )
        )
      }
      examples.push(decoded.right)
    }
    if (examples.length === 0) return Effect.fail(fail("the training data has no examples"))
    return Effect.succeed(examples)
  })
