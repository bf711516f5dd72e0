/**
 * The page's calls to the server: every read sends the key from the browser session as a bearer token
 * (never in a URL), and a 401 sends the reader back to the login form.
 */

const KEY = "effect-rl-api-key"

/** The key kept for this browser session (tab), if any. */
export const storedKey = (): string | null => sessionStorage.getItem(KEY)

/** Keeps the key for this browser session. */
export const storeKey = (key: string): void => sessionStorage.setItem(KEY, key)

/** Forgets the key. */
export const forgetKey = (): void => sessionStorage.removeItem(KEY)

/** A failed read: the status and the server's `detail`. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string
  ) {
    super(message)
  }
}

const headers = (): Record<string, string> => ({ authorization: `Bearer ${storedKey() ?? ""}` })

const failure = async (response: Response): Promise<ApiError> => {
  const body = (await response.json().catch(() => ({}))) as { detail?: unknown }
  const detail = typeof body.detail === "string" ? body.detail : response.statusText
  if (response.status === 401) window.dispatchEvent(new Event("effect-rl-unauthorized"))
  return new ApiError(response.status, detail)
}

/** GETs a JSON read of the server. */
export const get = async <A>(path: string, signal?: AbortSignal): Promise<A> => {
  const response = await fetch(path, { headers: headers(), ...(signal === undefined ? {} : { signal }) })
  if (!response.ok) throw await failure(response)
  return (await response.json()) as A
}

/** Whether a key opens the server's reads (for the login form). */
export const check = async (key: string): Promise<boolean> => {
  const response = await fetch("/v1/local/models", { headers: { authorization: `Bearer ${key}` } })
  return response.ok
}

/**
 * Follows a server-sent events endpoint with `fetch` (so the key goes in a header), calling `onEvent` with each
 * event's name and data; reconnects after a pause when the stream ends, until `signal` aborts.
 */
export const follow = (path: string, signal: AbortSignal, onEvent: (event: string, data: string) => void): void => {
  const run = async () => {
    while (!signal.aborted) {
      try {
        const response = await fetch(path, { headers: headers(), signal })
        if (!response.ok || response.body === null) throw await failure(response)
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
        let buffer = ""
        for (;;) {
          const { done, value } = await reader.read()
          if (done) break
          buffer += value
          let end = buffer.indexOf("\n\n")
          while (end >= 0) {
            const frame = buffer.slice(0, end)
            buffer = buffer.slice(end + 2)
            let event = "message"
            const data: Array<string> = []
            for (const line of frame.split("\n")) {
              if (line.startsWith("event:")) event = line.slice(6).trim()
              else if (line.startsWith("data:")) data.push(line.slice(5).trimStart())
            }
            if (data.length > 0) onEvent(event, data.join("\n"))
            end = buffer.indexOf("\n\n")
          }
        }
      } catch (error) {
        if (signal.aborted || (error instanceof ApiError && error.status < 500)) return
      }
      await new Promise((resolve) => setTimeout(resolve, 2000))
    }
  }
  void run()
}

/** Trades a one-time sign-in token for the key (no key sent); the server's reason when it refuses. */
export const signIn = async (token: string): Promise<string> => {
  const response = await fetch("/v1/local/sign-in", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ token }),
    cache: "no-store"
  })
  const body = (await response.json().catch(() => ({}))) as { api_key?: unknown; detail?: unknown }
  if (!response.ok || typeof body.api_key !== "string") {
    throw new ApiError(response.status, typeof body.detail === "string" ? body.detail : response.statusText)
  }
  return body.api_key
}
