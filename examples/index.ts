/**
 * The examples `effect-rl train <name>` knows, by name. Each is also runnable as a plain script
 * (`npx tsx examples/<name>.ts`).
 */
import type { Example } from "effect-rl"
import { example as arithmetic } from "./arithmetic.js"
import { example as judged } from "./judged.js"
import { example as minimal } from "./minimal.js"
import { example as sftThenRl } from "./sft-then-rl.js"
import { example as tictactoe } from "./tictactoe.js"
import { example as tools } from "./tools.js"

/** The examples by name. */
export const examples: Readonly<Record<string, Example.Example>> = {
  tictactoe,
  minimal,
  arithmetic,
  judged,
  "sft-then-rl": sftThenRl,
  tools
}
