// Bundles the dashboard (ui/) into dist/ui/: app.js and app.css by esbuild (Preact, htm and uPlot inlined, so
// the page loads nothing from elsewhere), and index.html and the icon copied. Run by `npm run build`, and by the tests'
// global set-up so that they never read a stale bundle.
import { copyFile, mkdir } from "node:fs/promises"
import { fileURLToPath } from "node:url"
import { build } from "esbuild"

const root = fileURLToPath(new URL("..", import.meta.url))

/** Builds the bundle into `<root>/dist/ui/`. */
export const buildUi = async () => {
  const outdir = `${root}dist/ui`
  await mkdir(outdir, { recursive: true })
  await build({
    entryPoints: { app: `${root}ui/main.ts` },
    bundle: true,
    format: "esm",
    target: "es2022",
    minify: true,
    sourcemap: false,
    legalComments: "eof",
    outdir,
    logLevel: "warning"
  })
  for (const file of ["index.html", "favicon.svg"]) await copyFile(`${root}ui/${file}`, `${outdir}/${file}`)
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildUi()
