/**
 * The automaton behind constrained decoding: a regular language over Unicode code points, written as a small
 * expression tree (`Node`), compiled to an NFA (Thompson construction), determinised lazily, and run over
 * UTF-8 bytes — the tokens of the byte-level tokenizer — by a `Matcher`.
 *
 * A matcher reports, for each of the 256 bytes, the fewest bytes (this one included) with which an accepted
 * output can be reached after choosing it (`Infinity` when none can): the sampler masks a byte whose cost
 * exceeds the tokens left, so that a constrained output always completes within `max_tokens` when it can.
 * Multi-byte characters are handled exactly: a lead or continuation byte is allowed only when some valid
 * code point (no overlong forms, no surrogates) starting with the bytes so far is accepted.
 *
 * @since 0.1.0
 */

/** The largest code point. */
export const MAX_CODE_POINT = 0x10ffff

/** A regular expression tree over code points. */
export type Node =
  /** One code point from the ranges `[lo0, hi0, lo1, hi1, ...]` (sorted, disjoint, inclusive). */
  | { readonly kind: "set"; readonly ranges: ReadonlyArray<number> }
  /** The items one after the other. */
  | { readonly kind: "seq"; readonly items: ReadonlyArray<Node> }
  /** One of the items. */
  | { readonly kind: "alt"; readonly items: ReadonlyArray<Node> }
  /** The item `min` to `max` times (`max` may be `Infinity`). */
  | { readonly kind: "repeat"; readonly item: Node; readonly min: number; readonly max: number }
  /** One or more items separated by `separator` (built with a single copy of the item). */
  | { readonly kind: "list"; readonly item: Node; readonly separator: Node }

/** Sort and merge ranges `[lo, hi, ...]`. */
export const normalizeRanges = (ranges: ReadonlyArray<number>): Array<number> => {
  const pairs: Array<[number, number]> = []
  for (let i = 0; i + 1 < ranges.length; i += 2) pairs.push([ranges[i]!, ranges[i + 1]!])
  pairs.sort((a, b) => a[0] - b[0])
  const out: Array<number> = []
  for (const [lo, hi] of pairs) {
    if (lo > hi) continue
    const n = out.length
    if (n > 0 && lo <= out[n - 1]! + 1) out[n - 1] = Math.max(out[n - 1]!, hi)
    else out.push(lo, hi)
  }
  return out
}

/** The code points not in the ranges. */
export const negateRanges = (ranges: ReadonlyArray<number>): Array<number> => {
  const sorted = normalizeRanges(ranges)
  const out: Array<number> = []
  let next = 0
  for (let i = 0; i < sorted.length; i += 2) {
    if (sorted[i]! > next) out.push(next, sorted[i]! - 1)
    next = sorted[i + 1]! + 1
  }
  if (next <= MAX_CODE_POINT) out.push(next, MAX_CODE_POINT)
  return out
}

/** One code point from the ranges. */
export const set = (ranges: ReadonlyArray<number>): Node => ({ kind: "set", ranges: normalizeRanges(ranges) })
/** The items in sequence. */
export const seq = (...items: ReadonlyArray<Node>): Node => (items.length === 1 ? items[0]! : { kind: "seq", items })
/** One of the items. */
export const alt = (...items: ReadonlyArray<Node>): Node => (items.length === 1 ? items[0]! : { kind: "alt", items })
/** The item `min` to `max` times. */
export const repeat = (item: Node, min: number, max: number): Node => ({ kind: "repeat", item, min, max })
/** The item or nothing. */
export const optional = (item: Node): Node => repeat(item, 0, 1)
/** The empty string. */
export const empty: Node = { kind: "seq", items: [] }
/** One or more items separated by `separator`. */
export const list = (item: Node, separator: Node): Node => ({ kind: "list", item, separator })
/** A literal string. */
export const literal = (text: string): Node => {
  const items: Array<Node> = []
  for (const ch of text) {
    const cp = ch.codePointAt(0)!
    items.push({ kind: "set", ranges: [cp, cp] })
  }
  return seq(...items)
}

/** Thrown when an expression would compile to too many states. */
export class TooComplexError extends Error {}

/** The most NFA states a constraint may compile to. */
const MAX_STATES = 250_000

interface Fragment {
  readonly start: number
  readonly end: number
}

/** An NFA over code points with one start and one accepting state. */
class Nfa {
  /** Epsilon edges per state. */
  readonly eps: Array<Array<number>> = []
  /** Labelled edges per state, flat `[lo, hi, to, ...]`. */
  readonly trans: Array<Array<number>> = []
  start = 0
  accept = 0
  /** The fewest UTF-8 bytes from each state to the accepting state (`Infinity` when unreachable). */
  dist: Float64Array = new Float64Array(0)

  state(): number {
    if (this.eps.length >= MAX_STATES) throw new TooComplexError("the constraint is too large")
    this.eps.push([])
    this.trans.push([])
    return this.eps.length - 1
  }

  build(node: Node): Fragment {
    switch (node.kind) {
      case "set": {
        const s = this.state()
        const e = this.state()
        const t = this.trans[s]!
        for (let i = 0; i < node.ranges.length; i += 2) t.push(node.ranges[i]!, node.ranges[i + 1]!, e)
        return { start: s, end: e }
      }
      case "seq": {
        if (node.items.length === 0) {
          const s = this.state()
          const e = this.state()
          this.eps[s]!.push(e)
          return { start: s, end: e }
        }
        const first = this.build(node.items[0]!)
        let end = first.end
        for (let i = 1; i < node.items.length; i++) {
          const f = this.build(node.items[i]!)
          this.eps[end]!.push(f.start)
          end = f.end
        }
        return { start: first.start, end }
      }
      case "alt": {
        const s = this.state()
        const e = this.state()
        for (const item of node.items) {
          const f = this.build(item)
          this.eps[s]!.push(f.start)
          this.eps[f.end]!.push(e)
        }
        return { start: s, end: e }
      }
      case "list": {
        const item = this.build(node.item)
        const sep = this.build(node.separator)
        const e = this.state()
        this.eps[item.end]!.push(e, sep.start)
        this.eps[sep.end]!.push(item.start)
        return { start: item.start, end: e }
      }
      case "repeat": {
        const s = this.state()
        let cur = s
        for (let i = 0; i < node.min; i++) {
          const f = this.build(node.item)
          this.eps[cur]!.push(f.start)
          cur = f.end
        }
        const e = this.state()
        if (node.max === Number.POSITIVE_INFINITY) {
          const f = this.build(node.item)
          this.eps[cur]!.push(f.start, e)
          this.eps[f.end]!.push(f.start, e)
        } else {
          for (let i = node.min; i < node.max; i++) {
            const f = this.build(node.item)
            this.eps[cur]!.push(f.start, e)
            cur = f.end
          }
          this.eps[cur]!.push(e)
        }
        return { start: s, end: e }
      }
    }
  }

  /** The fewest bytes to the accepting state from every state (Dijkstra on the reversed graph). */
  computeDistances(): void {
    const n = this.eps.length
    const rev: Array<Array<number>> = Array.from({ length: n }, () => [])
    for (let s = 0; s < n; s++) {
      for (const t of this.eps[s]!) rev[t]!.push(s, 0)
      const tr = this.trans[s]!
      for (let i = 0; i < tr.length; i += 3) rev[tr[i + 2]!]!.push(s, utf8Length(tr[i]!))
    }
    const dist = new Float64Array(n).fill(Number.POSITIVE_INFINITY)
    // Edge weights are 0..4: a bucket queue (Dial's algorithm).
    const buckets: Array<Array<number>> = [[this.accept]]
    dist[this.accept] = 0
    for (let d = 0; d < buckets.length; d++) {
      const bucket = buckets[d]
      if (bucket === undefined) continue
      for (let k = 0; k < bucket.length; k++) {
        const s = bucket[k]!
        if (dist[s]! !== d) continue
        const r = rev[s]!
        for (let i = 0; i < r.length; i += 2) {
          const p = r[i]!
          const nd = d + r[i + 1]!
          if (nd < dist[p]!) {
            dist[p] = nd
            const target = buckets[nd]
            if (target === undefined) buckets[nd] = [p]
            else target.push(p)
          }
        }
      }
    }
    this.dist = dist
  }
}

/** The number of UTF-8 bytes of a code point. */
export const utf8Length = (cp: number): number => (cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4)

/** The least and greatest code point of each UTF-8 length (index = length). */
const MIN_CP = [0, 0, 0x80, 0x800, 0x10000]
const MAX_CP = [0, 0x7f, 0x7ff, 0xffff, MAX_CODE_POINT]

/** The length of a UTF-8 sequence by its lead byte, 0 when the byte cannot lead one. */
const leadLength = (b: number): number =>
  b < 0x80 ? 1 : b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0

/** Whether some code point in `[lo, hi]` (within the length's bounds) that is not a surrogate is in `[a, b]`. */
const meets = (lo: number, hi: number, a: number, b: number): boolean => {
  const x = Math.max(lo, a)
  const y = Math.min(hi, b)
  return x <= y && !(x >= 0xd800 && y <= 0xdfff)
}

/**
 * A compiled constraint: the NFA of a `Node` and its lazily built DFA, shared by the matchers of one request
 * (one per choice).
 */
export class ByteAutomaton {
  private readonly nfa = new Nfa()
  private readonly index = new Map<string, number>()
  private readonly sets: Array<Int32Array> = []
  /** Whether each DFA state accepts. */
  private readonly accepting: Array<boolean> = []
  /** The fewest bytes from each DFA state to an accepted output. */
  private readonly dist: Array<number> = []
  /** Per DFA state: next state per ASCII code point (-2 unknown, -1 none). */
  private readonly ascii: Array<Int32Array> = []
  /** Per DFA state: next state per other code point. */
  private readonly wide: Array<Map<number, number>> = []
  /** Per DFA state: the cost of each byte (see `Matcher.costs`). */
  private readonly byteCosts: Array<Float64Array | undefined> = []
  private readonly stack: Array<number> = []
  private readonly mark: Uint8Array
  /** The DFA start state. */
  readonly start: number

  /** Compile a node (throws `TooComplexError` when it is too large). */
  constructor(node: Node) {
    const f = this.nfa.build(node)
    this.nfa.start = f.start
    this.nfa.accept = f.end
    this.nfa.computeDistances()
    this.mark = new Uint8Array(this.nfa.eps.length)
    this.start = this.intern([f.start])
  }

  /** The DFA states built so far (the DFA is built as outputs reach its states). */
  get states(): number {
    return this.sets.length
  }

  /** The fewest bytes of an accepted output (`Infinity` when the language is empty). */
  get minLength(): number {
    return this.dist[this.start]!
  }

  /** Whether a DFA state accepts. */
  isAccepting(state: number): boolean {
    return this.accepting[state]!
  }

  /** The fewest bytes from a DFA state to an accepted output. */
  distance(state: number): number {
    return this.dist[state]!
  }

  private intern(seeds: ReadonlyArray<number>): number {
    const members: Array<number> = []
    const stack = this.stack
    const mark = this.mark
    for (const s of seeds) {
      if (mark[s] === 0) {
        mark[s] = 1
        stack.push(s)
      }
    }
    while (stack.length > 0) {
      const s = stack.pop()!
      members.push(s)
      for (const t of this.nfa.eps[s]!) {
        if (mark[t] === 0) {
          mark[t] = 1
          stack.push(t)
        }
      }
    }
    for (const s of members) mark[s] = 0
    // Keep only the states that matter: with labelled edges, or the accepting state.
    const kept = members.filter((s) => this.nfa.trans[s]!.length > 0 || s === this.nfa.accept)
    kept.sort((a, b) => a - b)
    const key = kept.join(",")
    const known = this.index.get(key)
    if (known !== undefined) return known
    const id = this.sets.length
    const arr = Int32Array.from(kept)
    this.sets.push(arr)
    this.index.set(key, id)
    let d = Number.POSITIVE_INFINITY
    for (const s of arr) d = Math.min(d, this.nfa.dist[s]!)
    this.dist.push(d)
    this.accepting.push(arr.includes(this.nfa.accept))
    this.ascii.push(new Int32Array(128).fill(-2))
    this.wide.push(new Map())
    this.byteCosts.push(undefined)
    return id
  }

  private computeStep(state: number, cp: number): number {
    const targets: Array<number> = []
    for (const s of this.sets[state]!) {
      const tr = this.nfa.trans[s]!
      for (let i = 0; i < tr.length; i += 3) {
        if (cp >= tr[i]! && cp <= tr[i + 1]! && this.nfa.dist[tr[i + 2]!]! < Number.POSITIVE_INFINITY) {
          targets.push(tr[i + 2]!)
        }
      }
    }
    return targets.length === 0 ? -1 : this.intern(targets)
  }

  /** The DFA state after a code point, or -1 when it cannot be consumed. */
  step(state: number, cp: number): number {
    if (cp < 128) {
      const row = this.ascii[state]!
      let next = row[cp]!
      if (next === -2) {
        next = this.computeStep(state, cp)
        row[cp] = next
      }
      return next
    }
    const map = this.wide[state]!
    let next = map.get(cp)
    if (next === undefined) {
      next = this.computeStep(state, cp)
      map.set(cp, next)
    }
    return next
  }

  /**
   * The fewest bytes of a path to acceptance that starts with a code point whose UTF-8 form has `bytes`
   * bytes in total and lies in `[lo, hi]` (`Infinity` when none).
   */
  costVia(state: number, lo: number, hi: number, bytes: number): number {
    let best = Number.POSITIVE_INFINITY
    for (const s of this.sets[state]!) {
      const tr = this.nfa.trans[s]!
      for (let i = 0; i < tr.length; i += 3) {
        if (meets(lo, hi, tr[i]!, tr[i + 1]!)) best = Math.min(best, bytes + this.nfa.dist[tr[i + 2]!]!)
      }
    }
    return best
  }

  /** The cost of each byte from a DFA state at a character boundary (cached). */
  costs(state: number): Float64Array {
    const cached = this.byteCosts[state]
    if (cached !== undefined) return cached
    const out = new Float64Array(256).fill(Number.POSITIVE_INFINITY)
    for (let b = 0; b < 128; b++) {
      const next = this.step(state, b)
      if (next >= 0) out[b] = 1 + this.dist[next]!
    }
    for (let b = 0xc2; b <= 0xf4; b++) {
      const n = leadLength(b)
      const r = n - 1
      const payload = b & (n === 2 ? 0x1f : n === 3 ? 0x0f : 0x07)
      const lo = Math.max(payload << (6 * r), MIN_CP[n]!)
      const hi = Math.min((payload << (6 * r)) | ((1 << (6 * r)) - 1), MAX_CP[n]!)
      if (lo <= hi) out[b] = this.costVia(state, lo, hi, n)
    }
    this.byteCosts[state] = out
    return out
  }
}

/** The costs of a matcher that left the automaton: no byte leads anywhere. */
const NO_WAY: Float64Array = new Float64Array(256).fill(Number.POSITIVE_INFINITY)

/**
 * Runs a `ByteAutomaton` over the bytes of one output. `costs()` gives, per byte, the fewest bytes (this one
 * included) to an accepted output after choosing it; `canEnd()` whether the output may end now. A byte of
 * infinite cost leaves the automaton for good: from then on every cost is infinite and the output may not
 * end (the sampler never advances by one; this keeps a mistake from reading outside the automaton).
 */
export class Matcher {
  /** The DFA state, -1 once the output left the automaton. */
  private state: number
  /** Continuation bytes still expected in the current character. */
  private pending = 0
  /** The bits of the current character so far. */
  private value = 0
  /** The length of the current character. */
  private length = 0
  private readonly scratch = new Float64Array(256)

  /** A matcher at the start of the automaton. */
  constructor(readonly automaton: ByteAutomaton) {
    this.state = automaton.start
  }

  /** Whether the output may end here (an accepted output, at a character boundary). */
  canEnd(): boolean {
    return this.state >= 0 && this.pending === 0 && this.automaton.isAccepting(this.state)
  }

  /** Whether some byte can follow on the way to an accepted output. */
  canContinue(): boolean {
    const c = this.costs()
    for (let b = 0; b < 256; b++) if (c[b]! < Number.POSITIVE_INFINITY) return true
    return false
  }

  /** The fewest further bytes to an accepted output. */
  remaining(): number {
    if (this.state < 0) return Number.POSITIVE_INFINITY
    if (this.pending === 0) return this.automaton.distance(this.state)
    let best = Number.POSITIVE_INFINITY
    const c = this.costs()
    for (let b = 0x80; b < 0xc0; b++) best = Math.min(best, c[b]!)
    return best
  }

  /** The cost of each byte (shared buffer: read it before the next call). */
  costs(): Float64Array {
    if (this.state < 0) return NO_WAY
    if (this.pending === 0) return this.automaton.costs(this.state)
    const out = this.scratch.fill(Number.POSITIVE_INFINITY)
    const n = this.length
    const r = this.pending - 1
    for (let b = 0x80; b < 0xc0; b++) {
      const v = (this.value << 6) | (b & 0x3f)
      if (r === 0) {
        if (v < MIN_CP[n]! || v > MAX_CP[n]! || (v >= 0xd800 && v <= 0xdfff)) continue
        const next = this.automaton.step(this.state, v)
        if (next >= 0) out[b] = 1 + this.automaton.distance(next)
      } else {
        const lo = Math.max(v << (6 * r), MIN_CP[n]!)
        const hi = Math.min((v << (6 * r)) | ((1 << (6 * r)) - 1), MAX_CP[n]!)
        if (lo <= hi) out[b] = this.automaton.costVia(this.state, lo, hi, 1 + r)
      }
    }
    return out
  }

  /** Consume a byte (one that `costs()` gave a finite cost). */
  advance(b: number): void {
    if (this.state < 0) return
    if (this.pending === 0) {
      const n = leadLength(b)
      if (n === 1) {
        this.state = this.automaton.step(this.state, b)
        return
      }
      if (n === 0) {
        this.state = -1
        return
      }
      this.length = n
      this.pending = n - 1
      this.value = b & (n === 2 ? 0x1f : n === 3 ? 0x0f : 0x07)
      return
    }
    if ((b & 0xc0) !== 0x80) {
      this.state = -1
      this.pending = 0
      return
    }
    this.value = (this.value << 6) | (b & 0x3f)
    this.pending--
    if (this.pending === 0) this.state = this.automaton.step(this.state, this.value)
  }
}
