/**
 * Uploaded files of the local backend (the server's `/v1/local/files` extension): opaque bytes, in practice
 * SFT training data as JSONL, stored whole in one row of the `files` table. An insert is one statement, so a
 * file is either there with all its bytes or not at all, and it is on disk when `put` returns (see
 * `Database`'s durability).
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { decodeRows, nowIso, orDieSql } from "./internal/sql.js"
import type { StoreError } from "./StoreError.js"

/** A stored file without its bytes. */
export const FileRecord = Schema.Struct({
  id: Schema.String,
  bytes: Schema.Int,
  content_type: Schema.String,
  created_at: Schema.String
})
/** @see {@link FileRecord} */
export type FileRecord = typeof FileRecord.Type

const decodeFiles = decodeRows(FileRecord, "file")

/** The files repository. */
export interface Service {
  /** Stores bytes under a new id (a UUID), with the media type they were sent as. */
  readonly put: (content: Uint8Array, contentType: string) => Effect.Effect<FileRecord>
  /** A file's record, or none when the id is unknown. */
  readonly get: (id: string) => Effect.Effect<Option.Option<FileRecord>, StoreError>
  /** A file's bytes, or none when the id is unknown. */
  readonly content: (id: string) => Effect.Effect<Option.Option<Uint8Array>>
}

/** The files repository service. */
export class Files extends Context.Tag("effect-rl/local/store/Files")<Files, Service>() {}

/** Builds the files repository over the `SqlClient`. */
export const make: Effect.Effect<Service, never, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient

  const put = (content: Uint8Array, contentType: string) =>
    Effect.gen(function* () {
      const record: FileRecord = {
        id: crypto.randomUUID(),
        bytes: content.byteLength,
        content_type: contentType,
        created_at: yield* nowIso
      }
      yield* sql`INSERT INTO files ${sql.insert({ ...record, content })}`
      return record
    }).pipe(orDieSql, Effect.withSpan("Files.put"))

  const get = (id: string) =>
    sql`SELECT id, bytes, content_type, created_at FROM files WHERE id = ${id}`.pipe(
      Effect.flatMap(decodeFiles),
      Effect.map((rows) => Option.fromNullable(rows[0])),
      orDieSql
    )

  const content = (id: string) =>
    sql<{ readonly content: Uint8Array }>`SELECT content FROM files WHERE id = ${id}`.pipe(
      Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row) => row.content)),
      orDieSql,
      Effect.withSpan("Files.content")
    )

  return { put, get, content }
})

/** The files repository layer. */
export const layer: Layer.Layer<Files, never, SqlClient.SqlClient> = Layer.effect(Files, make)
