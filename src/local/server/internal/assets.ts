/**
 * The dashboard's static files at `/ui/`: the bundle `npm run build` writes to `dist/ui/` (see
 * `scripts/build-ui.mjs`), found beside the server whether it runs from `src/` (tsx) or from `dist/` (the
 * installed package). They hold no data, so they are served without the key; the page asks for the key and
 * sends it to the `/v1/local/...` reads itself.
 *
 * Only the bundle's own file names are served (no path from the request reaches the file system), with a
 * content security policy that lets the page load nothing from another origin.
 */
import { readdir, readFile } from "node:fs/promises"
import { fileURLToPath } from "node:url"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import { UI_PATH } from "../DashboardApi.js"

/** The directory of the bundle: `dist/ui/`, from `src/local/server/internal/` or `dist/local/server/internal/`. */
export const assetsDir = fileURLToPath(
  new URL(import.meta.url.endsWith(".ts") ? "../../../../dist/ui/" : "../../../ui/", import.meta.url)
)

/** Whether a path is the dashboard's (`/ui` or under `/ui/`). */
export const isUiPath = (pathname: string): boolean => pathname === "/ui" || pathname.startsWith(UI_PATH)

const TYPES: Readonly<Record<string, string>> = {
  html: "text/html; charset=utf-8",
  js: "text/javascript; charset=utf-8",
  css: "text/css; charset=utf-8",
  map: "application/json",
  svg: "image/svg+xml",
  png: "image/png"
}

const HEADERS = {
  "cache-control": "no-cache",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "content-security-policy":
    "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'"
}

const text = (status: number, body: string) =>
  HttpServerResponse.text(body, { status, headers: { ...HEADERS, "content-type": "text/plain; charset=utf-8" } })

/** The names of the bundle's files (none when it is not built). */
const listing = Effect.promise(() => readdir(assetsDir).catch((): ReadonlyArray<string> => [])).pipe(
  Effect.map((names) => new Set(names.filter((name) => /^[\w.-]+$/.test(name))))
)

/** The answer to a request for the dashboard: a file of the bundle, `index.html` for `/ui/`, else a 404. */
export const serveAsset = (pathname: string, method: string): Effect.Effect<HttpServerResponse.HttpServerResponse> =>
  Effect.gen(function* () {
    if (method !== "GET" && method !== "HEAD") return text(405, "Method Not Allowed")
    if (pathname === "/ui") return HttpServerResponse.redirect(UI_PATH, { status: 301 })
    const name = pathname === UI_PATH ? "index.html" : pathname.slice(UI_PATH.length)
    const names = yield* listing
    if (names.size === 0) return text(503, "The dashboard is not built: run `npm run build` in the package.")
    if (!names.has(name)) return text(404, "Not Found")
    const body = yield* Effect.promise(() => readFile(`${assetsDir}${name}`))
    const type = TYPES[name.slice(name.lastIndexOf(".") + 1)] ?? "application/octet-stream"
    return HttpServerResponse.uint8Array(body, { headers: { ...HEADERS, "content-type": type } })
  })
