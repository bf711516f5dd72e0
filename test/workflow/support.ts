/**
 * The real embedded backend for the workflow tests, with both real clients pointed at it: the package's own
 * `Backend.local` (the layer users run), with the test key.
 */
import * as Redacted from "effect/Redacted"
import * as Backend from "../../src/Backend.js"
import { API_KEY } from "../support/clients.js"

/** The real embedded backend and both real clients against it. */
export const WorkflowBackend = Backend.local({ apiKey: Redacted.make(API_KEY) })

/** The base model the embedded backend serves. */
export const TINY = "effect-rl/tiny"
