/**
 * How deep a JSON body nests, checked before a schema decodes it: a decoder and its error formatter recurse
 * once per level, so a body of a few kilobytes nested thousands deep would overflow the stack while a 4xx was
 * being written. One check for every surface that reads JSON (the embedded backend's `admit.ts`, the rollout's
 * endpoint), so they refuse the same bodies alike.
 */

/** The deepest nesting of arrays and objects a JSON body may have. */
export const MAX_JSON_DEPTH = 512

/** The sentence a body nested deeper than {@link MAX_JSON_DEPTH} is refused with. */
export const TOO_DEEP = `The JSON body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`

/**
 * How deep the arrays and objects of a JSON text nest, counted in one pass without recursion; stops counting
 * once past `limit` (the answer is then `limit + 1`). Brackets inside strings do not count.
 */
export const jsonDepth = (text: string, limit: number): number => {
  let depth = 0
  let deepest = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x5c) i++
      else if (c === 0x22) inString = false
    } else if (c === 0x22) {
      inString = true
    } else if (c === 0x5b || c === 0x7b) {
      depth++
      if (depth > deepest) {
        deepest = depth
        if (deepest > limit) return deepest
      }
    } else if (c === 0x5d || c === 0x7d) {
      depth--
    }
  }
  return deepest
}

/**
 * Whether the arrays and objects of a parsed JSON value nest deeper than `limit`: {@link jsonDepth} of its text
 * above `limit`, counted on the value (recursion at most `limit + 1` deep).
 */
export const nestsDeeper = (value: unknown, limit: number): boolean => deeper(value, 1, limit)

/**
 * The key of a JSON object whose value nests too deep, for an error to name (`messages`, `input`): the first
 * of its keys whose value takes the object past `limit`; `null` when the value is not an object or is not too
 * deep.
 */
export const deepField = (value: unknown, limit: number): string | null => {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return null
  const record = value as Record<string, unknown>
  for (const key in record) if (deeper(record[key], 2, limit)) return key
  return null
}

const deeper = (u: unknown, depth: number, limit: number): boolean => {
  if (typeof u !== "object" || u === null) return false
  if (depth > limit) return true
  if (Array.isArray(u)) {
    for (let i = 0; i < u.length; i++) if (deeper(u[i], depth + 1, limit)) return true
    return false
  }
  const record = u as Record<string, unknown>
  for (const key in record) if (deeper(record[key], depth + 1, limit)) return true
  return false
}
