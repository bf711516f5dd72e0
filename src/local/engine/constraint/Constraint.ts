/**
 * The constraint of a chat-completions request: `structured_outputs` (`choice`, `regex`, `json`,
 * `json_object`), `response_format` (`json_object`, `json_schema`) or its tools (`tool_choice` other than
 * `none`, see `ToolCalls.ts`), compiled to a `ByteAutomaton`. Fields
 * this engine cannot honour (`grammar`, `structural_tag`, `whitespace_pattern`, a `structural_tag` response
 * format, schema keywords or regex features outside the subsets) are `EngineError`s naming them. The
 * output is always compact: `disable_any_whitespace` and `disable_additional_properties` hold trivially.
 *
 * @since 0.1.0
 */
import type { ChatCompletionRequest } from "../../../api/ChatCompletion.js"
import type { JsonValue } from "../../../api/Json.js"
import { badRequest, EngineError, unsupported } from "../EngineError.js"
import { ByteAutomaton, literal, type Node, TooComplexError } from "./Automaton.js"
import { choiceNode } from "./Choice.js"
import { compileJsonSchema, jsonObjectNode, SchemaError } from "./JsonSchema.js"
import { parseRegex, RegexError } from "./Regex.js"
import { ToolSchemaError, toolCallsNode, toolModeOf } from "./ToolCalls.js"

interface Source {
  readonly param: string
  readonly build: () => Node
  /** What the node is built from, as a string, when that is all it depends on (the compiled automaton is shared). */
  readonly key?: string | undefined
}

const parseSchema = (schema: string | JsonValue, param: string): JsonValue => {
  if (typeof schema !== "string") return schema
  try {
    return JSON.parse(schema) as JsonValue
  } catch (cause) {
    throw badRequest(param, `${param} is not valid JSON: ${cause instanceof Error ? cause.message : String(cause)}`)
  }
}

const sourcesOf = (request: ChatCompletionRequest): Array<Source> => {
  const sources: Array<Source> = []
  const so = request.structured_outputs
  if (so != null) {
    if (so.grammar != null) throw unsupported("structured_outputs.grammar", "use regex, json or choice")
    if (so.structural_tag != null) throw unsupported("structured_outputs.structural_tag")
    if (so.whitespace_pattern != null) {
      throw unsupported("structured_outputs.whitespace_pattern", "outputs are always written without whitespace")
    }
    if (so.choice != null) {
      const choices = so.choice
      if (choices.length === 0) throw badRequest("structured_outputs.choice", "structured_outputs.choice is empty")
      sources.push({
        param: "structured_outputs.choice",
        build: () => choiceNode(choices),
        key: JSON.stringify(choices)
      })
    }
    if (so.regex != null) {
      const regex = so.regex
      sources.push({ param: "structured_outputs.regex", build: () => parseRegex(regex), key: regex })
    }
    if (so.json != null) {
      const schema = parseSchema(so.json, "structured_outputs.json")
      sources.push({
        param: "structured_outputs.json",
        build: () => compileJsonSchema(schema),
        key: JSON.stringify(schema)
      })
    }
    if (so.json_object === true) sources.push({ param: "structured_outputs.json_object", build: jsonObjectNode })
  }
  const rf = request.response_format
  if (rf != null) {
    if (rf.type === "structural_tag") throw unsupported("response_format", "the structural_tag response format")
    if (rf.type === "json_object") sources.push({ param: "response_format", build: jsonObjectNode })
    if (rf.type === "json_schema") {
      const spec = "json_schema" in rf ? rf.json_schema : undefined
      if (spec == null) throw badRequest("response_format", "response_format of type json_schema needs json_schema")
      const schema: JsonValue = spec.schema ?? {}
      sources.push({
        param: "response_format.json_schema.schema",
        build: () => compileJsonSchema(schema),
        key: JSON.stringify(schema)
      })
    }
  }
  const mode = toolModeOf(request)
  if (mode !== null) sources.push({ param: "tool_choice", build: () => toolCallsNode(request, mode) })
  return sources
}

/** A request's compiled constraint and the request field it came from. */
export interface RequestConstraint {
  /** The compiled constraint. */
  readonly automaton: ByteAutomaton
  /** The request field that set it (`response_format`, `structured_outputs.regex`, ...), for messages. */
  readonly param: string
}

/**
 * The compiled constraint of a request and the field that set it, or null when its output is free. Throws
 * `EngineError`.
 */
export const compileConstraint = (request: ChatCompletionRequest): RequestConstraint | null => {
  const sources = sourcesOf(request)
  if (sources.length === 0) return null
  if (sources.length > 1) {
    throw badRequest(
      sources[1]!.param,
      `Only one kind of structured output may be requested, got ${sources.map((s) => s.param).join(" and ")}`
    )
  }
  const source = sources[0]!
  const key = source.key === undefined ? undefined : `${source.param}\u0000${source.key}`
  const cached = key === undefined ? undefined : compiled.get(key)
  if (cached !== undefined) {
    compiled.delete(key!)
    // One whose DFA grew large (outputs of many requests reach states that one request's would not) starts afresh.
    if (cached.automaton.states <= KEPT_STATES) {
      compiled.set(key!, cached)
      return cached
    }
  }
  let automaton: ByteAutomaton
  try {
    automaton = new ByteAutomaton(source.build())
  } catch (cause) {
    if (cause instanceof ToolSchemaError) {
      const param = `tools[${cause.index}].function.parameters`
      const inner = cause.schemaError
      throw new EngineError({
        kind: inner instanceof SchemaError && inner.unsupported ? "Unsupported" : "BadRequest",
        param,
        message: `${param}: ${cause.message}`
      })
    }
    if (cause instanceof RegexError || cause instanceof SchemaError) {
      throw new EngineError({
        kind: cause.unsupported ? "Unsupported" : "BadRequest",
        param: source.param,
        message: `${source.param}: ${cause.message}`
      })
    }
    if (cause instanceof TooComplexError) throw badRequest(source.param, `${source.param}: ${cause.message}`)
    throw cause
  }
  if (automaton.minLength === Number.POSITIVE_INFINITY) {
    throw badRequest(source.param, `${source.param}: no output can satisfy the constraint`)
  }
  const result = { automaton, param: source.param }
  if (key !== undefined) {
    compiled.set(key, result)
    if (compiled.size > COMPILED_CONSTRAINTS) compiled.delete(compiled.keys().next().value!)
  }
  return result
}

/** How many compiled constraints are kept for requests that ask for them again (least recently asked go first). */
const COMPILED_CONSTRAINTS = 64

/**
 * The most DFA states a kept constraint may have built (2.6 KB each, measured growing `[ab]*a[ab]{11}` to 2,064:
 * its transitions and byte costs; so about 5 MB for one at the bound); past them it is compiled afresh. A
 * tic-tac-toe move's has two.
 */
const KEPT_STATES = 2_048

/**
 * Compiled constraints by what they were built from: an agent asks for the same few again and again (a game's free
 * cells, one answer schema), and compiling was most of the constraint's cost (`npm start`: 20 KB and 40-50 us a
 * request). An automaton is shared safely: it determinises itself lazily, the same states whoever asks, and
 * each output runs its own `Matcher` over it. Tool calls are not kept: their node depends on several fields.
 */
const compiled = new Map<string, RequestConstraint>()

/** The compiled constraint of a request, or null when its output is free. Throws `EngineError`. */
export const constraintOf = (request: ChatCompletionRequest): ByteAutomaton | null =>
  compileConstraint(request)?.automaton ?? null

/** A constraint of a fixed set of strings (the same as `structured_outputs.choice`). */
export const choiceConstraint = (choices: ReadonlyArray<string>): ByteAutomaton =>
  new ByteAutomaton(choices.length === 1 ? literal(choices[0]!) : choiceNode(choices))
