/**
 * Objects, tables, refs and files of the trace service (surface A), and the dataset deletion
 * result. Object and row digests are computed as `Digest` says; an object's version is addressed by
 * its content digest, `latest`, or `vN`.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { JsonObject, JsonValue } from "./Json.js"
import { ProjectId, SortBy, Timestamp } from "./TraceCall.js"

/** An optional key that may also be `null`, as the service's `X | None = None` fields are. */
const nullable = <S extends Schema.Schema.Any>(schema: S) => Schema.optional(Schema.NullOr(schema))

const objectIdPattern = /^[\p{L}\p{N}_.-]+$/u

/**
 * An object's name: Python's `[\w._-]+` (word characters are Unicode letters and digits), at most 128
 * characters (code points).
 */
export const ObjectId = Schema.String.pipe(
  Schema.filter((id) => objectIdPattern.test(id) && [...id].length <= 128, {
    message: () => "an object id matches [\\w._-]+ and has at most 128 characters"
  }),
  Schema.annotations({
    identifier: "ObjectId",
    arbitrary: () => (fc) => fc.stringMatching(/^[A-Za-z0-9_.-]{1,128}$/)
  })
)
/** @see {@link ObjectId} */
export type ObjectId = typeof ObjectId.Type

// ---------------------------------------------------------------------------------------------------------------
// Objects
// ---------------------------------------------------------------------------------------------------------------

/** An object as a client creates it. */
export const ObjectInsert = Schema.Struct({
  project_id: ProjectId,
  object_id: ObjectId,
  val: JsonValue,
  builtin_object_class: nullable(Schema.String),
  set_base_object_class: nullable(Schema.String),
  expected_digest: nullable(Schema.String),
  wb_user_id: nullable(Schema.String)
}).annotations({ identifier: "ObjectInsert" })
/** @see {@link ObjectInsert} */
export type ObjectInsert = typeof ObjectInsert.Type

/**
 * The body of `POST /obj/create`: `{obj}`. Creating an existing live digest is a no-op that returns it;
 * otherwise the new version gets `version_index` = number of earlier versions and becomes the latest.
 */
export const ObjCreateReq = Schema.Struct({ obj: ObjectInsert }).annotations({ identifier: "ObjCreateReq" })
/** @see {@link ObjCreateReq} */
export type ObjCreateReq = typeof ObjCreateReq.Type

/** The result of an object create: the version's digest. */
export const ObjCreateRes = Schema.Struct({
  digest: Schema.String,
  object_id: nullable(Schema.String)
}).annotations({ identifier: "ObjCreateRes" })
/** @see {@link ObjCreateRes} */
export type ObjCreateRes = typeof ObjCreateRes.Type

/** The kind of an object version: an op or any other object. */
export const ObjectKind = Schema.Literal("op", "object")
/** @see {@link ObjectKind} */
export type ObjectKind = typeof ObjectKind.Type

/**
 * One version of an object (`ObjSchema`). `kind` is `op` or `object` ({@link ObjectKind}; typed as a string so
 * a later kind still decodes); `is_latest` is 1 for the latest version and 0 otherwise.
 */
export class ObjectVersion extends Schema.Class<ObjectVersion>("effect-rl/trace/ObjectVersion")({
  project_id: ProjectId,
  object_id: Schema.String,
  created_at: Timestamp,
  deleted_at: nullable(Timestamp),
  digest: Schema.String,
  version_index: Schema.Int,
  is_latest: Schema.Int,
  kind: Schema.String,
  base_object_class: Schema.NullOr(Schema.String),
  leaf_object_class: nullable(Schema.String),
  val: JsonValue,
  wb_user_id: nullable(Schema.String),
  size_bytes: nullable(Schema.Int),
  tags: nullable(Schema.Array(Schema.String)),
  aliases: nullable(Schema.Array(Schema.String))
}) {}

/** The body of `POST /obj/read`; `digest` is a content digest, `latest` or `vN`. */
export const ObjReadReq = Schema.Struct({
  project_id: ProjectId,
  object_id: Schema.String,
  digest: Schema.String,
  metadata_only: nullable(Schema.Boolean),
  include_tags_and_aliases: nullable(Schema.Boolean)
}).annotations({ identifier: "ObjReadReq" })
/** @see {@link ObjReadReq} */
export type ObjReadReq = typeof ObjReadReq.Type

/** The result of an object read. */
export const ObjReadRes = Schema.Struct({ obj: ObjectVersion }).annotations({ identifier: "ObjReadRes" })
/** @see {@link ObjReadRes} */
export type ObjReadRes = typeof ObjReadRes.Type

/** The filter of an objects query. */
export const ObjectVersionFilter = Schema.Struct({
  base_object_classes: nullable(Schema.Array(Schema.String)),
  exclude_base_object_classes: nullable(Schema.Array(Schema.String)),
  leaf_object_classes: nullable(Schema.Array(Schema.String)),
  object_ids: nullable(Schema.Array(Schema.String)),
  is_op: nullable(Schema.Boolean),
  latest_only: nullable(Schema.Boolean),
  tags: nullable(Schema.Array(Schema.String)),
  aliases: nullable(Schema.Array(Schema.String))
}).annotations({ identifier: "ObjectVersionFilter" })
/** @see {@link ObjectVersionFilter} */
export type ObjectVersionFilter = typeof ObjectVersionFilter.Type

/** The body of `POST /objs/query`; sort by `object_id` or `created_at`. */
export const ObjQueryReq = Schema.Struct({
  project_id: ProjectId,
  filter: nullable(ObjectVersionFilter),
  limit: nullable(Schema.NonNegativeInt),
  offset: nullable(Schema.NonNegativeInt),
  sort_by: nullable(Schema.Array(SortBy)),
  metadata_only: nullable(Schema.Boolean),
  include_storage_size: nullable(Schema.Boolean),
  include_tags_and_aliases: nullable(Schema.Boolean)
}).annotations({ identifier: "ObjQueryReq" })
/** @see {@link ObjQueryReq} */
export type ObjQueryReq = typeof ObjQueryReq.Type

/** The result of an objects query. */
export const ObjQueryRes = Schema.Struct({ objs: Schema.Array(ObjectVersion) }).annotations({
  identifier: "ObjQueryRes"
})
/** @see {@link ObjQueryRes} */
export type ObjQueryRes = typeof ObjQueryRes.Type

/**
 * The body of `POST /obj/delete`: without `digests` every live version is deleted; 404 when nothing, or not all
 * of the given digests, match.
 */
export const ObjDeleteReq = Schema.Struct({
  project_id: ProjectId,
  object_id: Schema.String,
  digests: nullable(Schema.Array(Schema.String))
}).annotations({ identifier: "ObjDeleteReq" })
/** @see {@link ObjDeleteReq} */
export type ObjDeleteReq = typeof ObjDeleteReq.Type

/** One deleted version, as some deployments list them. */
export const DeletedObjVersion = Schema.Struct({
  digest: Schema.String,
  base_object_class: nullable(Schema.String),
  leaf_object_class: nullable(Schema.String)
}).annotations({ identifier: "DeletedObjVersion" })
/** @see {@link DeletedObjVersion} */
export type DeletedObjVersion = typeof DeletedObjVersion.Type

/** The result of an object delete: how many versions were deleted. */
export const ObjDeleteRes = Schema.Struct({
  num_deleted: Schema.Int,
  deleted_versions: nullable(Schema.Array(DeletedObjVersion))
}).annotations({ identifier: "ObjDeleteRes" })
/** @see {@link ObjDeleteRes} */
export type ObjDeleteRes = typeof ObjDeleteRes.Type

// ---------------------------------------------------------------------------------------------------------------
// Datasets (dataset deletion)
// ---------------------------------------------------------------------------------------------------------------

/** The path of `DELETE /v2/{entity}/{project}/datasets/{object_id}`. */
export const DatasetDeletePath = Schema.Struct({
  entity: Schema.String,
  project: Schema.String,
  object_id: Schema.String
}) // No identifier: the OpenAPI generator lists path and query parameters only from an inline struct.
/** @see {@link DatasetDeletePath} */
export type DatasetDeletePath = typeof DatasetDeletePath.Type

/**
 * The query of the dataset delete: `digests` repeated (`?digests=a&digests=b`). With digests only those versions
 * are deleted; without them, all versions.
 */
export const DatasetDeleteParams = Schema.Struct({
  digests: Schema.optional(Schema.Array(Schema.String))
}) // No identifier, as for the path.
/** @see {@link DatasetDeleteParams} */
export type DatasetDeleteParams = typeof DatasetDeleteParams.Type

/** The dataset deletion result: the number of dataset versions deleted. */
export const DatasetDeleteRes = Schema.Struct({ num_deleted: Schema.Int }).annotations({
  identifier: "DatasetDeleteRes"
})
/** @see {@link DatasetDeleteRes} */
export type DatasetDeleteRes = typeof DatasetDeleteRes.Type

// ---------------------------------------------------------------------------------------------------------------
// Tables
// ---------------------------------------------------------------------------------------------------------------

/** A table as a client creates it: its rows, each a JSON object. */
export const TableInsert = Schema.Struct({
  project_id: ProjectId,
  rows: Schema.Array(JsonObject),
  expected_digest: nullable(Schema.String)
}).annotations({ identifier: "TableInsert" })
/** @see {@link TableInsert} */
export type TableInsert = typeof TableInsert.Type

/** The body of `POST /table/create`: `{table}`. */
export const TableCreateReq = Schema.Struct({ table: TableInsert }).annotations({ identifier: "TableCreateReq" })
/** @see {@link TableCreateReq} */
export type TableCreateReq = typeof TableCreateReq.Type

/** The result of a table create: the table's digest and its rows' digests, in order. */
export const TableCreateRes = Schema.Struct({
  digest: Schema.String,
  row_digests: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] })
}).annotations({ identifier: "TableCreateRes" })
/** @see {@link TableCreateRes} */
export type TableCreateRes = typeof TableCreateRes.Type

/** An update that appends a row. */
export const TableAppend = Schema.Struct({ append: Schema.Struct({ row: JsonObject }) }).annotations({
  identifier: "TableAppend"
})
/** @see {@link TableAppend} */
export type TableAppend = typeof TableAppend.Type

/** An update that removes the row at `index`. */
export const TablePop = Schema.Struct({ pop: Schema.Struct({ index: Schema.Int }) }).annotations({
  identifier: "TablePop"
})
/** @see {@link TablePop} */
export type TablePop = typeof TablePop.Type

/** An update that inserts a row at `index`. */
export const TableInsertRow = Schema.Struct({
  insert: Schema.Struct({ index: Schema.Int, row: JsonObject })
}).annotations({ identifier: "TableInsertRow" })
/** @see {@link TableInsertRow} */
export type TableInsertRow = typeof TableInsertRow.Type

/** One update of a table. */
export const TableUpdateSpec = Schema.Union(TableAppend, TablePop, TableInsertRow).annotations({
  identifier: "TableUpdateSpec"
})
/** @see {@link TableUpdateSpec} */
export type TableUpdateSpec = typeof TableUpdateSpec.Type

/** The body of `POST /table/update`: updates applied in order to the table `base_digest`, making a new table. */
export const TableUpdateReq = Schema.Struct({
  project_id: ProjectId,
  base_digest: Schema.String,
  updates: Schema.Array(TableUpdateSpec)
}).annotations({ identifier: "TableUpdateReq" })
/** @see {@link TableUpdateReq} */
export type TableUpdateReq = typeof TableUpdateReq.Type

/** The result of a table update: the new table's digest and the digests of the rows added. */
export const TableUpdateRes = Schema.Struct({
  digest: Schema.String,
  updated_row_digests: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] })
}).annotations({ identifier: "TableUpdateRes" })
/** @see {@link TableUpdateRes} */
export type TableUpdateRes = typeof TableUpdateRes.Type

/** The row filter of a table query. */
export const TableRowFilter = Schema.Struct({
  row_digests: nullable(Schema.Array(Schema.String))
}).annotations({ identifier: "TableRowFilter" })
/** @see {@link TableRowFilter} */
export type TableRowFilter = typeof TableRowFilter.Type

/** The body of `POST /table/query` and `POST /table/query_stream`. */
export const TableQueryReq = Schema.Struct({
  project_id: ProjectId,
  digest: Schema.String,
  filter: nullable(TableRowFilter),
  limit: nullable(Schema.NonNegativeInt),
  offset: nullable(Schema.NonNegativeInt),
  sort_by: nullable(Schema.Array(SortBy))
}).annotations({ identifier: "TableQueryReq" })
/** @see {@link TableQueryReq} */
export type TableQueryReq = typeof TableQueryReq.Type

/** A table row: its digest, value, and index in the table. */
export class TableRow extends Schema.Class<TableRow>("effect-rl/trace/TableRow")({
  digest: Schema.String,
  val: JsonValue,
  original_index: nullable(Schema.Int)
}) {}

/** The result of `POST /table/query`; `POST /table/query_stream` answers the same rows as JSON lines. */
export const TableQueryRes = Schema.Struct({ rows: Schema.Array(TableRow) }).annotations({
  identifier: "TableQueryRes"
})
/** @see {@link TableQueryRes} */
export type TableQueryRes = typeof TableQueryRes.Type

/** The body of `POST /table/query_stats`. */
export const TableQueryStatsReq = Schema.Struct({
  project_id: ProjectId,
  digest: Schema.String
}).annotations({ identifier: "TableQueryStatsReq" })
/** @see {@link TableQueryStatsReq} */
export type TableQueryStatsReq = typeof TableQueryStatsReq.Type

/** The result of `POST /table/query_stats`: the number of rows. */
export const TableQueryStatsRes = Schema.Struct({ count: Schema.Int }).annotations({
  identifier: "TableQueryStatsRes"
})
/** @see {@link TableQueryStatsRes} */
export type TableQueryStatsRes = typeof TableQueryStatsRes.Type

// ---------------------------------------------------------------------------------------------------------------
// Refs
// ---------------------------------------------------------------------------------------------------------------

/** The most refs one `refs/read_batch` resolves. */
export const maxRefsPerBatch = 1000

/**
 * The body of `POST /refs/read_batch`: at most {@link maxRefsPerBatch} refs
 * (`weave:///entity/project/object/<name>:<digest>`, `.../op/...`, `.../table/<digest>`, `.../call/<id>`,
 * optionally followed by `/key/<k>`, `/attr/<a>`, `/index/<i>`, `/id/<row digest>`).
 */
export const RefsReadBatchReq = Schema.Struct({
  refs: Schema.Array(Schema.String).pipe(Schema.maxItems(maxRefsPerBatch))
}).annotations({ identifier: "RefsReadBatchReq" })
/** @see {@link RefsReadBatchReq} */
export type RefsReadBatchReq = typeof RefsReadBatchReq.Type

/** The result of a refs read: the values in the order of the refs; a deleted object resolves to null. */
export const RefsReadBatchRes = Schema.Struct({ vals: Schema.Array(JsonValue) }).annotations({
  identifier: "RefsReadBatchRes"
})
/** @see {@link RefsReadBatchRes} */
export type RefsReadBatchRes = typeof RefsReadBatchRes.Type

// ---------------------------------------------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------------------------------------------

/**
 * The text fields of the multipart body of `POST /file/create` (the upload itself is the part `file`; see
 * `TraceApi.FileCreateForm`).
 */
export const FileCreateFields = Schema.Struct({
  project_id: ProjectId,
  expected_digest: Schema.optional(Schema.String)
}).annotations({ identifier: "FileCreateFields" })
/** @see {@link FileCreateFields} */
export type FileCreateFields = typeof FileCreateFields.Type

/** The result of a file create: the byte digest of the content, which clients also compute themselves. */
export const FileCreateRes = Schema.Struct({ digest: Schema.String }).annotations({ identifier: "FileCreateRes" })
/** @see {@link FileCreateRes} */
export type FileCreateRes = typeof FileCreateRes.Type

/** The body of `POST /file/content`; the answer is the raw bytes. */
export const FileContentReadReq = Schema.Struct({
  project_id: ProjectId,
  digest: Schema.String
}).annotations({ identifier: "FileContentReadReq" })
/** @see {@link FileContentReadReq} */
export type FileContentReadReq = typeof FileContentReadReq.Type
