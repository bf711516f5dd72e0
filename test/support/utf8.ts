/**
 * UTF-8 well-formedness as the platform's own decoder judges it (`TextDecoder` with `fatal`), the reference the
 * engine's UTF-8 tests compare with.
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
