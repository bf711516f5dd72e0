/**
 * Digests against fixed vectors computed by Python's `json` and `hashlib` (`scripts/digest-vectors.py`, output
 * committed in `fixtures/trace-digests.json`), and the int/float rule of `Digest.Canonical`.
 */
import { readFileSync } from "node:fs"
import { describe, expect, it } from "@effect/vitest"
import * as Schema from "effect/Schema"
import * as Digest from "../../src/api/Digest.js"

interface ValueVector {
  readonly name: string
  readonly json: string
  readonly dumps: string
  readonly digest: string
}
interface TableVector {
  readonly name: string
  readonly rows: ReadonlyArray<string>
  readonly row_digests: ReadonlyArray<string>
  readonly digest: string
}
interface FileVector {
  readonly name: string
  readonly base64: string
  readonly digest: string
}
const vectors = JSON.parse(readFileSync(new URL("fixtures/trace-digests.json", import.meta.url), "utf8")) as {
  readonly values: ReadonlyArray<ValueVector>
  readonly tables: ReadonlyArray<TableVector>
  readonly files: ReadonlyArray<FileVector>
}
const vector = (name: string): ValueVector => {
  const found = vectors.values.find((v) => v.name === name)
  if (found === undefined) throw new Error(`no vector named ${name}`)
  return found
}

describe("Digest against Python's vectors", () => {
  it("has the vectors the contract needs", () => {
    expect(vectors.values.length).toBeGreaterThan(40)
    expect(vectors.tables.length).toBeGreaterThanOrEqual(3)
    expect(vectors.files.length).toBeGreaterThanOrEqual(3)
  })

  for (const v of vectors.values) {
    it(`value: ${v.name}`, () => {
      const value = Digest.parse(v.json)
      expect(Digest.dumps(value)).toBe(v.dumps)
      expect(Digest.ofValue(value)).toBe(v.digest)
      expect(Digest.ofJsonText(v.json)).toBe(v.digest)
      expect(Digest.ofString(v.dumps)).toBe(v.digest)
      expect(v.digest).toMatch(/^[A-Za-z0-9]{43}$/)
      expect(Schema.is(Digest.ContentDigest)(v.digest)).toBe(true)
    })
  }

  for (const t of vectors.tables) {
    it(`table: ${t.name}`, () => {
      const rowDigests = t.rows.map(Digest.ofJsonText)
      expect(rowDigests).toEqual(t.row_digests)
      expect(Digest.ofTable(rowDigests)).toBe(t.digest)
      expect(Schema.is(Digest.TableDigest)(t.digest)).toBe(true)
    })
  }

  for (const f of vectors.files) {
    it(`file: ${f.name}`, () => {
      const bytes = new Uint8Array(Buffer.from(f.base64, "base64"))
      expect(Digest.ofFile(bytes)).toBe(f.digest)
      expect(Digest.ofBytes(bytes)).toBe(f.digest)
    })
  }
})

describe("ints and floats", () => {
  it("an integral number is an int, a Float is a float, a bigint is an exact int", () => {
    expect(Digest.ofValue(42)).toBe(vector("int").digest)
    expect(Digest.ofValue(new Digest.Float(1))).toBe(vector("float 1.0").digest)
    expect(Digest.ofValue(new Digest.Float(-0))).toBe(vector("float -0.0").digest)
    expect(Digest.ofValue(new Digest.Float(1e15))).toBe(vector("float 1e15").digest)
    expect(Digest.ofValue(new Digest.Float(1e16))).toBe(vector("float 1e16").digest)
    expect(Digest.ofValue(18446744073709551617n)).toBe(vector("large int").digest)
    expect(Digest.ofValue(-(2n ** 63n))).toBe(vector("large negative int").digest)
    expect(Digest.dumps(1)).toBe("1")
    expect(Digest.dumps(new Digest.Float(1))).toBe("1.0")
    expect(Digest.dumps(-0)).toBe("0")
  })

  it("a fractional number is a float without a wrapper", () => {
    expect(Digest.ofValue(1e-7)).toBe(vector("float 1e-7").digest)
    expect(Digest.ofValue(0.1 + 0.2)).toBe(vector("float 0.1 + 0.2").digest)
    expect(Digest.ofValue(5e-324)).toBe(vector("float smallest subnormal").digest)
    expect(Digest.ofValue(-2.5)).toBe(vector("float -2.5").digest)
  })

  it("a value built by hand with Float where Python had a float matches Python", () => {
    const list = [1, new Digest.Float(2), "three", null, true, [], {}]
    expect(Digest.ofValue(list)).toBe(vector("list").digest)
    const nested = {
      outer: { z: [1, { y: new Digest.Float(1), x: null }], a: { deep: { deeper: ["ü", 1e-7, 10n ** 20n] } } },
      list: [[[]], [{}], [{ k: "v" }]],
      flag: false
    }
    expect(Digest.ofValue(nested)).toBe(vector("nested").digest)
  })

  it("JSON.parse output hashes as Python hashes it when no integral float is involved", () => {
    for (const name of ["key order", "non-ascii keys", "emoji", "object value", "op value", "float 1e-7"]) {
      const v = vector(name)
      expect(Digest.ofValue(JSON.parse(v.json) as Digest.Canonical)).toBe(v.digest)
    }
    // ...and differs where Python kept a float that JSON.parse turns into an integral number.
    const v = vector("float 1.0")
    expect(Digest.ofValue(JSON.parse(v.json) as Digest.Canonical)).not.toBe(v.digest)
  })

  it("parse keeps ints and floats apart, at any size", () => {
    expect(Digest.parse("1")).toBe(1)
    expect(Digest.parse("1.0")).toEqual(new Digest.Float(1))
    expect(Digest.parse("1e2")).toEqual(new Digest.Float(100))
    expect(Digest.parse("9007199254740993")).toBe(9007199254740993n)
    expect(Digest.parse(' {"__proto__": [1, 2.5]} ')).toEqual(
      Object.defineProperty({}, "__proto__", {
        value: [1, new Digest.Float(2.5)],
        enumerable: true,
        writable: true,
        configurable: true
      })
    )
    expect(Digest.dumps(Digest.parse('{"__proto__": 1}'))).toBe('{"__proto__": 1}')
    expect(Digest.dumps(Digest.parse('{"a": 1, "a": 2}'))).toBe('{"a": 2}')
    expect(Digest.dumps(Digest.parse("[NaN, Infinity, -Infinity]"))).toBe("[NaN, Infinity, -Infinity]")
  })

  it("parse rejects what is not JSON", () => {
    for (const bad of ["", "{", "[1,]", "01", "1.", '"\\x"', '"a\nb"', "tru", "{} x", "{'a': 1}"]) {
      expect(() => Digest.parse(bad), bad).toThrow(SyntaxError)
    }
  })
})

describe("Python's float repr", () => {
  it("matches repr for the boundaries of fixed and exponent notation", () => {
    const cases: ReadonlyArray<readonly [number, string]> = [
      [0, "0.0"],
      [1, "1.0"],
      [0.001, "0.001"],
      [0.0001, "0.0001"],
      [0.00001, "1e-05"],
      [123.456, "123.456"],
      [1e15, "1000000000000000.0"],
      [1e16, "1e+16"],
      [1.2345e16, "1.2345e+16"],
      [-1e100, "-1e+100"],
      [1e-100, "1e-100"]
    ]
    for (const [value, repr] of cases) expect(Digest.floatRepr(value)).toBe(repr)
  })

  it("sorts keys by code point, as Python does", () => {
    const keys = ["😀", "\uffff", "a", "é"]
    expect([...keys].sort(Digest.compareCodePoints)).toEqual(["a", "é", "\uffff", "😀"])
    expect([...keys].sort()).not.toEqual(["a", "é", "\uffff", "😀"])
  })
})
