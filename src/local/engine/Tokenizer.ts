/**
 * The local engine's tokenizer: byte-level, so any UTF-8 text has a tokenization and nothing is
 * downloaded. Ids 0..255 are the bytes; the special tokens of the chat format follow.
 *
 * A token's `token` string (as logprobs report it) is its text when the byte is printable ASCII or a
 * whole special token; a byte that is not a character on its own (a part of a multi-byte character, a
 * control byte) is written `<0xNN>`, and its `bytes` give the truth, as the convention does.
 *
 * @since 0.1.0
 */
import type { TokenLogprob } from "../../api/ChatCompletion.js"

/** The special tokens, by name. */
export const SPECIAL_TOKENS = ["<|bos|>", "<|eos|>", "<|im_start|>", "<|im_end|>", "<|pad|>"] as const

/** The id of the first special token. */
const FIRST_SPECIAL = 256

/** Beginning of sequence: added by `add_special_tokens`. */
export const BOS = FIRST_SPECIAL
/** End of sequence. */
export const EOS = FIRST_SPECIAL + 1
/** Opens a chat turn: `<|im_start|>role\n`. */
export const IM_START = FIRST_SPECIAL + 2
/** Closes a chat turn; the model ends an assistant turn by sampling it (a stop, like EOS). */
export const IM_END = FIRST_SPECIAL + 3
/** Padding; never sampled. */
export const PAD = FIRST_SPECIAL + 4

/** The number of token ids. */
export const VOCAB_SIZE = FIRST_SPECIAL + SPECIAL_TOKENS.length

/** Whether an id is a special token. */
export const isSpecial = (id: number): boolean => id >= FIRST_SPECIAL && id < VOCAB_SIZE

/** The ids that end a completion unless `ignore_eos`: EOS and the end of the turn. */
export const STOP_IDS: ReadonlyArray<number> = [EOS, IM_END]

const encoder = new TextEncoder()
const decoder = new TextDecoder("utf-8", { fatal: false })

const specialIds = new Map<string, number>(SPECIAL_TOKENS.map((name, i) => [name, FIRST_SPECIAL + i]))
const specialPattern = new RegExp(SPECIAL_TOKENS.map((s) => s.replace(/[|]/g, "\\|")).join("|"), "g")

/** The id of a special token by its text, if it is one. */
export const specialId = (text: string): number | undefined => specialIds.get(text)

/** Encode text as its UTF-8 bytes; special-token texts in it are plain text (not special ids). */
export const encode = (text: string): Array<number> => Array.from(encoder.encode(text))

/** Encode text in which special-token texts (like `<|im_start|>`) are the special tokens (templates). */
export const encodeWithSpecials = (text: string): Array<number> => {
  const out: Array<number> = []
  let last = 0
  for (const match of text.matchAll(specialPattern)) {
    for (const b of encoder.encode(text.slice(last, match.index))) out.push(b)
    out.push(specialIds.get(match[0])!)
    last = match.index + match[0].length
  }
  for (const b of encoder.encode(text.slice(last))) out.push(b)
  return out
}

/** Decode ids to text; special tokens are dropped with `skipSpecialTokens` (the default), else written. */
export const decode = (ids: ArrayLike<number>, options?: { readonly skipSpecialTokens?: boolean }): string => {
  const skip = options?.skipSpecialTokens ?? true
  let text = ""
  let bytes: Array<number> = []
  const flush = () => {
    if (bytes.length > 0) text += decoder.decode(Uint8Array.from(bytes))
    bytes = []
  }
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!
    if (id < FIRST_SPECIAL) bytes.push(id)
    else {
      flush()
      if (!skip && isSpecial(id)) text += SPECIAL_TOKENS[id - FIRST_SPECIAL]
    }
  }
  flush()
  return text
}

/** The bytes of a token (the UTF-8 of a special token's text). */
export const tokenBytes = (id: number): Array<number> =>
  id < FIRST_SPECIAL ? [id] : isSpecial(id) ? encode(SPECIAL_TOKENS[id - FIRST_SPECIAL]!) : []

/** The `token` string of a token, as logprobs report it. */
export const tokenString = (id: number): string => {
  if (isSpecial(id)) return SPECIAL_TOKENS[id - FIRST_SPECIAL]!
  if (id >= 0x20 && id < 0x7f) return String.fromCharCode(id)
  if (id === 0x0a) return "\n"
  if (id === 0x09) return "\t"
  return `<0x${id.toString(16).toUpperCase().padStart(2, "0")}>`
}

const tokenIdPattern = /^token_id:(\d+)$/
const bytePattern = /^<0x([0-9A-F]{2})>$/

/** The id of a `token` string (also the `token_id:<id>` form of `return_tokens_as_token_ids`). */
export const idOfTokenString = (token: string): number | undefined => {
  const asId = tokenIdPattern.exec(token)
  if (asId !== null) return Number(asId[1])
  const special = specialIds.get(token)
  if (special !== undefined) return special
  const byte = bytePattern.exec(token)
  if (byte !== null) return Number.parseInt(byte[1]!, 16)
  const bytes = encoder.encode(token)
  return bytes.length === 1 ? bytes[0] : undefined
}

/** Thrown (as a defect of the caller's data) when a recorded choice cannot be mapped back to token ids. */
export class UnmappableTokenError extends Error {
  /** The position of the entry in `logprobs.content`. */
  readonly index: number
  constructor(index: number, token: string) {
    super(`logprobs.content[${index}]: token ${JSON.stringify(token)} is not a token of this tokenizer`)
    this.index = index
  }
}

/**
 * The token ids of a recorded choice: its `token_ids` when present, else from its logprob entries (the
 * `token_id:<id>` form, the token string, or the `bytes` when the string is ambiguous).
 */
export const idsOfChoice = (choice: {
  readonly token_ids?: ReadonlyArray<number> | null | undefined
  readonly logprobs?: { readonly content?: ReadonlyArray<TokenLogprob> | null | undefined } | null | undefined
}): Array<number> => {
  if (choice.token_ids != null) return [...choice.token_ids]
  const content = choice.logprobs?.content ?? []
  const ids: Array<number> = []
  content.forEach((entry, i) => {
    const id = idOfTokenString(entry.token)
    if (id !== undefined) ids.push(id)
    else if (entry.bytes != null && entry.bytes.length > 0) {
      // A token string that is not one of ours (e.g. a decoded multi-byte character): its bytes are.
      const special = specialIds.get(decoder.decode(Uint8Array.from(entry.bytes)))
      if (special !== undefined) ids.push(special)
      else for (const b of entry.bytes) ids.push(b)
    } else throw new UnmappableTokenError(i, entry.token)
  })
  return ids
}
