/**
 * UTF-8 well-formedness as the platform's own decoder judges it (`TextDecoder` with `fatal`), the reference the
 * engine's UTF-8 tests compare with; and bytes cut as network reads cut them, for the decoders' property tests.
 */

/** Whether bytes are well-formed UTF-8 ending at a character boundary. */
export const wellFormed = (bytes: ReadonlyArray<number>): boolean => {
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(Uint8Array.from(bytes))
    return true
  } catch {
    return false
  }
}

/** Whether bytes are a well-formed UTF-8 prefix (what may follow them can still make them whole). */
export const wellFormedPrefix = (bytes: ReadonlyArray<number>): boolean => {
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(Uint8Array.from(bytes), { stream: true })
    return true
  } catch {
    return false
  }
}

/** Bytes cut at the given points (taken modulo their length + 1), as network reads would cut them: inside a CRLF or a UTF-8 sequence too. */
export const cutAt = (body: Uint8Array, cuts: ReadonlyArray<number>): Array<Uint8Array> => {
  const points = [...new Set(cuts.map((c) => c % (body.length + 1)))].sort((a, b) => a - b)
  const pieces: Array<Uint8Array> = []
  let from = 0
  for (const point of [...points, body.length]) {
    pieces.push(body.subarray(from, point))
    from = point
  }
  return pieces
}
