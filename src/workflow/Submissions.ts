/**
 * The durable record of the training jobs a loop submitted: one {@link Submission} per model and checkpoint
 * step, kept in a `KeyValueStore` the user can swap (`@effect/platform`'s `KeyValueStore`: in memory, on
 * the file system, in a browser's storage, or any other), by default a directory of small JSON files
 * ({@link directory}, written atomically). `Trainer.train` and `TrainingLoop.run` take it as their `state`
 * option.
 *
 * A record goes through two writes: the **intent** (the idempotency key and the request body, before the job
 * is created) and the **job id** (after; the request body is then dropped). So whatever point a process is
 * killed at, the next one finds either nothing (no job was asked for), an intent (a job may or may not exist:
 * it is asked for again under the same key only where the backend honours keys, else the loop stops with
 * `TrainerError` `Ambiguous`), or the job id (the job is followed, not submitted again). See `Trainer`.
 *
 * Keys are `<model id>.step-<step>.json`; the file store writes each record to a temporary file, syncs it and
 * renames it over the old one, so a record is never seen half written.
 *
 * @since 0.1.0
 */
import { randomUUID } from "node:crypto"
import { mkdir, open, readdir, readFile, rename, rm } from "node:fs/promises"
import { join, resolve } from "node:path"
import * as PlatformError from "@effect/platform/Error"
import * as KeyValueStore from "@effect/platform/KeyValueStore"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"

/** What a loop submitted (or was about to submit) for one checkpoint step of one model. */
export class Submission extends Schema.Class<Submission>("effect-rl/Submission")({
  /** The model. */
  modelId: Schema.String,
  /** The checkpoint step the job trains from (it makes `step + 1`). */
  step: Schema.Int,
  /** An RL or an SFT job. */
  kind: Schema.Literal("rl", "sft"),
  /** The `Idempotency-Key` the job is (or was to be) created under. */
  idempotencyKey: Schema.String,
  /** The job, once its creation answered; absent in an intent. */
  jobId: Schema.optional(Schema.String),
  /** The request body as encoded for the wire, kept in an intent only (to ask again under the same key). */
  request: Schema.optional(Schema.Unknown),
  /** The metrics of the groups the job trains on (`Metrics.compute`), so a resumed step reports them. */
  metrics: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Number })),
  /** When the intent was written (ISO 8601). */
  submittedAt: Schema.String
}) {}

/** Where submissions are kept: a directory (see {@link directory}) or any `KeyValueStore`. */
export type Location = string | KeyValueStore.KeyValueStore

/** The directory `TrainingLoop.run` keeps its submissions in by default, under the working directory. */
export const DEFAULT_DIRECTORY = ".effect-rl/submissions"

/** The key of a model's step. */
export const key = (modelId: string, step: number): string => `${modelId}.step-${step}.json`

const systemError = (method: string, path: string, cause: unknown) =>
  new PlatformError.SystemError({
    reason: "Unknown",
    module: "KeyValueStore",
    method,
    pathOrDescriptor: path,
    description: cause instanceof Error ? cause.message : String(cause),
    cause
  })

const attempt = <A>(method: string, path: string, f: () => Promise<A>) =>
  Effect.tryPromise({ try: f, catch: (cause) => systemError(method, path, cause) })

const isMissing = (error: unknown): boolean => (error as { readonly code?: unknown } | null)?.code === "ENOENT"

/**
 * A `KeyValueStore` of one file per key under `dir` (made on the first write): a write goes to a temporary
 * file, is synced to disk, and is renamed over the key's file, so a reader (or a process started after a
 * crash) sees the old record or the new one, never part of one.
 */
export const directory = (dir: string): KeyValueStore.KeyValueStore => {
  const root = resolve(dir)
  const fileOf = (key: string) => join(root, encodeURIComponent(key))
  const read = <A>(method: string, key: string, f: (path: string) => Promise<A>) =>
    attempt(method, fileOf(key), async () => {
      try {
        return Option.some(await f(fileOf(key)))
      } catch (error) {
        if (isMissing(error)) return Option.none<A>()
        throw error
      }
    })
  const files = (method: string) =>
    attempt(method, root, async () => {
      try {
        return (await readdir(root)).filter((name) => !name.endsWith(".tmp"))
      } catch (error) {
        if (isMissing(error)) return []
        throw error
      }
    })
  return KeyValueStore.make({
    get: (key) => read("get", key, (path) => readFile(path, "utf8")),
    getUint8Array: (key) => read("getUint8Array", key, async (path) => new Uint8Array(await readFile(path))),
    set: (key, value) =>
      attempt("set", fileOf(key), async () => {
        await mkdir(root, { recursive: true, mode: 0o700 })
        const path = fileOf(key)
        const temporary = `${path}.${randomUUID()}.tmp`
        const handle = await open(temporary, "w", 0o600)
        try {
          await handle.writeFile(value)
          await handle.sync()
        } finally {
          await handle.close()
        }
        await rename(temporary, path)
      }),
    remove: (key) => attempt("remove", fileOf(key), () => rm(fileOf(key), { force: true })),
    clear: Effect.flatMap(files("clear"), (names) =>
      attempt("clear", root, () => Promise.all(names.map((name) => rm(join(root, name), { force: true })))).pipe(
        Effect.asVoid
      )
    ),
    size: Effect.map(files("size"), (names) => names.length)
  })
}

/** Where a record lives, for messages: the file of a directory store, else the key. */
export const describe = (location: Location, modelId: string, step: number): string =>
  typeof location === "string"
    ? join(resolve(location), encodeURIComponent(key(modelId, step)))
    : `key ${key(modelId, step)}`

/** The store a location names. */
const storeOf = (location: Location): KeyValueStore.KeyValueStore =>
  typeof location === "string" ? directory(location) : location

const json = Schema.parseJson(Submission)

/** The record of a model's step, if any (a record that does not decode fails with its `ParseError`). */
export const get = (
  location: Location,
  modelId: string,
  step: number
): Effect.Effect<Option.Option<Submission>, PlatformError.PlatformError | ParseResult.ParseError> =>
  Effect.flatMap(storeOf(location).get(key(modelId, step)), (text) =>
    Option.isNone(text) ? Effect.succeed(Option.none()) : Effect.map(Schema.decode(json)(text.value), Option.some)
  )

/** Writes a record under its model and step, in place of any before it. */
export const put = (
  location: Location,
  submission: Submission
): Effect.Effect<void, PlatformError.PlatformError | ParseResult.ParseError> =>
  Effect.flatMap(Schema.encode(json)(submission), (text) =>
    storeOf(location).set(key(submission.modelId, submission.step), text)
  )

/** Removes the record of a model's step (nothing when there is none). */
export const remove = (
  location: Location,
  modelId: string,
  step: number
): Effect.Effect<void, PlatformError.PlatformError> => storeOf(location).remove(key(modelId, step))
