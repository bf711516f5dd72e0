/**
 * How large a request body a rollout takes: what its policy's context can hold. Apart from the surface
 * (`rolloutHttp.ts`), so that the public modules can say it without loading the HTTP platform.
 */

/**
 * The largest request body a rollout takes when its policy does not say its context, in bytes (4 MiB). A
 * request's text all becomes prompt tokens, so a body fits a context: 131,072 tokens at the worst JSON of a few
 * bytes each (escapes, keys) is about 1 MiB; the rest is room. A body beyond is refused (413) as soon as it is
 * larger, before it is parsed, so no agent's request can hold the event loop or the memory that a parse of tens
 * of megabytes takes.
 */
export const DEFAULT_MAX_BODY_SIZE = 4 * 1024 * 1024

/** The most bytes a token of a request takes, in the worst case: its text JSON-escaped, and its share of keys. */
export const BYTES_PER_TOKEN = 32

/** What a request body may hold beyond its context's tokens: tool schemas, settings, room (64 KiB). */
export const BODY_MARGIN = 64 * 1024

/**
 * The largest body a rollout of a policy takes: what its context can hold at the worst tokenisation
 * ({@link BYTES_PER_TOKEN} bytes a token) with a margin; {@link DEFAULT_MAX_BODY_SIZE} when its context is not known.
 */
export const bodyLimit = (policy: { readonly contextTokens?: number | undefined }): number =>
  policy.contextTokens === undefined ? DEFAULT_MAX_BODY_SIZE : policy.contextTokens * BYTES_PER_TOKEN + BODY_MARGIN
