/**
 * What the fast-path tests compare: a schema with a fast path in front and the same schema without it, given the
 * same value, succeed with the same value (the same keys in the same order) or fail with the same issues.
 */
import { expect } from "@effect/vitest"
import type * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type * as AST from "effect/SchemaAST"

/** Whether a value holds an own `__proto__` key or an object without a prototype (see FastPath.test.ts). */
export const hasProtoKey = (value: unknown): boolean =>
  typeof value === "object" &&
  value !== null &&
  (Object.hasOwn(value, "__proto__") || Object.getPrototypeOf(value) === null || Object.values(value).some(hasProtoKey))

const formatted = (error: ParseResult.ParseError) => ParseResult.ArrayFormatter.formatErrorSync(error)

type Parse = (u: unknown, options?: AST.ParseOptions) => Either.Either<unknown, ParseResult.ParseError>

/** `fast` and `plain` parse `input` alike, under the default options and with every error reported. */
export const expectSameParse = (fast: Parse, plain: Parse, input: unknown) => {
  for (const options of [undefined, { errors: "all" } as const]) {
    const a = fast(input, options)
    const b = plain(input, options)
    expect(a._tag).toBe(b._tag)
    if (a._tag === "Right" && b._tag === "Right") {
      expect(a.right).toStrictEqual(b.right)
      expect(JSON.stringify(a.right)).toBe(JSON.stringify(b.right))
    }
    if (a._tag === "Left" && b._tag === "Left") expect(formatted(a.left)).toEqual(formatted(b.left))
  }
}

/** The fast schema decodes and encodes `value` exactly as the plain one (values {@link hasProtoKey} holds are left out). */
export const sameAs = <A, I>(fastSchema: Schema.Schema<A, I>, plainSchema: Schema.Schema<A, I>, value: unknown) => {
  if (hasProtoKey(value)) return
  expectSameParse(Schema.decodeUnknownEither(fastSchema), Schema.decodeUnknownEither(plainSchema), value)
  expectSameParse(Schema.encodeUnknownEither(fastSchema), Schema.encodeUnknownEither(plainSchema), value)
}

/** The keys of a chat-completions message, to set one of to an edge value. */
export const MESSAGE_KEYS: ReadonlyArray<string> = [
  "role",
  "content",
  "name",
  "refusal",
  "audio",
  "function_call",
  "tool_calls",
  "tool_call_id",
  "reasoning",
  "reasoning_content"
]

/** A choice as the embedded engine returns it for a tic-tac-toe move (logprobs and token ids asked for). */
export const engineChoice = () => ({
  index: 0,
  message: { role: "assistant", content: "5", refusal: null },
  logprobs: { content: [{ token: "5", logprob: -1.1, bytes: [53], top_logprobs: [] }], refusal: null },
  finish_reason: "stop",
  stop_reason: null,
  token_ids: [53, 2]
})
