/** The test run's global set-up: builds the dashboard's bundle (`dist/ui/`) from `ui/`, about 100 ms with esbuild. */
// @ts-expect-error: a plain ES module of the build, without types.
import { buildUi } from "../../scripts/build-ui.mjs"

export default async function setup(): Promise<void> {
  await (buildUi as () => Promise<void>)()
}
