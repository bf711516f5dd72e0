/**
 * The trace calls repository over a real SQLite file: starts and ends merged in any order and across
 * reopening, the SQL filter (prefixes matched literally, roots only, id lists), lineage, display names, and
 * soft deletion with descendants.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { type CallEnd, type CallStart, TraceCalls } from "../../src/local/store/TraceCalls.js"
import { tempDir, withStore } from "./support.js"

const P = "ent/proj"

const start = (id: string, fields: Partial<CallStart> = {}): CallStart => ({
  project_id: P,
  id,
  trace_id: "t1",
  parent_id: null,
  op_name: "op",
  display_name: null,
  thread_id: null,
  turn_id: null,
  started_at: "2026-01-01T00:00:00Z",
  started_key: 0,
  attributes: {},
  inputs: {},
  wb_user_id: null,
  wb_run_id: null,
  wb_run_step: null,
  ...fields
})

const end = (id: string, fields: Partial<CallEnd> = {}): CallEnd => ({
  project_id: P,
  id,
  ended_at: "2026-01-01T00:00:01Z",
  output: Option.none(),
  summary: {},
  exception: null,
  wb_run_step_end: null,
  ...fields
})

const ids = (records: ReadonlyArray<{ readonly id: string }>) => records.map((r) => r.id)

describe("TraceCalls", () => {
  it.scoped("merges an end that comes before its start, and keeps both across reopening", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* withStore(dir)(
        Effect.gen(function* () {
          const calls = yield* TraceCalls
          yield* calls.batch([{ mode: "end", end: end("a", { output: Option.some(null), summary: { k: 1 } }) }])
          expect(yield* calls.read(P, "a")).toEqual(Option.none())
          expect(yield* calls.query(P, {})).toEqual([])
        })
      )
      const read = yield* withStore(dir)(
        Effect.gen(function* () {
          const calls = yield* TraceCalls
          yield* calls.batch([{ mode: "start", start: start("a", { inputs: { q: "é" }, started_key: 5 }) }])
          return yield* calls.read(P, "a")
        })
      )
      expect(Option.getOrThrow(read)).toMatchObject({
        id: "a",
        inputs: { q: "é" },
        ended_at: "2026-01-01T00:00:01Z",
        output: Option.some(null),
        summary: { k: 1 },
        started_key: 5
      })
    })
  )

  it.scoped("in one batch, starts and ends of a call merge in either order, and a later start wins", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const [a, b] = yield* withStore(dir)(
        Effect.gen(function* () {
          const calls = yield* TraceCalls
          yield* calls.batch([
            { mode: "end", end: end("a", { exception: "boom" }) },
            { mode: "start", start: start("a") },
            { mode: "start", start: start("b", { display_name: "first" }) },
            { mode: "end", end: end("b", { output: Option.some({ ok: true }) }) },
            { mode: "start", start: start("b", { display_name: "second" }) }
          ])
          return [Option.getOrThrow(yield* calls.read(P, "a")), Option.getOrThrow(yield* calls.read(P, "b"))]
        })
      )
      expect(a).toMatchObject({ exception: "boom", ended_at: "2026-01-01T00:00:01Z", op_name: "op" })
      expect(b).toMatchObject({ display_name: "second", output: Option.some({ ok: true }) })
    })
  )

  it.scoped("filters in SQL: op names exact and by literal prefix, id lists, roots only; ordered by start", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* withStore(dir)(
        Effect.gen(function* () {
          const calls = yield* TraceCalls
          yield* calls.batch([
            { mode: "start", start: start("c", { op_name: "my_op:1", started_key: 3 }) },
            { mode: "start", start: start("a", { op_name: "my_op:2", started_key: 1, trace_id: "t2" }) },
            { mode: "start", start: start("b", { op_name: "myXop:1", started_key: 1, parent_id: "a" }) },
            { mode: "start", start: start("z", { project_id: "ent/other", op_name: "my_op:1" }) }
          ])
          expect(ids(yield* calls.query(P, {}))).toEqual(["a", "b", "c"])
          // `_` in a prefix is literal, not LIKE's any-character.
          expect(ids(yield* calls.query(P, { op_prefixes: ["my_op:"] }))).toEqual(["a", "c"])
          expect(ids(yield* calls.query(P, { op_names: ["myXop:1"], op_prefixes: ["my_op:2"] }))).toEqual(["a", "b"])
          expect(ids(yield* calls.query(P, { trace_ids: ["t2"] }))).toEqual(["a"])
          expect(ids(yield* calls.query(P, { parent_ids: ["a"] }))).toEqual(["b"])
          expect(ids(yield* calls.query(P, { trace_roots_only: true }))).toEqual(["a", "c"])
          expect(ids(yield* calls.query(P, { call_ids: ["c", "z"] }))).toEqual(["c"])
          expect(ids(yield* calls.query(P, { call_ids: [] }))).toEqual(["a", "b", "c"])
        })
      )
    })
  )

  it.scoped("lineage, display names, and soft deletion with every descendant", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      yield* withStore(dir)(
        Effect.gen(function* () {
          const calls = yield* TraceCalls
          yield* calls.batch([
            { mode: "start", start: start("r") },
            { mode: "start", start: start("c1", { parent_id: "r" }) },
            { mode: "start", start: start("g1", { parent_id: "c1" }) },
            { mode: "start", start: start("c2", { parent_id: "r" }) },
            { mode: "start", start: start("x", { trace_id: "t9" }) },
            { mode: "end", end: end("g1", { exception: "boom" }) }
          ])
          const lineage = yield* calls.lineage(P, ["t1"])
          expect(lineage.filter((row) => row.failed).map((row) => row.id)).toEqual(["g1"])
          expect(lineage.map((row) => row.id).sort()).toEqual(["c1", "c2", "g1", "r"])

          expect(yield* calls.setDisplayName(P, "c2", "named")).toBe(true)
          expect(Option.getOrThrow(yield* calls.read(P, "c2")).display_name).toBe("named")
          expect(yield* calls.setDisplayName(P, "nope", "named")).toBe(false)

          expect(yield* calls.softDelete(P, ["c1", "nope"], "2026-01-02T00:00:00.000Z")).toBe(2)
          expect(ids(yield* calls.query(P, {}))).toEqual(["c2", "r", "x"])
          expect(yield* calls.setDisplayName(P, "g1", "late")).toBe(false)
          expect(yield* calls.softDelete(P, ["r"], "2026-01-02T00:00:00.000Z")).toBe(2)
          expect(ids(yield* calls.query(P, {}))).toEqual(["x"])
          expect(yield* calls.lineage(P, ["t1"])).toEqual([])
        })
      )
    })
  )
})
