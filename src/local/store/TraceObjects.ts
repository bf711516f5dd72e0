/**
 * Objects, tables and files of the trace surface, stored in `trace_objects`, `trace_table_rows`,
 * `trace_tables` and `trace_files`:
 *
 * - an object's versions are rows in creation order; creating a digest that is already a live version of the
 *   object is a no-op, any other creation appends a version whose `version_index` is the number of earlier rows
 *   (deleted ones included); deletion is soft (`deleted_at`);
 * - table rows and tables are content-addressed by the digests the server computes, so storing one twice is a
 *   no-op;
 * - files keep their bytes, addressed by their byte digest.
 *
 * Digests, kinds and classes are the server's business (`server/internal/trace/`); this module stores what it
 * is given. Values are kept as the JSON text they were hashed from.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"

/** A new object version, as the server hands it over. `val` is JSON text. */
export interface ObjectInsert {
  readonly project_id: string
  readonly object_id: string
  readonly digest: string
  readonly kind: string
  readonly base_object_class: string | null
  readonly leaf_object_class: string | null
  readonly val: string
  readonly created_at: string
}

/** A stored object version (live or deleted). */
export interface ObjectRecord extends ObjectInsert {
  readonly version_index: number
  readonly deleted_at: string | null
}

/** A table row: its digest and its value as JSON text. */
export interface RowRecord {
  readonly digest: string
  readonly val: string
}

/** The trace objects repository. */
export interface Service {
  /**
   * Stores a version of an object unless the digest is already a live version of it; whether it was created.
   */
  readonly createObject: (insert: ObjectInsert) => Effect.Effect<{ readonly created: boolean }>
  /** Every version (live and deleted) of one object, by `version_index`. */
  readonly versions: (projectId: string, objectId: string) => Effect.Effect<ReadonlyArray<ObjectRecord>>
  /** Every version (live and deleted) of every object of a project, in creation order. */
  readonly projectVersions: (projectId: string) => Effect.Effect<ReadonlyArray<ObjectRecord>>
  /**
   * Soft-deletes the live versions with the given digests (every live version without digests); how many, or
   * none when nothing, or not every given digest, is a live version (then nothing is deleted).
   */
  readonly deleteObject: (
    projectId: string,
    objectId: string,
    digests: ReadonlyArray<string> | undefined,
    now: string
  ) => Effect.Effect<Option.Option<number>>
  /** Stores a table's rows and the table (both content-addressed). */
  readonly putTable: (
    projectId: string,
    digest: string,
    rows: ReadonlyArray<RowRecord>,
    rowDigests: ReadonlyArray<string>
  ) => Effect.Effect<void>
  /** A table's row digests, in order. */
  readonly tableRowDigests: (projectId: string, digest: string) => Effect.Effect<Option.Option<ReadonlyArray<string>>>
  /** The stored rows with the given digests, by digest. */
  readonly rows: (projectId: string, digests: ReadonlyArray<string>) => Effect.Effect<ReadonlyMap<string, string>>
  /** Stores a file's bytes under its digest. */
  readonly putFile: (projectId: string, digest: string, content: Uint8Array) => Effect.Effect<void>
  /** A file's bytes. */
  readonly file: (projectId: string, digest: string) => Effect.Effect<Option.Option<Uint8Array>>
}

/** The trace objects repository service. */
export class TraceObjects extends Context.Tag("effect-rl/local/store/TraceObjects")<TraceObjects, Service>() {}

const objectColumns =
  "project_id, object_id, digest, version_index, kind, base_object_class, leaf_object_class, val, created_at, " +
  "deleted_at"

/** The most list items bound in one statement (SQLite limits the number of variables). */
const CHUNK = 500

/** Builds the repository over the `SqlClient`. SQL failures are defects (see `StoreError`). */
export const make: Effect.Effect<Service, never, SqlClient.SqlClient> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient

  const createObject = (insert: ObjectInsert) =>
    Effect.gen(function* () {
      const live = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM trace_objects
        WHERE project_id = ${insert.project_id} AND object_id = ${insert.object_id} AND digest = ${insert.digest}
          AND deleted_at IS NULL`
      if ((live[0]?.n ?? 0) > 0) return { created: false }
      const earlier = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM trace_objects
        WHERE project_id = ${insert.project_id} AND object_id = ${insert.object_id}`
      yield* sql`INSERT INTO trace_objects ${sql.insert({ ...insert, version_index: earlier[0]?.n ?? 0 })}`
      return { created: true }
    }).pipe(sql.withTransaction, Effect.orDie, Effect.withSpan("TraceObjects.createObject"))

  const versions = (projectId: string, objectId: string) =>
    sql<ObjectRecord>`SELECT ${sql.literal(objectColumns)} FROM trace_objects
      WHERE project_id = ${projectId} AND object_id = ${objectId} ORDER BY version_index`.pipe(Effect.orDie)

  const projectVersions = (projectId: string) =>
    sql<ObjectRecord>`SELECT ${sql.literal(objectColumns)} FROM trace_objects
      WHERE project_id = ${projectId} ORDER BY seq`.pipe(Effect.orDie)

  const deleteObject = (projectId: string, objectId: string, digests: ReadonlyArray<string> | undefined, now: string) =>
    Effect.gen(function* () {
      const live = yield* sql<{ digest: string }>`SELECT digest FROM trace_objects
        WHERE project_id = ${projectId} AND object_id = ${objectId} AND deleted_at IS NULL`
      const liveDigests = new Set(live.map((row) => row.digest))
      const wanted = digests === undefined ? [...liveDigests] : [...new Set(digests)]
      if (wanted.length === 0 || wanted.some((digest) => !liveDigests.has(digest))) return Option.none<number>()
      let deleted = 0
      for (let i = 0; i < wanted.length; i += CHUNK) {
        const part = wanted.slice(i, i + CHUNK)
        const rows = yield* sql<{ seq: number }>`UPDATE trace_objects SET deleted_at = ${now}
          WHERE project_id = ${projectId} AND object_id = ${objectId} AND deleted_at IS NULL
            AND ${sql.in("digest", part)} RETURNING seq`
        deleted += rows.length
      }
      return Option.some(deleted)
    }).pipe(sql.withTransaction, Effect.orDie, Effect.withSpan("TraceObjects.deleteObject"))

  const putTable = (
    projectId: string,
    digest: string,
    rows: ReadonlyArray<RowRecord>,
    rowDigests: ReadonlyArray<string>
  ) =>
    Effect.gen(function* () {
      const unique = [...new Map(rows.map((row) => [row.digest, row])).values()]
      for (let i = 0; i < unique.length; i += CHUNK) {
        const part = unique.slice(i, i + CHUNK).map((row) => ({ project_id: projectId, ...row }))
        yield* sql`INSERT INTO trace_table_rows ${sql.insert(part)} ON CONFLICT DO NOTHING`
      }
      yield* sql`INSERT INTO trace_tables ${sql.insert({
        project_id: projectId,
        digest,
        row_digests: JSON.stringify(rowDigests)
      })} ON CONFLICT DO NOTHING`
    }).pipe(sql.withTransaction, Effect.orDie, Effect.withSpan("TraceObjects.putTable"))

  const tableRowDigests = (projectId: string, digest: string) =>
    sql<{ row_digests: string }>`SELECT row_digests FROM trace_tables
      WHERE project_id = ${projectId} AND digest = ${digest}`.pipe(
      Effect.map((found) =>
        Option.map(Option.fromNullable(found[0]), (row) => JSON.parse(row.row_digests) as ReadonlyArray<string>)
      ),
      Effect.orDie
    )

  const rows = (projectId: string, digests: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      const unique = [...new Set(digests)]
      const found = new Map<string, string>()
      for (let i = 0; i < unique.length; i += CHUNK) {
        const part = unique.slice(i, i + CHUNK)
        const got = yield* sql<RowRecord>`SELECT digest, val FROM trace_table_rows
          WHERE project_id = ${projectId} AND ${sql.in("digest", part)}`
        for (const row of got) found.set(row.digest, row.val)
      }
      return found as ReadonlyMap<string, string>
    }).pipe(Effect.orDie)

  const putFile = (projectId: string, digest: string, content: Uint8Array) =>
    sql`INSERT INTO trace_files ${sql.insert({ project_id: projectId, digest, content })}
      ON CONFLICT DO NOTHING`.pipe(Effect.asVoid, Effect.orDie)

  const file = (projectId: string, digest: string) =>
    sql<{ content: Uint8Array }>`SELECT content FROM trace_files
      WHERE project_id = ${projectId} AND digest = ${digest}`.pipe(
      Effect.map((found) => Option.map(Option.fromNullable(found[0]), (row) => new Uint8Array(row.content))),
      Effect.orDie
    )

  return {
    createObject,
    versions,
    projectVersions,
    deleteObject,
    putTable,
    tableRowDigests,
    rows,
    putFile,
    file
  } satisfies Service
})

/** The repository as a layer over the `SqlClient`. */
export const layer: Layer.Layer<TraceObjects, never, SqlClient.SqlClient> = Layer.effect(TraceObjects, make)
