/**
 * The JSON error bodies of the embedded backend: FastAPI's `{detail}` on the training surface, and the
 * OpenAI-style `{error: {message, type, param, code}}` on the inference surface (`/v1/chat/...`, `/v1/models`,
 * `/v1/responses`).
 */
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import type { ValidationError } from "../../../api/HttpValidationError.js"

/** Whether a path belongs to the OpenAI-compatible surface, whose errors take the OpenAI shape. */
export const isOpenAiPath = (pathname: string): boolean =>
  pathname.startsWith("/v1/chat/") ||
  pathname === "/v1/models" ||
  pathname.startsWith("/v1/models/") ||
  pathname === "/v1/responses" ||
  pathname.startsWith("/v1/responses/")

/**
 * `{detail: "<message>"}` with a status. A 409 here is final (a taken name, a reused idempotency key), not a
 * transient lock: it says `x-should-retry: false`, so clients that retry 409s by convention don't.
 */
export const detail = (status: number, message: string): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.unsafeJson(
    { detail: message },
    status === 409 ? { status, headers: { "x-should-retry": "false" } } : { status }
  )

/** `{error: {message, type, param, code: status}}` with a status. */
export const openAi = (
  status: number,
  type: string,
  message: string,
  param: string | null = null
): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.unsafeJson({ error: { message, type, param, code: status } }, { status })

/** The 422 validation body: `{detail: [{loc, msg, type}]}`. */
export const invalid = (details: ReadonlyArray<ValidationError>): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.unsafeJson({ detail: details }, { status: 422 })

/** 500 without any detail of the cause (which is logged server-side). */
export const internalError = (): HttpServerResponse.HttpServerResponse => detail(500, "Internal Server Error")
