/**
 * Schema parse issues as FastAPI validation details: `{loc, msg, type}` with `loc` starting at the request
 * part (`body`, `path`, `query`) and then the path of the field, and the pydantic error types and messages for
 * the kinds of check the wire schemas make.
 */
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as AST from "effect/SchemaAST"
import type { ValidationError } from "../../../api/HttpValidationError.js"

/** A part of the request a field lives in. */
export type Part = "body" | "path" | "query"

type Loc = ReadonlyArray<string | number>

const key = (k: PropertyKey): string | number => (typeof k === "symbol" ? String(k) : k)

const literalText = (ast: AST.AST): string | undefined => {
  if (AST.isLiteral(ast)) return typeof ast.literal === "string" ? `'${ast.literal}'` : String(ast.literal)
  return undefined
}

/** `Input should be 'a', 'b' or 'c'` when every member of a union (but `undefined`) is a literal. */
const literalUnion = (ast: AST.Union): Message | undefined => {
  const literals = ast.types.filter((t) => !AST.isUndefinedKeyword(t)).map(literalText)
  if (literals.length === 0 || !literals.every((l) => l !== undefined)) return undefined
  const text = literals.length > 1 ? `${literals.slice(0, -1).join(", ")} or ${literals.at(-1)}` : literals[0]
  return { msg: `Input should be ${text}`, type: "literal_error" }
}

/**
 * The member issue of `Schema.optional`'s `| undefined`, or of `Schema.NullOr`'s `| null`, which says nothing
 * about the value sent: pydantic reports a bad value of an `Optional[X]` field with X's errors alone.
 */
const isEmptyMember = (issue: ParseResult.ParseIssue): boolean =>
  issue._tag === "Type" &&
  (AST.isUndefinedKeyword(issue.ast) || (AST.isLiteral(issue.ast) && issue.ast.literal === null))

/** Whether a schema decodes from a JSON object (a struct, a record, or a class or refinement of one). */
const isObjectSchema = (ast: AST.AST): boolean => AST.isTypeLiteral(AST.encodedAST(ast))

const isRecord = (u: unknown): boolean => typeof u === "object" && u !== null && !Array.isArray(u)

type Message = { readonly msg: string; readonly type: string }

/** A detail with its keys in FastAPI's order. */
const detail = (loc: Loc, message: Message): ValidationError => ({ loc, msg: message.msg, type: message.type })

const typeDetail = (ast: AST.AST, actual: unknown): Message | undefined => {
  switch (ast._tag) {
    case "NumberKeyword":
      return typeof actual === "string"
        ? { type: "float_parsing", msg: "Input should be a valid number, unable to parse string as a number" }
        : { type: "float_type", msg: "Input should be a valid number" }
    case "StringKeyword":
      return { type: "string_type", msg: "Input should be a valid string" }
    case "BooleanKeyword":
      return typeof actual === "string" || typeof actual === "number"
        ? { type: "bool_parsing", msg: "Input should be a valid boolean, unable to interpret input" }
        : { type: "bool_type", msg: "Input should be a valid boolean" }
    case "TupleType":
      return { type: "list_type", msg: "Input should be a valid list" }
    case "TypeLiteral":
      return { type: "dict_type", msg: "Input should be a valid dictionary" }
    case "Literal":
      return { type: "literal_error", msg: `Input should be ${literalText(ast)}` }
    case "Union": {
      const literal = literalUnion(ast)
      if (literal !== undefined) return literal
      // A union of objects given something else (its members are told apart by a literal key such as `role`).
      const members = ast.types.filter((t) => !AST.isUndefinedKeyword(t))
      return !isRecord(actual) && members.length > 0 && members.every(isObjectSchema)
        ? { type: "dict_type", msg: "Input should be a valid dictionary" }
        : undefined
    }
    default:
      return undefined
  }
}

interface Bounds {
  readonly minimum?: number | undefined
  readonly maximum?: number | undefined
  readonly exclusiveMinimum?: number | undefined
  readonly exclusiveMaximum?: number | undefined
}

/** The bounds a range refinement (`between`, `greaterThanOrEqualTo`, ...) states in its JSON Schema annotation. */
const bounds = (ast: AST.Refinement): Bounds | undefined => {
  const annotation = AST.getJSONSchemaAnnotation(ast)
  if (annotation._tag === "None") return undefined
  const { minimum, maximum, exclusiveMinimum, exclusiveMaximum } = annotation.value as Bounds
  const out = { minimum, maximum, exclusiveMinimum, exclusiveMaximum }
  return Object.values(out).some((b) => typeof b === "number") ? out : undefined
}

/** pydantic's message for a number outside a refinement's bounds, or undefined when it is within them. */
const boundsDetail = (ast: AST.Refinement, actual: unknown): Message | undefined => {
  const b = bounds(ast)
  const value = typeof actual === "number" ? actual : typeof actual === "string" ? Number(actual) : Number.NaN
  if (b === undefined || Number.isNaN(value)) return undefined
  if (b.minimum !== undefined && value < b.minimum)
    return { type: "greater_than_equal", msg: `Input should be greater than or equal to ${b.minimum}` }
  if (b.exclusiveMinimum !== undefined && value <= b.exclusiveMinimum)
    return { type: "greater_than", msg: `Input should be greater than ${b.exclusiveMinimum}` }
  if (b.maximum !== undefined && value > b.maximum)
    return { type: "less_than_equal", msg: `Input should be less than or equal to ${b.maximum}` }
  if (b.exclusiveMaximum !== undefined && value >= b.exclusiveMaximum)
    return { type: "less_than", msg: `Input should be less than ${b.exclusiveMaximum}` }
  return undefined
}

const refinementDetail = (ast: AST.Refinement, actual: unknown): Message | undefined => {
  const id = AST.getSchemaIdAnnotation(ast)
  if (id._tag === "None") return undefined
  switch (id.value) {
    case Schema.IntSchemaId:
      if (typeof actual !== "number")
        return { type: "int_parsing", msg: "Input should be a valid integer, unable to parse string as an integer" }
      // An integer past 2^53 cannot be read exactly from JSON into a JS number, so it is refused.
      return Number.isInteger(actual)
        ? { type: "int_parsing_size", msg: "Input should be a valid integer, unable to read it exactly (too large)" }
        : { type: "int_from_float", msg: "Input should be a valid integer, got a number with a fractional part" }
    case Schema.FiniteSchemaId:
      return { type: "finite_number", msg: "Input should be a finite number" }
    case Schema.UUIDSchemaId:
      return { type: "uuid_parsing", msg: "Input should be a valid UUID" }
    default:
      return boundsDetail(ast, actual)
  }
}

/**
 * The message of a refinement whose underlying schema already failed, where pydantic names the refinement:
 * a number out of a range's bounds (even when it is also no safe integer), a UUID or an integer given a value
 * of another type.
 */
const fromDetail = (ast: AST.Refinement, inner: ParseResult.ParseIssue, actual: unknown): Message | undefined => {
  const bound = typeof actual === "number" ? boundsDetail(ast, actual) : undefined
  if (bound !== undefined) return bound
  if (inner._tag !== "Type") return undefined
  const id = AST.getSchemaIdAnnotation(ast)
  if (id._tag === "None") return undefined
  if (id.value === Schema.UUIDSchemaId && AST.isStringKeyword(inner.ast))
    return { type: "uuid_type", msg: "UUID input should be a string, bytes or UUID object" }
  if (id.value === Schema.IntSchemaId && AST.isNumberKeyword(inner.ast))
    return typeof actual === "string"
      ? { type: "int_parsing", msg: "Input should be a valid integer, unable to parse string as an integer" }
      : { type: "int_type", msg: "Input should be a valid integer" }
  return undefined
}

/** The value a refinement's predicate rejected (after any transformation before it). */
const refinedValue = (issue: ParseResult.Refinement): unknown =>
  typeof issue.issue.actual === "number" ? issue.issue.actual : issue.actual

const fallback = (issue: ParseResult.ParseIssue): Message => ({
  type: "value_error",
  msg: ParseResult.TreeFormatter.formatIssueSync(issue).split("\n").at(-1)?.replace(/^\W+/, "") ?? "Invalid value"
})

const walk = (issue: ParseResult.ParseIssue, loc: Loc): Array<ValidationError> => {
  switch (issue._tag) {
    case "Pointer": {
      const path: ReadonlyArray<PropertyKey> = typeof issue.path === "object" ? issue.path : [issue.path]
      return walk(issue.issue, [...loc, ...path.map(key)])
    }
    case "Composite": {
      if (AST.isUnion(issue.ast)) {
        const literal = literalUnion(issue.ast)
        if (literal !== undefined) return [detail(loc, literal)]
      }
      const issues: ReadonlyArray<ParseResult.ParseIssue> = Array.isArray(issue.issues)
        ? issue.issues
        : [issue.issues as ParseResult.ParseIssue]
      const informative = issues.filter((i) => !isEmptyMember(i))
      return (informative.length > 0 ? informative : issues).flatMap((i) => walk(i, loc))
    }
    case "Refinement":
      if (issue.kind === "From") {
        const message = fromDetail(issue.ast, issue.issue, issue.actual)
        return message === undefined ? walk(issue.issue, loc) : [detail(loc, message)]
      }
      if (issue.issue._tag === "Composite" || issue.issue._tag === "Pointer") return crossField(issue.issue, loc)
      return [detail(loc, refinementDetail(issue.ast, refinedValue(issue)) ?? fallback(issue))]
    case "Transformation":
      if (issue.kind === "Transformation" && AST.isNumberKeyword(AST.typeAST(issue.ast.to))) {
        return [detail(loc, typeDetail(AST.typeAST(issue.ast.to), issue.actual) ?? fallback(issue))]
      }
      return walk(issue.issue, loc)
    case "Missing":
      return [detail(loc, { msg: "Field required", type: "missing" })]
    case "Unexpected":
      return [detail(loc, { msg: "Extra inputs are not permitted", type: "extra_forbidden" })]
    case "Type":
      return [detail(loc, typeDetail(issue.ast, issue.actual) ?? fallback(issue))]
    case "Forbidden":
      return [detail(loc, fallback(issue))]
  }
}

/**
 * The details a filter across fields reported (its issues name the fields at fault). They are marked, so
 * that the OpenAI-compatible routes can answer them as the engine's semantic 400s.
 */
export const crossFieldDetails = new WeakSet<ValidationError>()

const crossField = (issue: ParseResult.ParseIssue, loc: Loc): Array<ValidationError> => {
  if (issue._tag === "Composite") {
    const issues = Array.isArray(issue.issues) ? issue.issues : [issue.issues as ParseResult.ParseIssue]
    return issues.flatMap((i) => crossField(i, loc))
  }
  if (issue._tag === "Pointer") {
    const path: ReadonlyArray<PropertyKey> = typeof issue.path === "object" ? issue.path : [issue.path]
    return crossField(issue.issue, [...loc, ...path.map(key)])
  }
  const message = issue._tag === "Type" && issue.message !== undefined ? issue.message : fallback(issue).msg
  const out = detail(loc, { msg: `Value error, ${message}`, type: "value_error" })
  crossFieldDetails.add(out)
  return [out]
}

/**
 * The validation details of a parse issue of one request part. A detail repeated word for word (members of a
 * union failing alike; pydantic would tell them apart by the member's name in `loc`) is reported once.
 */
export const details = (part: Part, issue: ParseResult.ParseIssue): Array<ValidationError> => {
  const seen = new Set<string>()
  return walk(issue, [part]).filter((d) => {
    const k = JSON.stringify([d.loc, d.msg, d.type])
    if (seen.has(k)) return false
    seen.add(k)
    return true
  })
}
