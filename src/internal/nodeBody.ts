/**
 * Reading a Node request's body with a limit, for the servers that refuse a body past it at once (the embedded
 * backend's chunked bodies, a rollout's endpoint on the gateway).
 *
 * @internal
 */

/** The part of a Node `IncomingMessage` read here. */
export interface NodeBody {
  readonly on: (event: string, listener: (...args: Array<never>) => void) => unknown
  readonly off: (event: string, listener: (...args: Array<never>) => void) => unknown
  readonly resume: () => unknown
  readonly readableEnded: boolean
}

/** Whether a request's source is a Node body (the platform's Node server gives its `IncomingMessage`). */
export const isNodeBody = (source: unknown): source is NodeBody =>
  typeof source === "object" && source !== null && "resume" in source && "readableEnded" in source

/**
 * Reads `source` to its end: its chunks, or `undefined` as soon as they are more than `limit` bytes (what came is
 * dropped). Past the limit the rest is drained unread, its bytes discarded as they come, so the caller's 413 goes
 * out at once and the client reads it: a socket closed (or destroyed) on unread bytes is reset, and a client still
 * writing would fail before it saw the answer. Calls `done` once; returns how to stop listening (an interruption).
 */
export const readNodeBody = (
  source: NodeBody,
  limit: number,
  done: (result: { readonly chunks: ReadonlyArray<Uint8Array> | undefined } | { readonly error: unknown }) => void
): (() => void) => {
  if (source.readableEnded) {
    done({ chunks: [] })
    return () => undefined
  }
  const chunks: Array<Uint8Array> = []
  let size = 0
  const cleanup = () => {
    source.off("data", onData)
    source.off("end", onEnd)
    source.off("error", onError)
  }
  const onData = (chunk: Uint8Array) => {
    size += chunk.length
    if (size <= limit) return void chunks.push(chunk)
    cleanup()
    // Flowing with no reader: the rest is discarded as it arrives.
    source.resume()
    done({ chunks: undefined })
  }
  const onEnd = () => {
    cleanup()
    done({ chunks })
  }
  const onError = (error: unknown) => {
    cleanup()
    done({ error })
  }
  source.on("data", onData)
  source.on("end", onEnd)
  source.on("error", onError)
  return cleanup
}
