/** Builds the bundled `effect-rl` command into `dist/bin/` (see scripts/build-bin.mjs). */
export declare const buildBin: () => Promise<void>
