import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import { instant, instantOf, isCallId, isProjectId } from "../../src/local/server/internal/trace/ids.js"

const digits = (n: number) =>
  FastCheck.string({ unit: FastCheck.constantFrom(..."0123456789"), minLength: n, maxLength: n })

/** Timestamps of the form clients send, with any digits (months and days out of range too) and fraction length. */
const canonical = FastCheck.tuple(
  digits(4),
  digits(2),
  digits(2),
  digits(2),
  digits(2),
  digits(2),
  FastCheck.option(
    digits(1).chain(() => FastCheck.string({ unit: FastCheck.constantFrom(..."0123456789"), maxLength: 12 }))
  )
).map(([y, mo, d, h, mi, s, f]) => `${y}-${mo}-${d}T${h}:${mi}:${s}${f === null ? "" : `.${f}`}Z`)

/** Near forms: another case, separator or offset, a missing part, spaces. */
const near = FastCheck.tuple(canonical, FastCheck.nat({ max: 9 })).map(([text, kind]) => {
  switch (kind) {
    case 0:
      return text.toLowerCase()
    case 1:
      return text.replace("T", " ")
    case 2:
      return text.replace("Z", "+00:00")
    case 3:
      return text.replace("Z", "-05:30")
    case 4:
      return text.slice(0, -1)
    case 5:
      return ` ${text} `
    case 6:
      return text.replace(/:\d\d(?=[.Z])/, "")
    case 7:
      return text.replace(".", ",")
    default:
      return text
  }
})

describe("trace ids: instant", () => {
  it("reads what its regular expressions read, for the form clients send and the forms near it", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.oneof(canonical, near), (text) => {
        expect(instant(text)).toStrictEqual(instantOf(text))
      }),
      { numRuns: 5000 }
    )
    expect(instant("2026-01-01T00:00:00.000123Z")).toStrictEqual({
      iso: "2026-01-01T00:00:00.000123Z",
      micros: Date.UTC(2026, 0, 1) * 1000 + 123
    })
    expect(instant("2026-02-30T00:00:00Z")).toStrictEqual(instantOf("2026-02-30T00:00:00Z"))
    expect(instant("2026-13-01T00:00:00.5Z")).toBeUndefined()
  })
})

describe("trace ids: instant of calls within one second", () => {
  it("reads each as its regular expressions read it, one after another (the second read once is reused)", () => {
    const fraction = FastCheck.option(
      FastCheck.string({ unit: FastCheck.constantFrom(..."0123456789x"), maxLength: 9 })
    )
    FastCheck.assert(
      FastCheck.property(canonical, FastCheck.array(FastCheck.tuple(fraction, FastCheck.boolean())), (first, rest) => {
        const second = first.slice(0, 19)
        for (const text of [first, ...rest.map(([f, z]) => `${second}${f === null ? "" : `.${f}`}${z ? "Z" : ""}`)]) {
          expect(instant(text)).toStrictEqual(instantOf(text))
        }
      }),
      { numRuns: 1000 }
    )
  })
})

describe("trace ids: isCallId and isProjectId", () => {
  // The regular expressions isCallId reads by character codes.
  const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
  const OTEL_ID = /^(?:[0-9a-f]{16}|[0-9a-f]{32})$/i
  const byPattern = (id: string) => UUID.test(id) || OTEL_ID.test(id)
  const hexish = FastCheck.string({
    unit: FastCheck.constantFrom(..."0123456789abcdefABCDEFgG-@`/: \n"),
    maxLength: 40
  })
  const uuidLike = FastCheck.uuid().chain((id) =>
    FastCheck.tuple(FastCheck.nat({ max: 35 }), FastCheck.constantFrom("-", "g", "F", "0", "\n", "")).map(([i, c]) =>
      c === "0" ? id.toUpperCase() : `${id.slice(0, i)}${c}${id.slice(i + 1)}`
    )
  )

  it("isCallId: what the UUID and OpenTelemetry id patterns accept", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.oneof(hexish, uuidLike, FastCheck.uuid(), FastCheck.string()), (id) => {
        expect(isCallId(id)).toBe(byPattern(id))
      }),
      { numRuns: 5000 }
    )
    expect(isCallId("0190a000-0000-7000-8000-00000000000a")).toBe(true)
    expect(isCallId("0190A000-0000-7000-8000-00000000000A")).toBe(true)
    expect(isCallId("0123456789abcdef")).toBe(true)
    expect(isCallId("0123456789abcdef0123456789ABCDEF")).toBe(true)
    expect(isCallId("0190a000-0000-7000-8000-00000000000a\n")).toBe(false)
    expect(isCallId("0123456789abcdeg")).toBe(false)
  })

  it("isProjectId: entity/project, asked again after a well-formed one", () => {
    for (const [id, ok] of [
      ["a/b", true],
      ["a/b", true],
      ["a/b/c", false],
      ["a b/c", false],
      ["/b", false],
      ["a/b", true],
      ["a/\u00a0", false]
    ] as const) {
      expect(isProjectId(id)).toBe(ok)
    }
  })
})
