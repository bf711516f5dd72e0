/**
 * Adam with decoupled weight decay (AdamW) over the policy's flat parameter buffer, with clipping of the
 * gradient by its global norm. The moments live in buffers of the parameters' float type, so that a
 * checkpoint holds them bit for bit. Over buffers in the kernels' memory (a float32 policy's) the step runs in
 * WebAssembly (`adam` in `wasm/kernels.as`), in float64 as the loop here computes it: the same bits.
 *
 * @since 0.1.0
 */
import type { FloatArray } from "./policy/Kernels.js"
import { heap, ptr } from "./policy/Wasm.js"

/** The optimiser's hyperparameters (the learning rate is given per step). */
export interface AdamConfig {
  /** Decay of the first moment. */
  readonly beta1: number
  /** Decay of the second moment. */
  readonly beta2: number
  /** Added to the root of the second moment. */
  readonly epsilon: number
  /** Decoupled weight decay per unit of learning rate (AdamW); 0 is plain Adam. */
  readonly weightDecay: number
  /** The gradient's global L2 norm is clipped to this (0 or Infinity: no clipping). */
  readonly maxGradNorm: number
}

/**
 * The defaults for the small policy: beta2 = 0.99 (rather than 0.999) adapts faster to the changing scale of
 * RL gradients; no weight decay; clipping at norm 1.
 */
export const DEFAULT_ADAM_CONFIG: AdamConfig = {
  beta1: 0.9,
  beta2: 0.99,
  epsilon: 1e-8,
  weightDecay: 0,
  maxGradNorm: 1
}

/** The optimiser's state: both moments and the number of steps taken. */
export interface AdamState {
  /** The hyperparameters. */
  readonly config: AdamConfig
  /** The first moment, one per parameter. */
  readonly m: FloatArray
  /** The second moment, one per parameter. */
  readonly v: FloatArray
  /** The steps taken so far (for bias correction). */
  step: number
}

/** A fresh state for `size` parameters (float64 moments when `float64`). */
export const makeAdamState = (size: number, config: Partial<AdamConfig> = {}, float64 = false): AdamState => ({
  config: { ...DEFAULT_ADAM_CONFIG, ...config },
  m: float64 ? new Float64Array(size) : (heap()?.f32(size) ?? new Float32Array(size)),
  v: float64 ? new Float64Array(size) : (heap()?.f32(size) ?? new Float32Array(size)),
  step: 0
})

/**
 * Gives a state's moments back to the kernels' memory at once (see `Heap.release` and `Policy.dispose`), where
 * they live; the state must not be used after. Moments elsewhere are left to the garbage collector.
 */
export const disposeAdamState = (state: AdamState): void => {
  const H = heap()
  if (H === undefined) return
  H.release(state.m)
  H.release(state.v)
}

/** The global L2 norm of a gradient buffer. */
export const globalNorm = (grads: ArrayLike<number>): number => {
  let ss = 0
  for (let i = 0; i < grads.length; i++) {
    const g = grads[i]!
    ss += g * g
  }
  return Math.sqrt(ss)
}

/** What one optimiser step did. */
export interface AdamStepResult {
  /** The gradient's global norm before clipping. */
  readonly gradNorm: number
  /** The factor the gradient was scaled by (1 when not clipped). */
  readonly clipScale: number
}

/**
 * One AdamW step: clip `grads` by global norm (in the update, `grads` is left as it is), update the moments,
 * and move `params`. A non-finite gradient norm skips the update (and is reported).
 */
export const adamStep = (
  params: FloatArray,
  grads: FloatArray,
  state: AdamState,
  learningRate: number
): AdamStepResult => {
  if (params.length !== grads.length || params.length !== state.m.length) {
    throw new RangeError("adamStep: parameter, gradient and moment buffers differ in size")
  }
  const { beta1, beta2, epsilon, weightDecay, maxGradNorm } = state.config
  const W = heap()
  const wasm = W !== undefined && [params, grads, state.m, state.v].every((a) => a instanceof Float32Array && W.has(a))
  const gradNorm = wasm ? Math.sqrt(W.kernels.sumSquares64(ptr(grads), grads.length)) : globalNorm(grads)
  if (!Number.isFinite(gradNorm)) return { gradNorm, clipScale: 0 }
  const clipScale = maxGradNorm > 0 && gradNorm > maxGradNorm ? maxGradNorm / gradNorm : 1
  state.step += 1
  const t = state.step
  const c1 = 1 - beta1 ** t
  const c2 = 1 - beta2 ** t
  const m = state.m
  const v = state.v
  const decay = 1 - learningRate * weightDecay
  const stepSize = learningRate / c1
  if (wasm) {
    W.kernels.adam(
      ptr(params),
      ptr(grads),
      ptr(m),
      ptr(v),
      params.length,
      clipScale,
      beta1,
      beta2,
      epsilon,
      decay,
      stepSize,
      c2
    )
    return { gradNorm, clipScale }
  }
  for (let i = 0; i < params.length; i++) {
    const g = grads[i]! * clipScale
    const mi = beta1 * m[i]! + (1 - beta1) * g
    const vi = beta2 * v[i]! + (1 - beta2) * g * g
    m[i] = mi
    v[i] = vi
    params[i] = params[i]! * decay - (stepSize * mi) / (Math.sqrt(vi / c2) + epsilon)
  }
  return { gradNorm, clipScale }
}
