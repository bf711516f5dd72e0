/**
 * `call/upsert_batch` bodies read straight from their text, for the hottest route of the trace surface (thousands
 * of calls per body): one pass over the text gives each item's fields and the JSON text of its `attributes`,
 * `inputs` and `output` as they arrived, so that they are stored without being parsed and serialized again.
 *
 * A value's text is kept only when it is exactly what `JSON.stringify(JSON.parse(text))` gives (no whitespace, no
 * escapes `JSON.stringify` would not write, numbers as JavaScript prints them, no repeated keys, no keys that are
 * array indices, which a parse would move first): then the store holds the very bytes the parsed path stores.
 * The summary, whose keys the schema reorders (`usage` and `status_counts` first, each usage's named counts first in
 * `LLMUsage`'s order), is written in that order from its members' texts. Anything else (text that is not such JSON,
 * a field the schema would refuse) declines (`undefined`) and the body goes the schema's way, which answers it as it
 * always has.
 *
 * Mirrors `CallCreateBatchReq` in api/TraceCall.ts and its fast decoder (api/internal/traceFastPath.ts): keep them
 * in step (a property test compares the two; the compiler checks that the start's and the end's key lists here are
 * those of `CallStartInsert` and `CallEndInsert`).
 */
import { LLM_USAGE_KEYS } from "../../../../api/internal/traceFastPath.js"
import type { CallEndInsert, CallStartInsert } from "../../../../api/TraceCall.js"

/** A call's start as read from the text: its fields, with `attributes` and `inputs` as JSON text. */
export interface StartText {
  readonly project_id: string
  readonly id?: string | null | undefined
  readonly op_name: string
  readonly display_name?: string | null | undefined
  readonly trace_id?: string | null | undefined
  readonly parent_id?: string | null | undefined
  readonly thread_id?: string | null | undefined
  readonly turn_id?: string | null | undefined
  readonly started_at: string
  readonly attributes: string
  readonly inputs: string
  readonly wb_user_id?: string | null | undefined
  readonly wb_run_id?: string | null | undefined
  readonly wb_run_step?: number | null | undefined
}

/** A call's end as read from the text: its fields, with `output` (when sent) and `summary` as JSON text. */
export interface EndText {
  readonly project_id: string
  readonly id: string
  readonly ended_at: string
  readonly exception?: string | null | undefined
  readonly output?: string | undefined
  readonly summary: string
  readonly wb_run_step_end?: number | null | undefined
}

/** One item of a batch read from the text. */
export type ItemText =
  | { readonly mode: "start"; readonly start: StartText }
  | { readonly mode: "end"; readonly end: EndText }

/** Nesting deeper than this (the body's own levels included) declines: well within the server's 512. */
const MAX_DEPTH = 200

/** Thrown to decline; caught once, in {@link readBatchText}. */
const DECLINE: unique symbol = Symbol("effect-rl/local/server/trace/batchText/Decline")

const decline = (): never => {
  throw DECLINE
}

const QUOTE = 0x22
const BACKSLASH = 0x5c
const COMMA = 0x2c
const COLON = 0x3a
const OPEN_OBJECT = 0x7b
const CLOSE_OBJECT = 0x7d
const OPEN_ARRAY = 0x5b
const CLOSE_ARRAY = 0x5d

/** The most keys of open objects tracked at once (as pairs); more declines. */
const KEYS = 1 << 14

const isDigit = (c: number) => c >= 0x30 && c <= 0x39

/** Whether an escape character (the one after `\`) is one `JSON.stringify` writes: `" \ b f n r t`. */
const isStringifyEscape = (c: number) =>
  c === QUOTE || c === BACKSLASH || c === 0x62 || c === 0x66 || c === 0x6e || c === 0x72 || c === 0x74

/** Whether the escape (the character after `\`) is one JSON allows (those above, `/` and `u` with four hex digits). */
const isJsonEscape = (text: string, at: number) => {
  const c = text.charCodeAt(at)
  if (isStringifyEscape(c) || c === 0x2f) return true
  return c === 0x75 && /^[0-9a-fA-F]{4}$/.test(text.slice(at + 1, at + 5))
}

/** Whether the key text `[start, end)` (quotes excluded) is an array index, which objects order first. */
const isIndexKey = (text: string, start: number, end: number): boolean => {
  if (!isDigit(text.charCodeAt(start))) return false
  for (let i = start; i < end; i++) if (!isDigit(text.charCodeAt(i))) return false
  if (end - start > 1 && text.charCodeAt(start) === 0x30) return false
  return end - start <= 10 && Number(text.slice(start, end)) < 4294967295
}

/** The reading position over a body's text, and what it reads. */
class Reader {
  pos = 0
  /** Where the next `\` at or after the last search is (`Infinity` when none): searched once, not per string. */
  private backslash = -1
  /** The keys of the objects being read, as pairs [start, end) of their text, to find a repeated one. */
  private readonly keys = new Int32Array(KEYS)
  /** How many entries of {@link keys} are in use. */
  private top = 0
  /** Where the text of the last key read ends (past its closing quote). */
  keyEnd = 0

  constructor(readonly text: string) {}

  expect(c: number) {
    if (this.text.charCodeAt(this.pos) !== c) decline()
    this.pos++
  }

  private nextBackslash(from: number): number {
    if (this.backslash < from) {
      const at = this.text.indexOf("\\", from)
      this.backslash = at < 0 ? Number.POSITIVE_INFINITY : at
    }
    return this.backslash
  }

  /**
   * Past a string starting at `pos` (its opening quote); `canonical` asks that it be as `JSON.stringify` writes it.
   * Whether it holds an escape. Control characters inside are found once for the whole text (see
   * {@link readBatchText}).
   */
  private string(canonical: boolean): boolean {
    const text = this.text
    if (text.charCodeAt(this.pos) !== QUOTE) decline()
    const start = this.pos + 1
    let end = text.indexOf('"', start)
    if (end < 0) decline()
    let escaped = false
    let bs = this.nextBackslash(start)
    while (bs < end) {
      escaped = true
      if (canonical ? !isStringifyEscape(text.charCodeAt(bs + 1)) : !isJsonEscape(text, bs + 1)) decline()
      // An escaped quote does not end the string.
      if (bs + 1 === end) {
        end = text.indexOf('"', end + 1)
        if (end < 0) decline()
      }
      bs = this.nextBackslash(bs + 2)
    }
    this.pos = end + 1
    return escaped
  }

  /** A string's value (its text parsed only when it holds escapes). */
  stringValue(): string {
    const start = this.pos
    return this.string(false)
      ? (JSON.parse(this.text.slice(start, this.pos)) as string)
      : this.text.slice(start + 1, this.pos - 1)
  }

  /**
   * Past a number as `JSON.stringify` writes it: its value when `wanted`, else 0. Integers of up to 15 digits
   * print as written (but -0); any other number must print back the same.
   */
  private number(wanted: boolean): number {
    const text = this.text
    const start = this.pos
    let i = start
    const negative = text.charCodeAt(i) === 0x2d
    if (negative) i++
    const first = text.charCodeAt(i)
    let value = first - 0x30
    if (first === 0x30) i++
    else if (first >= 0x31 && first <= 0x39) {
      i++
      for (let c = text.charCodeAt(i); isDigit(c); c = text.charCodeAt(++i)) value = value * 10 + (c - 0x30)
    } else decline()
    let plain = true
    if (text.charCodeAt(i) === 0x2e) {
      plain = false
      i++
      if (!isDigit(text.charCodeAt(i))) decline()
      while (isDigit(text.charCodeAt(i))) i++
    }
    const e = text.charCodeAt(i)
    if (e === 0x65 || e === 0x45) {
      plain = false
      i++
      const sign = text.charCodeAt(i)
      if (sign === 0x2b || sign === 0x2d) i++
      if (!isDigit(text.charCodeAt(i))) decline()
      while (isDigit(text.charCodeAt(i))) i++
    }
    this.pos = i
    if (plain) {
      if (i - start > 15 || (negative && value === 0)) decline()
      return wanted ? (negative ? -value : value) : 0
    }
    const slice = text.slice(start, i)
    const parsed = Number(slice)
    if (String(parsed) !== slice) decline()
    return parsed
  }

  private literal(word: string) {
    if (!this.at(word)) decline()
    this.pos += word.length
  }

  /** Past a JSON value as `JSON.stringify` writes it (see the module's comment); `depth` levels are open around it. */
  value(depth: number): void {
    switch (this.text.charCodeAt(this.pos)) {
      case QUOTE:
        this.string(true)
        return
      case OPEN_OBJECT:
        this.object(depth + 1)
        return
      case OPEN_ARRAY:
        this.array(depth + 1)
        return
      case 0x74:
        this.literal("true")
        return
      case 0x66:
        this.literal("false")
        return
      case 0x6e:
        this.literal("null")
        return
      default:
        this.number(false)
    }
  }

  private array(depth: number) {
    if (depth > MAX_DEPTH) decline()
    this.pos++
    if (this.text.charCodeAt(this.pos) === CLOSE_ARRAY) {
      this.pos++
      return
    }
    for (;;) {
      this.value(depth)
      const c = this.text.charCodeAt(this.pos++)
      if (c === CLOSE_ARRAY) return
      if (c !== COMMA) decline()
    }
  }

  /**
   * Past a key as `JSON.stringify` writes it, and its colon: not an array index, and not one of the keys read
   * since `base` in {@link keys} (where it is added). Where its text starts (at its quote).
   */
  key(base: number): number {
    const text = this.text
    const keys = this.keys
    const start = this.pos
    this.string(true)
    const end = this.pos
    if (isDigit(text.charCodeAt(start + 1)) && isIndexKey(text, start + 1, end - 1)) decline()
    const top = this.top
    for (let k = base; k < top; k += 2) {
      const from = keys[k]!
      if (keys[k + 1]! - from === end - start && text.charCodeAt(from + 1) === text.charCodeAt(start + 1)) {
        if (text.startsWith(text.slice(start, end), from)) decline()
      }
    }
    if (top + 2 > KEYS) decline()
    keys[top] = start
    keys[top + 1] = end
    this.top = top + 2
    this.keyEnd = end
    this.expect(COLON)
    return start
  }

  /**
   * Past a key of the body's own objects (the batch, its items, their starts and ends), and its colon: its text
   * is not kept, so neither its place nor a repeat matters (each reader takes a known key once: see {@link once}).
   * Where its text starts (at its quote).
   */
  field(): number {
    const start = this.pos
    this.string(true)
    this.keyEnd = this.pos
    this.expect(COLON)
    return start
  }

  /** Whether the key at `at` (its text from its quote) is `"name"`. */
  isKey(at: number, name: string): boolean {
    const text = this.text
    const length = name.length
    if (text.charCodeAt(at + length + 1) !== QUOTE) return false
    for (let i = 0; i < length; i++) if (text.charCodeAt(at + 1 + i) !== name.charCodeAt(i)) return false
    return true
  }

  /** Whether `word` is at `pos` (compared by character: `startsWith` costs a call into the runtime). */
  private at(word: string): boolean {
    const text = this.text
    const pos = this.pos
    for (let i = 0; i < word.length; i++) if (text.charCodeAt(pos + i) !== word.charCodeAt(i)) return false
    return true
  }

  /** Past `{`; whether the object is empty (and past its `}` when so). */
  open(depth: number): boolean {
    if (depth > MAX_DEPTH) decline()
    this.expect(OPEN_OBJECT)
    if (this.text.charCodeAt(this.pos) === CLOSE_OBJECT) {
      this.pos++
      return true
    }
    return false
  }

  /** Past the `,` before another member (true) or the closing `}` (false); `base` is the object's first key. */
  more(base: number): boolean {
    const c = this.text.charCodeAt(this.pos++)
    if (c === COMMA) return true
    if (c !== CLOSE_OBJECT) decline()
    this.top = base
    return false
  }

  /** {@link more} for the body's own objects, whose keys are not tracked (see {@link field}). */
  next(): boolean {
    const c = this.text.charCodeAt(this.pos++)
    if (c === COMMA) return true
    if (c !== CLOSE_OBJECT) decline()
    return false
  }

  /** Where an object's keys start in {@link keys}. */
  get base(): number {
    return this.top
  }

  private object(depth: number) {
    const base = this.base
    if (this.open(depth)) return
    do {
      this.key(base)
      this.value(depth)
    } while (this.more(base))
  }

  /** A value's JSON text, kept as it arrived (see {@link value}). */
  raw(depth: number): string {
    const start = this.pos
    this.value(depth)
    return this.text.slice(start, this.pos)
  }

  /** An object's JSON text, kept as it arrived. */
  rawObject(depth: number): string {
    if (this.text.charCodeAt(this.pos) !== OPEN_OBJECT) decline()
    return this.raw(depth)
  }

  /** Whether the next value is `null` (and past it when so). */
  isNull(): boolean {
    if (this.at("null")) {
      this.pos += 4
      return true
    }
    return false
  }

  /** A string or `null`. */
  nullableString(): string | null {
    return this.isNull() ? null : this.stringValue()
  }

  /** `true`, `false` or `null`, skipped. */
  nullableBoolean() {
    if (this.isNull()) return
    if (this.at("true")) this.pos += 4
    else if (this.at("false")) this.pos += 5
    else decline()
  }

  /** A safe integer (a number whose value is one, as a parse gives it) or `null`. */
  nullableInt(): number | null {
    if (this.isNull()) return null
    const value = this.number(true)
    if (!Number.isSafeInteger(value)) decline()
    return value
  }

  /** The text of a safe integer or `null` (see {@link nullableInt}). */
  nullableIntText(): string {
    const start = this.pos
    this.nullableInt()
    return this.text.slice(start, this.pos)
  }
}

/** Names (their places in a list) by their length, to look a key up among them (see {@link known}). */
interface Names<K extends string> {
  readonly names: ReadonlyArray<K>
  readonly byLength: ReadonlyArray<ReadonlyArray<number> | undefined>
}

const names = <K extends string>(list: ReadonlyArray<K>): Names<K> => {
  const byLength: Array<Array<number>> = []
  list.forEach((name, i) => {
    const same = byLength[name.length] ?? []
    same.push(i)
    byLength[name.length] = same
  })
  return { names: list, byLength }
}

/** The place in `table` of the last key read (its text from its quote at `at`), or -1 when it is none of them. */
const known = <K extends string>(r: Reader, at: number, table: Names<K>): number => {
  const candidates = table.byLength[r.keyEnd - at - 2]
  if (candidates === undefined) return -1
  for (let i = 0; i < candidates.length; i++) {
    const index = candidates[i]!
    if (r.isKey(at, table.names[index]!)) return index
  }
  return -1
}

const USAGE_KEYS = names(LLM_USAGE_KEYS)

/** Members' texts joined by a comma, either empty or both. */
const joined = (a: string, b: string): string => (a === "" ? b : b === "" ? a : `${a},${b}`)

/** Whether the last {@link usageCounts} wrote its text as it came. */
let countsAsCame = true

/** Where each named count of a usage is, as [start, end) of its member's text (`"key":value`). */
const namedAt = new Int32Array(LLM_USAGE_KEYS.length * 2)

/**
 * An `LLMUsage` as the schema decodes it, written: its named counts (null or safe integers) first, in the schema's
 * order, then the other members as they came (the text as it came when that is its order already).
 */
const usageCounts = (r: Reader, depth: number): string => {
  const text = r.text
  const from = r.pos
  const base = r.base
  if (r.open(depth)) return "{}"
  let named = 0
  let inOrder = true
  let last = -1
  let others: Array<number> | undefined
  do {
    const at = r.key(base)
    const index = known(r, at, USAGE_KEYS)
    if (index < 0) {
      r.value(depth)
      if (others === undefined) others = []
      others.push(at, r.pos)
    } else {
      r.nullableInt()
      if (index < last || others !== undefined) inOrder = false
      last = index
      named |= 1 << index
      namedAt[2 * index] = at
      namedAt[2 * index + 1] = r.pos
    }
  } while (r.more(base))
  countsAsCame = inOrder
  if (inOrder) return text.slice(from, r.pos)
  let out = ""
  for (let i = 0; i < LLM_USAGE_KEYS.length; i++) {
    if ((named & (1 << i)) !== 0) out = joined(out, text.slice(namedAt[2 * i]!, namedAt[2 * i + 1]!))
  }
  if (others !== undefined) {
    for (let i = 0; i < others.length; i += 2) out = joined(out, text.slice(others[i]!, others[i + 1]!))
  }
  return `{${out}}`
}

/**
 * A `SummaryInsert` as the schema decodes it, written: `usage` (each model's counts by {@link usageCounts}) and
 * `status_counts` (safe integers) first, then the other members as they came (the text as it came when nothing
 * moves).
 */
const summary = (r: Reader, depth: number): string => {
  const text = r.text
  const from = r.pos
  const base = r.base
  if (r.open(depth)) return "{}"
  let usage = ""
  let statusCounts = ""
  let others = ""
  let members = 0
  // Whether the text as it came is what the schema gives: usage first, then status_counts, each as it came.
  let asCame = true
  do {
    const at = r.key(base)
    if (r.isKey(at, "usage")) {
      const usageFrom = r.pos
      let models = ""
      const modelBase = r.base
      if (!r.open(depth + 1)) {
        do {
          const model = r.key(modelBase)
          const counts = r.pos
          const written = usageCounts(r, depth + 2)
          if (!countsAsCame) asCame = false
          models = joined(models, text.slice(model, counts) + written)
        } while (r.more(modelBase))
      }
      usage = asCame ? `"usage":${text.slice(usageFrom, r.pos)}` : `"usage":{${models}}`
      if (members !== 0) asCame = false
    } else if (r.isKey(at, "status_counts")) {
      const start = r.pos
      const countBase = r.base
      if (!r.open(depth + 1)) {
        do {
          r.key(countBase)
          if (r.nullableInt() === null) decline()
        } while (r.more(countBase))
      }
      statusCounts = `"status_counts":${text.slice(start, r.pos)}`
      if (members !== (usage === "" ? 0 : 1)) asCame = false
    } else {
      r.value(depth)
      others = joined(others, text.slice(at, r.pos))
    }
    members++
  } while (r.more(base))
  return asCame ? text.slice(from, r.pos) : `{${joined(joined(usage, statusCounts), others)}}`
}

/** `seen` with `bit` added, declining when it is there already: a known key repeated (a parse keeps the last). */
const once = (seen: number, bit: number): number => ((seen & bit) !== 0 ? decline() : seen | bit)

/** `true` when `Listed` names every key of `All`: with `satisfies`, a list that is exactly a schema's keys. */
type Covers<All extends string, Listed extends string> = [Exclude<All, Listed>] extends [never] ? true : false

const START_NAMES = [
  "project_id",
  "id",
  "op_name",
  "display_name",
  "trace_id",
  "parent_id",
  "thread_id",
  "turn_id",
  "started_at",
  "attributes",
  "inputs",
  "otel_dump",
  "wb_user_id",
  "wb_run_id",
  "wb_run_step"
] as const satisfies ReadonlyArray<keyof typeof CallStartInsert.fields>

const END_NAMES = [
  "project_id",
  "id",
  "trace_id",
  "is_eval",
  "ended_at",
  "started_at",
  "exception",
  "output",
  "summary",
  "wb_run_step_end"
] as const satisfies ReadonlyArray<keyof typeof CallEndInsert.fields>

/** Compiles only for `true`: the checks below fail to compile when a schema gains a key these lists do not read. */
type Holds<T extends true> = T
/** The two checks (exported only so that the compiler does not call the alias unused). */
export type ListsCoverSchemas = [
  Holds<Covers<keyof typeof CallStartInsert.fields, (typeof START_NAMES)[number]>>,
  Holds<Covers<keyof typeof CallEndInsert.fields, (typeof END_NAMES)[number]>>
]

const START_KEYS = names(START_NAMES)
const END_KEYS = names(END_NAMES)

const start = (r: Reader, depth: number): StartText => {
  let projectId: string | undefined
  let id: string | null | undefined
  let opName: string | undefined
  let displayName: string | null | undefined
  let traceId: string | null | undefined
  let parentId: string | null | undefined
  let threadId: string | null | undefined
  let turnId: string | null | undefined
  let startedAt: string | undefined
  let attributes: string | undefined
  let inputs: string | undefined
  let wbUserId: string | null | undefined
  let wbRunId: string | null | undefined
  let wbRunStep: number | null | undefined
  let seen = 0
  if (r.open(depth)) return decline()
  do {
    const index = known(r, r.field(), START_KEYS)
    if (index >= 0) seen = once(seen, 1 << index)
    switch (START_NAMES[index]) {
      case "project_id":
        projectId = r.stringValue()
        break
      case "id":
        id = r.nullableString()
        break
      case "op_name":
        opName = r.stringValue()
        break
      case "display_name":
        displayName = r.nullableString()
        break
      case "trace_id":
        traceId = r.nullableString()
        break
      case "parent_id":
        parentId = r.nullableString()
        break
      case "thread_id":
        threadId = r.nullableString()
        break
      case "turn_id":
        turnId = r.nullableString()
        break
      case "started_at":
        startedAt = r.stringValue()
        break
      case "attributes":
        attributes = r.rawObject(depth)
        break
      case "inputs":
        inputs = r.rawObject(depth)
        break
      case "otel_dump":
        if (!r.isNull()) r.rawObject(depth)
        break
      case "wb_user_id":
        wbUserId = r.nullableString()
        break
      case "wb_run_id":
        wbRunId = r.nullableString()
        break
      case "wb_run_step":
        wbRunStep = r.nullableInt()
        break
      default:
        r.value(depth)
    }
  } while (r.next())
  if (
    projectId === undefined ||
    opName === undefined ||
    startedAt === undefined ||
    attributes === undefined ||
    inputs === undefined
  ) {
    return decline()
  }
  return {
    project_id: projectId,
    id,
    op_name: opName,
    display_name: displayName,
    trace_id: traceId,
    parent_id: parentId,
    thread_id: threadId,
    turn_id: turnId,
    started_at: startedAt,
    attributes,
    inputs,
    wb_user_id: wbUserId,
    wb_run_id: wbRunId,
    wb_run_step: wbRunStep
  }
}

const end = (r: Reader, depth: number): EndText => {
  let projectId: string | undefined
  let id: string | undefined
  let endedAt: string | undefined
  let exception: string | null | undefined
  let output: string | undefined
  let summaryText: string | undefined
  let wbRunStepEnd: number | null | undefined
  let seen = 0
  if (r.open(depth)) return decline()
  do {
    const index = known(r, r.field(), END_KEYS)
    if (index >= 0) seen = once(seen, 1 << index)
    switch (END_NAMES[index]) {
      case "project_id":
        projectId = r.stringValue()
        break
      case "id":
        id = r.stringValue()
        break
      case "ended_at":
        endedAt = r.stringValue()
        break
      case "trace_id":
      case "started_at":
        r.nullableString()
        break
      case "exception":
        exception = r.nullableString()
        break
      case "is_eval":
        r.nullableBoolean()
        break
      case "output":
        output = r.raw(depth)
        break
      case "summary":
        summaryText = summary(r, depth + 1)
        break
      case "wb_run_step_end":
        wbRunStepEnd = r.nullableInt()
        break
      default:
        r.value(depth)
    }
  } while (r.next())
  if (projectId === undefined || id === undefined || endedAt === undefined || summaryText === undefined) {
    return decline()
  }
  return {
    project_id: projectId,
    id,
    ended_at: endedAt,
    exception,
    output,
    summary: summaryText,
    wb_run_step_end: wbRunStepEnd
  }
}

const item = (r: Reader): ItemText => {
  let mode: string | undefined
  let startText: StartText | undefined
  let endText: EndText | undefined
  let seen = 0
  if (r.open(2)) return decline()
  do {
    const at = r.field()
    if (r.isKey(at, "mode")) {
      seen = once(seen, 1)
      mode = r.stringValue()
    } else if (r.isKey(at, "req")) {
      seen = once(seen, 2)
      let seenReq = 0
      if (r.open(3)) return decline()
      do {
        const reqKey = r.field()
        if (r.isKey(reqKey, "start")) {
          seenReq = once(seenReq, 1)
          startText = start(r, 4)
        } else if (r.isKey(reqKey, "end")) {
          seenReq = once(seenReq, 2)
          endText = end(r, 4)
        } else r.value(3)
      } while (r.next())
    } else r.value(2)
  } while (r.next())
  if (mode === "start" && startText !== undefined) return { mode, start: startText }
  if (mode === "end" && endText !== undefined) return { mode, end: endText }
  return decline()
}

const batch = (r: Reader): Array<ItemText> | undefined => {
  let items: Array<ItemText> | undefined
  if (r.open(1)) return undefined
  do {
    const at = r.field()
    if (!r.isKey(at, "batch")) {
      r.value(1)
      continue
    }
    if (items !== undefined) decline()
    r.expect(OPEN_ARRAY)
    items = []
    if (r.text.charCodeAt(r.pos) === CLOSE_ARRAY) {
      r.pos++
      continue
    }
    for (;;) {
      items.push(item(r))
      const c = r.text.charCodeAt(r.pos++)
      if (c === CLOSE_ARRAY) break
      if (c !== COMMA) decline()
    }
  } while (r.next())
  if (r.pos !== r.text.length) decline()
  return items
}

/** Whether a string has no lone surrogates (`String.prototype.isWellFormed`, in every Node this package runs on). */
const isWellFormed = (text: string): boolean => (text as unknown as { isWellFormed(): boolean }).isWellFormed()

/**
 * The items of an `upsert_batch` body, each as the schema decodes it but with its JSON values as text (see the
 * module's comment), or `undefined` when the body is not plainly one.
 */
export const readBatchText = (text: string): ReadonlyArray<ItemText> | undefined => {
  let items: ReadonlyArray<ItemText> | undefined
  try {
    items = batch(new Reader(text))
  } catch (error) {
    if (error === DECLINE) return undefined
    throw error
  }
  // The reader skips over the insides of strings: JSON allows no raw control characters there (whitespace, which
  // it declines, is the only other place for them), and JSON.stringify escapes lone surrogates. Checked once read,
  // so that a body declined early (an indented one) is not scanned for them.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
  return /[\x00-\x1f]/.test(text) || !isWellFormed(text) ? undefined : items
}
