/**
 * `refs/read_batch` of the trace surface: each ref resolved in order.
 *
 * - `weave:///<entity>/<project>/object/<name>:<digest>` and `.../op/<name>:<digest>` are object versions (the
 *   digest may be `latest` or `vN`); a deleted or missing version resolves to null.
 * - `.../table/<digest>` is the list of the table's row values; `.../call/<id>` the call as `call/read` answers
 *   it (with the derived `summary.weave`), null when there is no live call.
 * - Extras follow in pairs: `/key/<k>` and `/attr/<a>` take a member of an object, `/index/<i>` an item of a list
 *   or the row at that index of a table, `/id/<row digest>` the row of a table with that digest. A value that is
 *   itself a ref string is resolved before the next extra applies (a dataset's `rows` are a table ref). An extra
 *   that does not apply resolves to null. Parts are URL-decoded.
 * - A ref that is not of these forms is 400.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { JsonObject, JsonValue } from "../../../../api/Json.js"
import type { RefsReadBatchReq } from "../../../../api/TraceObject.js"
import * as TraceCalls from "../../../store/TraceCalls.js"
import * as TraceObjects from "../../../store/TraceObjects.js"
import { callsWire } from "./callWire.js"
import { invalid } from "./ids.js"
import { jsonOf, readVersion } from "./objects.js"

/** A resolved value on the way through a ref's extras: a JSON value, or a table (its row digests). */
type Value =
  | { readonly _tag: "json"; readonly value: JsonValue }
  | { readonly _tag: "table"; readonly projectId: string; readonly digests: ReadonlyArray<string> }

interface Parsed {
  readonly projectId: string
  readonly kind: "object" | "op" | "table" | "call"
  readonly target: string
  readonly extras: ReadonlyArray<readonly [string, string]>
}

const REF = /^weave:\/\/\/([^/]+)\/([^/]+)\/(object|op|table|call)\/([^/]+)((?:\/[^/]+\/[^/]+)*)$/

const decode = (part: string): string | undefined => {
  try {
    return decodeURIComponent(part)
  } catch {
    return undefined
  }
}

const parse = (ref: string): Parsed | undefined => {
  const match = REF.exec(ref)
  if (match === null) return undefined
  const [, entity = "", project = "", kind = "", target = "", rest = ""] = match
  const parts = rest.split("/").slice(1).map(decode)
  const extras: Array<readonly [string, string]> = []
  for (let i = 0; i < parts.length; i += 2) {
    const name = parts[i]
    const value = parts[i + 1]
    if (name === undefined || value === undefined || !["key", "attr", "index", "id"].includes(name)) return undefined
    extras.push([name, value])
  }
  const decodedTarget = decode(target)
  if (decodedTarget === undefined) return undefined
  if ((kind === "object" || kind === "op") && !decodedTarget.includes(":")) return undefined
  return { projectId: `${entity}/${project}`, kind: kind as Parsed["kind"], target: decodedTarget, extras }
}

const json = (value: JsonValue): Value => ({ _tag: "json", value })
const NULL = json(null)

const rowVals = (projectId: string, digests: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const store = yield* TraceObjects.TraceObjects
    const vals = yield* store.rows(projectId, digests)
    return digests.map((digest) => {
      const val = vals.get(digest)
      return val === undefined ? null : jsonOf(val)
    })
  })

/** The value a ref's target names (before extras). */
const target = (
  parsed: Pick<Parsed, "projectId" | "kind" | "target">
): Effect.Effect<Value, never, TraceObjects.TraceObjects | TraceCalls.TraceCalls> =>
  Effect.gen(function* () {
    if (parsed.kind === "object" || parsed.kind === "op") {
      const at = parsed.target.lastIndexOf(":")
      const found = yield* readVersion(parsed.projectId, parsed.target.slice(0, at), parsed.target.slice(at + 1)).pipe(
        Effect.option
      )
      return Option.match(found, { onNone: () => NULL, onSome: (obj) => json(obj.val) })
    }
    if (parsed.kind === "table") {
      const store = yield* TraceObjects.TraceObjects
      const digests = yield* store.tableRowDigests(parsed.projectId, parsed.target)
      return Option.match(digests, {
        onNone: () => NULL,
        onSome: (list): Value => ({ _tag: "table", projectId: parsed.projectId, digests: list })
      })
    }
    const calls = yield* TraceCalls.TraceCalls
    const record = yield* calls.read(parsed.projectId, parsed.target).pipe(Effect.orElseSucceed(() => Option.none()))
    if (Option.isNone(record)) return NULL
    const [wire] = yield* callsWire(calls, parsed.projectId, [record.value])
    return wire === undefined ? NULL : json(wire)
  })

/** A value that is a ref string, resolved; any other value as it is. */
const follow = (value: Value): Effect.Effect<Value, never, TraceObjects.TraceObjects | TraceCalls.TraceCalls> => {
  if (value._tag !== "json" || typeof value.value !== "string") return Effect.succeed(value)
  const parsed = parse(value.value)
  if (parsed === undefined || parsed.extras.length > 0) return Effect.succeed(value)
  return target(parsed)
}

const step = (value: Value, [name, arg]: readonly [string, string]) =>
  Effect.gen(function* () {
    const current = yield* follow(value)
    if (current._tag === "table") {
      const index =
        name === "index" ? (/^\d+$/.test(arg) ? Number(arg) : -1) : name === "id" ? current.digests.indexOf(arg) : -1
      const digest = current.digests[index]
      if (digest === undefined) return NULL
      const [row] = yield* rowVals(current.projectId, [digest])
      return json(row ?? null)
    }
    const v = current.value
    if (name === "index" && Array.isArray(v) && /^\d+$/.test(arg)) {
      return json((v as ReadonlyArray<JsonValue>)[Number(arg)] ?? null)
    }
    if ((name === "key" || name === "attr") && v !== null && typeof v === "object" && !Array.isArray(v)) {
      const obj = v as JsonObject
      return json(Object.hasOwn(obj, arg) ? (obj[arg] ?? null) : null)
    }
    return NULL
  })

const resolve = (parsed: Parsed) =>
  Effect.gen(function* () {
    let value = yield* target(parsed)
    for (const extra of parsed.extras) value = yield* step(value, extra)
    if (value._tag === "table") return (yield* rowVals(value.projectId, value.digests)) as JsonValue
    return value.value
  })

/**
 * The value of an object or op ref (extras included) of the project, for `expand_columns`; `None` for anything
 * else (not a ref, a ref of another kind or of another project), which the service leaves as it is.
 */
export const resolveObjectRef = (projectId: string, ref: string) => {
  const parsed = parse(ref)
  return parsed === undefined || parsed.projectId !== projectId || (parsed.kind !== "object" && parsed.kind !== "op")
    ? Effect.succeed(Option.none<JsonValue>())
    : Effect.map(resolve(parsed), Option.some)
}

/** `POST /refs/read_batch` */
export const refsReadBatch = ({ payload }: { readonly payload: RefsReadBatchReq }) =>
  Effect.gen(function* () {
    const parsed: Array<Parsed> = []
    for (const ref of payload.refs) {
      const one = parse(ref)
      if (one === undefined) return yield* invalid(`Invalid ref: ${ref}`)
      parsed.push(one)
    }
    return { vals: yield* Effect.forEach(parsed, resolve) }
  })
