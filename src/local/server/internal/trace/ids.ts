/**
 * Ids, project ids and timestamps of the trace surface: call and trace ids are UUIDs (UUIDv7 when this
 * server makes them) or OpenTelemetry hex ids (16 hex digits for a span, 32 for a trace); timestamps are ISO
 * 8601, answered in UTC with `Z` and the client's fraction kept (up to microseconds). A malformed one is a 400
 * `{reason}` (`invalid`, `checkProject`), which every trace route answers the same way.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { InvalidRequest } from "../../../../api/TraceError.js"

/** A hex digit, either case. */
const isHexDigit = (c: number): boolean => (c >= 48 && c <= 57) || ((c | 32) >= 97 && (c | 32) <= 102)

/**
 * Whether a string is a call or trace id this server accepts: a UUID (`8-4-4-4-12` hex digits, either case) or an
 * OpenTelemetry hex id (16 or 32 hex digits). Read by character codes (a batch checks three ids a call; the
 * regular expressions it replaces are in the test that compares the two).
 */
export const isCallId = (id: string): boolean => {
  const length = id.length
  if (length === 36) {
    for (let i = 0; i < 36; i++) {
      const c = id.charCodeAt(i)
      if (i === 8 || i === 13 || i === 18 || i === 23 ? c !== 45 /* - */ : !isHexDigit(c)) return false
    }
    return true
  }
  if (length !== 16 && length !== 32) return false
  for (let i = 0; i < length; i++) if (!isHexDigit(id.charCodeAt(i))) return false
  return true
}

const PROJECT_ID = /^[^/\s]+\/[^/\s]+$/

// The last project id found well formed: the calls of a batch mostly share one.
let lastProjectId = ""

/** Whether a project id has the `"entity/project"` form. */
export const isProjectId = (projectId: string): boolean => {
  if (projectId === lastProjectId) return true
  if (!PROJECT_ID.test(projectId)) return false
  lastProjectId = projectId
  return true
}

/** A 400 `{reason}` of the trace service. */
export const invalid = (reason: string) => Effect.fail(new InvalidRequest({ reason }))

/** 400 unless the project id has the `"entity/project"` form. */
export const checkProject = (projectId: string) =>
  isProjectId(projectId) ? Effect.void : invalid(`Invalid project_id: expected "entity/project"`)

const hex = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")

/** A UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, the version, then random bits with the variant. */
export const uuidv7 = (millis: number): string => {
  const bytes = new Uint8Array(16)
  crypto.getRandomValues(bytes)
  let ms = Math.max(0, Math.floor(millis))
  for (let i = 5; i >= 0; i--) {
    bytes[i] = ms % 256
    ms = Math.floor(ms / 256)
  }
  bytes[6] = 0x70 | ((bytes[6] ?? 0) & 0x0f)
  bytes[8] = 0x80 | ((bytes[8] ?? 0) & 0x3f)
  const h = hex(bytes)
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`
}

/** A new UUIDv7 at the `Clock`'s time. */
export const newId: Effect.Effect<string> = Effect.map(Clock.currentTimeMillis, uuidv7)

/** A timestamp in UTC with its ordering key: microseconds since the epoch. */
export interface Instant {
  readonly iso: string
  readonly micros: number
}

const ISO = /^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}(?::\d{2})?)(?:\.(\d+))?(Z|[+-]\d{2}:?\d{2})?$/i

/**
 * Reads an ISO 8601 timestamp. One in UTC (`Z`, `+00:00` or no offset) keeps its fraction up to microseconds;
 * another offset is converted to UTC with millisecond precision. Undefined when it is not a timestamp.
 */
export const instant = (text: string): Instant | undefined => canonicalInstant(text) ?? instantOf(text)

const isDigit = (text: string, i: number) => {
  const c = text.charCodeAt(i)
  return c >= 48 && c <= 57
}

/** The character positions of the digits of `YYYY-MM-DDTHH:MM:SS`. */
const DIGITS = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18]

// The last `YYYY-MM-DDTHH:MM:SS` read in the canonical form, and its milliseconds: the calls of a batch mostly
// start and end within the same second, whose reading (checks and `Date.parse`) is then done once.
let lastSeconds = ""
let lastSecondsMillis = 0

/**
 * {@link instantOf} of the form clients send (`YYYY-MM-DDTHH:MM:SS[.fraction]Z`, as `toISOString` writes it),
 * read without its regular expressions; `undefined` for any other form (or a date `Date.parse` refuses), which
 * {@link instantOf} then reads.
 */
const canonicalInstant = (text: string): Instant | undefined => {
  const length = text.length
  if (length < 20 || text.charCodeAt(length - 1) !== 90 /* Z */) return undefined
  const sameSecond = lastSeconds !== "" && text.startsWith(lastSeconds)
  if (!sameSecond) {
    if (text[4] !== "-" || text[7] !== "-" || text[10] !== "T" || text[13] !== ":" || text[16] !== ":") return undefined
    for (const i of DIGITS) if (!isDigit(text, i)) return undefined
  }
  let micro = 0
  if (length > 20) {
    if (text[19] !== "." || length === 21) return undefined
    for (let i = 20; i < length - 1; i++) if (!isDigit(text, i)) return undefined
    for (let i = 20; i < 26; i++) micro = micro * 10 + (i < length - 1 ? text.charCodeAt(i) - 48 : 0)
  }
  let seconds = lastSecondsMillis
  if (!sameSecond) {
    seconds = Date.parse(`${text.slice(0, 19)}Z`)
    if (!Number.isFinite(seconds)) return undefined
    lastSeconds = text.slice(0, 19)
    lastSecondsMillis = seconds
  }
  return { iso: length <= 27 ? text : `${text.slice(0, 26)}Z`, micros: seconds * 1000 + micro }
}

/** {@link instant} by its regular expressions, for every form it takes. */
export const instantOf = (text: string): Instant | undefined => {
  const match = ISO.exec(text.trim())
  if (match === null) return undefined
  const [, date, clock, fraction = "", offset = "Z"] = match
  const time = clock !== undefined && clock.length === 5 ? `${clock}:00` : clock
  const utc = /^(?:Z|[+-]00:?00)$/i.test(offset)
  const micro = fraction.slice(0, 6)
  if (utc) {
    const seconds = Date.parse(`${date}T${time}Z`)
    if (!Number.isFinite(seconds)) return undefined
    return {
      iso: `${date}T${time}${micro.length > 0 ? `.${micro}` : ""}Z`,
      micros: seconds * 1000 + Number(micro.padEnd(6, "0"))
    }
  }
  const zone = offset.includes(":") ? offset : `${offset.slice(0, 3)}:${offset.slice(3)}`
  const millis = Date.parse(`${date}T${time}${fraction.length > 0 ? `.${fraction.slice(0, 3)}` : ""}${zone}`)
  if (!Number.isFinite(millis)) return undefined
  return { iso: new Date(millis).toISOString(), micros: millis * 1000 }
}
