import { createHash } from "node:crypto"

/** The SHA-256 digest (hex) of a checkpoint's weights, written with them and checked when they are loaded. */
export const weightsDigest = (weights: Uint8Array): string => createHash("sha256").update(weights).digest("hex")
