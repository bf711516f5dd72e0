// Bundles the `effect-rl` command (the compiled dist/cli/main.js, the examples it trains and everything they import
// from node_modules) into dist/bin/: command.js and the chunks it loads on demand (the embedded backend, each
// command's own parts), and effect-rl.js, the bin, which starts it. A command line that names a module of the
// user's to load (`runner --agents <module>`, `--reward <module>`) starts the unbundled dist/cli/main.js instead:
// such a module imports `effect-rl` and `effect` from node_modules, and the command must share their copies with it
// (a bundle has its own). Run by `npm run build` after tsc. Why: the unbundled command loads about 700 modules before
// it reads its arguments, most of the time resolving and compiling `effect`'s files; `effect-rl --version` on this
// 2-core machine (`npm run bench:cli-start`, 10 pairs): 0.44-0.46 s bundled against 0.85-0.94 s unbundled.
//
// The bundle behaves as the files it was built from:
// - every module of this package keeps its own `import.meta.url` (the file's place under dist/, computed from the
//   chunk's), so what it finds beside itself (the shipped weights, the dashboard's files, better-sqlite3 through
//   `createRequire`) is found as before;
// - the worker threads that run a module of this package (training, decoding) start on an entry of the bundle for
//   that module (`thread-training.js`, `thread-decoding.js`), which loads the chunks holding it, as quickly as the
//   command itself starts (a thread loads its own copy of every module, on the core the command also starts on);
// - the examples' registry, which dist/cli/main.js imports by a computed URL (so that it runs from src/ too), is
//   imported by its path here, so the examples are in the bundle and share its one copy of this package and of
//   `effect`;
// - better-sqlite3 (a native addon) and what only tests or optional features load from elsewhere stay outside.
import { readFile, rm, writeFile } from "node:fs/promises"
import { relative } from "node:path"
import { fileURLToPath } from "node:url"
import { build } from "esbuild"

const root = fileURLToPath(new URL("..", import.meta.url))
const outdir = `${root}dist/bin`

/** The modules that start a thread on themselves, and the bundle entry each thread starts on instead. */
const THREADS = {
  "local/engine/policy/DecodeThread.js": "thread-decoding",
  "local/server/internal/trainingThread.js": "thread-training"
}
const THREAD_START = "startModuleThread(import.meta.url"

/** Stands for the chunk's own `import.meta.url` while the package module's own are rewritten (see below). */
const CHUNK_URL = "__effectRlChunkUrl__"

/** The registry import of dist/cli/main.js, and what it becomes in the bundle. */
const REGISTRY_IMPORT = "import(new URL(registry, import.meta.url).href)"
const REGISTRY_STATIC = 'import("../examples/index.js")'

/** The chunks' banner: `require` for bundled CommonJS, and each package module's own URL (see above). */
const BANNER = [
  'import { createRequire as __effectRlCreateRequire } from "node:module";',
  "const require = __effectRlCreateRequire(import.meta.url);",
  // Every output file is in dist/bin/: the package root is two levels up.
  'const __effectRlModuleUrl = (path) => new URL("../../" + path, import.meta.url).href;'
].join("\n")

/** Rewrites the package's own modules as described in the header. */
const packageModules = {
  name: "effect-rl-package-modules",
  setup(context) {
    const dist = `${root}dist/`
    context.onLoad({ filter: /\.js$/ }, async (args) => {
      if (!args.path.startsWith(dist) || args.path.startsWith(`${outdir}/`)) return undefined
      let text = await readFile(args.path, "utf8")
      if (args.path === `${dist}cli/main.js`) {
        if (!text.includes(REGISTRY_IMPORT)) {
          throw new Error(`build-bin: dist/cli/main.js no longer has \`${REGISTRY_IMPORT}\`: update this script`)
        }
        text = text.replace(REGISTRY_IMPORT, REGISTRY_STATIC)
      }
      const thread = THREADS[args.path.slice(dist.length)]
      if (thread !== undefined) {
        if (!text.includes(THREAD_START)) {
          throw new Error(`build-bin: ${args.path} no longer has \`${THREAD_START}\`: update this script`)
        }
        // The chunk's own URL (not rewritten below): every output file is in dist/bin/.
        text = text.replace(THREAD_START, `startModuleThread(new URL("./${thread}.js", ${CHUNK_URL}).href`)
      }
      const path = relative(root, args.path).split("\\").join("/")
      text = text
        .replaceAll("import.meta.url", `__effectRlModuleUrl(${JSON.stringify(path)})`)
        .replaceAll(CHUNK_URL, "import.meta.url")
      return { contents: text, loader: "js" }
    })
  }
}

/** Builds the bundle into `<root>/dist/bin/`, replacing what was there. */
export const buildBin = async () => {
  await rm(outdir, { recursive: true, force: true })
  await build({
    entryPoints: {
      command: `${root}dist/cli/main.js`,
      ...Object.fromEntries(Object.entries(THREADS).map(([module, entry]) => [entry, `${root}dist/${module}`]))
    },
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node20",
    outdir,
    chunkNames: "[name]-[hash]",
    external: ["better-sqlite3", "tsx", "tsx/*", "playwright-core", "puppeteer-core"],
    banner: { js: BANNER },
    plugins: [packageModules],
    // Not tsconfig.json's: its `paths` map `effect-rl` to src/ (for type-checking the examples), which would bundle
    // a second copy of the package, from its sources, for the examples' imports. Here they take package.json's
    // `exports` (dist/), as an installed package's examples do.
    tsconfigRaw: {},
    legalComments: "eof",
    logLevel: "warning"
  })
  await writeFile(`${outdir}/effect-rl.js`, LAUNCHER, { mode: 0o755 })
}

/** The flags that name a module of the user's for the command to import. */
export const MODULE_FLAGS = ["--agents", "--reward"]

/** The bin: the bundle, or the unbundled command when a module of the user's is to be loaded (see above). */
export const LAUNCHER = `#!/usr/bin/env node
// The effect-rl command (generated by scripts/build-bin.mjs): the bundle in this directory, or the unbundled
// dist/cli/main.js when the command line names a module of yours to load (${MODULE_FLAGS.join(", ")}), which must
// share this package's and effect's modules with the command.
const flags = ${JSON.stringify(MODULE_FLAGS)}
const loads = process.argv.slice(2).some((arg) => flags.some((flag) => arg === flag || arg.startsWith(flag + "=")))
await import(new URL(loads ? "../cli/main.js" : "./command.js", import.meta.url).href)
`

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildBin()
