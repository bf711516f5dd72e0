/**
 * A practical regular-expression subset for `structured_outputs.regex`, parsed into an automaton `Node`.
 * The whole output must match (anchors are implicit; a leading `^` and a trailing `$` are accepted).
 *
 * Supported: literal characters; escapes `\n \t \r \f \v \0 \xHH \uHHHH \u{H…}` and escaped punctuation;
 * classes `[abc]`, `[a-z]`, `[^…]` and the shorthands `\d \D \w \W \s \S` (ASCII meanings: `\w` is
 * `[A-Za-z0-9_]`, `\s` is `[ \t\n\r\f\v]`); `.` (any character but `\n`); groups `(…)`, `(?:…)`,
 * `(?<name>…)`, `(?P<name>…)`; alternation `|`; quantifiers `* + ? {m} {m,} {m,n}` (a lazy `?` after one
 * is accepted: it matches the same strings). Not supported (a `RegexError`): backreferences, lookaround,
 * word boundaries, inline flags, anchors inside the expression.
 *
 * @since 0.1.0
 */
import { alt, empty, type Node, negateRanges, repeat, seq, set } from "./Automaton.js"

/** A pattern outside the supported subset (`unsupported`), or malformed. */
export class RegexError extends Error {
  /** Whether the pattern is valid but uses a feature outside the subset. */
  readonly unsupported: boolean
  constructor(message: string, unsupported = false) {
    super(message)
    this.unsupported = unsupported
  }
}

/** The most a counted repetition `{m,n}` may ask for. */
const MAX_COUNT = 1000

const DIGIT = [0x30, 0x39]
const WORD = [0x30, 0x39, 0x41, 0x5a, 0x5f, 0x5f, 0x61, 0x7a]
const SPACE = [0x09, 0x0d, 0x20, 0x20]

const isDigit = (c: string | undefined): boolean => c !== undefined && c >= "0" && c <= "9"

class Parser {
  private readonly chars: Array<string>
  private pos = 0

  constructor(pattern: string) {
    this.chars = Array.from(pattern)
  }

  private peek(offset = 0): string | undefined {
    return this.chars[this.pos + offset]
  }

  private fail(message: string): never {
    throw new RegexError(`${message} at position ${this.pos}`, message.includes("not supported"))
  }

  parse(): Node {
    const node = this.parseAlt(0)
    if (this.pos < this.chars.length) this.fail(`unbalanced ${JSON.stringify(this.peek())}`)
    return node
  }

  private parseAlt(depth: number): Node {
    const branches: Array<Node> = [this.parseSeq(depth)]
    while (this.peek() === "|") {
      this.pos++
      branches.push(this.parseSeq(depth))
    }
    return alt(...branches)
  }

  private parseSeq(depth: number): Node {
    const items: Array<Node> = []
    for (;;) {
      const c = this.peek()
      if (c === undefined || c === "|" || c === ")") break
      if (c === "^") {
        if (depth !== 0 || items.length > 0) this.fail("an anchor ^ inside the expression is not supported")
        this.pos++
        continue
      }
      if (c === "$") {
        const next = this.peek(1)
        if (depth !== 0 || (next !== undefined && next !== "|")) {
          this.fail("an anchor $ inside the expression is not supported")
        }
        this.pos++
        continue
      }
      const atom = this.parseAtom(depth)
      items.push(this.parseQuantifiers(atom))
    }
    return items.length === 0 ? empty : seq(...items)
  }

  private parseQuantifiers(atom: Node): Node {
    let node = atom
    for (;;) {
      const c = this.peek()
      let min: number
      let max: number
      if (c === "*") {
        min = 0
        max = Number.POSITIVE_INFINITY
        this.pos++
      } else if (c === "+") {
        min = 1
        max = Number.POSITIVE_INFINITY
        this.pos++
      } else if (c === "?") {
        min = 0
        max = 1
        this.pos++
      } else if (c === "{") {
        const counted = this.parseCount()
        if (counted === undefined) return node
        ;[min, max] = counted
      } else return node
      if (this.peek() === "?") this.pos++
      else if (this.peek() === "+") this.fail("possessive quantifiers are not supported")
      node = repeat(node, min, max)
    }
  }

  /** `{m}`, `{m,}`, `{m,n}`; undefined (and nothing consumed) when `{` does not start one (a literal). */
  private parseCount(): [number, number] | undefined {
    let i = this.pos + 1
    let a = ""
    while (isDigit(this.chars[i])) a += this.chars[i++]
    if (a === "") return undefined
    let b = a
    if (this.chars[i] === ",") {
      i++
      b = ""
      while (isDigit(this.chars[i])) b += this.chars[i++]
    }
    if (this.chars[i] !== "}") return undefined
    this.pos = i + 1
    const min = Number(a)
    const max = b === "" ? Number.POSITIVE_INFINITY : Number(b)
    if (min > max) this.fail(`the repetition {${a},${b}} has min > max`)
    if (min > MAX_COUNT || (max !== Number.POSITIVE_INFINITY && max > MAX_COUNT)) {
      this.fail(`a counted repetition may not exceed ${MAX_COUNT}`)
    }
    return [min, max]
  }

  private parseAtom(depth: number): Node {
    const c = this.peek()!
    if (c === "(") {
      this.pos++
      if (this.peek() === "?") {
        const next = this.peek(1)
        if (next === ":") this.pos += 2
        else if (next === "<" && this.peek(2) !== "=" && this.peek(2) !== "!") this.skipGroupName(2)
        else if (next === "P" && this.peek(2) === "<") this.skipGroupName(3)
        else this.fail("lookaround, inline flags and other (? groups are not supported")
      }
      const inner = this.parseAlt(depth + 1)
      if (this.peek() !== ")") this.fail("missing )")
      this.pos++
      return inner
    }
    if (c === "[") return this.parseClass()
    if (c === ".") {
      this.pos++
      return set(negateRanges([0x0a, 0x0a]))
    }
    if (c === "\\") return set(this.parseEscape(false))
    if (c === "*" || c === "+" || c === "?") this.fail(`nothing to repeat before ${c}`)
    this.pos++
    const cp = c.codePointAt(0)!
    return set([cp, cp])
  }

  private skipGroupName(offset: number): void {
    this.pos += offset
    while (this.peek() !== undefined && this.peek() !== ">") this.pos++
    if (this.peek() !== ">") this.fail("unterminated group name")
    this.pos++
  }

  /** An escape (the `\` at `pos`): its ranges. Inside a class, `\b` is a backspace. */
  private parseEscape(inClass: boolean): Array<number> {
    this.pos++
    const c = this.peek()
    if (c === undefined) this.fail("a pattern may not end with \\")
    this.pos++
    const single = (cp: number) => [cp, cp]
    switch (c) {
      case "d":
        return DIGIT
      case "D":
        return negateRanges(DIGIT)
      case "w":
        return WORD
      case "W":
        return negateRanges(WORD)
      case "s":
        return SPACE
      case "S":
        return negateRanges(SPACE)
      case "n":
        return single(0x0a)
      case "t":
        return single(0x09)
      case "r":
        return single(0x0d)
      case "f":
        return single(0x0c)
      case "v":
        return single(0x0b)
      case "0":
        return single(0)
      case "x":
        return single(this.hex(2))
      case "u": {
        if (this.peek() === "{") {
          this.pos++
          let digits = ""
          while (this.peek() !== undefined && this.peek() !== "}") digits += this.chars[this.pos++]
          if (this.peek() !== "}" || !/^[0-9a-fA-F]{1,6}$/.test(digits)) this.fail("bad \\u{...} escape")
          this.pos++
          const cp = Number.parseInt(digits, 16)
          if (cp > 0x10ffff) this.fail("code point out of range")
          return single(cp)
        }
        return single(this.hex(4))
      }
      case "b":
        if (inClass) return single(0x08)
        return this.fail("word boundaries (\\b) are not supported")
    }
    if (/[0-9]/.test(c)) this.fail("backreferences are not supported")
    if (/[A-Za-z]/.test(c)) this.fail(`the escape \\${c} is not supported`)
    return single(c.codePointAt(0)!)
  }

  private hex(n: number): number {
    let digits = ""
    for (let i = 0; i < n; i++) digits += this.peek() ?? ""
    if (!new RegExp(`^[0-9a-fA-F]{${n}}$`).test(digits)) this.fail("bad hexadecimal escape")
    this.pos += n
    return Number.parseInt(digits, 16)
  }

  private parseClass(): Node {
    this.pos++
    let negated = false
    if (this.peek() === "^") {
      negated = true
      this.pos++
    }
    const ranges: Array<number> = []
    let first = true
    for (;;) {
      const c = this.peek()
      if (c === undefined) this.fail("missing ]")
      if (c === "]" && !first) {
        this.pos++
        break
      }
      first = false
      const lo = this.classAtom()
      if (this.peek() === "-" && this.peek(1) !== "]" && this.peek(1) !== undefined) {
        this.pos++
        const hi = this.classAtom()
        if (lo.length !== 2 || hi.length !== 2 || lo[0] !== lo[1] || hi[0] !== hi[1]) {
          this.fail("a class range needs single characters at both ends")
        }
        if (lo[0]! > hi[0]!) this.fail("a class range is out of order")
        ranges.push(lo[0]!, hi[0]!)
      } else ranges.push(...lo)
    }
    return set(negated ? negateRanges(ranges) : ranges)
  }

  private classAtom(): Array<number> {
    const c = this.peek()!
    if (c === "\\") return this.parseEscape(true)
    if (c === "[" && this.peek(1) === ":") this.fail("POSIX classes are not supported")
    this.pos++
    const cp = c.codePointAt(0)!
    return [cp, cp]
  }
}

/** Parse a pattern of the supported subset (throws `RegexError`). */
export const parseRegex = (pattern: string): Node => new Parser(pattern).parse()
