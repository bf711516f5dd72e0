/**
 * The shape of the local engine's policy (`PolicyConfig`, the default shape) and the layout of its flat
 * parameter buffer: where each tensor sits, how many parameters a shape has, and what a token's forward pass
 * costs.
 *
 * @since 0.1.0
 */
import { VOCAB_SIZE } from "../Tokenizer.js"

/** The shape of a policy. */
export interface PolicyConfig {
  /** The number of token ids. */
  readonly vocabSize: number
  /** The most tokens a sequence may hold (the number of learned positions). */
  readonly contextLength: number
  /** The width of the residual stream. */
  readonly dModel: number
  /** The number of transformer blocks. */
  readonly nLayers: number
  /** The number of attention heads (dividing `dModel`). */
  readonly nHeads: number
  /** The width of the MLP's hidden layer. */
  readonly dFf: number
}

/** The default shape: see the module comment. */
export const DEFAULT_POLICY_CONFIG: PolicyConfig = {
  vocabSize: VOCAB_SIZE,
  contextLength: 512,
  dModel: 48,
  nLayers: 2,
  nHeads: 4,
  dFf: 192
}

/** The offsets of one block's tensors in the flat parameter buffer. */
export interface LayerLayout {
  readonly ln1: number
  readonly wqkv: number
  readonly wo: number
  readonly ln2: number
  readonly w1: number
  readonly b1: number
  readonly w2: number
  readonly b2: number
}

/** The offsets of every tensor in the flat parameter buffer, and its size. */
export interface Layout {
  readonly tokEmb: number
  readonly posEmb: number
  readonly layers: ReadonlyArray<LayerLayout>
  readonly lnF: number
  readonly wout: number
  readonly bout: number
  readonly size: number
}

/** The layout of a policy of this shape. */
export const layoutOf = (c: PolicyConfig): Layout => {
  const d = c.dModel
  let at = 0
  const take = (n: number): number => {
    const start = at
    at += n
    return start
  }
  const tokEmb = take(c.vocabSize * d)
  const posEmb = take(c.contextLength * d)
  const layers: Array<LayerLayout> = []
  for (let l = 0; l < c.nLayers; l++) {
    layers.push({
      ln1: take(d),
      wqkv: take(3 * d * d),
      wo: take(d * d),
      ln2: take(d),
      w1: take(c.dFf * d),
      b1: take(c.dFf),
      w2: take(d * c.dFf),
      b2: take(d)
    })
  }
  const lnF = take(d)
  const wout = take(c.vocabSize * d)
  const bout = take(c.vocabSize)
  return { tokEmb, posEmb, layers, lnF, wout, bout, size: at }
}

/** The named tensors of the flat parameter buffer, in order, with their offsets and sizes. */
export const parameterTensors = (
  config: PolicyConfig
): ReadonlyArray<{ readonly name: string; readonly offset: number; readonly size: number }> => {
  const L = layoutOf(config)
  const starts: Array<[string, number]> = [
    ["tokEmb", L.tokEmb],
    ["posEmb", L.posEmb]
  ]
  L.layers.forEach((l, i) => {
    for (const [k, v] of Object.entries(l)) starts.push([`layers.${i}.${k}`, v])
  })
  starts.push(["lnF", L.lnF], ["wout", L.wout], ["bout", L.bout])
  return starts.map(([name, offset], i) => ({ name, offset, size: (starts[i + 1]?.[1] ?? L.size) - offset }))
}

/** The number of parameters of a policy of this shape. */
export const parameterCount = (config: PolicyConfig): number => layoutOf(config).size

/**
 * The floating-point operations of one token's forward pass with `context` earlier tokens in view (matrix
 * products, attention scores and mixing; norms and activations are not counted). A training step costs
 * about three times this per token.
 */
export const forwardFlopsPerToken = (config: PolicyConfig, context: number): number => {
  const d = config.dModel
  const matrix = config.nLayers * (3 * d * d + d * d + 2 * d * config.dFf) + config.vocabSize * d
  return 2 * matrix + config.nLayers * 4 * d * (context + 1)
}

/** Throws `RangeError` for a shape that is not a valid policy (sizes not positive, heads not dividing the width). */
export const checkConfig = (c: PolicyConfig): void => {
  const ints = [c.vocabSize, c.contextLength, c.dModel, c.nLayers, c.nHeads, c.dFf]
  if (!ints.every((n) => Number.isInteger(n) && n > 0)) throw new RangeError("policy config: sizes must be positive")
  if (c.dModel % c.nHeads !== 0) throw new RangeError("policy config: nHeads must divide dModel")
}
