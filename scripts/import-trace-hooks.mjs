// The loader hooks of ./import-trace.mjs: each module's URL, once, appended to IMPORT_TRACE_FILE as it loads.
import { appendFileSync } from "node:fs"

const file = process.env.IMPORT_TRACE_FILE
const seen = new Set()

export async function load(url, context, nextLoad) {
  if (file && !seen.has(url)) {
    seen.add(url)
    appendFileSync(file, `${url}\n`)
  }
  return nextLoad(url, context)
}
