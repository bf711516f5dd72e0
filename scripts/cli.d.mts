/** The compiled bin (`dist/bin/effect-rl.js`, the bundle of `dist/cli/main.js`). */
export declare const compiledCli: string
/** The bin's source (`src/cli/main.ts`). */
export declare const sourceCli: string
/** Whether `dist/` was built after the last change to `src/` and `examples/`. */
export declare const compiledIsFresh: () => boolean
