/**
 * Well-formed UTF-8 for a byte-level sampler: the state of a byte stream written one byte at a time (the
 * continuation bytes still due and the range the next byte must fall in), the mask of the bytes that may
 * come next, and the cut of a text to its last complete character.
 *
 * Well-formed means as the Unicode standard defines it (its table of well-formed byte sequences), which is
 * what a fatal `TextDecoder` accepts: no continuation byte without a lead, no lead where a continuation is
 * due, never 0xC0, 0xC1 or 0xF5..0xFF, no overlong forms (0xE0 then below 0xA0, 0xF0 then below 0x90), no
 * surrogates (0xED then 0xA0 or above), nothing above U+10FFFF (0xF4 then 0x90 or above).
 *
 * @since 0.1.0
 */

/** The first id that is not a byte (the special tokens follow the bytes). */
const BYTES = 256

/** The number of bytes of the character a byte leads: 1 for ASCII, 2..4 for a lead byte, 0 for any other. */
export const sequenceLength = (byte: number): number =>
  byte < 0x80 ? 1 : byte < 0xc2 ? 0 : byte < 0xe0 ? 2 : byte < 0xf0 ? 3 : byte < 0xf5 ? 4 : 0

/**
 * Where a UTF-8 byte stream stands: at a character boundary (`pending` 0), or inside a character with
 * `pending` continuation bytes still due, the next of which must be in `[lo, hi]`. Mutable: one per stream.
 */
export class Utf8State {
  /** The continuation bytes still due; 0 at a character boundary. */
  pending = 0
  /** The least byte that may come next inside a character. */
  lo = 0x80
  /** The greatest byte that may come next inside a character. */
  hi = 0xbf

  /** Whether the stream is at a character boundary (nothing is due). */
  get complete(): boolean {
    return this.pending === 0
  }

  /** Whether `byte` may come next. */
  accepts(byte: number): boolean {
    if (this.pending > 0) return byte >= this.lo && byte <= this.hi
    return sequenceLength(byte) > 0
  }

  /** Take the next byte; false (and the state unchanged) when it may not come next. */
  push(byte: number): boolean {
    if (this.pending > 0) {
      if (byte < this.lo || byte > this.hi) return false
      this.pending--
      this.lo = 0x80
      this.hi = 0xbf
      return true
    }
    const length = sequenceLength(byte)
    if (length === 0) return false
    this.pending = length - 1
    // The second byte's range is narrower after four lead bytes (overlong, surrogate, above U+10FFFF forms).
    this.lo = byte === 0xe0 ? 0xa0 : byte === 0xf0 ? 0x90 : 0x80
    this.hi = byte === 0xed ? 0x9f : byte === 0xf4 ? 0x8f : 0xbf
    return true
  }

  /** Back to a character boundary (an open character abandoned). */
  reset(): void {
    this.pending = 0
    this.lo = 0x80
    this.hi = 0xbf
  }
}

/**
 * Mask, in `ok` (one flag per token id: the bytes 0..255, then the special tokens), what may not come next
 * so that the stream stays well-formed and is at a character boundary wherever it may end:
 *
 * - inside a character, every byte outside the continuation range, and the special tokens — unless no
 *   continuation byte is left in `ok`, then the special tokens keep their flags (one of them may end the
 *   choice there: the open character is abandoned);
 * - at a boundary, the bytes that cannot start a character, and, so that a started character is finished
 *   within the `left` tokens (this one included), the lead bytes of characters longer than `left` — unless
 *   that would leave no token at all, then those keep their flags (the limit will cut the character).
 *
 * The flags of allowed tokens are never set, only cleared: the caller's other masks stay in force.
 */
export const maskNext = (state: Utf8State, ok: Uint8Array, left: number): void => {
  const bytes = Math.min(BYTES, ok.length)
  if (state.pending > 0) {
    let any = false
    for (let b = 0; b < bytes; b++) {
      if (b < state.lo || b > state.hi) ok[b] = 0
      else if (ok[b] === 1) any = true
    }
    if (any) ok.fill(0, bytes)
    return
  }
  for (let b = 0x80; b < 0xc2 && b < bytes; b++) ok[b] = 0
  for (let b = 0xf5; b < bytes; b++) ok[b] = 0
  if (left >= 4) return
  // The first lead byte too long for the tokens left: 0xC2 (2 bytes), 0xE0 (3) or 0xF0 (4).
  const from = left <= 1 ? 0xc2 : left === 2 ? 0xe0 : 0xf0
  const to = Math.min(0xf5, bytes)
  let shorter = false
  for (let id = 0; id < ok.length && !shorter; id++) if (ok[id] === 1 && (id < from || id >= to)) shorter = true
  if (shorter) for (let b = from; b < to; b++) ok[b] = 0
}

/**
 * The end of the longest prefix of `bytes[0, end)` that is well-formed and ends at a character boundary: a
 * character left open at the end (or anything after a byte that may not come where it is) is left out.
 */
export const completeEnd = (bytes: ArrayLike<number>, end: number): number => {
  const state = new Utf8State()
  let boundary = 0
  for (let i = 0; i < end; i++) {
    if (!state.push(bytes[i]!)) return boundary
    if (state.pending === 0) boundary = i + 1
  }
  return boundary
}
