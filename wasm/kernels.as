/**
 * The local engine's numeric kernels in WebAssembly with 128-bit SIMD (AssemblyScript; built by
 * `npm run build:wasm` into `src/local/engine/policy/wasm/kernels.wasm` and its embedding `kernelsWasm.ts`).
 *
 * Every argument named like a buffer is a byte address in the memory the module imports (`env.memory`, shared
 * with the decoding thread); strides and counts are in elements. Floats are float32, summed in float32 in an
 * order fixed by the shapes alone: each output element of a product is summed over the inner index in the same
 * order (four lanes of partial sums over quads of the index, then `(l0 + l2) + (l1 + l3)`, then the remainder in
 * order, for `matmulNT`; in order of the inner index for `matmulAx`) whatever the block it falls in and however
 * many rows are computed together, so that results do not depend on the batch. Nothing here allocates: the
 * module has no data, no runtime and no start function.
 */

// ---------------------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------------------

/** The host's natural logarithm (`Math.log`): imported, so that the module has no data (no lookup tables). */
// @ts-expect-error: decorator
@external("env", "log") declare function hostLog(x: f64): f64

/** `(a0 + a2) + (a1 + a3)`: the fixed reduction of a vector of partial sums. */
// @ts-expect-error: decorator
@inline function hsum(a: v128): f32 {
  return (f32x4.extract_lane(a, 0) + f32x4.extract_lane(a, 2)) + (f32x4.extract_lane(a, 1) + f32x4.extract_lane(a, 3))
}

/** `[hsum(a0), hsum(a1), hsum(a2), hsum(a3)]` with shuffles, the same bits as `hsum` of each. */
// @ts-expect-error: decorator
@inline function hsum4(a0: v128, a1: v128, a2: v128, a3: v128): v128 {
  const x = f32x4.add(v128.shuffle<f32>(a0, a1, 0, 1, 4, 5), v128.shuffle<f32>(a0, a1, 2, 3, 6, 7))
  const y = f32x4.add(v128.shuffle<f32>(a2, a3, 0, 1, 4, 5), v128.shuffle<f32>(a2, a3, 2, 3, 6, 7))
  return f32x4.add(v128.shuffle<f32>(x, y, 0, 2, 4, 6), v128.shuffle<f32>(x, y, 1, 3, 5, 7))
}

/**
 * e^x per lane (Cephes' expf: 2^n times a degree-6 polynomial; within 2 ulp; x clamped to [-87.3, 88]).
 *
 * V8 builds a v128 constant at every use (three instructions: half of this function's), in loops too; identical
 * constants of one loop body are built once, so loops over many values do four quads per iteration.
 */
// @ts-expect-error: decorator
@inline function vexp(x0: v128): v128 {
  // pmin/pmax (one instruction each) clamp as min/max do but for NaN, which passes through both as it does there.
  let x = f32x4.pmin(f32x4.pmax(x0, f32x4.splat(-87.33654)), f32x4.splat(88.0))
  const fx = f32x4.floor(f32x4.add(f32x4.mul(x, f32x4.splat(1.44269504088896341)), f32x4.splat(0.5)))
  x = f32x4.sub(x, f32x4.mul(fx, f32x4.splat(0.693359375)))
  x = f32x4.sub(x, f32x4.mul(fx, f32x4.splat(-2.12194440e-4)))
  const z = f32x4.mul(x, x)
  let y = f32x4.splat(1.9875691500e-4)
  y = f32x4.add(f32x4.mul(y, x), f32x4.splat(1.3981999507e-3))
  y = f32x4.add(f32x4.mul(y, x), f32x4.splat(8.3334519073e-3))
  y = f32x4.add(f32x4.mul(y, x), f32x4.splat(4.1665795894e-2))
  y = f32x4.add(f32x4.mul(y, x), f32x4.splat(1.6666665459e-1))
  y = f32x4.add(f32x4.mul(y, x), f32x4.splat(5.0000001201e-1))
  y = f32x4.add(f32x4.add(f32x4.mul(y, z), x), f32x4.splat(1.0))
  // fx is a whole number in [-126, 127]: fx + 1.5 2^23 is exact and its bits are those of 1.5 2^23 plus fx, so
  // the exponent field n + 127 comes with two integer operations (what truncation to i32 gives, at less cost).
  const n = i32x4.sub(f32x4.add(fx, f32x4.splat(12582912.0)), i32x4.splat(0x4b400000 - 127))
  return f32x4.mul(y, i32x4.shl(n, 23))
}

/** e^x, the same bits as a lane of `vexp`. */
// @ts-expect-error: decorator
@inline function sexp(x: f32): f32 {
  return f32x4.extract_lane(vexp(f32x4.splat(x)), 0)
}

/**
 * `dst[i] = e^{src[i] - m}` over the first `e4` bytes (whole quads; `dst` 0 for none), returning the sum of the
 * quads per lane (in order), four quads per iteration (see `vexp`).
 */
function expQuads(dst: usize, src: usize, e4: usize, m: f32): v128 {
  const vm = f32x4.splat(m)
  let s = f32x4.splat(0)
  let i: usize = 0
  for (; i + 64 <= e4; i += 64) {
    const e0 = vexp(f32x4.sub(v128.load(src + i), vm))
    const e1 = vexp(f32x4.sub(v128.load(src + i, 16), vm))
    const e2 = vexp(f32x4.sub(v128.load(src + i, 32), vm))
    const e3 = vexp(f32x4.sub(v128.load(src + i, 48), vm))
    if (dst) {
      v128.store(dst + i, e0)
      v128.store(dst + i, e1, 16)
      v128.store(dst + i, e2, 32)
      v128.store(dst + i, e3, 48)
    }
    s = f32x4.add(f32x4.add(f32x4.add(f32x4.add(s, e0), e1), e2), e3)
  }
  for (; i < e4; i += 16) {
    const e = vexp(f32x4.sub(v128.load(src + i), vm))
    if (dst) v128.store(dst + i, e)
    s = f32x4.add(s, e)
  }
  return s
}

const GELU_C: f32 = 0.7978845608028654 // sqrt(2 / pi)
const GELU_A: f32 = 0.044715

/** Loads `count` (< 4) floats at `p` into the low lanes of a zero vector. */
// @ts-expect-error: decorator
@inline function loadPartial(p: usize, count: i32): v128 {
  let v = f32x4.splat(0)
  v = f32x4.replace_lane(v, 0, load<f32>(p))
  if (count > 1) v = f32x4.replace_lane(v, 1, load<f32>(p, 4))
  if (count > 2) v = f32x4.replace_lane(v, 2, load<f32>(p, 8))
  return v
}

/** Stores the low `count` (< 4) lanes of `v` at `p`. */
// @ts-expect-error: decorator
@inline function storePartial(p: usize, v: v128, count: i32): void {
  store<f32>(p, f32x4.extract_lane(v, 0))
  if (count > 1) store<f32>(p, f32x4.extract_lane(v, 1), 4)
  if (count > 2) store<f32>(p, f32x4.extract_lane(v, 2), 8)
}

// ---------------------------------------------------------------------------------------------------------
// Matrix products
// ---------------------------------------------------------------------------------------------------------

/** Writes a finished 4-vector of sums: `C += r` (acc), `C = r + bias`, or `C = r`. */
// @ts-expect-error: decorator
@inline function finish4(c: usize, r: v128, bias: usize, acc: i32): void {
  if (acc) v128.store(c, f32x4.add(v128.load(c), r))
  else if (bias) v128.store(c, f32x4.add(r, v128.load(bias)))
  else v128.store(c, r)
}

// @ts-expect-error: decorator
@inline function finish1(c: usize, r: f32, bias: usize, acc: i32): void {
  if (acc) store<f32>(c, load<f32>(c) + r)
  else if (bias) store<f32>(c, r + load<f32>(bias))
  else store<f32>(c, r)
}

/** Adds the products of the inner indices past the last quad (k4 .. K - 1), in order, to four sums. */
// @ts-expect-error: decorator
@inline function tail4(r: v128, a: usize, b0: usize, sb: usize, k4: usize, kEnd: usize): v128 {
  for (let k = k4; k < kEnd; k += 4) {
    let w = f32x4.splat(load<f32>(b0 + k))
    w = f32x4.replace_lane(w, 1, load<f32>(b0 + sb + k))
    w = f32x4.replace_lane(w, 2, load<f32>(b0 + 2 * sb + k))
    w = f32x4.replace_lane(w, 3, load<f32>(b0 + 3 * sb + k))
    r = f32x4.add(r, f32x4.mul(f32x4.splat(load<f32>(a + k)), w))
  }
  return r
}

// @ts-expect-error: decorator
@inline function tail1(r: f32, a: usize, b: usize, k4: usize, kEnd: usize): f32 {
  for (let k = k4; k < kEnd; k += 4) r = r + load<f32>(a + k) * load<f32>(b + k)
  return r
}

/**
 * `C[m, n] = sum_k A[m, k] B[n, k] (+ bias[n])`, or `C[m, n] += ...` when `acc`, for m < M, n < N (row strides
 * lda, ldb, ldc; `bias` 0 for none). Vectorised over k: lane j sums k = j mod 4 of the quads in order.
 */
export function matmulNT(
  C: usize,
  ldc: i32,
  A: usize,
  lda: i32,
  B: usize,
  ldb: i32,
  M: i32,
  N: i32,
  K: i32,
  bias: usize,
  acc: i32
): void {
  const sa = (<usize>lda) << 2
  const sb = (<usize>ldb) << 2
  const sc = (<usize>ldc) << 2
  const k4 = (<usize>(K & ~3)) << 2
  const kEnd = (<usize>K) << 2
  const z = f32x4.splat(0)
  let m = 0
  for (; m + 2 <= M; m += 2) {
    const a0 = A + <usize>m * sa
    const a1 = a0 + sa
    const c0 = C + <usize>m * sc
    const c1 = c0 + sc
    let n = 0
    for (; n + 4 <= N; n += 4) {
      const b0 = B + <usize>n * sb
      const b1 = b0 + sb
      const b2 = b1 + sb
      const b3 = b2 + sb
      let s00 = z, s01 = z, s02 = z, s03 = z, s10 = z, s11 = z, s12 = z, s13 = z
      for (let k: usize = 0; k < k4; k += 16) {
        const x0 = v128.load(a0 + k)
        const x1 = v128.load(a1 + k)
        let w = v128.load(b0 + k)
        s00 = f32x4.add(s00, f32x4.mul(x0, w))
        s10 = f32x4.add(s10, f32x4.mul(x1, w))
        w = v128.load(b1 + k)
        s01 = f32x4.add(s01, f32x4.mul(x0, w))
        s11 = f32x4.add(s11, f32x4.mul(x1, w))
        w = v128.load(b2 + k)
        s02 = f32x4.add(s02, f32x4.mul(x0, w))
        s12 = f32x4.add(s12, f32x4.mul(x1, w))
        w = v128.load(b3 + k)
        s03 = f32x4.add(s03, f32x4.mul(x0, w))
        s13 = f32x4.add(s13, f32x4.mul(x1, w))
      }
      const bn = bias ? bias + (<usize>n << 2) : 0
      finish4(c0 + (<usize>n << 2), tail4(hsum4(s00, s01, s02, s03), a0, b0, sb, k4, kEnd), bn, acc)
      finish4(c1 + (<usize>n << 2), tail4(hsum4(s10, s11, s12, s13), a1, b0, sb, k4, kEnd), bn, acc)
    }
    for (; n < N; n++) {
      const b0 = B + <usize>n * sb
      let s0 = z, s1 = z
      for (let k: usize = 0; k < k4; k += 16) {
        const w = v128.load(b0 + k)
        s0 = f32x4.add(s0, f32x4.mul(v128.load(a0 + k), w))
        s1 = f32x4.add(s1, f32x4.mul(v128.load(a1 + k), w))
      }
      const bn = bias ? bias + (<usize>n << 2) : 0
      finish1(c0 + (<usize>n << 2), tail1(hsum(s0), a0, b0, k4, kEnd), bn, acc)
      finish1(c1 + (<usize>n << 2), tail1(hsum(s1), a1, b0, k4, kEnd), bn, acc)
    }
  }
  for (; m < M; m++) {
    const a0 = A + <usize>m * sa
    const c0 = C + <usize>m * sc
    let n = 0
    for (; n + 4 <= N; n += 4) {
      const b0 = B + <usize>n * sb
      const b1 = b0 + sb
      const b2 = b1 + sb
      const b3 = b2 + sb
      let s0 = z, s1 = z, s2 = z, s3 = z
      for (let k: usize = 0; k < k4; k += 16) {
        const x = v128.load(a0 + k)
        s0 = f32x4.add(s0, f32x4.mul(x, v128.load(b0 + k)))
        s1 = f32x4.add(s1, f32x4.mul(x, v128.load(b1 + k)))
        s2 = f32x4.add(s2, f32x4.mul(x, v128.load(b2 + k)))
        s3 = f32x4.add(s3, f32x4.mul(x, v128.load(b3 + k)))
      }
      const bn = bias ? bias + (<usize>n << 2) : 0
      finish4(c0 + (<usize>n << 2), tail4(hsum4(s0, s1, s2, s3), a0, b0, sb, k4, kEnd), bn, acc)
    }
    for (; n < N; n++) {
      const b0 = B + <usize>n * sb
      let s = z
      for (let k: usize = 0; k < k4; k += 16) s = f32x4.add(s, f32x4.mul(v128.load(a0 + k), v128.load(b0 + k)))
      finish1(c0 + (<usize>n << 2), tail1(hsum(s), a0, b0, k4, kEnd), bias ? bias + (<usize>n << 2) : 0, acc)
    }
  }
}

/**
 * `C[m, j] = sum_n A(m, n) B[n, j] (+ bias[j])`, or `C[m, j] += ...` when `acc`, for m < M, j < N, n < K, where
 * `A(m, n)` is at `A + 4 (m sam + n san)` (so A or its transpose) and B has row stride ldb. Vectorised over j:
 * each element is summed over n in order.
 */
export function matmulAx(
  C: usize,
  ldc: i32,
  A: usize,
  sam: i32,
  san: i32,
  B: usize,
  ldb: i32,
  M: i32,
  N: i32,
  K: i32,
  bias: usize,
  acc: i32
): void {
  const am = (<usize>sam) << 2
  const an = (<usize>san) << 2
  const sb = (<usize>ldb) << 2
  const sc = (<usize>ldc) << 2
  const z = f32x4.splat(0)
  let m = 0
  for (; m + 4 <= M; m += 4) {
    const a0 = A + <usize>m * am
    const c0 = C + <usize>m * sc
    let j = 0
    for (; j + 8 <= N; j += 8) {
      let s00 = z, s01 = z, s10 = z, s11 = z, s20 = z, s21 = z, s30 = z, s31 = z
      let b = B + (<usize>j << 2)
      let a = a0
      for (let n = 0; n < K; n++) {
        const w0 = v128.load(b)
        const w1 = v128.load(b, 16)
        let x = v128.load32_splat(a)
        s00 = f32x4.add(s00, f32x4.mul(x, w0))
        s01 = f32x4.add(s01, f32x4.mul(x, w1))
        x = v128.load32_splat(a + am)
        s10 = f32x4.add(s10, f32x4.mul(x, w0))
        s11 = f32x4.add(s11, f32x4.mul(x, w1))
        x = v128.load32_splat(a + 2 * am)
        s20 = f32x4.add(s20, f32x4.mul(x, w0))
        s21 = f32x4.add(s21, f32x4.mul(x, w1))
        x = v128.load32_splat(a + 3 * am)
        s30 = f32x4.add(s30, f32x4.mul(x, w0))
        s31 = f32x4.add(s31, f32x4.mul(x, w1))
        b += sb
        a += an
      }
      const c = c0 + (<usize>j << 2)
      const bj = bias ? bias + (<usize>j << 2) : 0
      const bj4 = bias ? bj + 16 : 0
      finish4(c, s00, bj, acc)
      finish4(c + 16, s01, bj4, acc)
      finish4(c + sc, s10, bj, acc)
      finish4(c + sc + 16, s11, bj4, acc)
      finish4(c + 2 * sc, s20, bj, acc)
      finish4(c + 2 * sc + 16, s21, bj4, acc)
      finish4(c + 3 * sc, s30, bj, acc)
      finish4(c + 3 * sc + 16, s31, bj4, acc)
    }
    for (; j < N; j += 4) {
      const w = N - j < 4 ? N - j : 4
      let s0 = z, s1 = z, s2 = z, s3 = z
      let b = B + (<usize>j << 2)
      let a = a0
      for (let n = 0; n < K; n++) {
        const w0 = w === 4 ? v128.load(b) : loadPartial(b, w)
        s0 = f32x4.add(s0, f32x4.mul(v128.load32_splat(a), w0))
        s1 = f32x4.add(s1, f32x4.mul(v128.load32_splat(a + am), w0))
        s2 = f32x4.add(s2, f32x4.mul(v128.load32_splat(a + 2 * am), w0))
        s3 = f32x4.add(s3, f32x4.mul(v128.load32_splat(a + 3 * am), w0))
        b += sb
        a += an
      }
      axFinish(c0 + (<usize>j << 2), s0, bias, j, acc, w)
      axFinish(c0 + sc + (<usize>j << 2), s1, bias, j, acc, w)
      axFinish(c0 + 2 * sc + (<usize>j << 2), s2, bias, j, acc, w)
      axFinish(c0 + 3 * sc + (<usize>j << 2), s3, bias, j, acc, w)
    }
  }
  for (; m < M; m++) {
    const a0 = A + <usize>m * am
    const c0 = C + <usize>m * sc
    for (let j = 0; j < N; j += 4) {
      const w = N - j < 4 ? N - j : 4
      let s0 = z
      let b = B + (<usize>j << 2)
      let a = a0
      for (let n = 0; n < K; n++) {
        const w0 = w === 4 ? v128.load(b) : loadPartial(b, w)
        s0 = f32x4.add(s0, f32x4.mul(v128.load32_splat(a), w0))
        b += sb
        a += an
      }
      axFinish(c0 + (<usize>j << 2), s0, bias, j, acc, w)
    }
  }
}

// @ts-expect-error: decorator
@inline function axFinish(c: usize, s: v128, bias: usize, j: i32, acc: i32, w: i32): void {
  if (w === 4) {
    finish4(c, s, bias ? bias + (<usize>j << 2) : 0, acc)
    return
  }
  let r = s
  if (acc) r = f32x4.add(loadPartial(c, w), s)
  else if (bias) r = f32x4.add(s, loadPartial(bias + (<usize>j << 2), w))
  storePartial(c, r, w)
}

// ---------------------------------------------------------------------------------------------------------
// Elementwise passes
// ---------------------------------------------------------------------------------------------------------

const RMS_EPS: f32 = 1e-5

/** The sum of squares of a row of d floats (lanes, then the fixed reduction, then the remainder in order). */
// @ts-expect-error: decorator
@inline function sumSquares(x: usize, d: i32): f32 {
  const d4 = (<usize>(d & ~3)) << 2
  let s = f32x4.splat(0)
  for (let e: usize = 0; e < d4; e += 16) {
    const v = v128.load(x + e)
    s = f32x4.add(s, f32x4.mul(v, v))
  }
  let r = hsum(s)
  for (let e = d4; e < (<usize>d) << 2; e += 4) {
    const v = load<f32>(x + e)
    r = r + v * v
  }
  return r
}

/**
 * RMSNorm of R rows of d floats: `Y[r] = g * X[x(r)] / rms(X[x(r)])`, where x(r) is `rows[r]` (Int32) when
 * `rows` is not 0, else r; writes 1 / rms of each row to `inv[r]` when `inv` is not 0.
 */
export function rmsNormRows(Y: usize, X: usize, g: usize, R: i32, d: i32, rows: usize, inv: usize): void {
  const row = (<usize>d) << 2
  const d4 = (<usize>(d & ~3)) << 2
  for (let r = 0; r < R; r++) {
    const xr = rows ? <usize>load<i32>(rows + ((<usize>r) << 2)) : <usize>r
    const x = X + xr * row
    const y = Y + <usize>r * row
    const iv: f32 = <f32>1.0 / Mathf.sqrt(sumSquares(x, d) / <f32>d + RMS_EPS)
    if (inv) store<f32>(inv + ((<usize>r) << 2), iv)
    const vi = f32x4.splat(iv)
    for (let e: usize = 0; e < d4; e += 16) v128.store(y + e, f32x4.mul(f32x4.mul(v128.load(x + e), vi), v128.load(g + e)))
    for (let e = d4; e < row; e += 4) store<f32>(y + e, load<f32>(x + e) * iv * load<f32>(g + e))
  }
}

/** `rmsNormRows` of R consecutive rows of X, row r written to the byte address `targets[r]` (Int32). */
export function rmsNormTo(targets: usize, X: usize, g: usize, R: i32, d: i32): void {
  const row = (<usize>d) << 2
  for (let r = 0; r < R; r++) {
    rmsNormRows(<usize>load<i32>(targets + ((<usize>r) << 2)), X + <usize>r * row, g, 1, d, 0, 0)
  }
}

/**
 * The backward pass of `rmsNormRows`: for each r, with x(r) as there, `dX[x(r)] += ...` and `dg += ...` from
 * `dY[r]`, `X[x(r)]` and `inv[r]`.
 */
export function rmsNormRowsBackward(
  dX: usize,
  dY: usize,
  X: usize,
  inv: usize,
  g: usize,
  dg: usize,
  R: i32,
  d: i32,
  rows: usize
): void {
  const row = (<usize>d) << 2
  const d4 = (<usize>(d & ~3)) << 2
  for (let r = 0; r < R; r++) {
    const xr = rows ? <usize>load<i32>(rows + ((<usize>r) << 2)) : <usize>r
    const x = X + xr * row
    const dx = dX + xr * row
    const dy = dY + <usize>r * row
    const iv = load<f32>(inv + ((<usize>r) << 2))
    const vi = f32x4.splat(iv)
    let s = f32x4.splat(0)
    for (let e: usize = 0; e < d4; e += 16) {
      const xhat = f32x4.mul(v128.load(x + e), vi)
      const dyv = v128.load(dy + e)
      v128.store(dg + e, f32x4.add(v128.load(dg + e), f32x4.mul(dyv, xhat)))
      s = f32x4.add(s, f32x4.mul(f32x4.mul(dyv, v128.load(g + e)), xhat))
    }
    let dot = hsum(s)
    for (let e = d4; e < row; e += 4) {
      const xhat = load<f32>(x + e) * iv
      const dyv = load<f32>(dy + e)
      store<f32>(dg + e, load<f32>(dg + e) + dyv * xhat)
      dot = dot + dyv * load<f32>(g + e) * xhat
    }
    dot = dot / <f32>d
    const vd = f32x4.splat(dot)
    for (let e: usize = 0; e < d4; e += 16) {
      const xhat = f32x4.mul(v128.load(x + e), vi)
      const t = f32x4.sub(f32x4.mul(v128.load(dy + e), v128.load(g + e)), f32x4.mul(xhat, vd))
      v128.store(dx + e, f32x4.add(v128.load(dx + e), f32x4.mul(vi, t)))
    }
    for (let e = d4; e < row; e += 4) {
      const xhat = load<f32>(x + e) * iv
      store<f32>(dx + e, load<f32>(dx + e) + iv * (load<f32>(dy + e) * load<f32>(g + e) - xhat * dot))
    }
  }
}

/** tanh(sqrt(2 / pi) (x + 0.044715 x^3)) per lane, as `1 - 2 / (e^{2z} + 1)`. */
// @ts-expect-error: decorator
@inline function vgeluTanh(x: v128): v128 {
  const x3 = f32x4.mul(f32x4.mul(x, x), x)
  const z = f32x4.mul(f32x4.splat(GELU_C), f32x4.add(x, f32x4.mul(f32x4.splat(GELU_A), x3)))
  const e = vexp(f32x4.add(z, z))
  return f32x4.sub(f32x4.splat(1.0), f32x4.div(f32x4.splat(2.0), f32x4.add(e, f32x4.splat(1.0))))
}

/** `gelu` of the quad at byte `i` (`y = 0.5 x (1 + t)`, t kept in `th` when it is not 0). */
// @ts-expect-error: decorator
@inline function geluQuad(out: usize, th: usize, u: usize, i: usize): void {
  const x = v128.load(u + i)
  const t = vgeluTanh(x)
  if (th) v128.store(th + i, t)
  v128.store(out + i, f32x4.mul(f32x4.mul(f32x4.splat(0.5), x), f32x4.add(f32x4.splat(1.0), t)))
}

/**
 * `out = gelu(u)` (tanh form) over n floats; the tanh of each kept in `th` when `th` is not 0. Four quads per
 * iteration (see `vexp`).
 */
export function gelu(out: usize, th: usize, u: usize, n: i32): void {
  const end = (<usize>n) << 2
  const e4 = (<usize>(n & ~3)) << 2
  let i: usize = 0
  for (; i + 64 <= e4; i += 64) {
    geluQuad(out, th, u, i)
    geluQuad(out, th, u, i + 16)
    geluQuad(out, th, u, i + 32)
    geluQuad(out, th, u, i + 48)
  }
  for (; i < e4; i += 16) geluQuad(out, th, u, i)
  if (i < end) {
    const w = <i32>((end - i) >> 2)
    const x = loadPartial(u + i, w)
    const t = vgeluTanh(x)
    if (th) storePartial(th + i, t, w)
    storePartial(out + i, f32x4.mul(f32x4.mul(f32x4.splat(0.5), x), f32x4.add(f32x4.splat(1.0), t)), w)
  }
}

/** `du = dg * gelu'(u)` over n floats, given the tanh kept by `gelu`. */
export function geluBackward(du: usize, dg: usize, u: usize, th: usize, n: i32): void {
  const half = f32x4.splat(0.5)
  const one = f32x4.splat(1.0)
  const c = f32x4.splat(GELU_C)
  const a3 = f32x4.splat(3 * GELU_A)
  const end = (<usize>n) << 2
  for (let i: usize = 0; i < end; i += 16) {
    const w = <i32>((end - i) >> 2)
    const x = w >= 4 ? v128.load(u + i) : loadPartial(u + i, w)
    const t = w >= 4 ? v128.load(th + i) : loadPartial(th + i, w)
    const g = w >= 4 ? v128.load(dg + i) : loadPartial(dg + i, w)
    const dt = f32x4.mul(f32x4.mul(f32x4.sub(one, f32x4.mul(t, t)), c), f32x4.add(one, f32x4.mul(a3, f32x4.mul(x, x))))
    const y = f32x4.mul(g, f32x4.add(f32x4.mul(half, f32x4.add(one, t)), f32x4.mul(f32x4.mul(half, x), dt)))
    if (w >= 4) v128.store(du + i, y)
    else storePartial(du + i, y, w)
  }
}

/** `out = a + b` over n floats (out may be a or b). */
export function add(out: usize, a: usize, b: usize, n: i32): void {
  const end = (<usize>n) << 2
  const e4 = (<usize>(n & ~3)) << 2
  for (let i: usize = 0; i < e4; i += 16) v128.store(out + i, f32x4.add(v128.load(a + i), v128.load(b + i)))
  for (let i = e4; i < end; i += 4) store<f32>(out + i, load<f32>(a + i) + load<f32>(b + i))
}

/** `dst[j] += sum_r src[r, j]` for j < N, over R rows of N floats, each summed in order of r. */
export function colSum(dst: usize, src: usize, R: i32, N: i32): void {
  const row = (<usize>N) << 2
  for (let r = 0; r < R; r++) add(dst, dst, src + <usize>r * row, N)
}

/** `dst[r, j] = src[r, j] * s[r]` over R rows of N floats. */
export function scaleRows(dst: usize, src: usize, s: usize, R: i32, N: i32): void {
  const row = (<usize>N) << 2
  const e4 = (<usize>(N & ~3)) << 2
  for (let r = 0; r < R; r++) {
    const f = load<f32>(s + ((<usize>r) << 2))
    const v = f32x4.splat(f)
    const d = dst + <usize>r * row
    const o = src + <usize>r * row
    for (let i: usize = 0; i < e4; i += 16) v128.store(d + i, f32x4.mul(v128.load(o + i), v))
    for (let i = e4; i < row; i += 4) store<f32>(d + i, load<f32>(o + i) * f)
  }
}

/** Embeddings: `h[r] = tok[tokens[r]] + pos[positions[r]]` (rows of d floats; tokens, positions Int32). */
export function embed(h: usize, tok: usize, pos: usize, tokens: usize, positions: usize, R: i32, d: i32): void {
  const row = (<usize>d) << 2
  for (let r = 0; r < R; r++) {
    const t = <usize>load<i32>(tokens + ((<usize>r) << 2))
    const p = <usize>load<i32>(positions + ((<usize>r) << 2))
    add(h + <usize>r * row, tok + t * row, pos + p * row, d)
  }
}

/** The backward pass of `embed`: `dTok[tokens[r]] += dh[r]`, `dPos[positions[r]] += dh[r]`, in order of r. */
export function embedBackward(dTok: usize, dPos: usize, dh: usize, tokens: usize, positions: usize, R: i32, d: i32): void {
  const row = (<usize>d) << 2
  for (let r = 0; r < R; r++) {
    const t = dTok + (<usize>load<i32>(tokens + ((<usize>r) << 2))) * row
    const p = dPos + (<usize>load<i32>(positions + ((<usize>r) << 2))) * row
    const v = dh + <usize>r * row
    add(t, t, v, d)
    add(p, p, v, d)
  }
}

/** The largest of n floats at p (lanes over quads, then the remainder: the same value in any order). */
// @ts-expect-error: decorator
@inline function maxOf(p: usize, n: i32): f32 {
  const end = (<usize>n) << 2
  const e4 = (<usize>(n & ~3)) << 2
  let mx: f32 = -Infinity
  if (e4 > 0) {
    let m = v128.load(p)
    for (let i: usize = 16; i < e4; i += 16) m = f32x4.max(m, v128.load(p + i))
    mx = max(max(f32x4.extract_lane(m, 0), f32x4.extract_lane(m, 1)), max(f32x4.extract_lane(m, 2), f32x4.extract_lane(m, 3)))
  }
  for (let i = e4; i < end; i += 4) mx = max(mx, load<f32>(p + i))
  return mx
}

/**
 * Softmax in place over n floats at `p`: `p[i] = e^{p[i] - max} / sum` (the sum over lanes of quads, reduced as
 * `hsum`, then the remainder in order).
 */
// @ts-expect-error: decorator
@inline function softmaxInPlace(p: usize, n: i32): void {
  const end = (<usize>n) << 2
  const e4 = (<usize>(n & ~3)) << 2
  const mx = maxOf(p, n)
  let sum = hsum(expQuads(p, p, e4, mx))
  for (let i = e4; i < end; i += 4) {
    const e = sexp(load<f32>(p + i) - mx)
    store<f32>(p + i, e)
    sum = sum + e
  }
  const inv: f32 = <f32>1.0 / sum
  const vi = f32x4.splat(inv)
  for (let i: usize = 0; i < e4; i += 16) v128.store(p + i, f32x4.mul(v128.load(p + i), vi))
  for (let i = e4; i < end; i += 4) store<f32>(p + i, load<f32>(p + i) * inv)
}

/**
 * Writes `log softmax(logits)` (n floats) to `out` (which may be `logits`), and the probabilities to `probs` when
 * it is not 0; returns the log of the normaliser. The entropy of the distribution is left in `entropyOut[0]`
 * when that is not 0.
 */
export function logSoftmax(out: usize, probs: usize, logits: usize, n: i32, entropyOut: usize): f32 {
  const end = (<usize>n) << 2
  const e4 = (<usize>(n & ~3)) << 2
  const mx = maxOf(logits, n)
  let sum = hsum(expQuads(probs, logits, e4, mx))
  for (let i = e4; i < end; i += 4) {
    const e = sexp(load<f32>(logits + i) - mx)
    if (probs) store<f32>(probs + i, e)
    sum = sum + e
  }
  const lse: f32 = mx + <f32>hostLog(<f64>sum)
  const inv: f32 = <f32>1.0 / sum
  const vl = f32x4.splat(lse)
  const vi = f32x4.splat(inv)
  let h = f32x4.splat(0)
  for (let i: usize = 0; i < e4; i += 16) {
    const lp = f32x4.sub(v128.load(logits + i), vl)
    v128.store(out + i, lp)
    if (probs) {
      const q = f32x4.mul(v128.load(probs + i), vi)
      v128.store(probs + i, q)
      h = f32x4.sub(h, f32x4.mul(q, lp))
    }
  }
  let ent = hsum(h)
  for (let i = e4; i < end; i += 4) {
    const lp = load<f32>(logits + i) - lse
    store<f32>(out + i, lp)
    if (probs) {
      const q = load<f32>(probs + i) * inv
      store<f32>(probs + i, q)
      ent = ent - q * lp
    }
  }
  if (entropyOut) store<f32>(entropyOut, ent)
  return lse
}

/**
 * The training head's distributions: for each of R rows of n logits, in place, logits -> logprobs, with the
 * probabilities in `probs` and the entropy in `entropy[r]`.
 */
export function logSoftmaxRows(logits: usize, probs: usize, entropy: usize, R: i32, n: i32): void {
  const row = (<usize>n) << 2
  for (let r = 0; r < R; r++) {
    const o = <usize>r * row
    logSoftmax(logits + o, probs + o, logits + o, n, entropy + ((<usize>r) << 2))
  }
}

// ---------------------------------------------------------------------------------------------------------
// Attention
// ---------------------------------------------------------------------------------------------------------

/**
 * Causal attention of one row over n rows in view: row `rows[i]` (Int32) of `kv` (row stride `kvStride`) holds
 * its key at element `kOff` and its value at `vOff`. Writes the mixed values (H heads of dh) to `out` and the
 * weights (head-major, n per head) to `probs`. Scores: per head, lanes over quads of the head's elements, then
 * the fixed reduction, then the remainder in order; outputs: each element summed over the rows in order.
 */
export function attendRow(
  q: usize,
  kv: usize,
  kvStride: i32,
  kOff: i32,
  vOff: i32,
  rows: usize,
  n: i32,
  out: usize,
  probs: usize,
  H: i32,
  dh: i32
): void {
  if ((dh & 3) !== 0) {
    attendRowAny(q, kv, kvStride, kOff, vOff, rows, n, out, probs, H, dh)
    return
  }
  // Heads of whole quads: the scores of four rows at a time, head by head, reduced together (`hsum4`, the same bits
  // as `hsum` of each) and stored as one vector; the outputs with the rows outermost (each element still summed
  // over the rows in order), two heads a pass for 12-wide heads, else four quads at a time. The same bits as
  // scores of four heads at a time and outputs four quads at a time, 1.5x as fast for the engine's heads
  // (12 wide, 4 heads; 19-20 ns against 29-31 a row in view).
  const scale: f32 = <f32>1.0 / Mathf.sqrt(<f32>dh)
  const vs = f32x4.splat(scale)
  const z = f32x4.splat(0)
  const stride = (<usize>kvStride) << 2
  const hb = (<usize>dh) << 2
  const pn = (<usize>n) << 2
  const ko = (<usize>kOff) << 2
  let i = 0
  for (; i + 4 <= n; i += 4) {
    const ri = rows + ((<usize>i) << 2)
    const k0 = kv + (<usize>load<i32>(ri)) * stride + ko
    const k1 = kv + (<usize>load<i32>(ri, 4)) * stride + ko
    const k2 = kv + (<usize>load<i32>(ri, 8)) * stride + ko
    const k3 = kv + (<usize>load<i32>(ri, 12)) * stride + ko
    for (let h = 0; h < H; h++) {
      const o = <usize>h * hb
      const qa = q + o
      let s0 = z, s1 = z, s2 = z, s3 = z
      for (let e: usize = 0; e < hb; e += 16) {
        const x = v128.load(qa + e)
        s0 = f32x4.add(s0, f32x4.mul(x, v128.load(k0 + o + e)))
        s1 = f32x4.add(s1, f32x4.mul(x, v128.load(k1 + o + e)))
        s2 = f32x4.add(s2, f32x4.mul(x, v128.load(k2 + o + e)))
        s3 = f32x4.add(s3, f32x4.mul(x, v128.load(k3 + o + e)))
      }
      v128.store(probs + o / hb * pn + ((<usize>i) << 2), f32x4.mul(hsum4(s0, s1, s2, s3), vs))
    }
  }
  for (; i < n; i++) {
    const base = kv + (<usize>load<i32>(rows + ((<usize>i) << 2))) * stride + ko
    for (let h = 0; h < H; h++) {
      const o = <usize>h * hb
      let s = z
      for (let e: usize = 0; e < hb; e += 16) s = f32x4.add(s, f32x4.mul(v128.load(q + o + e), v128.load(base + o + e)))
      store<f32>(probs + <usize>h * pn + ((<usize>i) << 2), hsum(s) * scale)
    }
  }
  for (let h = 0; h < H; h++) softmaxInPlace(probs + <usize>h * pn, n)
  const vb = kv + ((<usize>vOff) << 2)
  if (hb === 48 && (H & 1) === 0) {
    // Heads of three quads (the engine's 12-wide heads), two a pass: each row's two weights loaded once for the
    // six quads they scale (each element still summed over the rows in order).
    for (let h = 0; h < H; h += 2) {
      const f = <usize>h * hb
      const pa = probs + <usize>h * pn
      const pb = pa + pn
      let s0 = z, s1 = z, s2 = z, s3 = z, s4 = z, s5 = z
      for (let i = 0; i < n; i++) {
        const io = (<usize>i) << 2
        const v = vb + (<usize>load<i32>(rows + io)) * stride + f
        const xa = v128.load32_splat(pa + io)
        const xb = v128.load32_splat(pb + io)
        s0 = f32x4.add(s0, f32x4.mul(xa, v128.load(v)))
        s1 = f32x4.add(s1, f32x4.mul(xa, v128.load(v, 16)))
        s2 = f32x4.add(s2, f32x4.mul(xa, v128.load(v, 32)))
        s3 = f32x4.add(s3, f32x4.mul(xb, v128.load(v, 48)))
        s4 = f32x4.add(s4, f32x4.mul(xb, v128.load(v, 64)))
        s5 = f32x4.add(s5, f32x4.mul(xb, v128.load(v, 80)))
      }
      v128.store(out + f, s0)
      v128.store(out + f, s1, 16)
      v128.store(out + f, s2, 32)
      v128.store(out + f, s3, 48)
      v128.store(out + f, s4, 64)
      v128.store(out + f, s5, 80)
    }
    return
  }
  const db = (<usize>(H * dh)) << 2
  let f: usize = 0
  for (; f + 64 <= db; f += 64) {
    const p0 = probs + (f / hb) * pn
    const p1 = probs + ((f + 16) / hb) * pn
    const p2 = probs + ((f + 32) / hb) * pn
    const p3 = probs + ((f + 48) / hb) * pn
    let s0 = z, s1 = z, s2 = z, s3 = z
    for (let i = 0; i < n; i++) {
      const io = (<usize>i) << 2
      const v = vb + (<usize>load<i32>(rows + io)) * stride + f
      s0 = f32x4.add(s0, f32x4.mul(v128.load32_splat(p0 + io), v128.load(v)))
      s1 = f32x4.add(s1, f32x4.mul(v128.load32_splat(p1 + io), v128.load(v, 16)))
      s2 = f32x4.add(s2, f32x4.mul(v128.load32_splat(p2 + io), v128.load(v, 32)))
      s3 = f32x4.add(s3, f32x4.mul(v128.load32_splat(p3 + io), v128.load(v, 48)))
    }
    v128.store(out + f, s0)
    v128.store(out + f, s1, 16)
    v128.store(out + f, s2, 32)
    v128.store(out + f, s3, 48)
  }
  for (; f < db; f += 16) {
    const p0 = probs + (f / hb) * pn
    let s = z
    for (let i = 0; i < n; i++) {
      const io = (<usize>i) << 2
      s = f32x4.add(s, f32x4.mul(v128.load32_splat(p0 + io), v128.load(vb + (<usize>load<i32>(rows + io)) * stride + f)))
    }
    v128.store(out + f, s)
  }
}

/** `attendRow` for heads of any width (a partial quad at the end of each head). */
function attendRowAny(
  q: usize,
  kv: usize,
  kvStride: i32,
  kOff: i32,
  vOff: i32,
  rows: usize,
  n: i32,
  out: usize,
  probs: usize,
  H: i32,
  dh: i32
): void {
  const scale: f32 = <f32>1.0 / Mathf.sqrt(<f32>dh)
  const stride = (<usize>kvStride) << 2
  const hb = (<usize>dh) << 2
  const h4 = (<usize>(dh & ~3)) << 2
  for (let i = 0; i < n; i++) {
    const base = kv + (<usize>load<i32>(rows + ((<usize>i) << 2))) * stride + ((<usize>kOff) << 2)
    for (let h = 0; h < H; h++) {
      const o = <usize>h * hb
      let s = f32x4.splat(0)
      for (let e: usize = 0; e < h4; e += 16) s = f32x4.add(s, f32x4.mul(v128.load(q + o + e), v128.load(base + o + e)))
      let r = hsum(s)
      for (let e = h4; e < hb; e += 4) r = r + load<f32>(q + o + e) * load<f32>(base + o + e)
      store<f32>(probs + ((<usize>(h * n + i)) << 2), r * scale)
    }
  }
  for (let h = 0; h < H; h++) softmaxInPlace(probs + ((<usize>(h * n)) << 2), n)
  const vo = (<usize>vOff) << 2
  for (let h = 0; h < H; h++) {
    const o = <usize>h * hb
    const p = probs + ((<usize>(h * n)) << 2)
    for (let e: usize = 0; e < hb; e += 16) {
      const w = <i32>((hb - e) >> 2)
      let s = f32x4.splat(0)
      for (let i = 0; i < n; i++) {
        const v = kv + (<usize>load<i32>(rows + ((<usize>i) << 2))) * stride + vo + o + e
        const x = w >= 4 ? v128.load(v) : loadPartial(v, w)
        s = f32x4.add(s, f32x4.mul(v128.load32_splat(p + ((<usize>i) << 2)), x))
      }
      if (w >= 4) v128.store(out + o + e, s)
      else storePartial(out + o + e, s, w)
    }
  }
}

/**
 * The attention of B decoding rows: row b's query, key and value are at `qkv + 12 b d` (q | k | v, d = H dh
 * floats each); its key and value are copied into its cache (rows of 2d floats at the byte address `caches[b]`,
 * Int32) at position `positions[b]`, then it attends over positions `positions[b]` .. 0 of that cache (the window
 * of `desc`, which holds top, top - 1, ..., 0, that starts at top - positions[b]), as `attendRow` does, its output
 * at `out + 4 b d`. Rows in order, so a row sees the keys and values of earlier rows of the same cache.
 */
export function attendRows(
  qkv: usize,
  caches: usize,
  positions: usize,
  B: i32,
  desc: usize,
  top: i32,
  out: usize,
  probs: usize,
  H: i32,
  dh: i32
): void {
  const d = H * dh
  const rowBytes = (<usize>d) << 2
  for (let b = 0; b < B; b++) {
    const cache = <usize>load<i32>(caches + ((<usize>b) << 2))
    const pos = load<i32>(positions + ((<usize>b) << 2))
    const q = qkv + <usize>(3 * b) * rowBytes
    // A loop, not memory.copy: V8 calls out for that, which costs more than the copy of a row.
    const to = cache + <usize>(2 * pos) * rowBytes
    const from = q + rowBytes
    const span = rowBytes << 1
    const e4 = span & ~(<usize>15)
    for (let e: usize = 0; e < e4; e += 16) v128.store(to + e, v128.load(from + e))
    for (let e = e4; e < span; e += 4) store<f32>(to + e, load<f32>(from + e))
    attendRow(q, cache, 2 * d, 0, d, desc + ((<usize>(top - pos)) << 2), pos + 1, out + <usize>b * rowBytes, probs, H, dh)
  }
}

/** `n` floats from `src` to `dst` (which may overlap). */
export function copy(dst: usize, src: usize, n: i32): void {
  memory.copy(dst, src, (<usize>n) << 2)
}
/**
 * The backward pass of `attendRow` for a row of a packed batch (keys at `d`, values at `2d` of rows of
 * `qkv`, stride 3d): given its `dO` (d floats) and weights `att` (as `attendRow` wrote them), adds to `dQkv`:
 * the row's dQ, and dK, dV of each row in view. `scratch` holds H n + d floats.
 */
export function attendRowBackward(
  dO: usize,
  qkv: usize,
  r: i32,
  att: usize,
  rows: usize,
  n: i32,
  dQkv: usize,
  H: i32,
  dh: i32,
  scratch: usize
): void {
  if ((dh & 3) !== 0 || (H & 3) !== 0) {
    attendRowBackwardAny(dO, qkv, r, att, rows, n, dQkv, H, dh, scratch)
    return
  }
  // Heads of whole quads, four at a time: what `attendRowBackwardAny` computes, each value by the same operations
  // in the same order (dA of four heads reduced by one hsum4; the four heads' softmax dots summed side by side,
  // each in order of the rows).
  const d = H * dh
  const scale: f32 = <f32>1.0 / Mathf.sqrt(<f32>dh)
  const stride = (<usize>(3 * d)) << 2
  const hb = (<usize>dh) << 2
  const pn = (<usize>n) << 2
  const qb = qkv + <usize>r * stride
  const dAtt = scratch
  const dQs = scratch + ((<usize>(H * n)) << 2)
  const z = f32x4.splat(0)
  memory.fill(dQs, 0, (<usize>d) << 2)
  // dA = dO . v per head and row in view; dV += a dO.
  for (let i = 0; i < n; i++) {
    const io = (<usize>i) << 2
    const row = <usize>load<i32>(rows + io)
    const vb = qkv + row * stride + ((<usize>(2 * d)) << 2)
    const dvb = dQkv + row * stride + ((<usize>(2 * d)) << 2)
    for (let h = 0; h < H; h += 4) {
      const o = <usize>h * hb
      const ah = att + <usize>h * pn + io
      const a0 = f32x4.splat(load<f32>(ah))
      const a1 = f32x4.splat(load<f32>(ah + pn))
      const a2 = f32x4.splat(load<f32>(ah + 2 * pn))
      const a3 = f32x4.splat(load<f32>(ah + 3 * pn))
      let s0 = z, s1 = z, s2 = z, s3 = z
      for (let e: usize = 0; e < hb; e += 16) {
        const p0 = o + e
        const g0 = v128.load(dO + p0)
        s0 = f32x4.add(s0, f32x4.mul(g0, v128.load(vb + p0)))
        v128.store(dvb + p0, f32x4.add(v128.load(dvb + p0), f32x4.mul(a0, g0)))
        const p1 = p0 + hb
        const g1 = v128.load(dO + p1)
        s1 = f32x4.add(s1, f32x4.mul(g1, v128.load(vb + p1)))
        v128.store(dvb + p1, f32x4.add(v128.load(dvb + p1), f32x4.mul(a1, g1)))
        const p2 = p1 + hb
        const g2 = v128.load(dO + p2)
        s2 = f32x4.add(s2, f32x4.mul(g2, v128.load(vb + p2)))
        v128.store(dvb + p2, f32x4.add(v128.load(dvb + p2), f32x4.mul(a2, g2)))
        const p3 = p2 + hb
        const g3 = v128.load(dO + p3)
        s3 = f32x4.add(s3, f32x4.mul(g3, v128.load(vb + p3)))
        v128.store(dvb + p3, f32x4.add(v128.load(dvb + p3), f32x4.mul(a3, g3)))
      }
      const t = hsum4(s0, s1, s2, s3)
      const pd = dAtt + <usize>h * pn + io
      store<f32>(pd, f32x4.extract_lane(t, 0))
      store<f32>(pd + pn, f32x4.extract_lane(t, 1))
      store<f32>(pd + 2 * pn, f32x4.extract_lane(t, 2))
      store<f32>(pd + 3 * pn, f32x4.extract_lane(t, 3))
    }
  }
  // Softmax backward: dS = a (dA - sum a dA), with the score scale; four heads' sums side by side.
  const n4 = (<usize>(n & ~3)) << 2
  const vs = f32x4.splat(scale)
  for (let h = 0; h < H; h += 4) {
    const pa = att + <usize>h * pn
    const pd = dAtt + <usize>h * pn
    let d0: f32 = 0, d1: f32 = 0, d2: f32 = 0, d3: f32 = 0
    for (let i: usize = 0; i < pn; i += 4) {
      d0 = d0 + load<f32>(pa + i) * load<f32>(pd + i)
      d1 = d1 + load<f32>(pa + pn + i) * load<f32>(pd + pn + i)
      d2 = d2 + load<f32>(pa + 2 * pn + i) * load<f32>(pd + 2 * pn + i)
      d3 = d3 + load<f32>(pa + 3 * pn + i) * load<f32>(pd + 3 * pn + i)
    }
    softmaxBackwardRow(pa, pd, pn, n4, d0, scale, vs)
    softmaxBackwardRow(pa + pn, pd + pn, pn, n4, d1, scale, vs)
    softmaxBackwardRow(pa + 2 * pn, pd + 2 * pn, pn, n4, d2, scale, vs)
    softmaxBackwardRow(pa + 3 * pn, pd + 3 * pn, pn, n4, d3, scale, vs)
  }
  // dQ += dS k, dK += dS q.
  if (hb === 48) {
    // Heads of three quads (the engine's), two a pass: their dQ summed in registers over the rows, in order from
    // zero as in memory below (the same bits), where each row's term went through memory.
    for (let h = 0; h < H; h += 2) {
      const o = <usize>h * hb
      const pa = dAtt + <usize>h * pn
      const pb = pa + pn
      const qh = qb + o
      let s0 = z, s1 = z, s2 = z, s3 = z, s4 = z, s5 = z
      for (let i = 0; i < n; i++) {
        const io = (<usize>i) << 2
        const at = <usize>load<i32>(rows + io) * stride + ((<usize>d) << 2) + o
        const kb = qkv + at
        const dkb = dQkv + at
        const da = v128.load32_splat(pa + io)
        const db = v128.load32_splat(pb + io)
        s0 = f32x4.add(s0, f32x4.mul(da, v128.load(kb)))
        s1 = f32x4.add(s1, f32x4.mul(da, v128.load(kb, 16)))
        s2 = f32x4.add(s2, f32x4.mul(da, v128.load(kb, 32)))
        s3 = f32x4.add(s3, f32x4.mul(db, v128.load(kb, 48)))
        s4 = f32x4.add(s4, f32x4.mul(db, v128.load(kb, 64)))
        s5 = f32x4.add(s5, f32x4.mul(db, v128.load(kb, 80)))
        v128.store(dkb, f32x4.add(v128.load(dkb), f32x4.mul(da, v128.load(qh))))
        v128.store(dkb, f32x4.add(v128.load(dkb, 16), f32x4.mul(da, v128.load(qh, 16))), 16)
        v128.store(dkb, f32x4.add(v128.load(dkb, 32), f32x4.mul(da, v128.load(qh, 32))), 32)
        v128.store(dkb, f32x4.add(v128.load(dkb, 48), f32x4.mul(db, v128.load(qh, 48))), 48)
        v128.store(dkb, f32x4.add(v128.load(dkb, 64), f32x4.mul(db, v128.load(qh, 64))), 64)
        v128.store(dkb, f32x4.add(v128.load(dkb, 80), f32x4.mul(db, v128.load(qh, 80))), 80)
      }
      v128.store(dQs + o, s0)
      v128.store(dQs + o, s1, 16)
      v128.store(dQs + o, s2, 32)
      v128.store(dQs + o, s3, 48)
      v128.store(dQs + o, s4, 64)
      v128.store(dQs + o, s5, 80)
    }
    const dq = dQkv + <usize>r * stride
    add(dq, dq, dQs, d)
    return
  }
  for (let i = 0; i < n; i++) {
    const io = (<usize>i) << 2
    const row = <usize>load<i32>(rows + io)
    const kb = qkv + row * stride + ((<usize>d) << 2)
    const dkb = dQkv + row * stride + ((<usize>d) << 2)
    for (let h = 0; h < H; h++) {
      const ds = f32x4.splat(load<f32>(dAtt + <usize>h * pn + io))
      const o = <usize>h * hb
      for (let e: usize = 0; e < hb; e += 16) {
        const p = o + e
        v128.store(dQs + p, f32x4.add(v128.load(dQs + p), f32x4.mul(ds, v128.load(kb + p))))
        v128.store(dkb + p, f32x4.add(v128.load(dkb + p), f32x4.mul(ds, v128.load(qb + p))))
      }
    }
  }
  const dqb = dQkv + <usize>r * stride
  add(dqb, dqb, dQs, d)
}

/** `pd[i] = pa[i] (pd[i] - dot) scale` over the n floats of a head (`pn` bytes, whole quads to `n4`). */
// @ts-expect-error: decorator
@inline function softmaxBackwardRow(pa: usize, pd: usize, pn: usize, n4: usize, dot: f32, scale: f32, vs: v128): void {
  const vd = f32x4.splat(dot)
  for (let i: usize = 0; i < n4; i += 16) {
    v128.store(pd + i, f32x4.mul(f32x4.mul(v128.load(pa + i), f32x4.sub(v128.load(pd + i), vd)), vs))
  }
  for (let i = n4; i < pn; i += 4) store<f32>(pd + i, load<f32>(pa + i) * (load<f32>(pd + i) - dot) * scale)
}

/** `attendRowBackward` for any shape (a partial quad at the end of each head, heads not in fours). */
function attendRowBackwardAny(
  dO: usize,
  qkv: usize,
  r: i32,
  att: usize,
  rows: usize,
  n: i32,
  dQkv: usize,
  H: i32,
  dh: i32,
  scratch: usize
): void {
  const d = H * dh
  const scale: f32 = <f32>1.0 / Mathf.sqrt(<f32>dh)
  const stride = (<usize>(3 * d)) << 2
  const hb = (<usize>dh) << 2
  const qb = qkv + <usize>r * stride
  const dAtt = scratch
  const dQs = scratch + ((<usize>(H * n)) << 2)
  memory.fill(dQs, 0, (<usize>d) << 2)
  // dA = dO . v per head and row in view; dV += a dO.
  for (let i = 0; i < n; i++) {
    const row = <usize>load<i32>(rows + ((<usize>i) << 2))
    const vb = qkv + row * stride + ((<usize>(2 * d)) << 2)
    const dvb = dQkv + row * stride + ((<usize>(2 * d)) << 2)
    for (let h = 0; h < H; h++) {
      const a = load<f32>(att + ((<usize>(h * n + i)) << 2))
      const va = f32x4.splat(a)
      const o = <usize>h * hb
      let s = f32x4.splat(0)
      for (let e: usize = 0; e < hb; e += 16) {
        const w = <i32>((hb - e) >> 2)
        if (w >= 4) {
          const g = v128.load(dO + o + e)
          s = f32x4.add(s, f32x4.mul(g, v128.load(vb + o + e)))
          v128.store(dvb + o + e, f32x4.add(v128.load(dvb + o + e), f32x4.mul(va, g)))
        } else {
          const g = loadPartial(dO + o + e, w)
          s = f32x4.add(s, f32x4.mul(g, loadPartial(vb + o + e, w)))
          storePartial(dvb + o + e, f32x4.add(loadPartial(dvb + o + e, w), f32x4.mul(va, g)), w)
        }
      }
      store<f32>(dAtt + ((<usize>(h * n + i)) << 2), hsum(s))
    }
  }
  // Softmax backward: dS = a (dA - sum a dA), with the score scale.
  for (let h = 0; h < H; h++) {
    const pa = att + ((<usize>(h * n)) << 2)
    const pd = dAtt + ((<usize>(h * n)) << 2)
    let dot: f32 = 0
    for (let i: usize = 0; i < (<usize>n) << 2; i += 4) dot = dot + load<f32>(pa + i) * load<f32>(pd + i)
    for (let i: usize = 0; i < (<usize>n) << 2; i += 4) {
      store<f32>(pd + i, load<f32>(pa + i) * (load<f32>(pd + i) - dot) * scale)
    }
  }
  // dQ += dS k, dK += dS q.
  for (let i = 0; i < n; i++) {
    const row = <usize>load<i32>(rows + ((<usize>i) << 2))
    const kb = qkv + row * stride + ((<usize>d) << 2)
    const dkb = dQkv + row * stride + ((<usize>d) << 2)
    for (let h = 0; h < H; h++) {
      const ds = f32x4.splat(load<f32>(dAtt + ((<usize>(h * n + i)) << 2)))
      const o = <usize>h * hb
      for (let e: usize = 0; e < hb; e += 16) {
        const w = <i32>((hb - e) >> 2)
        if (w >= 4) {
          v128.store(dQs + o + e, f32x4.add(v128.load(dQs + o + e), f32x4.mul(ds, v128.load(kb + o + e))))
          v128.store(dkb + o + e, f32x4.add(v128.load(dkb + o + e), f32x4.mul(ds, v128.load(qb + o + e))))
        } else {
          storePartial(dQs + o + e, f32x4.add(loadPartial(dQs + o + e, w), f32x4.mul(ds, loadPartial(kb + o + e, w))), w)
          storePartial(dkb + o + e, f32x4.add(loadPartial(dkb + o + e, w), f32x4.mul(ds, loadPartial(qb + o + e, w))), w)
        }
      }
    }
  }
  const dqb = dQkv + <usize>r * stride
  add(dqb, dqb, dQs, d)
}

// ---------------------------------------------------------------------------------------------------------
// Optimiser
// ---------------------------------------------------------------------------------------------------------

/** The sum of squares of n floats, in float64, in order (as the JavaScript `globalNorm` sums). */
export function sumSquares64(g: usize, n: i32): f64 {
  let s: f64 = 0
  const end = (<usize>n) << 2
  for (let i: usize = 0; i < end; i += 4) {
    const v = <f64>load<f32>(g + i)
    s += v * v
  }
  return s
}

/**
 * One AdamW update over n parameters, in float64 as the JavaScript loop computes it (the same bits): with
 * `g = grads * clip`, `m = b1 m + (1 - b1) g`, `v = b2 v + (1 - b2) g^2`, `p = p decay - step m / (sqrt(v / c2) + eps)`.
 */
export function adam(
  params: usize,
  grads: usize,
  m: usize,
  v: usize,
  n: i32,
  clip: f64,
  b1: f64,
  b2: f64,
  eps: f64,
  decay: f64,
  step: f64,
  c2: f64
): void {
  const vclip = f64x2.splat(clip)
  const vb1 = f64x2.splat(b1)
  const vb2 = f64x2.splat(b2)
  const vc1 = f64x2.splat(1 - b1)
  const vc2b = f64x2.splat(1 - b2)
  const veps = f64x2.splat(eps)
  const vdecay = f64x2.splat(decay)
  const vstep = f64x2.splat(step)
  const vc2 = f64x2.splat(c2)
  const end = (<usize>n) << 2
  const e2 = (<usize>(n & ~1)) << 2
  for (let i: usize = 0; i < e2; i += 8) {
    const g = f64x2.mul(f64x2.promote_low_f32x4(v128.load64_zero(grads + i)), vclip)
    const mi = f64x2.add(f64x2.mul(vb1, f64x2.promote_low_f32x4(v128.load64_zero(m + i))), f64x2.mul(vc1, g))
    const vi = f64x2.add(
      f64x2.mul(vb2, f64x2.promote_low_f32x4(v128.load64_zero(v + i))),
      f64x2.mul(f64x2.mul(vc2b, g), g)
    )
    v128.store64_lane(m + i, f32x4.demote_f64x2_zero(mi), 0)
    v128.store64_lane(v + i, f32x4.demote_f64x2_zero(vi), 0)
    const p = f64x2.promote_low_f32x4(v128.load64_zero(params + i))
    const upd = f64x2.div(f64x2.mul(vstep, mi), f64x2.add(f64x2.sqrt(f64x2.div(vi, vc2)), veps))
    v128.store64_lane(params + i, f32x4.demote_f64x2_zero(f64x2.sub(f64x2.mul(p, vdecay), upd)), 0)
  }
  for (let i = e2; i < end; i += 4) {
    const g = <f64>load<f32>(grads + i) * clip
    const mi = b1 * <f64>load<f32>(m + i) + (1 - b1) * g
    const vi = b2 * <f64>load<f32>(v + i) + (1 - b2) * g * g
    store<f32>(m + i, <f32>mi)
    store<f32>(v + i, <f32>vi)
    store<f32>(params + i, <f32>(<f64>load<f32>(params + i) * decay - (step * mi) / (Math.sqrt(vi / c2) + eps)))
  }
}
