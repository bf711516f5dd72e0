/**
 * The objects of the trace surface over the store's `TraceObjects`: obj/create, obj/read, objs/query,
 * obj/delete and the dataset delete (`DELETE /v2/{entity}/{project}/datasets/{object_id}`).
 *
 * - Digests: an object's digest is `Digest.ofValue` of its `val` read from the request's raw JSON text as
 *   Python reads it (`Digest.parse`), so `1.0` and `1` hash apart as the service hashes them. The value is
 *   stored as `Digest.dumps` of it.
 * - Versions: creating a live digest again returns it; otherwise a new version (index = earlier versions,
 *   deleted ones included) becomes the latest, which is the live version with the highest index.
 * - `kind` is `op` for an op (`_type` `Op`, or a custom weave type of type `Op`); `base_object_class` is
 *   `builtin_object_class` when given, else the class below `Object` in `_bases` (or `_class_name` for a direct
 *   subclass of `Object`); `leaf_object_class` is `_class_name`.
 * - Reads of a deleted version (by digest, `vN`, or `latest` when every version is deleted) are 404 with
 *   `deleted_at`.
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Digest from "../../../../api/Digest.js"
import type { JsonObject, JsonValue } from "../../../../api/Json.js"
import type { SortBy } from "../../../../api/TraceCall.js"
import { NotFound } from "../../../../api/TraceError.js"
import {
  type DatasetDeleteParams,
  type DatasetDeletePath,
  type ObjCreateReq,
  type ObjDeleteReq,
  ObjectVersion,
  type ObjQueryReq,
  type ObjReadReq
} from "../../../../api/TraceObject.js"
import { nowIso } from "../../../store/internal/sql.js"
import * as TraceObjects from "../../../store/TraceObjects.js"
import * as Responses from "../responses.js"
import { checkProject, invalid } from "./ids.js"
import { page } from "./query.js"

/** The request's body read as Python's `json.loads` reads it (the platform has already read and cached it). */
export const rawBody: Effect.Effect<Digest.Canonical, never, HttpServerRequest.HttpServerRequest> = Effect.flatMap(
  HttpServerRequest.HttpServerRequest,
  (request) => Effect.flatMap(request.text, (text) => Effect.try(() => Digest.parse(text)))
).pipe(Effect.orDie)

/** A key of a canonical JSON object (undefined for anything else). */
export const member = (value: Digest.Canonical | undefined, key: string): Digest.Canonical | undefined =>
  value !== null &&
  typeof value === "object" &&
  !Array.isArray(value) &&
  !(value instanceof Digest.Float) &&
  Object.hasOwn(value, key)
    ? (value as { readonly [key: string]: Digest.Canonical })[key]
    : undefined

/** An item of a canonical JSON array (undefined for anything else). */
export const item = (value: Digest.Canonical | undefined, index: number): Digest.Canonical | undefined =>
  Array.isArray(value) ? (value as ReadonlyArray<Digest.Canonical>)[index] : undefined

/** Stored JSON text as a JSON value. */
export const jsonOf = (text: string): JsonValue => JSON.parse(text) as JsonValue

const asObject = (value: JsonValue): JsonObject | undefined =>
  value !== null && typeof value === "object" && !Array.isArray(value) ? (value as JsonObject) : undefined

const kindOf = (val: JsonValue): "op" | "object" => {
  const obj = asObject(val)
  if (obj === undefined) return "object"
  if (obj._type === "Op") return "op"
  const weaveType = obj.weave_type === undefined ? undefined : asObject(obj.weave_type)
  return obj._type === "CustomWeaveType" && weaveType?.type === "Op" ? "op" : "object"
}

const classesOf = (val: JsonValue, builtin: string | null | undefined) => {
  const obj = asObject(val)
  const leaf = typeof obj?._class_name === "string" ? obj._class_name : null
  if (builtin !== null && builtin !== undefined) return { base: builtin, leaf: leaf ?? builtin }
  const bases = obj?._bases
  let base: string | null = null
  if (Array.isArray(bases) && bases.length >= 2 && bases.at(-1) === "BaseModel" && bases.at(-2) === "Object") {
    const below = bases.length > 2 ? bases.at(-3) : leaf
    base = typeof below === "string" ? below : null
  }
  return { base, leaf }
}

const liveOf = (versions: ReadonlyArray<TraceObjects.ObjectRecord>) => versions.filter((v) => v.deleted_at === null)

/** The version's wire form; `latest` is the index of the object's latest live version (-1 for none). */
const toWire = (record: TraceObjects.ObjectRecord, latest: number) =>
  new ObjectVersion({
    project_id: record.project_id,
    object_id: record.object_id,
    created_at: record.created_at,
    deleted_at: record.deleted_at,
    digest: record.digest,
    version_index: record.version_index,
    is_latest: record.deleted_at === null && record.version_index === latest ? 1 : 0,
    kind: record.kind,
    base_object_class: record.base_object_class,
    leaf_object_class: record.leaf_object_class,
    val: jsonOf(record.val)
  })

const latestIndex = (versions: ReadonlyArray<TraceObjects.ObjectRecord>) =>
  liveOf(versions).reduce((max, v) => Math.max(max, v.version_index), -1)

/** `POST /obj/create` */
export const objCreate = ({ payload }: { readonly payload: ObjCreateReq }) =>
  Effect.gen(function* () {
    const store = yield* TraceObjects.TraceObjects
    yield* checkProject(payload.obj.project_id)
    const val = member(member(yield* rawBody, "obj"), "val") ?? null
    const digest = Digest.ofValue(val)
    const { base, leaf } = classesOf(payload.obj.val, payload.obj.builtin_object_class)
    yield* store.createObject({
      project_id: payload.obj.project_id,
      object_id: payload.obj.object_id,
      digest,
      kind: kindOf(payload.obj.val),
      base_object_class: base,
      leaf_object_class: leaf,
      val: Digest.dumps(val),
      created_at: yield* nowIso
    })
    return { digest, object_id: payload.obj.object_id }
  })

/** One version of an object: by digest, `latest` or `vN`, with the deleted/missing failures. */
export const readVersion = (projectId: string, objectId: string, digest: string) =>
  Effect.gen(function* () {
    const store = yield* TraceObjects.TraceObjects
    const versions = yield* store.versions(projectId, objectId)
    const latest = latestIndex(versions)
    const version = /^v(\d+)$/.exec(digest)
    const candidates =
      digest === "latest"
        ? versions.filter((v) => v.version_index === latest || latest === -1)
        : version !== null
          ? versions.filter((v) => v.version_index === Number(version[1]))
          : versions.filter((v) => v.digest === digest)
    const found = candidates.find((v) => v.deleted_at === null)
    if (found !== undefined) return toWire(found, latest)
    const deleted = candidates.at(-1)
    return yield* Effect.fail(
      deleted === undefined
        ? new NotFound({ reason: `Object ${objectId}:${digest} not found` })
        : new NotFound({ reason: `Object ${objectId}:${digest} was deleted`, deleted_at: deleted.deleted_at })
    )
  })

/** `POST /obj/read` */
export const objRead = ({ payload }: { readonly payload: ObjReadReq }) =>
  Effect.gen(function* () {
    yield* checkProject(payload.project_id)
    return { obj: yield* readVersion(payload.project_id, payload.object_id, payload.digest) }
  })

const compareBy = (sortBy: ReadonlyArray<SortBy>) => (a: ObjectVersion, b: ObjectVersion) => {
  for (const key of sortBy) {
    const x = key.field === "object_id" ? a.object_id : a.created_at
    const y = key.field === "object_id" ? b.object_id : b.created_at
    const order = x < y ? -1 : x > y ? 1 : 0
    if (order !== 0) return key.direction === "asc" ? order : -order
  }
  return 0
}

const listed = (values: ReadonlyArray<string> | null | undefined) =>
  values === null || values === undefined ? undefined : new Set(values)

/** `POST /objs/query`: live versions; sorted by `object_id` and/or `created_at` (default: creation order). */
export const objsQuery = ({ payload }: { readonly payload: ObjQueryReq }) =>
  Effect.gen(function* () {
    const store = yield* TraceObjects.TraceObjects
    yield* checkProject(payload.project_id)
    const sortBy = payload.sort_by ?? []
    const bad = sortBy.find((key) => key.field !== "object_id" && key.field !== "created_at")
    if (bad !== undefined) return yield* invalid(`Unsupported sort field: ${bad.field}`)
    const all = yield* store.projectVersions(payload.project_id)
    const latest = new Map<string, number>()
    for (const v of liveOf(all)) latest.set(v.object_id, Math.max(latest.get(v.object_id) ?? -1, v.version_index))
    const filter = payload.filter ?? {}
    const ids = listed(filter.object_ids)
    const bases = listed(filter.base_object_classes)
    const excluded = listed(filter.exclude_base_object_classes)
    const leaves = listed(filter.leaf_object_classes)
    const wire = liveOf(all)
      .map((v) => toWire(v, latest.get(v.object_id) ?? -1))
      .filter(
        (v) =>
          (ids === undefined || ids.has(v.object_id)) &&
          (bases === undefined || (v.base_object_class !== null && bases.has(v.base_object_class))) &&
          (excluded === undefined || v.base_object_class === null || !excluded.has(v.base_object_class)) &&
          (leaves === undefined ||
            (v.leaf_object_class !== null && v.leaf_object_class !== undefined && leaves.has(v.leaf_object_class))) &&
          (filter.is_op === null || filter.is_op === undefined || (v.kind === "op") === filter.is_op) &&
          (filter.latest_only !== true || v.is_latest === 1)
      )
    const sorted = sortBy.length === 0 ? wire : [...wire].sort(compareBy(sortBy))
    return { objs: page(sorted, payload.offset, payload.limit) }
  })

const deleteVersions = (projectId: string, objectId: string, digests: ReadonlyArray<string> | undefined) =>
  Effect.gen(function* () {
    const store = yield* TraceObjects.TraceObjects
    const deleted = yield* store.deleteObject(projectId, objectId, digests, yield* nowIso)
    if (Option.isNone(deleted)) {
      return yield* Effect.fail(
        new NotFound({
          reason:
            digests === undefined
              ? `Object ${objectId} not found`
              : `Object ${objectId}: not all of the digests are live versions`
        })
      )
    }
    return { num_deleted: deleted.value }
  })

/** `POST /obj/delete`: the given live versions, or every live version; 404 when nothing or not all match. */
export const objDelete = ({ payload }: { readonly payload: ObjDeleteReq }) =>
  Effect.gen(function* () {
    yield* checkProject(payload.project_id)
    return yield* deleteVersions(payload.project_id, payload.object_id, payload.digests ?? undefined)
  })

const objectIdPattern = /^[\p{L}\p{N}_.-]+$/u

/**
 * `DELETE /v2/{entity}/{project}/datasets/{object_id}`: 422 on an invalid path or digest; 404 when
 * nothing matches, or when the live object of that id is not a dataset (its base class is not `Dataset`).
 */
export const datasetDelete = ({
  path,
  urlParams
}: {
  readonly path: DatasetDeletePath
  readonly urlParams: DatasetDeleteParams
}) =>
  Effect.gen(function* () {
    const problems: Array<{ loc: Array<string | number>; msg: string; type: string }> = []
    for (const key of ["entity", "project"] as const) {
      if (!/^[^/\s]+$/.test(path[key])) {
        problems.push({ loc: ["path", key], msg: `Invalid ${key}`, type: "value_error" })
      }
    }
    if (!objectIdPattern.test(path.object_id) || [...path.object_id].length > 128) {
      problems.push({
        loc: ["path", "object_id"],
        msg: "String should match pattern '^[\\w._-]+$' and have at most 128 characters",
        type: "string_pattern_mismatch"
      })
    }
    const digests = urlParams.digests
    digests?.forEach((digest, index) => {
      if (digest.length === 0) {
        problems.push({ loc: ["query", "digests", index], msg: "Empty digest", type: "value_error" })
      }
    })
    if (problems.length > 0) return Responses.invalid(problems)
    const projectId = `${path.entity}/${path.project}`
    // Only a dataset is deleted here: an object of another class under that id is not found.
    const store = yield* TraceObjects.TraceObjects
    const live = (yield* store.versions(projectId, path.object_id)).filter((version) => version.deleted_at === null)
    if (live.length > 0 && !live.some((version) => version.base_object_class === "Dataset")) {
      return yield* Effect.fail(new NotFound({ reason: `Dataset ${path.object_id} not found` }))
    }
    const result = yield* deleteVersions(
      projectId,
      path.object_id,
      digests === undefined || digests.length === 0 ? undefined : digests
    )
    return HttpServerResponse.unsafeJson(result)
  })
