/**
 * The examples `effect-rl train <name>` knows, by name. Each is also runnable as a plain script
 * (`npx tsx examples/<name>.ts`).
 */
import type { Example } from "effect-rl"
import { example as tictactoe } from "./tictactoe.js"

/** The examples by name. */
export const examples: Readonly<Record<string, Example.Example>> = {
  tictactoe
}
