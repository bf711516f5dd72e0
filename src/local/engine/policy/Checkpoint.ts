/**
 * Checkpoints of the local engine's policy: its parameters, and the optimiser's state when given, as bytes,
 * bit-exact (see `saveCheckpoint` for the format).
 *
 * @since 0.1.0
 */
import type { AdamConfig, AdamState } from "../Optimizer.js"
import type { FloatArray } from "./Kernels.js"
import { Policy } from "./Policy.js"
import { checkConfig, type PolicyConfig, parameterCount } from "./PolicyConfig.js"
import { engineFloat32 } from "./Wasm.js"

const MAGIC = [0x45, 0x52, 0x4c, 0x50] // "ERLP"

/** The version of the checkpoint format written by `saveCheckpoint`. */
export const CHECKPOINT_VERSION = 1

/** A checkpoint that cannot be read: not one of ours, of another version, truncated or inconsistent. */
export class CheckpointFormatError extends Error {
  override readonly name = "CheckpointFormatError"
}

/** What a checkpoint's JSON header records. */
interface CheckpointHeader {
  readonly format: "effect-rl/policy"
  readonly version: number
  readonly dtype: "float32" | "float64"
  readonly config: PolicyConfig
  readonly parameterCount: number
  readonly optimizer: { readonly step: number; readonly config: AdamConfig } | null
}

const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1

const bytesOf = (a: FloatArray): Uint8Array => new Uint8Array(a.buffer, a.byteOffset, a.byteLength)

/**
 * The policy's parameters, and the optimiser's state when given, as bytes: "ERLP", the format version and
 * the length of a JSON header (u32 little-endian each), the header (shape, float type, optimiser step and
 * hyperparameters), then the raw little-endian floats of the parameters and of both moments. Bit-exact.
 */
export const saveCheckpoint = (policy: Policy, optimizer?: AdamState): Uint8Array => {
  if (!littleEndian) throw new CheckpointFormatError("checkpoints are written on little-endian machines only")
  const n = policy.parameterCount
  if (optimizer !== undefined && (optimizer.m.length !== n || optimizer.v.length !== n)) {
    throw new CheckpointFormatError("the optimiser state does not match the policy's parameters")
  }
  if (optimizer !== undefined && optimizer.m instanceof Float64Array !== policy.float64) {
    throw new CheckpointFormatError("the optimiser state's float type differs from the policy's")
  }
  const header: CheckpointHeader = {
    format: "effect-rl/policy",
    version: CHECKPOINT_VERSION,
    dtype: policy.float64 ? "float64" : "float32",
    config: { ...policy.config },
    parameterCount: n,
    optimizer: optimizer === undefined ? null : { step: optimizer.step, config: { ...optimizer.config } }
  }
  let json = new TextEncoder().encode(JSON.stringify(header))
  const pad = (8 - ((12 + json.length) % 8)) % 8
  if (pad > 0) json = new TextEncoder().encode(JSON.stringify(header) + " ".repeat(pad))
  const arrays = optimizer === undefined ? [policy.params] : [policy.params, optimizer.m, optimizer.v]
  const out = new Uint8Array(12 + json.length + arrays.reduce((s, a) => s + a.byteLength, 0))
  const view = new DataView(out.buffer)
  out.set(MAGIC, 0)
  view.setUint32(4, CHECKPOINT_VERSION, true)
  view.setUint32(8, json.length, true)
  out.set(json, 12)
  let at = 12 + json.length
  for (const a of arrays) {
    out.set(bytesOf(a), at)
    at += a.byteLength
  }
  return out
}

/** Read a checkpoint written by `saveCheckpoint`: the policy, and the optimiser state if it was saved. */
export const loadCheckpoint = (bytes: Uint8Array): { readonly policy: Policy; readonly optimizer?: AdamState } => {
  if (!littleEndian) throw new CheckpointFormatError("checkpoints are read on little-endian machines only")
  if (bytes.length < 12 || MAGIC.some((b, i) => bytes[i] !== b)) {
    throw new CheckpointFormatError("not an effect-rl policy checkpoint (the bytes do not start with ERLP)")
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const version = view.getUint32(4, true)
  if (version !== CHECKPOINT_VERSION) {
    throw new CheckpointFormatError(
      `unsupported checkpoint version ${version} (this engine reads ${CHECKPOINT_VERSION})`
    )
  }
  const jsonLength = view.getUint32(8, true)
  if (12 + jsonLength > bytes.length) throw new CheckpointFormatError("truncated checkpoint: the header is cut short")
  let header: CheckpointHeader
  try {
    header = JSON.parse(new TextDecoder().decode(bytes.subarray(12, 12 + jsonLength))) as CheckpointHeader
  } catch {
    throw new CheckpointFormatError("corrupt checkpoint: the header is not JSON")
  }
  if (header.format !== "effect-rl/policy" || (header.dtype !== "float32" && header.dtype !== "float64")) {
    throw new CheckpointFormatError("corrupt checkpoint: unknown format or float type in the header")
  }
  try {
    checkConfig(header.config)
  } catch (e) {
    throw new CheckpointFormatError(`corrupt checkpoint: ${(e as Error).message}`)
  }
  const n = parameterCount(header.config)
  if (n !== header.parameterCount) throw new CheckpointFormatError("corrupt checkpoint: parameter count mismatch")
  const float64 = header.dtype === "float64"
  const width = float64 ? 8 : 4
  const arrays = header.optimizer === null ? 1 : 3
  const expected = 12 + jsonLength + arrays * n * width
  if (bytes.length !== expected) {
    throw new CheckpointFormatError(`corrupt checkpoint: ${bytes.length} bytes where the header implies ${expected}`)
  }
  const read = (k: number): FloatArray => {
    // In the kernels' memory (shared: the decoding thread reads the parameters in place), see `Wasm.ts`; not
    // zeroed first, as every float is written next.
    const a = float64 ? new Float64Array(n) : engineFloat32(n, false)
    const start = 12 + jsonLength + k * n * width
    bytesOf(a).set(bytes.subarray(start, start + n * width))
    return a
  }
  const policy = Policy.fromParameters(header.config, read(0))
  if (header.optimizer === null) return { policy }
  const optimizer: AdamState = {
    config: header.optimizer.config,
    m: read(1),
    v: read(2),
    step: header.optimizer.step
  }
  return { policy, optimizer }
}
