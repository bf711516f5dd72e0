// Preload (`node --import ./scripts/import-trace.mjs`) that records every module the process loads: the
// ESM loader's resolved URL of each, one per line, appended to the file named by IMPORT_TRACE_FILE (the
// hooks run on the loader's own thread, so a file is how they report). Used by bench/import.ts and by the
// test that the package root loads nothing of the embedded backend.
import { register } from "node:module"

if (process.env.IMPORT_TRACE_FILE) register("./import-trace-hooks.mjs", import.meta.url)
