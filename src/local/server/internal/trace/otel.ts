/**
 * The OpenTelemetry export of the trace surface (`POST /otel/v1/traces` and `/otel/v1/trace`): an OTLP
 * `ExportTraceServiceRequest` as protobuf or JSON (read by `otlp.ts`), every span stored as a call through the
 * store's `TraceCalls` (a start and an end), as the service converts spans.
 *
 * - Project: the resource attributes `wandb.entity` and `wandb.project` of a resource's spans, else the
 *   request's `project_id` header (`entity/project`). No project for any span is 400 `{reason}`; a malformed
 *   `project_id` header is 400; spans of a resource without a project while others have one are rejected.
 * - A call per span: `id` the span id (16 hex), `trace_id` the trace id (32 hex), `parent_id` the parent span
 *   id, `op_name` the span name, `started_at`/`ended_at` from the nanosecond times (ISO, to the microsecond),
 *   `exception` the status message when the status is an error.
 * - Attributes are expanded as the service expands them: dotted keys nest (`a.b` = 1 → `{a: {b: 1}}`), string
 *   values that start with `[` or `{` and parse as JSON are parsed; a key that is both a value and a parent of
 *   others rejects the span. From the expanded attributes, the first present (truthy) of the service's
 *   conventional keys fill:
 *   - `inputs` (`ai.prompt`, `gen_ai.prompt`, `input.value`, ... `input`, `inputs`) as `{<key>: value}`, and
 *     `output` (`ai.response`, `gen_ai.completion`, `output.value`, ... `output`, `outputs`) likewise, `{}`
 *     without one; a lone `input(s)` object or `output(s)` value is unwrapped;
 *   - `attributes`: `system`, `kind`, `model`, `provider`, `model_parameters`, `agent`, `tools`, `operation`
 *     from their conventional keys, with the object `wandb.attributes` merged in; when no conventional input,
 *     output, attribute or usage key is present, all the expanded attributes instead;
 *   - `summary.usage[<model or "usage">]`: `input_tokens`, `output_tokens`, `prompt_tokens`,
 *     `completion_tokens`, `total_tokens` from `gen_ai.usage.*`, `llm.token_count.*` and the like (integers
 *     parsed, others left out; `total_tokens` summed when absent); no `usage` at all without any;
 *   - `display_name` from `wandb.display_name`, `thread_id` from `wandb.thread_id` (`turn_id` = the span id
 *     with a truthy `wandb.is_turn`), `wb_run_id` = `<project>:<wandb.wb_run_id>`, `wb_run_step(_end)` from
 *     `wandb.wb_run_step(_end)`.
 * - Rejected spans (bad or missing ids, times out of range, conflicting attribute keys, no project) are
 *   counted in `partial_success` with the service's messages; the other spans are stored, in one transaction.
 *   An undecodable body, or one that is neither protobuf nor JSON (`text/plain`, forms), is 400 `{reason}`;
 *   an empty request is `{}`.
 * - Not done: the service's op objects for span names (`op_name` stays the span name), its `otel_dump`, the
 *   Langfuse time overrides, name shortening, and the `wb_run_id` header.
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { JsonObject, JsonValue } from "../../../../api/Json.js"
import type { OtelExportRes } from "../../../../api/TraceMisc.js"
import * as TraceCalls from "../../../store/TraceCalls.js"
import { invalid, isProjectId } from "./ids.js"
import * as Otlp from "./otlp.js"

// ---------------------------------------------------------------------------------------------------------------
// Attributes, as the service expands and reads them
// ---------------------------------------------------------------------------------------------------------------

type Mutable = { [key: string]: JsonValue }

/** A span the service would not convert; the message says why. */
class Rejected extends Error {}

const isDict = (value: JsonValue | undefined): value is JsonObject =>
  value !== null && value !== undefined && typeof value === "object" && !Array.isArray(value)

const isMapping = (value: JsonValue | undefined) => value !== null && value !== undefined && typeof value === "object"

const own = (obj: JsonObject, key: string): JsonValue | undefined => (Object.hasOwn(obj, key) ? obj[key] : undefined)

/** Sets an own key (never a prototype, whatever the key). */
const setOwn = (obj: Mutable, key: string, value: JsonValue) => {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true })
}

/** Python's truthiness of a JSON value. */
const truthy = (value: JsonValue | undefined): boolean => {
  if (value === null || value === undefined || value === false || value === 0 || value === "") return false
  if (Array.isArray(value)) return value.length > 0
  if (typeof value === "object") return Object.keys(value).length > 0
  return true
}

/** A string that looks like JSON (`[` or `{` first) is parsed; one that does not parse stays as it is. */
const loaded = (value: JsonValue): JsonValue => {
  if (typeof value !== "string" || !(value.startsWith("[") || value.startsWith("{"))) return value
  try {
    return JSON.parse(value) as JsonValue
  } catch {
    return value
  }
}

const conflict = (key: string, kind: string) =>
  new Rejected(
    `Invalid attribute structure: received both nested subkeys for '${key}' and a non-object value for the same ` +
      `key (already a ${kind}). Attributes must form a valid tree structure.`
  )

const kindOf = (value: JsonValue) => (Array.isArray(value) ? "list" : isDict(value) ? "dict" : typeof value)

/** Dotted keys nested into objects, checked as the service checks them. */
const expand = (attributes: ReadonlyArray<Otlp.OtlpAttribute>): JsonObject => {
  const root: Mutable = {}
  for (const attribute of attributes) {
    const value = loaded(attribute.value)
    const parts = attribute.key.split(".")
    let current: Mutable = root
    for (const [i, part] of parts.slice(0, -1).entries()) {
      const existing = own(current, part)
      if (existing === undefined) {
        const child: Mutable = {}
        setOwn(current, part, child)
        current = child
      } else if (isDict(existing)) {
        current = existing as Mutable
      } else {
        throw new Rejected(
          `Invalid attribute structure: cannot set subkey '${parts[i + 1]}' under parent key ` +
            `'${parts.slice(0, i + 1).join(".")}' because it is already a ${kindOf(existing)}. ` +
            "Attributes must form a valid tree structure."
        )
      }
    }
    const leaf = parts[parts.length - 1] ?? ""
    const existing = own(current, leaf)
    if (existing !== undefined && isMapping(existing) && !isMapping(value)) {
      throw conflict(attribute.key, kindOf(existing))
    }
    setOwn(current, leaf, value)
  }
  return root
}

/** A value by a dotted key: the key itself first, then the path through objects (and list indexes). */
const lookup = (attributes: JsonObject, key: string): JsonValue | undefined => {
  const direct = own(attributes, key)
  if (direct !== undefined) return direct
  let current: JsonValue | undefined = attributes
  for (const part of key.split(".")) {
    if (isDict(current) && Object.hasOwn(current, part)) current = current[part]
    else if (Array.isArray(current) && /^\d+$/.test(part)) current = (current as ReadonlyArray<JsonValue>)[Number(part)]
    else return undefined
  }
  return current
}

/** Python's `int(value)` where it succeeds, else the value. */
const tryInt = (value: JsonValue): JsonValue => {
  if (typeof value === "boolean") return value ? 1 : 0
  if (typeof value === "number") return Number.isFinite(value) ? Math.trunc(value) : value
  if (typeof value === "string" && /^\s*[+-]?\d+\s*$/.test(value)) return Number.parseInt(value, 10)
  return value
}

/** Objects whose keys are exactly `0..n-1` become lists, inside out (as the service converts its values). */
const numericToLists = (value: JsonValue): JsonValue => {
  if (!isDict(value)) return value
  const converted: Mutable = {}
  for (const [key, child] of Object.entries(value)) setOwn(converted, key, numericToLists(child))
  const keys = Object.keys(converted)
  const indexes = keys.map(Number).sort((a, b) => a - b)
  const isList = keys.every((key) => /^\d+$/.test(key)) && indexes.every((index, i) => index === i)
  return isList ? indexes.map((index) => converted[String(index)] ?? null) : converted
}

type Handler = (value: JsonValue) => JsonValue
type Source = string | readonly [string, Handler]

const sourceKey = (source: Source) => (typeof source === "string" ? source : source[0])

const firstOf = (attributes: JsonObject, sources: ReadonlyArray<Source>) => {
  for (const source of sources) {
    const value = lookup(attributes, sourceKey(source))
    if (truthy(value) && value !== undefined) {
      return { key: sourceKey(source), value: typeof source === "string" ? value : source[1](value) }
    }
  }
  return undefined
}

/** The first present key of a list, as `{<key>: value}`. */
const fromList = (attributes: JsonObject, sources: ReadonlyArray<Source>): Mutable => {
  const found = firstOf(attributes, sources)
  const result: Mutable = {}
  if (found !== undefined) setOwn(result, found.key, numericToLists(found.value))
  return result
}

/** For each name, the first present of its keys, as `{<name>: value}`. */
const fromMap = (attributes: JsonObject, map: { readonly [name: string]: ReadonlyArray<Source> }): Mutable => {
  const result: Mutable = {}
  for (const [name, sources] of Object.entries(map)) {
    const found = firstOf(attributes, sources)
    if (found !== undefined) setOwn(result, name, numericToLists(found.value))
  }
  return result
}

const INPUT_KEYS: ReadonlyArray<Source> = [
  "ai.prompt",
  "gen_ai.prompt",
  "input.value",
  "mlflow.spanInputs",
  "gen_ai.input.messages",
  "pydantic_ai.all_messages",
  "traceloop.entity.input",
  "gcp.vertex.agent.tool_call_args",
  "gcp.vertex.agent.llm_request",
  "events.gen_ai.user.message",
  "input",
  "inputs"
]

const OUTPUT_KEYS: ReadonlyArray<Source> = [
  "ai.response",
  "gen_ai.completion",
  "output.value",
  "gen_ai.output.messages",
  "mlflow.spanOutputs",
  "final_result",
  "gen_ai.content.completion",
  "traceloop.entity.output",
  "gcp.vertex.agent.tool_response",
  "gcp.vertex.agent.llm_response",
  "events.gen_ai.choice",
  "output",
  "outputs"
]

const USAGE_KEYS: { readonly [name: string]: ReadonlyArray<Source> } = {
  input_tokens: [["gen_ai.usage.input_tokens", tryInt]],
  prompt_tokens: [
    ["gen_ai.usage.prompt_tokens", tryInt],
    ["llm.token_count.prompt", tryInt],
    ["ai.usage.promptTokens", tryInt]
  ],
  completion_tokens: [
    ["gen_ai.usage.completion_tokens", tryInt],
    ["llm.token_count.completion", tryInt],
    ["ai.usage.completionTokens", tryInt]
  ],
  output_tokens: [["gen_ai.usage.output_tokens", tryInt]],
  total_tokens: [
    ["llm.usage.total_tokens", tryInt],
    ["llm.token_count.total", tryInt]
  ]
}

const ATTRIBUTE_KEYS: { readonly [name: string]: ReadonlyArray<Source> } = {
  system: ["gen_ai.system", "llm.system", "gen_ai.system_instructions", "system_prompt"],
  kind: ["weave.span.kind", "traceloop.span.kind", "openinference.span.kind"],
  model: ["gen_ai.response.model", "gen_ai.request.model", "llm.model_name", "ai.model.id"],
  provider: ["llm.provider", "ai.model.provider"],
  model_parameters: ["gen_ai.request", "llm.invocation_parameters"],
  agent: ["gen_ai.agent.name"],
  tools: ["gen_ai.agent.tools"],
  operation: ["gen_ai.operation.name"]
}

const WANDB_KEYS: { readonly [name: string]: ReadonlyArray<Source> } = {
  display_name: ["wandb.display_name"],
  thread_id: ["gcp.vertex.agent.session_id", "wandb.thread_id"],
  attributes: ["wandb.attributes"],
  wb_run_id: ["wandb.wb_run_id"],
  wb_run_step: ["wandb.wb_run_step"],
  wb_run_step_end: ["wandb.wb_run_step_end"],
  is_turn: ["gcp.vertex.agent.session_id", "wandb.is_turn"]
}

/** Token counts; a count that is not an integer after parsing is left out (the usage record holds integers). */
const usageOf = (attributes: JsonObject): Mutable => {
  const usage: Mutable = {}
  for (const [name, value] of Object.entries(fromMap(attributes, USAGE_KEYS))) {
    if (Number.isSafeInteger(value)) setOwn(usage, name, value)
  }
  const sum = (a: string, b: string) => {
    const x = usage[a]
    const y = usage[b]
    if (usage.total_tokens === undefined && Number.isInteger(x) && Number.isInteger(y)) {
      setOwn(usage, "total_tokens", (x as number) + (y as number))
    }
  }
  sum("prompt_tokens", "completion_tokens")
  sum("input_tokens", "output_tokens")
  return usage
}

/** A lone `input`/`inputs` object becomes the inputs; a lone `output`/`outputs` value the output. */
const unwrapInputs = (inputs: Mutable): JsonObject => {
  if (Object.keys(inputs).length !== 1) return inputs
  const nested = truthy(inputs.inputs) ? inputs.inputs : inputs.input
  return isDict(nested) ? nested : inputs
}

const unwrapOutput = (output: Mutable): JsonValue => {
  if (Object.keys(output).length !== 1) return output
  const nested = truthy(output.outputs) ? output.outputs : output.output
  return nested === undefined || nested === null ? output : nested
}

const hasContent = (value: JsonValue): boolean =>
  typeof value === "number" || typeof value === "boolean"
    ? true
    : typeof value === "string" || Array.isArray(value)
      ? value.length > 0
      : isDict(value) && Object.keys(value).length > 0

// ---------------------------------------------------------------------------------------------------------------
// Spans to calls
// ---------------------------------------------------------------------------------------------------------------

const TRACE_ID = /^[0-9a-f]{32}$/
const SPAN_ID = /^[0-9a-f]{16}$/
const isZero = (hex: string) => /^0+$/.test(hex)
/** 9999-12-31T23:59:59.999999Z in nanoseconds: the last instant an ISO timestamp here can hold. */
const MAX_NANOS = 253402300799999999999n

/** A time in Unix nanoseconds as ISO 8601 in UTC to the microsecond, with its ordering key (microseconds). */
const instantOf = (what: string, nanos: bigint) => {
  if (nanos < 0n || nanos > MAX_NANOS) throw new Rejected(`${what} is out of range: ${nanos}`)
  const micros = nanos / 1000n
  const seconds = new Date(Number(micros / 1_000_000n) * 1000).toISOString().slice(0, 19)
  return { iso: `${seconds}.${(micros % 1_000_000n).toString().padStart(6, "0")}Z`, micros: Number(micros) }
}

const stringOrNull = (value: JsonValue | undefined): string | null =>
  typeof value === "string" && value.length > 0 ? value : null

const integerOrNull = (value: JsonValue | undefined): number | null =>
  typeof value === "number" && Number.isSafeInteger(value) ? value : null

/** A span's start and end, or `Rejected`. */
const toCall = (projectId: string, span: Otlp.OtlpSpan): ReadonlyArray<TraceCalls.BatchItem> => {
  if (!TRACE_ID.test(span.traceId) || isZero(span.traceId)) {
    throw new Rejected("trace_id must be 16 bytes (32 hex digits), not all zero")
  }
  if (!SPAN_ID.test(span.spanId) || isZero(span.spanId)) {
    throw new Rejected("span_id must be 8 bytes (16 hex digits), not all zero")
  }
  if (span.parentSpanId !== "" && !SPAN_ID.test(span.parentSpanId)) {
    throw new Rejected("parent_span_id must be empty or 8 bytes (16 hex digits)")
  }
  const started = instantOf("start_time_unix_nano", span.startTimeUnixNano)
  const ended = instantOf("end_time_unix_nano", span.endTimeUnixNano)
  const expanded = expand(span.attributes)

  const usage = usageOf(expanded)
  const inputs = unwrapInputs(fromList(expanded, INPUT_KEYS))
  const output = unwrapOutput(fromList(expanded, OUTPUT_KEYS))
  const conventional = fromMap(expanded, ATTRIBUTE_KEYS)
  const wandb = fromMap(expanded, WANDB_KEYS)
  const hasAttributes = Object.keys(conventional).length > 0
  const custom = wandb.attributes
  if (isDict(custom)) for (const [key, value] of Object.entries(custom)) setOwn(conventional, key, value)
  const attributes: JsonObject =
    !hasAttributes && Object.keys(inputs).length === 0 && !hasContent(output) && Object.keys(usage).length === 0
      ? expanded
      : conventional

  const parameters = conventional.model_parameters
  const model = stringOrNull(conventional.model) ?? (isDict(parameters) ? stringOrNull(parameters.model) : null)
  const summary: JsonObject = Object.keys(usage).length > 0 ? { usage: { [model ?? "usage"]: usage } } : {}
  const threadId = stringOrNull(wandb.thread_id)
  const runId = stringOrNull(wandb.wb_run_id)

  const start: TraceCalls.CallStart = {
    project_id: projectId,
    id: span.spanId,
    trace_id: span.traceId,
    parent_id: span.parentSpanId === "" ? null : span.parentSpanId,
    op_name: span.name,
    display_name: stringOrNull(wandb.display_name),
    thread_id: threadId,
    turn_id: threadId !== null && truthy(wandb.is_turn) ? span.spanId : null,
    started_at: started.iso,
    started_key: started.micros,
    attributes,
    inputs,
    wb_user_id: null,
    wb_run_id: runId !== null && !/[/:]/.test(runId) ? `${projectId}:${runId}` : null,
    wb_run_step: integerOrNull(wandb.wb_run_step)
  }
  const end: TraceCalls.CallEnd = {
    project_id: projectId,
    id: span.spanId,
    ended_at: ended.iso,
    output: Option.some(output),
    summary,
    exception: span.status.code === 2 ? span.status.message : null,
    wb_run_step_end: integerOrNull(wandb.wb_run_step_end)
  }
  return [
    { mode: "start", start },
    { mode: "end", end }
  ]
}

const MISSING_PROJECT =
  'Missing project: send the "project_id" header ("entity/project") or the resource attributes ' +
  '"wandb.entity" and "wandb.project"'

const resourceString = (resource: Otlp.OtlpResourceSpans["resource"], key: string): string | undefined => {
  const found = resource.attributes.find((attribute) => attribute.key === key)?.value
  return typeof found === "string" && found.length > 0 ? found : undefined
}

/** The project of a resource's spans: its `wandb.entity`/`wandb.project`, else the header's; or why not. */
const projectOf = (
  resource: Otlp.OtlpResourceSpans["resource"],
  header: string | undefined
): { readonly project: string } | { readonly problem: string } => {
  const entity = resourceString(resource, "wandb.entity")
  const project = resourceString(resource, "wandb.project")
  if (entity !== undefined && project !== undefined) {
    const id = `${entity}/${project}`
    return isProjectId(id) ? { project: id } : { problem: `Invalid project from wandb.entity and wandb.project: ${id}` }
  }
  return header === undefined ? { problem: MISSING_PROJECT } : { project: header }
}

const mediaTypeOf = (contentType: string | undefined) => (contentType ?? "").split(";")[0]?.trim().toLowerCase() ?? ""

/**
 * The OTLP request of a raw body, by its content type: `application/x-protobuf` (or `application/protobuf`) is
 * decoded with protobufjs, `application/json` (or no content type) parsed as JSON; anything else, JSON that
 * does not parse, and bodies that are not an `ExportTraceServiceRequest` are 400 `{reason}` naming the problem.
 */
const decode = (body: Uint8Array, contentType: string | undefined) =>
  Effect.suspend(() => {
    const mediaType = mediaTypeOf(contentType)
    try {
      if (mediaType === "application/x-protobuf" || mediaType === "application/protobuf") {
        return Effect.succeed(Otlp.fromProtobuf(body))
      }
      if (mediaType !== "" && mediaType !== "application/json") {
        return invalid(
          `Unsupported Content-Type ${mediaType}: the OTel export takes application/x-protobuf or application/json`
        )
      }
      let json: JsonValue
      try {
        json = JSON.parse(new TextDecoder().decode(body)) as JsonValue
      } catch (error) {
        return invalid(`Invalid JSON body: ${error instanceof Error ? error.message : String(error)}`)
      }
      return Effect.succeed(Otlp.fromJson(json))
    } catch (error) {
      if (error instanceof Otlp.OtlpDecodeError) return invalid(error.message)
      throw error
    }
  })

/** The most rejection messages joined into `partial_success.error_message`, as the service joins them. */
const MAX_MESSAGES = 20

/** `POST /otel/v1/traces` and `POST /otel/v1/trace` */
export const otelExport = () =>
  Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    const calls = yield* TraceCalls.TraceCalls
    const header = request.headers.project_id
    if (header !== undefined && !isProjectId(header)) {
      return yield* invalid(`Invalid project_id header: expected "entity/project"`)
    }
    // A body over the limit was refused (413) before reaching here; a read failure is a defect the error
    // middleware answers.
    const body = new Uint8Array(yield* Effect.orDie(request.arrayBuffer))
    const otlp = yield* decode(body, request.headers["content-type"])

    const items: Array<TraceCalls.BatchItem> = []
    const messages: Array<string> = []
    let spans = 0
    let withoutProject = 0
    for (const resourceSpans of otlp.resourceSpans) {
      const project = projectOf(resourceSpans.resource, header)
      for (const scopeSpans of resourceSpans.scopeSpans) {
        for (const span of scopeSpans.spans) {
          spans += 1
          const ident = `name='${span.name}' trace_id='${span.traceId}' span_id='${span.spanId}'`
          if ("problem" in project) {
            if (project.problem === MISSING_PROJECT) withoutProject += 1
            messages.push(`Rejected span (${ident}): ${project.problem}`)
            continue
          }
          try {
            items.push(...toCall(project.project, span))
          } catch (error) {
            if (!(error instanceof Rejected)) throw error
            messages.push(`Rejected span (${ident}): ${error.message}`)
          }
        }
      }
    }
    if (spans > 0 && withoutProject === spans) return yield* invalid(MISSING_PROJECT)
    if (items.length > 0) yield* calls.batch(items)
    if (messages.length === 0) return {} satisfies OtelExportRes
    const joined = messages.slice(0, MAX_MESSAGES).join("; ") + (messages.length > MAX_MESSAGES ? "; ..." : "")
    return { partial_success: { rejected_spans: messages.length, error_message: joined } } satisfies OtelExportRes
  })
