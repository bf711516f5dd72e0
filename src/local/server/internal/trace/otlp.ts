/**
 * OTLP trace export requests (`ExportTraceServiceRequest`), read from protobuf or from OTLP/JSON into one
 * internal form ({@link OtlpRequest}).
 *
 * - Protobuf is decoded by the npm package `protobufjs` with the message types below. Their field numbers and
 *   types are those of the published opentelemetry-proto (v1) files, checked one by one against them:
 *   `opentelemetry/proto/collector/trace/v1/trace_service.proto` (ExportTraceServiceRequest),
 *   `opentelemetry/proto/trace/v1/trace.proto` (ResourceSpans, ScopeSpans, Span, Span.Event, Span.Link,
 *   Status), `opentelemetry/proto/resource/v1/resource.proto` (Resource) and
 *   `opentelemetry/proto/common/v1/common.proto` (AnyValue, ArrayValue, KeyValueList, KeyValue,
 *   InstrumentationScope). Fields added to those files later (e.g. `Resource.entity_refs`) are skipped as
 *   unknown fields.
 * - OTLP/JSON: lowerCamelCase keys (the proto names in snake_case are accepted too, as the protobuf JSON
 *   mapping says), trace and span ids in hex (base64 of the right length is accepted too), 64-bit integers as
 *   decimal strings or numbers, enums as numbers or their names.
 * - The internal form: ids as lowercase hex (as sent: a wrong length is the caller's to reject), times in
 *   nanoseconds as `bigint`, attribute values as plain JSON values (`int64` as a number when it is a safe
 *   integer, else its decimal string; `bytes` as base64; a non-finite double as Python prints it: `nan`,
 *   `inf`, `-inf`; an empty `AnyValue` as null).
 * - An undecodable body is an {@link OtlpDecodeError} naming the problem (and, for JSON, where it is).
 */
import protobuf from "protobufjs"
import type { JsonValue } from "../../../../api/Json.js"

// ---------------------------------------------------------------------------------------------------------------
// The message types (opentelemetry-proto v1; see the header for the files)
// ---------------------------------------------------------------------------------------------------------------

const COMMON_PROTO = `
syntax = "proto3";
package opentelemetry.proto.common.v1;
message AnyValue {
  oneof value {
    string string_value = 1;
    bool bool_value = 2;
    int64 int_value = 3;
    double double_value = 4;
    ArrayValue array_value = 5;
    KeyValueList kvlist_value = 6;
    bytes bytes_value = 7;
  }
}
message ArrayValue { repeated AnyValue values = 1; }
message KeyValueList { repeated KeyValue values = 1; }
message KeyValue {
  string key = 1;
  AnyValue value = 2;
}
message InstrumentationScope {
  string name = 1;
  string version = 2;
  repeated KeyValue attributes = 3;
  uint32 dropped_attributes_count = 4;
}
`

const RESOURCE_PROTO = `
syntax = "proto3";
package opentelemetry.proto.resource.v1;
message Resource {
  repeated opentelemetry.proto.common.v1.KeyValue attributes = 1;
  uint32 dropped_attributes_count = 2;
}
`

const TRACE_PROTO = `
syntax = "proto3";
package opentelemetry.proto.trace.v1;
message ResourceSpans {
  opentelemetry.proto.resource.v1.Resource resource = 1;
  repeated ScopeSpans scope_spans = 2;
  string schema_url = 3;
}
message ScopeSpans {
  opentelemetry.proto.common.v1.InstrumentationScope scope = 1;
  repeated Span spans = 2;
  string schema_url = 3;
}
message Span {
  bytes trace_id = 1;
  bytes span_id = 2;
  string trace_state = 3;
  bytes parent_span_id = 4;
  fixed32 flags = 16;
  string name = 5;
  enum SpanKind {
    SPAN_KIND_UNSPECIFIED = 0;
    SPAN_KIND_INTERNAL = 1;
    SPAN_KIND_SERVER = 2;
    SPAN_KIND_CLIENT = 3;
    SPAN_KIND_PRODUCER = 4;
    SPAN_KIND_CONSUMER = 5;
  }
  SpanKind kind = 6;
  fixed64 start_time_unix_nano = 7;
  fixed64 end_time_unix_nano = 8;
  repeated opentelemetry.proto.common.v1.KeyValue attributes = 9;
  uint32 dropped_attributes_count = 10;
  message Event {
    fixed64 time_unix_nano = 1;
    string name = 2;
    repeated opentelemetry.proto.common.v1.KeyValue attributes = 3;
    uint32 dropped_attributes_count = 4;
  }
  repeated Event events = 11;
  uint32 dropped_events_count = 12;
  message Link {
    bytes trace_id = 1;
    bytes span_id = 2;
    string trace_state = 3;
    repeated opentelemetry.proto.common.v1.KeyValue attributes = 4;
    uint32 dropped_attributes_count = 5;
    fixed32 flags = 6;
  }
  repeated Link links = 13;
  uint32 dropped_links_count = 14;
  Status status = 15;
}
message Status {
  reserved 1;
  string message = 2;
  enum StatusCode {
    STATUS_CODE_UNSET = 0;
    STATUS_CODE_OK = 1;
    STATUS_CODE_ERROR = 2;
  }
  StatusCode code = 3;
}
`

const COLLECTOR_PROTO = `
syntax = "proto3";
package opentelemetry.proto.collector.trace.v1;
message ExportTraceServiceRequest {
  repeated opentelemetry.proto.trace.v1.ResourceSpans resource_spans = 1;
}
`

// Enums are read as their numbers (`toObject` below keeps them so); an unknown value is kept as its number.
const root = new protobuf.Root()
for (const source of [COMMON_PROTO, RESOURCE_PROTO, TRACE_PROTO, COLLECTOR_PROTO]) {
  protobuf.parse(source, root, { keepCase: false })
}
root.resolveAll()

/** The protobufjs type of `opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest`. */
export const ExportTraceServiceRequestType: protobuf.Type = root.lookupType(
  "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest"
)

// ---------------------------------------------------------------------------------------------------------------
// The internal form
// ---------------------------------------------------------------------------------------------------------------

/** An attribute: its key and its value as plain JSON. */
export interface OtlpAttribute {
  readonly key: string
  readonly value: JsonValue
}

/** A span's status: `code` 0 unset, 1 ok, 2 error. */
export interface OtlpStatus {
  readonly code: number
  readonly message: string
}

/** A timed event of a span. */
export interface OtlpEvent {
  readonly name: string
  readonly timeUnixNano: bigint
  readonly attributes: ReadonlyArray<OtlpAttribute>
  readonly droppedAttributesCount: number
}

/** A link from a span to another span. */
export interface OtlpLink {
  readonly traceId: string
  readonly spanId: string
  readonly traceState: string
  readonly attributes: ReadonlyArray<OtlpAttribute>
  readonly droppedAttributesCount: number
  readonly flags: number
}

/** A span: ids in lowercase hex (empty when absent), times in Unix nanoseconds. */
export interface OtlpSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string
  readonly traceState: string
  readonly flags: number
  readonly name: string
  readonly kind: number
  readonly startTimeUnixNano: bigint
  readonly endTimeUnixNano: bigint
  readonly attributes: ReadonlyArray<OtlpAttribute>
  readonly droppedAttributesCount: number
  readonly events: ReadonlyArray<OtlpEvent>
  readonly droppedEventsCount: number
  readonly links: ReadonlyArray<OtlpLink>
  readonly droppedLinksCount: number
  readonly status: OtlpStatus
}

/** The instrumentation scope of some spans. */
export interface OtlpScope {
  readonly name: string
  readonly version: string
  readonly attributes: ReadonlyArray<OtlpAttribute>
  readonly droppedAttributesCount: number
}

/** The spans of one instrumentation scope. */
export interface OtlpScopeSpans {
  readonly scope: OtlpScope
  readonly spans: ReadonlyArray<OtlpSpan>
  readonly schemaUrl: string
}

/** The spans of one resource, with the resource's attributes. */
export interface OtlpResourceSpans {
  readonly resource: { readonly attributes: ReadonlyArray<OtlpAttribute>; readonly droppedAttributesCount: number }
  readonly scopeSpans: ReadonlyArray<OtlpScopeSpans>
  readonly schemaUrl: string
}

/** An `ExportTraceServiceRequest`, from either encoding. */
export interface OtlpRequest {
  readonly resourceSpans: ReadonlyArray<OtlpResourceSpans>
}

/** A body that is not an `ExportTraceServiceRequest`; `message` says why (and where). */
export class OtlpDecodeError extends Error {
  override readonly name = "OtlpDecodeError"
}

// ---------------------------------------------------------------------------------------------------------------
// Reading either encoding
// ---------------------------------------------------------------------------------------------------------------

type Loose = { readonly [key: string]: unknown }

const fail = (path: string, expected: string): never => {
  throw new OtlpDecodeError(`${path === "" ? "the body" : path}: expected ${expected}`)
}

const isObject = (value: unknown): value is Loose =>
  value !== null && typeof value === "object" && !Array.isArray(value) && !(value instanceof Uint8Array)

const object = (value: unknown, path: string): Loose => (isObject(value) ? value : fail(path, "an object"))

/** A field by its lowerCamelCase JSON name or its proto name. */
const field = (obj: Loose, camel: string): unknown => {
  if (obj[camel] !== undefined) return obj[camel]
  const snake = camel.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)
  return obj[snake]
}

const join = (path: string, key: string) => (path === "" ? key : `${path}.${key}`)

const optionalObject = (obj: Loose, key: string, path: string): Loose => {
  const value = field(obj, key)
  return value === undefined || value === null ? {} : object(value, join(path, key))
}

const list = (obj: Loose, key: string, path: string): ReadonlyArray<unknown> => {
  const value = field(obj, key)
  if (value === undefined || value === null) return []
  return Array.isArray(value) ? value : fail(join(path, key), "an array")
}

const string = (obj: Loose, key: string, path: string): string => {
  const value = field(obj, key)
  if (value === undefined || value === null) return ""
  return typeof value === "string" ? value : fail(join(path, key), "a string")
}

const DECIMAL = /^-?\d+$/

/** A 64-bit integer: a decimal string (protobufjs and OTLP/JSON) or a number. */
const int64 = (value: unknown, path: string): bigint => {
  if (typeof value === "string" && DECIMAL.test(value)) return BigInt(value)
  if (typeof value === "number" && Number.isInteger(value)) return BigInt(value)
  return fail(path, "an integer (a number or a decimal string)")
}

const uint64 = (obj: Loose, key: string, path: string): bigint => {
  const value = field(obj, key)
  if (value === undefined || value === null) return 0n
  const n = int64(value, join(path, key))
  return n < 0n ? fail(join(path, key), "a non-negative integer") : n
}

const uint32 = (obj: Loose, key: string, path: string): number => {
  const value = field(obj, key)
  if (value === undefined || value === null) return 0
  const n = int64(value, join(path, key))
  return n < 0n || n > 0xffffffffn ? fail(join(path, key), "a 32-bit unsigned integer") : Number(n)
}

/** An enum: its number, or its name (`SPAN_KIND_SERVER`) looked up in `names`. */
const enumeration = (obj: Loose, key: string, path: string, names: ReadonlyArray<string>): number => {
  const value = field(obj, key)
  if (value === undefined || value === null) return 0
  if (typeof value === "string" && !DECIMAL.test(value)) {
    const index = names.indexOf(value)
    return index >= 0 ? index : fail(join(path, key), `one of ${names.join(", ")} or a number`)
  }
  const n = int64(value, join(path, key))
  return n < -0x80000000n || n > 0x7fffffffn ? fail(join(path, key), "a 32-bit integer") : Number(n)
}

const SPAN_KINDS = [
  "SPAN_KIND_UNSPECIFIED",
  "SPAN_KIND_INTERNAL",
  "SPAN_KIND_SERVER",
  "SPAN_KIND_CLIENT",
  "SPAN_KIND_PRODUCER",
  "SPAN_KIND_CONSUMER"
]
const STATUS_CODES = ["STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"]

const HEX = /^[0-9a-f]*$/i
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

const hexOf = (bytes: Uint8Array): string => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString("hex")

/**
 * An id: bytes (protobuf) as hex; a JSON string as lowercase hex when it is hex, else as the hex of its base64
 * when that decodes to `size` bytes, else as sent (the caller rejects what is not an id).
 */
const id = (obj: Loose, key: string, path: string, size: number): string => {
  const value = field(obj, key)
  if (value === undefined || value === null) return ""
  if (value instanceof Uint8Array) return hexOf(value)
  if (typeof value !== "string") return fail(join(path, key), "a hex string")
  if (HEX.test(value)) return value.toLowerCase()
  if (BASE64.test(value)) {
    const bytes = Buffer.from(value, "base64")
    if (bytes.length === size) return bytes.toString("hex")
  }
  return value
}

const safeInteger = (n: bigint): JsonValue =>
  n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n.toString()

const double = (value: unknown, path: string): JsonValue => {
  if (typeof value === "number") return Number.isFinite(value) ? value : value > 0 ? "inf" : value < 0 ? "-inf" : "nan"
  // The protobuf JSON mapping writes non-finite doubles as strings.
  if (value === "NaN") return "nan"
  if (value === "Infinity") return "inf"
  if (value === "-Infinity") return "-inf"
  if (typeof value === "string" && value.trim() !== "" && Number.isFinite(Number(value))) return Number(value)
  return fail(path, "a number")
}

/** An `AnyValue` as plain JSON. */
const anyValue = (value: unknown, path: string): JsonValue => {
  if (value === undefined || value === null) return null
  const obj = object(value, path)
  const at = (key: string) => join(path, key)
  const stringValue = field(obj, "stringValue")
  if (stringValue !== undefined && stringValue !== null) {
    return typeof stringValue === "string" ? stringValue : fail(at("stringValue"), "a string")
  }
  const boolValue = field(obj, "boolValue")
  if (boolValue !== undefined && boolValue !== null) {
    return typeof boolValue === "boolean" ? boolValue : fail(at("boolValue"), "a boolean")
  }
  const intValue = field(obj, "intValue")
  if (intValue !== undefined && intValue !== null) return safeInteger(int64(intValue, at("intValue")))
  const doubleValue = field(obj, "doubleValue")
  if (doubleValue !== undefined && doubleValue !== null) return double(doubleValue, at("doubleValue"))
  const arrayValue = field(obj, "arrayValue")
  if (arrayValue !== undefined && arrayValue !== null) {
    const values = list(object(arrayValue, at("arrayValue")), "values", at("arrayValue"))
    return values.map((item, i) => anyValue(item, `${at("arrayValue")}.values[${i}]`))
  }
  const kvlistValue = field(obj, "kvlistValue")
  if (kvlistValue !== undefined && kvlistValue !== null) {
    const pairs = keyValues(object(kvlistValue, at("kvlistValue")), "values", at("kvlistValue"))
    return Object.fromEntries(pairs.map((pair) => [pair.key, pair.value]))
  }
  const bytesValue = field(obj, "bytesValue")
  if (bytesValue !== undefined && bytesValue !== null) {
    if (bytesValue instanceof Uint8Array) return Buffer.from(bytesValue).toString("base64")
    return typeof bytesValue === "string" && BASE64.test(bytesValue)
      ? bytesValue
      : fail(at("bytesValue"), "base64 bytes")
  }
  return null
}

const keyValues = (obj: Loose, key: string, path: string): ReadonlyArray<OtlpAttribute> =>
  list(obj, key, path).map((item, i) => {
    const at = `${join(path, key)}[${i}]`
    const kv = object(item, at)
    return { key: string(kv, "key", at), value: anyValue(field(kv, "value"), join(at, "value")) }
  })

const readEvent = (value: unknown, path: string): OtlpEvent => {
  const obj = object(value, path)
  return {
    name: string(obj, "name", path),
    timeUnixNano: uint64(obj, "timeUnixNano", path),
    attributes: keyValues(obj, "attributes", path),
    droppedAttributesCount: uint32(obj, "droppedAttributesCount", path)
  }
}

const readLink = (value: unknown, path: string): OtlpLink => {
  const obj = object(value, path)
  return {
    traceId: id(obj, "traceId", path, 16),
    spanId: id(obj, "spanId", path, 8),
    traceState: string(obj, "traceState", path),
    attributes: keyValues(obj, "attributes", path),
    droppedAttributesCount: uint32(obj, "droppedAttributesCount", path),
    flags: uint32(obj, "flags", path)
  }
}

const readSpan = (value: unknown, path: string): OtlpSpan => {
  const obj = object(value, path)
  const status = optionalObject(obj, "status", path)
  const statusPath = join(path, "status")
  return {
    traceId: id(obj, "traceId", path, 16),
    spanId: id(obj, "spanId", path, 8),
    parentSpanId: id(obj, "parentSpanId", path, 8),
    traceState: string(obj, "traceState", path),
    flags: uint32(obj, "flags", path),
    name: string(obj, "name", path),
    kind: enumeration(obj, "kind", path, SPAN_KINDS),
    startTimeUnixNano: uint64(obj, "startTimeUnixNano", path),
    endTimeUnixNano: uint64(obj, "endTimeUnixNano", path),
    attributes: keyValues(obj, "attributes", path),
    droppedAttributesCount: uint32(obj, "droppedAttributesCount", path),
    events: list(obj, "events", path).map((item, i) => readEvent(item, `${join(path, "events")}[${i}]`)),
    droppedEventsCount: uint32(obj, "droppedEventsCount", path),
    links: list(obj, "links", path).map((item, i) => readLink(item, `${join(path, "links")}[${i}]`)),
    droppedLinksCount: uint32(obj, "droppedLinksCount", path),
    status: {
      code: enumeration(status, "code", statusPath, STATUS_CODES),
      message: string(status, "message", statusPath)
    }
  }
}

const readScopeSpans = (value: unknown, path: string): OtlpScopeSpans => {
  const obj = object(value, path)
  const scope = optionalObject(obj, "scope", path)
  const scopePath = join(path, "scope")
  return {
    scope: {
      name: string(scope, "name", scopePath),
      version: string(scope, "version", scopePath),
      attributes: keyValues(scope, "attributes", scopePath),
      droppedAttributesCount: uint32(scope, "droppedAttributesCount", scopePath)
    },
    spans: list(obj, "spans", path).map((item, i) => readSpan(item, `${join(path, "spans")}[${i}]`)),
    schemaUrl: string(obj, "schemaUrl", path)
  }
}

const readResourceSpans = (value: unknown, path: string): OtlpResourceSpans => {
  const obj = object(value, path)
  const resource = optionalObject(obj, "resource", path)
  const resourcePath = join(path, "resource")
  return {
    resource: {
      attributes: keyValues(resource, "attributes", resourcePath),
      droppedAttributesCount: uint32(resource, "droppedAttributesCount", resourcePath)
    },
    scopeSpans: list(obj, "scopeSpans", path).map((item, i) =>
      readScopeSpans(item, `${join(path, "scopeSpans")}[${i}]`)
    ),
    schemaUrl: string(obj, "schemaUrl", path)
  }
}

const readRequest = (value: unknown): OtlpRequest => {
  const obj = object(value, "")
  return {
    resourceSpans: list(obj, "resourceSpans", "").map((item, i) => readResourceSpans(item, `resourceSpans[${i}]`))
  }
}

const prefixed = (encoding: string, read: () => OtlpRequest): OtlpRequest => {
  try {
    return read()
  } catch (error) {
    if (!(error instanceof OtlpDecodeError)) throw error
    throw new OtlpDecodeError(`Invalid OTLP ${encoding} ExportTraceServiceRequest: ${error.message}`)
  }
}

/** Reads an OTLP/JSON `ExportTraceServiceRequest` (already parsed from its text). */
export const fromJson = (body: unknown): OtlpRequest => prefixed("JSON", () => readRequest(body))

/** Decodes an OTLP protobuf `ExportTraceServiceRequest`. */
export const fromProtobuf = (bytes: Uint8Array): OtlpRequest =>
  prefixed("protobuf", () => {
    let message: protobuf.Message
    try {
      message = ExportTraceServiceRequestType.decode(bytes)
    } catch (error) {
      // protobufjs throws plain errors on malformed input ("index out of range", "invalid wire type", ...).
      throw new OtlpDecodeError(error instanceof Error ? error.message : String(error))
    }
    // Plain objects holding only the fields present; 64-bit integers as decimal strings, bytes as bytes.
    return readRequest(
      ExportTraceServiceRequestType.toObject(message, { longs: String, defaults: false, arrays: false })
    )
  })
