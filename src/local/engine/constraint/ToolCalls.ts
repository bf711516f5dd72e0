/**
 * The grammar of a completion that may call tools, in the format the chat template renders past calls in
 * (Qwen/Hermes style, one call per block, compact JSON, name first):
 *
 * ```text
 * <tool_call>\n{"name":"<name>","arguments":<arguments>}\n</tool_call>
 * ```
 *
 * - `required`: one or more calls (one with `parallel_tool_calls: false`), separated by `\n`; each call names
 *   one of the tools and its arguments fit that tool's `parameters` JSON schema (an object when it has none).
 * - a named tool: exactly one call of that tool.
 * - `auto`: text that never contains the opener `<tool_call>`, then, optionally, the calls (after a `\n` when
 *   there is text), as `required` has them. So the model chooses text or calls, and once it writes the
 *   opener, the rest is a valid call.
 * - `none` (or no tools): no grammar; the output is text, never parsed for calls.
 *
 * @since 0.2.0
 */
import type { ChatCompletionRequest } from "../../../api/ChatCompletion.js"
import type { JsonValue } from "../../../api/Json.js"
import { alt, list, literal, MAX_CODE_POINT, type Node, optional, repeat, seq, set } from "./Automaton.js"
import { compileJsonSchema } from "./JsonSchema.js"

/** What opens a call block. */
export const CALL_OPENER = "<tool_call>"

/** The text between a call's arguments and the end of its block. */
export const CALL_CLOSER = "}\n</tool_call>"

/** The text of a call block before its arguments. */
export const callHeader = (name: string): string => `${CALL_OPENER}\n{"name":${JSON.stringify(name)},"arguments":`

/** How a request uses its tools. */
export type ToolMode =
  | { readonly kind: "auto" }
  | { readonly kind: "required" }
  | { readonly kind: "named"; readonly name: string }

/**
 * How a request uses its tools, or null when it calls none (`tool_choice: "none"`, or no tools). With tools
 * and no `tool_choice`, the convention's engine defaults to `auto`.
 */
export const toolModeOf = (request: ChatCompletionRequest): ToolMode | null => {
  const tools = request.tools ?? []
  const choice = request.tool_choice ?? (tools.length > 0 ? "auto" : "none")
  if (choice === "none" || tools.length === 0) return null
  if (choice === "auto") return { kind: "auto" }
  if (choice === "required") return { kind: "required" }
  return { kind: "named", name: choice.function.name }
}

/** An error in a tool's `parameters` schema, with the index of the tool. */
export class ToolSchemaError extends Error {
  constructor(
    readonly index: number,
    readonly schemaError: unknown
  ) {
    super(schemaError instanceof Error ? schemaError.message : String(schemaError))
  }
}

/** One call of a tool: its header, its arguments as its schema allows, the closer. */
const callNode = (name: string, parameters: JsonValue, index: number): Node => {
  let args: Node
  try {
    args = compileJsonSchema(parameters)
  } catch (cause) {
    throw new ToolSchemaError(index, cause)
  }
  return seq(literal(callHeader(name)), args, literal(CALL_CLOSER))
}

/** Any text in which the opener `<tool_call>` does not occur (code points; so always whole UTF-8). */
const textWithoutOpener = (): Node => {
  const opener = CALL_OPENER
  const lt = opener.codePointAt(0)!
  // Items: a code point other than `<`; or a proper prefix of the opener followed by a code point that
  // neither continues it nor is `<`. A bare prefix may stand only before another item starting with `<`
  // (or at the end), so that prefixes never join into the opener.
  const other = set([0, lt - 1, lt + 1, MAX_CODE_POINT])
  const broken: Array<Node> = []
  const bare: Array<Node> = []
  for (let k = 1; k < opener.length; k++) {
    const prefix = opener.slice(0, k)
    const next = opener.codePointAt(k)!
    const ranges = [0, MAX_CODE_POINT]
    broken.push(seq(literal(prefix), set(subtract(ranges, [next, lt]))))
    bare.push(literal(prefix))
  }
  const prefixes = alt(...bare)
  const item = alt(other, seq(repeat(prefixes, 0, Number.POSITIVE_INFINITY), alt(...broken)))
  return seq(repeat(item, 0, Number.POSITIVE_INFINITY), repeat(prefixes, 0, Number.POSITIVE_INFINITY))
}

/** The ranges minus the given code points. */
const subtract = (ranges: ReadonlyArray<number>, points: ReadonlyArray<number>): Array<number> => {
  let out = [...ranges]
  for (const p of points) {
    const next: Array<number> = []
    for (let i = 0; i + 1 < out.length; i += 2) {
      const lo = out[i]!
      const hi = out[i + 1]!
      if (p < lo || p > hi) next.push(lo, hi)
      else {
        if (lo <= p - 1) next.push(lo, p - 1)
        if (p + 1 <= hi) next.push(p + 1, hi)
      }
    }
    out = next
  }
  return out
}

/**
 * The grammar of a request's output with its tools, or null when it calls none. Throws `ToolSchemaError`
 * for a tool whose `parameters` the JSON-schema compiler does not take.
 */
export const toolCallsNode = (request: ChatCompletionRequest, mode: ToolMode): Node => {
  const tools = request.tools ?? []
  const calls = tools.flatMap((tool, index) =>
    mode.kind === "named" && tool.function.name !== mode.name
      ? []
      : [callNode(tool.function.name, tool.function.parameters ?? { type: "object" }, index)]
  )
  const one = alt(...calls)
  if (mode.kind === "named") return one
  const several = request.parallel_tool_calls === false ? one : list(one, literal("\n"))
  if (mode.kind === "required") return several
  const text = textWithoutOpener()
  return alt(text, seq(optional(seq(text, literal("\n"))), several))
}
