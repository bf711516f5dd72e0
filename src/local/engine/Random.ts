/**
 * A small seeded pseudo-random generator (xoshiro128**, seeded through splitmix32) for the local engine:
 * the same seed gives the same stream on every machine, which is what makes sampling with `seed` and
 * training reproducible bit for bit.
 *
 * @since 0.1.0
 */

const splitmix32 = (state: { s: number }): number => {
  state.s = (state.s + 0x9e3779b9) | 0
  let z = state.s
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b)
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35)
  return (z ^ (z >>> 16)) >>> 0
}

/** A seeded generator. */
export class Rng {
  private a: number
  private b: number
  private c: number
  private d: number

  /**
   * Seed with any integer in the int64 range (the bounds of the chat-completions `seed`); non-integers are
   * truncated.
   */
  constructor(seed: number | bigint) {
    const big = BigInt.asUintN(64, typeof seed === "bigint" ? seed : BigInt(Math.trunc(seed)))
    const hi = Number(big >> 32n) | 0
    const lo = Number(big & 0xffffffffn) | 0
    const state = { s: lo ^ Math.imul(hi, 0x27d4eb2d) }
    this.a = splitmix32(state) ^ hi
    this.b = splitmix32(state)
    this.c = splitmix32(state)
    this.d = splitmix32(state)
    if ((this.a | this.b | this.c | this.d) === 0) this.a = 1
  }

  /** The next 32-bit unsigned integer. */
  nextUint32(): number {
    const result = Math.imul(rotl(Math.imul(this.b, 5), 7), 9) >>> 0
    const t = this.b << 9
    this.c ^= this.a
    this.d ^= this.b
    this.b ^= this.c
    this.a ^= this.d
    this.c ^= t
    this.d = rotl(this.d, 11)
    return result
  }

  /** A float in [0, 1) with 32 bits of randomness. */
  float(): number {
    return this.nextUint32() / 4294967296
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.float() * n)
  }

  /** A standard normal sample (Box-Muller). */
  normal(): number {
    let u = this.float()
    while (u === 0) u = this.float()
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * this.float())
  }
}

const rotl = (x: number, k: number): number => (x << k) | (x >>> (32 - k))
