import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import { instant, instantOf } from "../../src/local/server/internal/trace/ids.js"

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
