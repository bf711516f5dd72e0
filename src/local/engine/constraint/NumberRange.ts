/**
 * Numbers and integers within `minimum`, `maximum`, `exclusiveMinimum` and `exclusiveMaximum`, as automaton
 * `Node`s: the numeric bounds of the JSON-Schema subset. Zod 4 writes them for every `z.number().int()`
 * (the safe-integer range) and for `.min`, `.max`, `.positive()` and the like, so tool schemas made with it
 * carry them.
 *
 * An integer is written in plain decimal, without leading zeros or `-0`; the integers allowed are exactly
 * those within the bounds (and within `MAX_INTEGER_DIGITS`). A bounded number is an integer within the
 * bounds, or an integer part `n` and a fraction when every value between `n` and the next integer away from
 * zero is within the bounds; its fraction ends in a non-zero digit, so that it lies strictly between the two
 * integers, and it has at most 15 significant digits with the integer part, so that it reads back as a double
 * distinct from both (an exclusive bound is never reached by rounding). A bounded number has no exponent.
 * So each output is within the bounds; values the form cannot write (a fraction between two non-integer
 * bounds, `[0.5, 0.9]`) are not offered, and bounds that leave nothing to write are a `SchemaError`.
 *
 * @since 0.1.0
 */
import type { JsonValue } from "../../../api/Json.js"
import { alt, empty, literal, type Node, repeat, seq, set } from "./Automaton.js"

/** The most significant digits of a bounded number with a fraction: doubles keep 15 of them exactly. */
export const MAX_SIGNIFICANT_DIGITS = 15

/** The numeric bounds of a schema: `-Infinity` and `Infinity` where there is none. */
export interface Bounds {
  readonly lower: number
  readonly lowerExclusive: boolean
  readonly upper: number
  readonly upperExclusive: boolean
}

const DIGIT = set([0x30, 0x39])
const NON_ZERO = set([0x31, 0x39])

/**
 * The bounds a schema sets (`undefined` when it sets none). `exclusiveMinimum: true` (draft 4's form) makes
 * `minimum` exclusive; a number is its own bound; where two bounds apply, the tighter one.
 */
export const boundsOf = (
  schema: { readonly [key: string]: JsonValue },
  where: string,
  error: (message: string) => Error
): Bounds | undefined => {
  const { minimum, maximum, exclusiveMinimum, exclusiveMaximum } = schema
  if ([minimum, maximum, exclusiveMinimum, exclusiveMaximum].every((v) => v === undefined)) return undefined
  const finite = (key: string, v: JsonValue | undefined): number | undefined => {
    if (v === undefined) return undefined
    if (typeof v !== "number" || !Number.isFinite(v)) throw error(`${where}.${key} must be a finite number`)
    return v
  }
  const flag = (key: string, v: JsonValue | undefined): boolean => {
    if (typeof v === "boolean") return v
    if (v !== undefined && typeof v !== "number") throw error(`${where}.${key} must be a number or a boolean`)
    return false
  }
  const min = finite("minimum", minimum)
  const max = finite("maximum", maximum)
  const exMin = typeof exclusiveMinimum === "boolean" ? undefined : finite("exclusiveMinimum", exclusiveMinimum)
  const exMax = typeof exclusiveMaximum === "boolean" ? undefined : finite("exclusiveMaximum", exclusiveMaximum)
  const minFlag = flag("exclusiveMinimum", exclusiveMinimum)
  const maxFlag = flag("exclusiveMaximum", exclusiveMaximum)
  let lower = Number.NEGATIVE_INFINITY
  let lowerExclusive = false
  if (min !== undefined) [lower, lowerExclusive] = [min, minFlag]
  if (exMin !== undefined && exMin >= lower) [lower, lowerExclusive] = [exMin, true]
  let upper = Number.POSITIVE_INFINITY
  let upperExclusive = false
  if (max !== undefined) [upper, upperExclusive] = [max, maxFlag]
  if (exMax !== undefined && exMax <= upper) [upper, upperExclusive] = [exMax, true]
  return { lower, lowerExclusive, upper, upperExclusive }
}

/** The digits of the non-negative integers from `lo` to `hi` (strings of one length), as written. */
const sameLength = (lo: string, hi: string): Node => {
  if (lo.length === 0) return empty
  const [l, h] = [lo.charCodeAt(0), hi.charCodeAt(0)]
  if (l === h) return seq(literal(lo[0]!), sameLength(lo.slice(1), hi.slice(1)))
  const rest = lo.length - 1
  const allZeros = /^0*$/.test(lo.slice(1))
  const allNines = /^9*$/.test(hi.slice(1))
  const middleLo = allZeros ? l : l + 1
  const middleHi = allNines ? h : h - 1
  const items: Array<Node> = []
  if (!allZeros) items.push(seq(literal(lo[0]!), sameLength(lo.slice(1), "9".repeat(rest))))
  if (middleLo <= middleHi) items.push(seq(set([middleLo, middleHi]), repeat(DIGIT, rest, rest)))
  if (!allNines) items.push(seq(literal(hi[0]!), sameLength("0".repeat(rest), hi.slice(1))))
  return alt(...items)
}

/**
 * The non-negative integers from `lo` to `hi` (none when `lo > hi`), without leading zeros, one `Node` per
 * length of digits, with that length.
 */
const byLength = (lo: number, hi: number): Array<readonly [length: number, node: Node]> => {
  const out: Array<readonly [number, Node]> = []
  if (lo > hi) return out
  for (let length = String(lo).length; length <= String(hi).length; length++) {
    const from = Math.max(lo, length === 1 ? 0 : 10 ** (length - 1))
    const to = Math.min(hi, 10 ** length - 1)
    out.push([length, sameLength(String(from), String(to))])
  }
  return out
}

/** The integers from `lo` to `hi` (safe integers; empty when `lo > hi`) as written, negatives with `-`. */
const integers = (lo: number, hi: number): Array<Node> => {
  const items: Array<Node> = []
  if (lo < 0 && Math.min(hi, -1) >= lo)
    items.push(seq(literal("-"), alt(...byLength(Math.max(1, -hi), -lo).map(([, node]) => node))))
  if (hi >= 0) items.push(...byLength(Math.max(0, lo), hi).map(([, node]) => node))
  return items
}

/** A fraction of at most `digits` digits (at least one) ending in a non-zero digit. */
const fraction = (digits: number): Node => seq(literal("."), repeat(DIGIT, 0, digits - 1), NON_ZERO)

/**
 * Integer parts `n` from `lo` to `hi` (non-negative), each with a fraction, at most 15 significant digits in
 * all (the part `0` is not significant).
 */
const fractional = (lo: number, hi: number): Array<Node> => {
  if (lo > hi) return []
  const items: Array<Node> = []
  if (lo === 0) items.push(seq(literal("0"), fraction(MAX_SIGNIFICANT_DIGITS)))
  if (hi === 0) return items
  for (const [length, node] of byLength(Math.max(1, lo), hi)) {
    if (length < MAX_SIGNIFICANT_DIGITS) items.push(seq(node, fraction(MAX_SIGNIFICANT_DIGITS - length)))
  }
  return items
}

/**
 * The integers (`integer: true`) or numbers within `bounds` that the engine writes, below
 * `10^maxDigits` in magnitude; throws `error` when there are none.
 */
export const boundedNumber = (
  bounds: Bounds,
  integer: boolean,
  maxDigits: number,
  where: string,
  error: (message: string) => Error
): Node => {
  const cap = 10 ** maxDigits - 1
  const { lower, lowerExclusive, upper, upperExclusive } = bounds
  // The integers within the bounds.
  const lo = Math.max(-cap, lowerExclusive ? Math.floor(lower) + 1 : Math.ceil(lower))
  const hi = Math.min(cap, upperExclusive ? Math.ceil(upper) - 1 : Math.floor(upper))
  const items = integers(lo, hi)
  if (!integer) {
    // n.f lies in (n, n + 1): within the bounds when lower <= n and n + 1 <= upper; -n.f lies in (-n - 1, -n).
    const positive = fractional(Math.max(0, Math.ceil(lower)), Math.min(cap, Math.floor(upper) - 1))
    const negative = fractional(Math.max(0, Math.ceil(-upper)), Math.min(cap, Math.floor(-lower) - 1))
    if (negative.length > 0) items.unshift(seq(literal("-"), alt(...negative)))
    items.push(...positive)
  }
  if (items.length === 0) {
    const none = lower > upper || (lower === upper && (lowerExclusive || upperExclusive))
    throw error(
      none
        ? `${where}: no value is within its bounds`
        : `${where}: bounds that leave no ${integer ? "integer" : "integer, nor a fraction between two integers,"} are not supported`
    )
  }
  return alt(...items)
}
