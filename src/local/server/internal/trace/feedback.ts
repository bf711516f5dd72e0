/**
 * The feedback of the trace surface over the store's `TraceFeedback`: feedback/create, feedback/query,
 * feedback/purge and feedback/replace. Failures are 400 `{reason}` (422 where the schema rejects the body).
 *
 * Create, with the weave trace server's rules:
 * - `weave_ref` is a `weave:///<entity>/<project>/<kind>/...` ref of the request's project.
 * - `wandb.reaction.1` needs `payload.emoji`, a string holding exactly one emoji; the stored payload adds `alias`
 *   (its `:short_name:`), `detoned` (the emoji without skin-tone modifiers) and `detoned_alias`. Names come from a
 *   table of common reactions (`EMOJI_NAMES`); an emoji outside it is its own alias, as the service's emoji
 *   library leaves emoji it does not know.
 * - `wandb.note.1` needs `payload.note`, a string of 1 to 1024 characters.
 * - A type starting `wandb.annotation` must be `wandb.annotation.<name>` with `annotation_ref` an object ref
 *   named `<name>` in the project that exists, and `payload.value`; `annotation_ref` is refused on other types.
 * - A type starting `wandb.runnable` must be `wandb.runnable.<name>` with `runnable_ref` an op or object ref named
 *   `<name>` (an op also needs `call_ref`), and `payload.output`. `wandb.agent_monitor` needs `runnable_ref`,
 *   `call_ref` and `trigger_ref`. Other types refuse `runnable_ref`, `call_ref` and `trigger_ref`.
 * - The scorer fields (`scorer_tags`, ...) are only for `wandb.runnable.*`, `wandb.agent_monitor` and
 *   `wandb.agent_user_feedback` (which needs `scorer_tags`). `call_ref` is a call ref, `trigger_ref` an object
 *   ref. `queue_id` names an annotation queue, and this server has none.
 * - Other types, `wandb.`-prefixed or not, are free-form (the service reserves the prefix but does not check it).
 * - The stored payload, as Python's `json.dumps` writes it, is at most 1 MiB of characters.
 *
 * Query: `fields` are the row's columns or `payload.<path>` (the value at the path as text: a string as is, a
 * number or boolean written as JSON, anything else `""`); `query` and `sort_by` take the calls' query
 * language (`query.ts`) over the rows (with `payload.<path>` reaching into the payload); any other field is 400
 * `Unknown field`. Without `sort_by`, rows come in creation order.
 *
 * Purge takes only `$eq` of `id` to a string literal, or `$or` of those. Replace validates the new feedback,
 * then removes `feedback_id` and stores the new one in one transaction.
 */
import * as Effect from "effect/Effect"
import * as Digest from "../../../../api/Digest.js"
import type { JsonObject, JsonValue } from "../../../../api/Json.js"
import type { Operand, Query, SortBy } from "../../../../api/TraceCall.js"
import { InvalidRequest } from "../../../../api/TraceError.js"
import type {
  FeedbackCreateReq,
  FeedbackPurgeReq,
  FeedbackQueryReq,
  FeedbackReplaceReq
} from "../../../../api/TraceMisc.js"
import { nowIso } from "../../../store/internal/sql.js"
import * as TraceFeedback from "../../../store/TraceFeedback.js"
import * as TraceObjects from "../../../store/TraceObjects.js"
import { checkProject, invalid, newId } from "./ids.js"
import { fieldPaths, getField, matches, page, sortCalls } from "./query.js"

/** The service's limit on a stored payload: 1 MiB of `json.dumps` characters. */
export const MAX_PAYLOAD_CHARS = 1024 * 1024
/** The longest note of `wandb.note.1`. */
export const MAX_NOTE_LENGTH = 1024

// ---------------------------------------------------------------------------------------------------------------
// Refs
// ---------------------------------------------------------------------------------------------------------------

interface Ref {
  readonly projectId: string
  readonly kind: string
  readonly name: string
  readonly version: string | undefined
}

const REF = /^weave:\/\/\/([^/]+)\/([^/]+)\/([^/]+)\/([^/]+)(?:\/.*)?$/

const parseRef = (ref: string): Ref | undefined => {
  const match = REF.exec(ref)
  if (match === null) return undefined
  const [, entity = "", project = "", kind = "", target = ""] = match
  const colon = target.indexOf(":")
  return colon < 0
    ? { projectId: `${entity}/${project}`, kind, name: target, version: undefined }
    : { projectId: `${entity}/${project}`, kind, name: target.slice(0, colon), version: target.slice(colon + 1) }
}

const KIND_NAMES: Record<string, string> = { object: "an object ref", op: "an op ref", call: "a call ref" }

/** A ref of one of the kinds (objects and ops need `name:version`), or 400 naming what was expected. */
const refOf = (ref: string, kinds: ReadonlyArray<"object" | "op" | "call">) => {
  const parsed = parseRef(ref)
  const ok =
    parsed !== undefined &&
    kinds.some((kind) => kind === parsed.kind) &&
    (parsed.kind === "call" || (parsed.name.length > 0 && (parsed.version ?? "").length > 0))
  return ok
    ? Effect.succeed(parsed)
    : invalid(`Invalid ref: ${ref}, expected ${kinds.map((kind) => KIND_NAMES[kind]).join(" or ")}`)
}

// ---------------------------------------------------------------------------------------------------------------
// Reactions
// ---------------------------------------------------------------------------------------------------------------

/** CLDR short names of common reaction emoji (without the emoji presentation selector U+FE0F). */
const EMOJI_NAMES: Record<string, string> = {
  "👍": "thumbs_up",
  "👎": "thumbs_down",
  "❤": "red_heart",
  "🎉": "party_popper",
  "🚀": "rocket",
  "👀": "eyes",
  "🔥": "fire",
  "💯": "hundred_points",
  "👏": "clapping_hands",
  "🙏": "folded_hands",
  "👋": "waving_hand",
  "👌": "OK_hand",
  "🤔": "thinking_face",
  "😀": "grinning_face",
  "😄": "grinning_face_with_smiling_eyes",
  "😊": "smiling_face_with_smiling_eyes",
  "🙂": "slightly_smiling_face",
  "😂": "face_with_tears_of_joy",
  "😕": "confused_face",
  "😢": "crying_face",
  "✅": "check_mark_button",
  "❌": "cross_mark",
  "⭐": "star",
  "💡": "light_bulb",
  "🐛": "bug"
}

const TONES: Record<string, string> = {
  "\u{1F3FB}": "light",
  "\u{1F3FC}": "medium-light",
  "\u{1F3FD}": "medium",
  "\u{1F3FE}": "medium-dark",
  "\u{1F3FF}": "dark"
}

// Built at run time: the `v` flag (Node 20 has it) is newer than the compiler's target.
const EMOJI_FLAGS: string = "gv"
const emojiPattern = () => new RegExp("\\p{RGI_Emoji}", EMOJI_FLAGS)
const TONE_PATTERN = /[\u{1F3FB}-\u{1F3FF}]/gu

/** How many emoji a string holds (RGI emoji sequences, each counted once). */
const emojiCount = (text: string): number => text.match(emojiPattern())?.length ?? 0

/** One emoji's `:name:` (with `_<tone>_skin_tone` for one modifier); an emoji outside the table is unchanged. */
const aliasOfEmoji = (emoji: string): string => {
  const tones = emoji.match(TONE_PATTERN) ?? []
  const base = emoji.replace(TONE_PATTERN, "").replaceAll("\uFE0F", "")
  const name = EMOJI_NAMES[base]
  if (name === undefined || tones.length > 1) return emoji
  const tone = tones[0] === undefined ? undefined : TONES[tones[0]]
  return tone === undefined ? `:${name}:` : `:${name}_${tone}_skin_tone:`
}

/** A string with each emoji replaced by its alias. */
const demojize = (text: string): string => text.replace(emojiPattern(), aliasOfEmoji)

/** A string without skin-tone modifiers. */
const detone = (text: string): string => text.replace(TONE_PATTERN, "")

// ---------------------------------------------------------------------------------------------------------------
// Create
// ---------------------------------------------------------------------------------------------------------------

const REACTION = "wandb.reaction.1"
const NOTE = "wandb.note.1"
const ANNOTATION = "wandb.annotation"
const RUNNABLE = "wandb.runnable"
const AGENT_MONITOR = "wandb.agent_monitor"
const AGENT_USER_FEEDBACK = "wandb.agent_user_feedback"

const SCORER_FIELDS = [
  "scorer_tags",
  "scorer_tag_reasons",
  "scorer_tag_confidences",
  "scorer_ratings",
  "scorer_rating_reasons",
  "scorer_rating_confidences"
] as const

/** The scorer and span columns with the values a row has when the request leaves them out. */
const EXTRA_DEFAULTS: JsonObject = {
  scorer_tags: [],
  scorer_tag_reasons: {},
  scorer_tag_confidences: {},
  scorer_ratings: {},
  scorer_rating_reasons: {},
  scorer_rating_confidences: {},
  span_agent_name: "",
  span_agent_version: "",
  span_status_code: "",
  span_conversation_id: "",
  span_trace_id: "",
  scorer_trace_id: ""
}

/** The user this server records when the request names none. */
export const LOCAL_USER_ID = "local"

const badPayload = (type: string, what: string) => invalid(`Invalid payload for feedback_type ${type}: ${what}`)

/** Whether a value is set as Python sees it (a non-empty list or map). */
const isSet = (value: unknown): boolean =>
  value !== undefined && value !== null && (typeof value !== "object" || Object.keys(value).length > 0)

const checkPayloadSchema = (req: FeedbackCreateReq) =>
  Effect.gen(function* () {
    const payload = req.payload
    if (req.feedback_type === REACTION) {
      if (!("emoji" in payload)) return yield* badPayload(REACTION, "emoji: Field required")
      if (typeof payload.emoji !== "string") return yield* badPayload(REACTION, "emoji: Input should be a valid string")
    }
    if (req.feedback_type === NOTE) {
      const note = payload.note
      if (!("note" in payload)) return yield* badPayload(NOTE, "note: Field required")
      if (typeof note !== "string") return yield* badPayload(NOTE, "note: Input should be a valid string")
      const length = [...note].length
      if (length < 1) return yield* badPayload(NOTE, "note: String should have at least 1 character")
      if (length > MAX_NOTE_LENGTH) {
        return yield* badPayload(NOTE, `note: String should have at most ${MAX_NOTE_LENGTH} characters`)
      }
    }
  })

const checkRefs = (req: FeedbackCreateReq) =>
  Effect.gen(function* () {
    const type = req.feedback_type
    const annotationRef = req.annotation_ref ?? undefined
    const runnableRef = req.runnable_ref ?? undefined
    const callRef = req.call_ref ?? undefined
    const triggerRef = req.trigger_ref ?? undefined
    if (type.startsWith(ANNOTATION)) {
      if (!type.startsWith(`${ANNOTATION}.`)) return yield* invalid(`Invalid annotation feedback type: ${type}`)
      const subname = type.slice(ANNOTATION.length + 1)
      if (annotationRef === undefined || annotationRef === "") {
        return yield* invalid("annotation_ref is required for annotation feedback")
      }
      const ref = yield* refOf(annotationRef, ["object"])
      if (ref.name !== subname) return yield* invalid(`annotation_ref must point to an object with name ${subname}`)
      if (!("value" in req.payload)) return yield* badPayload(type, "value: Field required")
    } else if (annotationRef !== undefined && annotationRef !== "") {
      return yield* invalid("annotation_ref is not allowed for non-annotation feedback")
    } else if (type.startsWith(RUNNABLE)) {
      if (!type.startsWith(`${RUNNABLE}.`)) return yield* invalid(`Invalid runnable feedback type: ${type}`)
      const subname = type.slice(RUNNABLE.length + 1)
      if (runnableRef === undefined || runnableRef === "") {
        return yield* invalid("runnable_ref is required for runnable feedback")
      }
      const ref = yield* refOf(runnableRef, ["op", "object"])
      if (ref.name !== subname) return yield* invalid(`runnable_ref must point to an object with name ${subname}`)
      if (ref.kind === "op" && (callRef === undefined || callRef === "")) {
        return yield* invalid("call_ref is required for runnable feedback on ops")
      }
      if (!("output" in req.payload)) return yield* badPayload(type, "output: Field required")
    } else if (type === AGENT_MONITOR) {
      if (runnableRef === undefined || runnableRef === "") {
        return yield* invalid("runnable_ref is required for agent monitor feedback")
      }
      if (callRef === undefined) return yield* invalid("call_ref is required for agent monitor feedback")
      if (triggerRef === undefined) return yield* invalid("trigger_ref is required for agent monitor feedback")
    } else if (runnableRef !== undefined && runnableRef !== "") {
      return yield* invalid("runnable_ref is not allowed for non-runnable feedback")
    } else if (callRef !== undefined && callRef !== "") {
      return yield* invalid("call_ref is not allowed for non-runnable feedback")
    } else if (triggerRef !== undefined && triggerRef !== "") {
      return yield* invalid("trigger_ref is not allowed for non-runnable feedback")
    }

    const scorerAllowed = type.startsWith(RUNNABLE) || type === AGENT_MONITOR || type === AGENT_USER_FEEDBACK
    if (!scorerAllowed && SCORER_FIELDS.some((field) => isSet(req[field]))) {
      return yield* invalid(
        "scorer_tags, scorer_tag_reasons, scorer_tag_confidences, scorer_ratings, scorer_rating_reasons, and " +
          "scorer_rating_confidences are only allowed on wandb.agent_monitor, wandb.agent_user_feedback, or " +
          "wandb.runnable feedback"
      )
    }
    if (type === AGENT_USER_FEEDBACK && !isSet(req.scorer_tags)) {
      return yield* invalid("scorer_tags is required for agent user feedback")
    }

    if (annotationRef !== undefined && annotationRef !== "") {
      const ref = yield* refOf(annotationRef, ["object"])
      if (ref.projectId !== req.project_id) {
        return yield* invalid(`Annotation ref ${annotationRef} does not match project id ${req.project_id}`)
      }
      const versions = yield* Effect.flatMap(TraceObjects.TraceObjects, (store) =>
        store.versions(ref.projectId, ref.name)
      )
      const live = versions.filter((v) => v.deleted_at === null)
      const version = /^v(\d+)$/.exec(ref.version ?? "")
      const found =
        ref.version === "latest"
          ? live.length > 0
          : version !== null
            ? live.some((v) => v.version_index === Number(version[1]))
            : live.some((v) => v.digest === ref.version)
      if (!found) return yield* invalid(`Annotation ref ${annotationRef} not found`)
    }
    if (runnableRef !== undefined && runnableRef !== "") yield* refOf(runnableRef, ["op", "object"])
    if (callRef !== undefined && callRef !== "") yield* refOf(callRef, ["call"])
    if (triggerRef !== undefined && triggerRef !== "") yield* refOf(triggerRef, ["object"])
    if (req.queue_id !== undefined && req.queue_id !== null && req.queue_id !== "") {
      return yield* invalid(`Queue ${req.queue_id} not found or has been deleted`)
    }
  })

/** The payload as stored: a reaction gains its aliases. */
const processPayload = (req: FeedbackCreateReq) =>
  Effect.gen(function* () {
    let payload: JsonObject = req.payload
    if (req.feedback_type === REACTION) {
      const emoji = String(payload.emoji)
      if (emojiCount(emoji) !== 1) return yield* invalid("Value of emoji key in payload must be exactly one emoji")
      const detoned = detone(emoji)
      payload = { ...payload, alias: demojize(emoji), detoned, detoned_alias: demojize(detoned) }
    }
    if (Digest.dumps(payload).length > MAX_PAYLOAD_CHARS) return yield* invalid("Feedback payload too large")
    return payload
  })

/** A validated create as the row to store. */
const prepare = (req: FeedbackCreateReq) =>
  Effect.gen(function* () {
    yield* checkProject(req.project_id)
    const ref = parseRef(req.weave_ref)
    if (ref === undefined || ref.projectId !== req.project_id) {
      return yield* invalid(`Invalid weave_ref: ${req.weave_ref}, expected a weave:///${req.project_id}/... ref`)
    }
    yield* checkPayloadSchema(req)
    yield* checkRefs(req)
    const payload = yield* processPayload(req)
    const extra: Record<string, JsonValue> = {}
    for (const key of Object.keys(EXTRA_DEFAULTS)) {
      const value = req[key as keyof FeedbackCreateReq]
      if (value !== undefined && value !== null) extra[key] = value as JsonValue
    }
    const record: TraceFeedback.FeedbackRecord = {
      project_id: req.project_id,
      id: req.id ?? (yield* newId),
      weave_ref: req.weave_ref,
      wb_user_id: req.wb_user_id ?? LOCAL_USER_ID,
      creator: req.creator ?? null,
      created_at: yield* nowIso,
      feedback_type: req.feedback_type,
      payload: JSON.stringify(payload),
      annotation_ref: req.annotation_ref ?? null,
      runnable_ref: req.runnable_ref ?? null,
      call_ref: req.call_ref ?? null,
      trigger_ref: req.trigger_ref ?? null,
      queue_id: req.queue_id ?? null,
      extra: JSON.stringify(extra)
    }
    return { record, payload }
  })

const store = (req: FeedbackCreateReq, replacing?: string) =>
  Effect.gen(function* () {
    const { record, payload } = yield* prepare(req)
    yield* Effect.flatMap(TraceFeedback.TraceFeedback, (feedback) => feedback.createFeedback(record, replacing))
    return { id: record.id, created_at: record.created_at, wb_user_id: record.wb_user_id, payload }
  })

/** `POST /feedback/create` */
export const feedbackCreate = ({ payload }: { readonly payload: FeedbackCreateReq }) => store(payload)

/** `POST /feedback/replace` */
export const feedbackReplace = ({ payload }: { readonly payload: FeedbackReplaceReq }) => {
  const { feedback_id, ...create } = payload
  return store(create, feedback_id)
}

// ---------------------------------------------------------------------------------------------------------------
// Query
// ---------------------------------------------------------------------------------------------------------------

const COLUMNS = [
  "id",
  "project_id",
  "weave_ref",
  "wb_user_id",
  "creator",
  "created_at",
  "feedback_type",
  "payload",
  "annotation_ref",
  "runnable_ref",
  "call_ref",
  "trigger_ref",
  "queue_id",
  ...Object.keys(EXTRA_DEFAULTS)
]
const COLUMN_SET = new Set(COLUMNS)
/** The columns whose members a dotted path may name: the payload and the scorer maps. */
const NESTED = new Set([
  "payload",
  "scorer_tag_reasons",
  "scorer_tag_confidences",
  "scorer_ratings",
  "scorer_rating_reasons",
  "scorer_rating_confidences"
])

/** Undefined when a row field may be named, else the 400 reason. */
export const unknownField = (
  path: string,
  columns: ReadonlySet<string>,
  nested: ReadonlySet<string>
): string | undefined => {
  if (columns.has(path)) return undefined
  const [root = "", ...rest] = path.split(".")
  return nested.has(root) && rest.length > 0 && rest.every((part) => part.length > 0)
    ? undefined
    : `Unknown field: ${path}`
}

/** 400 unless every field the query, the sort and `fields` name is known. */
export const checkFields = (
  fields: ReadonlyArray<string>,
  query: Query | null | undefined,
  sortBy: ReadonlyArray<SortBy> | null | undefined,
  columns: ReadonlySet<string>,
  nested: ReadonlySet<string>
) => {
  const named = [
    ...fields,
    ...(query === null || query === undefined ? [] : fieldPaths(query.$expr as Operand)),
    ...(sortBy ?? []).map((key) => key.field)
  ]
  for (const field of named) {
    const reason = unknownField(field, columns, nested)
    if (reason !== undefined) return Effect.fail(new InvalidRequest({ reason }))
  }
  return Effect.void
}

/** Filter, sort and page rows as a query asks. */
export const select = (
  rows: ReadonlyArray<JsonObject>,
  query: Query | null | undefined,
  sortBy: ReadonlyArray<SortBy> | null | undefined,
  offset: number | null | undefined,
  limit: number | null | undefined
): ReadonlyArray<JsonObject> => {
  const filtered = query === null || query === undefined ? rows : rows.filter((row) => matches(row, query.$expr))
  const sorted = sortBy === null || sortBy === undefined || sortBy.length === 0 ? filtered : sortCalls(filtered, sortBy)
  return page(sorted, offset, limit)
}

const wireRow = (record: TraceFeedback.FeedbackRecord): JsonObject => ({
  id: record.id,
  project_id: record.project_id,
  weave_ref: record.weave_ref,
  wb_user_id: record.wb_user_id,
  creator: record.creator,
  created_at: record.created_at,
  feedback_type: record.feedback_type,
  payload: JSON.parse(record.payload) as JsonValue,
  annotation_ref: record.annotation_ref,
  runnable_ref: record.runnable_ref,
  call_ref: record.call_ref,
  trigger_ref: record.trigger_ref,
  queue_id: record.queue_id,
  ...EXTRA_DEFAULTS,
  ...(JSON.parse(record.extra) as JsonObject)
})

/** A `payload.<path>` value as the service's JSON extraction gives it: text of a scalar, else `""`. */
const pathText = (value: JsonValue | undefined): JsonValue => {
  if (typeof value === "string") return value
  if (typeof value === "number" || typeof value === "boolean") return JSON.stringify(value)
  return ""
}

/** `POST /feedback/query` */
export const feedbackQuery = ({ payload }: { readonly payload: FeedbackQueryReq }) =>
  Effect.gen(function* () {
    yield* checkProject(payload.project_id)
    const fields = payload.fields ?? []
    yield* checkFields(fields, payload.query, payload.sort_by, COLUMN_SET, NESTED)
    const records = yield* Effect.flatMap(TraceFeedback.TraceFeedback, (store) => store.feedback(payload.project_id))
    const rows = select(records.map(wireRow), payload.query, payload.sort_by, payload.offset, payload.limit)
    const result =
      fields.length === 0
        ? rows
        : rows.map((row) => {
            const out: Record<string, JsonValue> = {}
            for (const field of fields) {
              const value = getField(row, field)
              out[field] = field.startsWith("payload.") ? pathText(value) : (value ?? null)
            }
            return out as JsonObject
          })
    return { result }
  })

// ---------------------------------------------------------------------------------------------------------------
// Purge
// ---------------------------------------------------------------------------------------------------------------

/** The message of an id-based purge query that a `$or` item breaks (the service's generic one). */
export const INVALID_PURGE = "Can only purge by specifying one or more ids"
/** The service's reason for a feedback purge query that is not id-based. */
export const INVALID_FEEDBACK_PURGE = "Can only purge feedback by specifying one or more feedback ids"

const isIdField = (operand: Operand | undefined) =>
  operand !== undefined && "$getField" in operand && operand.$getField === "id"

const stringLiteral = (operand: Operand | undefined): string | undefined =>
  operand !== undefined && "$literal" in operand && typeof operand.$literal === "string" ? operand.$literal : undefined

const eqId = (operand: Operand): string | undefined => {
  if (!("$eq" in operand) || Object.keys(operand).length !== 1 || !isIdField(operand.$eq[0])) return undefined
  return stringLiteral(operand.$eq[1])
}

/**
 * The ids of an id-based purge query: `$eq` of `id` to a string literal, `$or` of those, and (when `allowIn`)
 * `$in` of `id` and string literals. Anything else fails with `message` (a `$or` item with the generic one).
 */
export const purgeIds = (query: Query, message: string, allowIn: boolean) =>
  Effect.gen(function* () {
    const expr: Operand = query.$expr
    if ("$eq" in expr) {
      const id = eqId(expr)
      return id === undefined ? yield* invalid(message) : [id]
    }
    if ("$or" in expr) {
      const ids: Array<string> = []
      for (const item of expr.$or) {
        const id = eqId(item)
        if (id === undefined) return yield* invalid(INVALID_PURGE)
        ids.push(id)
      }
      return ids
    }
    if (allowIn && "$in" in expr && isIdField(expr.$in[0])) {
      const ids = expr.$in[1].map(stringLiteral)
      if (ids.every((id): id is string => id !== undefined)) return ids
    }
    return yield* invalid(message)
  })

/** `POST /feedback/purge` */
export const feedbackPurge = ({ payload }: { readonly payload: FeedbackPurgeReq }) =>
  Effect.gen(function* () {
    yield* checkProject(payload.project_id)
    const ids = yield* purgeIds(payload.query, INVALID_FEEDBACK_PURGE, false)
    yield* Effect.flatMap(TraceFeedback.TraceFeedback, (store) => store.purgeFeedback(payload.project_id, ids))
    return {}
  })
