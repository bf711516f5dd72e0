#!/usr/bin/env node
// Builds the local engine's WebAssembly kernels: wasm/kernels.as (AssemblyScript, 128-bit SIMD) compiled with the
// `assemblyscript` devDependency into src/local/engine/policy/wasm/kernels.wasm, and the same bytes as base64 in
// src/local/engine/policy/wasm/kernelsWasm.ts (what the engine loads: it works from src/ and dist/, on the main
// thread and the decoding thread, with nothing read from disk at run time), with the SHA-256 of the source they
// were built from. Both outputs are committed; `npm run build:wasm` rebuilds them after the source changes (a
// test compares the recorded source hash with the source). `--check` builds into memory and exits 1 when the
// committed outputs differ from a fresh build.
import { createHash } from "node:crypto"
import { readFileSync, writeFileSync } from "node:fs"
import { fileURLToPath, pathToFileURL } from "node:url"
import asc from "assemblyscript/asc"

const root = new URL("../", import.meta.url)
const source = fileURLToPath(new URL("wasm/kernels.as", root))
const wasmPath = fileURLToPath(new URL("src/local/engine/policy/wasm/kernels.wasm", root))
const tsPath = fileURLToPath(new URL("src/local/engine/policy/wasm/kernelsWasm.ts", root))

/** The compiler's flags: SIMD, the memory imported and shared, no runtime, no start, fully optimised. */
export const FLAGS = [
  "--enable",
  "simd,threads",
  "--importMemory",
  "--sharedMemory",
  "--initialMemory",
  "16",
  "--maximumMemory",
  "32768",
  "--runtime",
  "stub",
  "--noExportMemory",
  "--noAssert",
  "-O3",
  "--converge"
]

/** Compiles an AssemblyScript source of the kernels (its text) with {@link FLAGS}: the module's bytes. */
export const compileKernels = async (text) => {
  let binary
  const { error, stderr } = await asc.main(["kernels.ts", "--outFile", "kernels.wasm", ...FLAGS], {
    readFile: (name) => (name === "kernels.ts" ? text : null),
    writeFile: (name, contents) => {
      if (name.endsWith(".wasm")) binary = contents
    }
  })
  if (error) {
    process.stderr.write(stderr.toString())
    throw error
  }
  const module = new WebAssembly.Module(binary)
  const imports = WebAssembly.Module.imports(module)
  if (
    imports
      .map((i) => i.name)
      .sort()
      .join() !== "log,memory"
  ) {
    throw new Error(`kernels: unexpected imports ${JSON.stringify(imports)}`)
  }
  return binary
}

/** The generated module embedding `binary` (base64), with the hash of the source it was built from. */
const embedding = (binary, sourceHash) => {
  const lines =
    Buffer.from(binary)
      .toString("base64")
      .match(/.{1,116}/g) ?? []
  return `/**
 * The local engine's WebAssembly kernels, as built by \`npm run build:wasm\` (scripts/build-wasm.mjs) from
 * \`wasm/kernels.as\`: the bytes of \`kernels.wasm\` beside this file, in base64. Generated: do not edit.
 *
 * @since 0.1.0
 */

/** The SHA-256 of the AssemblyScript source these bytes were built from. */
export const KERNELS_SOURCE_SHA256 = "${sourceHash}"

/** The compiled module's bytes, base64. */
export const KERNELS_WASM_BASE64 =
${lines.map((l, i) => `  "${l}"${i + 1 < lines.length ? " +" : ""}`).join("\n")}
`
}

const main = async () => {
  const text = readFileSync(source, "utf8")
  // The source is named .as so that the TypeScript compiler and the linter leave it alone; asc reads it as .ts.
  const binary = await compileKernels(text)
  const ts = embedding(binary, createHash("sha256").update(text).digest("hex"))
  if (process.argv.includes("--check")) {
    const same =
      Buffer.compare(readFileSync(wasmPath), Buffer.from(binary)) === 0 && readFileSync(tsPath, "utf8") === ts
    console.log(
      same ? "kernels: the committed build is current" : "kernels: the committed build differs from a fresh one"
    )
    process.exit(same ? 0 : 1)
  }
  writeFileSync(wasmPath, binary)
  writeFileSync(tsPath, ts)
  console.log(`kernels: ${binary.length} bytes -> ${wasmPath}`)
}

// Imported (by `bench/kernels.ts`, for `compileKernels`), it builds nothing.
if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) await main()
