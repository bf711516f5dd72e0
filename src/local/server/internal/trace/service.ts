/**
 * The trace surface's service routes: `GET /health` answers `{"status": "ok"}` while the store answers a query
 * (503 `{"status": "unavailable"}` otherwise, so a probe sees a broken data directory), and `GET /server_info`
 * names this server: `trace_server_version` is `effect-rl <version>`, `min_required_weave_python_version` the
 * oldest Python SDK whose requests this server understands (the `0.51` line, the first to send calls through
 * `call/upsert_batch`).
 */
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import { version } from "../../../../internal/version.js"
import * as Database from "../../../store/Database.js"

/** The oldest weave Python SDK this server serves. */
export const MIN_WEAVE_PYTHON_VERSION = "0.51.0"

/** `GET /health` */
export const traceHealth = () =>
  Database.ping.pipe(
    Effect.timeout("2 seconds"),
    Effect.orElseSucceed(() => false),
    Effect.map((ok) =>
      ok
        ? HttpServerResponse.unsafeJson({ status: "ok" })
        : HttpServerResponse.unsafeJson({ status: "unavailable" }, { status: 503 })
    )
  )

/** `GET /server_info` */
export const serverInfo = () =>
  Effect.succeed({
    min_required_weave_python_version: MIN_WEAVE_PYTHON_VERSION,
    trace_server_version: `effect-rl ${version}`
  })
