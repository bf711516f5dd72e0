/**
 * Content digests of the trace service, computed exactly as the service computes them:
 *
 * - a string or byte digest is the SHA-256 of the bytes, in URL-safe base64 without padding, with `-`
 *   replaced by `X` and `_` by `Y` (43 characters of `[A-Za-z0-9]`);
 * - an object's or a table row's digest is the string digest of Python's `json.dumps(val, sort_keys=True)`:
 *   separators `", "` and `": "`, keys sorted by code point, every character outside printable ASCII escaped as
 *   `\uXXXX` (lowercase hex; astral characters as surrogate pairs), floats written as Python's `repr` writes them
 *   (`1.0`, `1e-07`, `1e+16`);
 * - a table's digest is the lowercase hex SHA-256 of its row digests concatenated;
 * - a file's digest is the byte digest of its content.
 *
 * **Ints and floats.** Python keeps `1` and `1.0` apart and writes them differently; a JavaScript number does
 * not. A {@link Canonical} value therefore says which it is: a `number` with an integral value is an int (so
 * `JSON.parse` output hashes as Python hashes JSON written by a JavaScript client, which never writes `1.0`), a
 * `number` with a fractional part is a float, a {@link Float} is always a float (`new Float(1)` is `1.0`), and a
 * `bigint` is an int of any size. When the source is JSON text, {@link parse} reads it as Python's `json.loads`
 * does (a number with a fraction or an exponent is a float, any other is an int, exact at any size), so
 * {@link ofJsonText} gives the service's digest of whatever a client sent, byte for byte.
 *
 * @since 0.1.0
 */
import { createHash } from "node:crypto"
import * as Schema from "effect/Schema"

/** A float, written as Python writes a float even when its value is integral (`new Float(1)` is `1.0`). */
export class Float {
  constructor(
    /** The value. */
    readonly value: number
  ) {}
}

/**
 * A JSON value as Python's `json` module sees it. A `number` is an int when integral and a float otherwise;
 * {@link Float} forces a float, `bigint` is an exact int.
 */
export type Canonical =
  | null
  | boolean
  | string
  | number
  | bigint
  | Float
  | ReadonlyArray<Canonical>
  | { readonly [key: string]: Canonical }

/** A content digest: 43 characters of `[A-Za-z0-9]` (the byte and object digests). */
export const ContentDigest = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9]{43}$/),
  Schema.annotations({ identifier: "ContentDigest" })
)

/** A table digest: 64 lowercase hex characters. */
export const TableDigest = Schema.String.pipe(
  Schema.pattern(/^[0-9a-f]{64}$/),
  Schema.annotations({ identifier: "TableDigest" })
)

const base64ToDigest = (base64url: string): string => base64url.replaceAll("-", "X").replaceAll("_", "Y")

/** The digest of bytes: SHA-256, URL-safe base64 without padding, `-` → `X`, `_` → `Y`. */
export const ofBytes = (bytes: Uint8Array): string =>
  base64ToDigest(createHash("sha256").update(bytes).digest("base64url"))

/** The digest of a file's content: the byte digest. */
export const ofFile = ofBytes

/** The digest of a string: the byte digest of its UTF-8 encoding (Python's `str_digest`). */
export const ofString = (text: string): string =>
  base64ToDigest(createHash("sha256").update(text, "utf8").digest("base64url"))

/** The digest of an object value or a table row: the string digest of {@link dumps}. */
export const ofValue = (value: Canonical): string => ofString(dumps(value))

/** The digest of a value given as JSON text, read as Python reads it ({@link parse}). */
export const ofJsonText = (text: string): string => ofValue(parse(text))

/** The digest of a table: the lowercase hex SHA-256 of its row digests concatenated, in order. */
export const ofTable = (rowDigests: ReadonlyArray<string>): string => {
  const hash = createHash("sha256")
  for (const digest of rowDigests) hash.update(digest, "utf8")
  return hash.digest("hex")
}

// ---------------------------------------------------------------------------------------------------------------
// json.dumps(value, sort_keys=True)
// ---------------------------------------------------------------------------------------------------------------

const hex4 = (code: number): string => `\\u${code.toString(16).padStart(4, "0")}`

/** Python's `ensure_ascii` string encoding: printable ASCII stays, the rest is escaped per UTF-16 code unit. */
const dumpString = (text: string): string => {
  let out = '"'
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    if (code === 0x22) out += '\\"'
    else if (code === 0x5c) out += "\\\\"
    else if (code >= 0x20 && code <= 0x7e) out += text[i]
    else if (code === 0x0a) out += "\\n"
    else if (code === 0x0d) out += "\\r"
    else if (code === 0x09) out += "\\t"
    else if (code === 0x08) out += "\\b"
    else if (code === 0x0c) out += "\\f"
    else out += hex4(code)
  }
  return `${out}"`
}

/** Python's `float.__repr__`: the shortest round-tripping digits, fixed notation when -4 < exponent < 16. */
export const floatRepr = (value: number): string => {
  if (Number.isNaN(value)) return "NaN"
  if (value === Number.POSITIVE_INFINITY) return "Infinity"
  if (value === Number.NEGATIVE_INFINITY) return "-Infinity"
  const sign = value < 0 || Object.is(value, -0) ? "-" : ""
  // `toExponential()` without an argument gives the shortest digits that read back as the same double.
  const [mantissa, exponent] = Math.abs(value).toExponential().split("e") as [string, string]
  const digits = mantissa.replace(".", "")
  const decimalPoint = Number(exponent) + 1 // value = 0.<digits> × 10^decimalPoint
  if (decimalPoint > -4 && decimalPoint <= 16) {
    if (decimalPoint <= 0) return `${sign}0.${"0".repeat(-decimalPoint)}${digits}`
    if (decimalPoint >= digits.length) return `${sign}${digits}${"0".repeat(decimalPoint - digits.length)}.0`
    return `${sign}${digits.slice(0, decimalPoint)}.${digits.slice(decimalPoint)}`
  }
  const e = decimalPoint - 1
  const head = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits
  return `${sign}${head}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`
}

/** Compares strings by code point, as Python sorts `str` (UTF-16 order differs above U+D7FF). */
export const compareCodePoints = (a: string, b: string): number => {
  const length = Math.min(a.length, b.length)
  for (let i = 0; i < length; i++) {
    const x = a.codePointAt(i)!
    const y = b.codePointAt(i)!
    if (x !== y) return x < y ? -1 : 1
    if (x > 0xffff) i++
  }
  return a.length - b.length
}

const dumpNumber = (value: number): string => {
  if (Number.isInteger(value)) return Object.is(value, -0) ? "0" : BigInt(value).toString()
  return floatRepr(value)
}

/**
 * Python's `json.dumps(value, sort_keys=True)`, byte for byte (its default form: `", "` and `": "`,
 * `ensure_ascii`, `allow_nan`). See the module header for how ints and floats are told apart.
 */
export const dumps = (value: Canonical): string => {
  if (value === null) return "null"
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false"
    case "string":
      return dumpString(value)
    case "number":
      return dumpNumber(value)
    case "bigint":
      return value.toString()
  }
  if (value instanceof Float) return floatRepr(value.value)
  if (Array.isArray(value)) {
    const items = value as ReadonlyArray<Canonical>
    return `[${items.map(dumps).join(", ")}]`
  }
  const record = value as { readonly [key: string]: Canonical }
  const keys = Object.keys(record).sort(compareCodePoints)
  return `{${keys.map((key) => `${dumpString(key)}: ${dumps(record[key]!)}`).join(", ")}}`
}

// ---------------------------------------------------------------------------------------------------------------
// json.loads, keeping ints and floats apart
// ---------------------------------------------------------------------------------------------------------------

/**
 * Reads JSON text as Python's `json.loads` does: a number with a fraction or an exponent is a {@link Float}, any
 * other number an int (a `number` when it is a safe integer, otherwise a `bigint`). Also reads Python's
 * `NaN`, `Infinity` and `-Infinity`. A repeated key keeps its last value. Throws a `SyntaxError` on bad input.
 */
export const parse = (text: string): Canonical => {
  const numberPattern = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y
  let i = 0
  const fail = (what: string): never => {
    throw new SyntaxError(`${what} at position ${i} of JSON text`)
  }
  const skip = () => {
    while (i < text.length) {
      const c = text.charCodeAt(i)
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) i++
      else break
    }
  }
  const word = (literal: string) => {
    if (text.startsWith(literal, i)) {
      i += literal.length
      return true
    }
    return false
  }
  const string = (): string => {
    i++ // opening quote
    let out = ""
    let start = i
    for (;;) {
      if (i >= text.length) fail("Unterminated string")
      const c = text.charCodeAt(i)
      if (c === 0x22) {
        out += text.slice(start, i)
        i++
        return out
      }
      if (c < 0x20) fail("Control character in string")
      if (c !== 0x5c) {
        i++
        continue
      }
      out += text.slice(start, i)
      const escaped = text[i + 1]
      i += 2
      switch (escaped) {
        case '"':
          out += '"'
          break
        case "\\":
          out += "\\"
          break
        case "/":
          out += "/"
          break
        case "b":
          out += "\b"
          break
        case "f":
          out += "\f"
          break
        case "n":
          out += "\n"
          break
        case "r":
          out += "\r"
          break
        case "t":
          out += "\t"
          break
        case "u": {
          const code = text.slice(i, i + 4)
          if (!/^[0-9a-fA-F]{4}$/.test(code)) fail("Bad \\u escape")
          out += String.fromCharCode(Number.parseInt(code, 16))
          i += 4
          break
        }
        default:
          fail("Bad escape")
      }
      start = i
    }
  }
  const number = (): Canonical => {
    numberPattern.lastIndex = i
    const match = numberPattern.exec(text)
    if (match === null) return fail("Unexpected character")
    i += match[0].length
    if (match[1] !== undefined || match[2] !== undefined) return new Float(Number(match[0]))
    const asNumber = Number(match[0])
    return Number.isSafeInteger(asNumber) ? asNumber : BigInt(match[0])
  }
  const value = (): Canonical => {
    skip()
    const c = text[i]
    if (c === "{") {
      i++
      const out: Record<string, Canonical> = {}
      skip()
      if (text[i] === "}") {
        i++
        return out
      }
      for (;;) {
        skip()
        if (text[i] !== '"') fail("Expected a key")
        const key = string()
        skip()
        if (text[i] !== ":") fail("Expected ':'")
        i++
        // defineProperty, so that a `__proto__` key is a key and not the prototype.
        Object.defineProperty(out, key, { value: value(), enumerable: true, writable: true, configurable: true })
        skip()
        if (text[i] === ",") i++
        else if (text[i] === "}") {
          i++
          return out
        } else fail("Expected ',' or '}'")
      }
    }
    if (c === "[") {
      i++
      const out: Array<Canonical> = []
      skip()
      if (text[i] === "]") {
        i++
        return out
      }
      for (;;) {
        out.push(value())
        skip()
        if (text[i] === ",") i++
        else if (text[i] === "]") {
          i++
          return out
        } else fail("Expected ',' or ']'")
      }
    }
    if (c === '"') return string()
    if (word("null")) return null
    if (word("true")) return true
    if (word("false")) return false
    if (word("NaN")) return new Float(Number.NaN)
    if (word("Infinity")) return new Float(Number.POSITIVE_INFINITY)
    if (word("-Infinity")) return new Float(Number.NEGATIVE_INFINITY)
    return number()
  }
  const result = value()
  skip()
  if (i !== text.length) fail("Unexpected data after the value")
  return result
}
