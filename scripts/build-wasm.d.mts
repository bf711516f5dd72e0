/** The AssemblyScript compiler's flags the kernels are built with (SIMD, shared imported memory, no runtime). */
export declare const FLAGS: ReadonlyArray<string>
/** Compiles an AssemblyScript source of the kernels (its text) with `FLAGS`: the module's bytes. */
export declare const compileKernels: (text: string) => Promise<Uint8Array>
