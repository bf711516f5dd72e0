/**
 * Real clients pointed at a test server.
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as InferenceClient from "../../src/client/InferenceClient.js"
import { makeTransport } from "../../src/client/internal/http.js"
import * as TrainingClient from "../../src/client/TrainingClient.js"

/** The API key the tests use; a test asserts it never shows in an error. */
export const API_KEY = "sk-test-secret-0123456789"

/** The platform HTTP client (undici), alive for the test's scope. */
const httpClient = Layer.build(NodeHttpClient.layerUndici)

/** A training client against `baseUrl`, over the undici-based Node client, for the life of the scope. */
export const training = (baseUrl: string, options: Partial<TrainingClient.Options> = {}) =>
  Effect.flatMap(httpClient, (context) =>
    TrainingClient.make({ apiKey: Redacted.make(API_KEY), ...options, baseUrl }).pipe(Effect.provide(context))
  )

/** An inference client against `baseUrl`, for the life of the scope. */
export const inference = (baseUrl: string, options: Partial<InferenceClient.Options> = {}) =>
  Effect.flatMap(httpClient, (context) =>
    InferenceClient.make({ apiKey: Redacted.make(API_KEY), ...options, baseUrl }).pipe(Effect.provide(context))
  )

/** The raw client pipeline against `baseUrl`, for calling endpoint definitions directly. */
export const transport = (baseUrl: string) =>
  Effect.map(httpClient, (context) =>
    makeTransport(Context.get(context, HttpClient.HttpClient), { apiKey: Redacted.make(API_KEY), baseUrl })
  )
