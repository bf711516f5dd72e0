/**
 * The calls query language (`{"$expr": ...}`) and `sort_by`, evaluated in TypeScript over calls as they are
 * answered (with the derived `summary.weave`). The local store fetches the rows that the SQL-expressible part
 * of a query's filter selects and this module does the rest, which is plenty for one local process.
 *
 * Semantics, close to the hosted service's:
 * - `$getField` takes a dot path: a top-level field of the call, or a path into `inputs.`, `output.`,
 *   `attributes.` or `summary.` (including `summary.weave.status|latency_ms|trace_name`); list elements by
 *   index. A missing field is `null`. Any other path is an invalid field (403).
 * - `$eq` and `$in` compare JSON values; a number and a numeric string, or a boolean and `"true"`/`"false"`,
 *   compare as equal when they mean the same value.
 * - `$gt`, `$gte`, `$lt`, `$lte` compare numbers (numeric strings too), timestamps by time, other strings by
 *   code point; anything else (a null, mixed types) makes the comparison false.
 * - `$contains` converts its input to text (JSON for objects) and looks for `substr`, optionally ignoring case.
 * - `$convert` to `double`, `int`, `string`, `bool`, or `exists` (present and not null); what does not convert
 *   is `null`.
 * - `$and`, `$or`, `$not` take truthiness: `true`, a non-zero number, a non-empty string, any object.
 */
import type { JsonObject, JsonValue } from "../../../../api/Json.js"
import type { ConvertTo, LiteralValue, Operand, Operation, SortBy } from "../../../../api/TraceCall.js"
import { instant } from "./ids.js"

/** The top-level fields of a call a query may name. */
const SCALAR_FIELDS = new Set([
  "id",
  "project_id",
  "op_name",
  "display_name",
  "trace_id",
  "parent_id",
  "thread_id",
  "turn_id",
  "started_at",
  "ended_at",
  "exception",
  "wb_user_id",
  "wb_run_id",
  "wb_run_step",
  "wb_run_step_end",
  "deleted_at"
])

/** The fields whose values are JSON a path may reach into. */
const NESTED_FIELDS = new Set(["inputs", "output", "attributes", "summary"])

const TIME_FIELDS = new Set(["started_at", "ended_at", "deleted_at"])

/** Why a field path is invalid, or undefined when a query may name it. */
export const invalidField = (path: string): string | undefined => {
  const [root, ...rest] = path.split(".")
  if (root !== undefined && SCALAR_FIELDS.has(root) && rest.length === 0) return undefined
  if (root !== undefined && NESTED_FIELDS.has(root) && rest.every((part) => part.length > 0)) return undefined
  return `Invalid field: ${path}`
}

/** Every field path an operand names. */
export const fieldPaths = (operand: Operand): ReadonlyArray<string> => {
  if ("$literal" in operand) return []
  if ("$getField" in operand) return [operand.$getField]
  if ("$convert" in operand) return fieldPaths(operand.$convert.input)
  if ("$size" in operand) return fieldPaths(operand.$size)
  if ("$and" in operand) return operand.$and.flatMap(fieldPaths)
  if ("$or" in operand) return operand.$or.flatMap(fieldPaths)
  if ("$not" in operand) return fieldPaths(operand.$not[0])
  if ("$in" in operand) return [...fieldPaths(operand.$in[0]), ...operand.$in[1].flatMap(fieldPaths)]
  if ("$contains" in operand) {
    return [...fieldPaths(operand.$contains.input), ...fieldPaths(operand.$contains.substr)]
  }
  const [a, b] = pairOf(operand)
  return [...fieldPaths(a), ...fieldPaths(b)]
}

type Value = JsonValue | undefined

/** The value at a dot path of a call; undefined when missing. */
export const getField = (call: JsonObject, path: string): Value => {
  let current: Value = call
  for (const part of path.split(".")) {
    if (current === null || current === undefined || typeof current !== "object") return undefined
    if (Array.isArray(current)) {
      const list: ReadonlyArray<JsonValue> = current
      current = /^\d+$/.test(part) ? list[Number(part)] : undefined
    } else {
      const record = current as JsonObject
      current = Object.hasOwn(record, part) ? record[part] : undefined
    }
  }
  return current
}

/**
 * Sets the value at a dot path of a call, in place, when every step before the last exists (an object member, or
 * a list index in range); false when the path does not reach.
 */
export const setField = (call: JsonObject, path: string, value: JsonValue): boolean => {
  const parts = path.split(".")
  const last = parts.pop()
  let current: Value = call
  for (const part of parts) {
    if (current === null || current === undefined || typeof current !== "object") return false
    current = Array.isArray(current)
      ? /^\d+$/.test(part)
        ? (current as ReadonlyArray<JsonValue>)[Number(part)]
        : undefined
      : Object.hasOwn(current, part)
        ? (current as JsonObject)[part]
        : undefined
  }
  if (last === undefined || current === null || current === undefined || typeof current !== "object") return false
  if (Array.isArray(current)) {
    if (!/^\d+$/.test(last) || Number(last) >= current.length) return false
    ;(current as Array<JsonValue>)[Number(last)] = value
    return true
  }
  ;(current as Record<string, JsonValue>)[last] = value
  return true
}

const literal = (value: LiteralValue): JsonValue => {
  if (value === null || typeof value !== "object") return value
  if (Array.isArray(value)) return value.map((item: { readonly $literal: LiteralValue }) => literal(item.$literal))
  const out: Record<string, JsonValue> = {}
  for (const [key, item] of Object.entries(value as { readonly [key: string]: { readonly $literal: LiteralValue } })) {
    out[key] = literal(item.$literal)
  }
  return out
}

/** JSON with sorted keys, to compare objects and lists by content. */
const canonical = (value: Value): string => {
  if (value === undefined || value === null || typeof value !== "object") return JSON.stringify(value ?? null)
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`
  const record = value as JsonObject
  return `{${Object.keys(record)
    .sort()
    .map((key) => `${JSON.stringify(key)}:${canonical(record[key])}`)
    .join(",")}}`
}

const numeric = (value: Value): number | undefined => {
  if (typeof value === "number") return value
  if (typeof value === "string" && value.trim() !== "") {
    const n = Number(value)
    return Number.isFinite(n) ? n : undefined
  }
  return undefined
}

const text = (value: Value): string | null => {
  if (value === undefined || value === null) return null
  if (typeof value === "string") return value
  if (typeof value === "number" || typeof value === "boolean") return String(value)
  return canonical(value)
}

const truthy = (value: Value): boolean => {
  if (value === undefined || value === null) return false
  if (typeof value === "boolean") return value
  if (typeof value === "number") return value !== 0
  if (typeof value === "string") return value.length > 0
  return true
}

const equals = (a: Value, b: Value): boolean => {
  const x = a ?? null
  const y = b ?? null
  if (x === null || y === null) return x === y
  if (typeof x === typeof y) return typeof x === "object" ? canonical(x) === canonical(y) : x === y
  if (typeof x === "number" || typeof y === "number") {
    const [n, m] = [numeric(x), numeric(y)]
    return n !== undefined && m !== undefined && n === m
  }
  if (typeof x === "boolean" || typeof y === "boolean") return String(x) === String(y)
  return false
}

/** The order of two values, or undefined when they do not compare. */
const compare = (a: Value, b: Value): number | undefined => {
  if (a === undefined || a === null || b === undefined || b === null) return undefined
  if (typeof a === "number" || typeof b === "number") {
    const [n, m] = [numeric(a), numeric(b)]
    return n === undefined || m === undefined ? undefined : n - m
  }
  if (typeof a === "string" && typeof b === "string") {
    const [s, t] = [instant(a), instant(b)]
    if (s !== undefined && t !== undefined) return s.micros - t.micros
    return a < b ? -1 : a > b ? 1 : 0
  }
  if (typeof a === "boolean" && typeof b === "boolean") return Number(a) - Number(b)
  return undefined
}

const convert = (value: Value, to: ConvertTo): JsonValue => {
  switch (to) {
    case "exists":
      return value !== undefined && value !== null
    case "double":
      return typeof value === "boolean" ? Number(value) : (numeric(value) ?? null)
    case "int": {
      const n = typeof value === "boolean" ? Number(value) : numeric(value)
      return n === undefined ? null : Math.trunc(n)
    }
    case "string":
      return text(value)
    case "bool": {
      if (typeof value === "boolean") return value
      if (typeof value === "number") return value !== 0
      if (typeof value === "string") {
        const lower = value.trim().toLowerCase()
        if (lower === "true" || lower === "1") return true
        if (lower === "false" || lower === "0" || lower === "") return false
      }
      return null
    }
  }
}

const pairOf = (
  operation: Exclude<
    Operation,
    | { readonly $and: unknown }
    | { readonly $or: unknown }
    | { readonly $not: unknown }
    | { readonly $in: unknown }
    | { readonly $contains: unknown }
  >
): readonly [Operand, Operand] => {
  if ("$eq" in operation) return operation.$eq
  if ("$gt" in operation) return operation.$gt
  if ("$gte" in operation) return operation.$gte
  if ("$lt" in operation) return operation.$lt
  return operation.$lte
}

/** The value of an operand for a call. */
export const evaluate = (call: JsonObject, operand: Operand): Value => {
  if ("$literal" in operand) return literal(operand.$literal)
  if ("$getField" in operand) return getField(call, operand.$getField)
  if ("$convert" in operand) return convert(evaluate(call, operand.$convert.input), operand.$convert.to)
  if ("$size" in operand) {
    const value = evaluate(call, operand.$size)
    return Array.isArray(value) || typeof value === "string" ? value.length : null
  }
  return matches(call, operand)
}

/** Whether a call satisfies an operation. */
export const matches = (call: JsonObject, operation: Operation): boolean => {
  if ("$and" in operation) return operation.$and.every((item) => truthy(evaluate(call, item)))
  if ("$or" in operation) return operation.$or.some((item) => truthy(evaluate(call, item)))
  if ("$not" in operation) return !truthy(evaluate(call, operation.$not[0]))
  if ("$in" in operation) {
    const value = evaluate(call, operation.$in[0])
    return operation.$in[1].some((item) => equals(value, evaluate(call, item)))
  }
  if ("$contains" in operation) {
    const input = text(evaluate(call, operation.$contains.input))
    const substr = text(evaluate(call, operation.$contains.substr))
    if (input === null || substr === null) return false
    return operation.$contains.case_insensitive === true
      ? input.toLowerCase().includes(substr.toLowerCase())
      : input.includes(substr)
  }
  const [a, b] = pairOf(operation).map((item) => evaluate(call, item)) as [Value, Value]
  if ("$eq" in operation) return equals(a, b)
  const order = compare(a, b)
  if (order === undefined) return false
  if ("$gt" in operation) return order > 0
  if ("$gte" in operation) return order >= 0
  if ("$lt" in operation) return order < 0
  return order <= 0
}

/** A sort key's value: timestamps of the time fields as microseconds. */
const sortValue = (call: JsonObject, field: string): Value => {
  const value = getField(call, field)
  if (TIME_FIELDS.has(field) && typeof value === "string") return instant(value)?.micros ?? value
  return value
}

const rank = (value: Value): number =>
  value === undefined || value === null
    ? 4
    : typeof value === "boolean"
      ? 0
      : typeof value === "number"
        ? 1
        : typeof value === "string"
          ? 2
          : 3

const order = (a: Value, b: Value): number => {
  const [ra, rb] = [rank(a), rank(b)]
  if (ra !== rb || ra === 4) return ra - rb
  if (typeof a === "number" && typeof b === "number") return a - b
  if (typeof a === "boolean" && typeof b === "boolean") return Number(a) - Number(b)
  const [s, t] = [typeof a === "string" ? a : canonical(a), typeof b === "string" ? b : canonical(b)]
  return s < t ? -1 : s > t ? 1 : 0
}

/**
 * Sorts items by the keys of the call each one is seen as (`view`), in order, then by id; a missing or null value
 * sorts last whatever the direction.
 */
export const sortBy = <A>(
  items: ReadonlyArray<A>,
  view: (item: A) => JsonObject,
  keys: ReadonlyArray<SortBy>
): Array<A> => {
  const keyed = items.map((item) => {
    const call = view(item)
    return { item, id: call.id, keys: keys.map((key) => sortValue(call, key.field)) }
  })
  keyed.sort((x, y) => {
    for (let i = 0; i < keys.length; i++) {
      const [a, b] = [x.keys[i], y.keys[i]]
      const missing = (a ?? null) === null || (b ?? null) === null
      const d = order(a, b)
      if (d !== 0) return missing || keys[i]?.direction !== "desc" ? d : -d
    }
    return order(x.id, y.id)
  })
  return keyed.map((entry) => entry.item)
}

/**
 * Sorts calls by the keys in order, then by id; a missing or null value sorts last whatever the direction.
 */
export const sortCalls = (calls: ReadonlyArray<JsonObject>, keys: ReadonlyArray<SortBy>): Array<JsonObject> =>
  sortBy(calls, (call) => call, keys)

/** The page of `items` that `offset` and `limit` select (either may be absent or null, as requests send them). */
export const page = <A>(
  items: ReadonlyArray<A>,
  offset: number | null | undefined,
  limit: number | null | undefined
): ReadonlyArray<A> => {
  const start = offset ?? 0
  return items.slice(start, limit === null || limit === undefined ? undefined : start + limit)
}
