/**
 * `POST /call/upsert_batch` from its body's text. A body that is plainly a batch (see `batchText.ts`) is checked
 * item by item as `callUpsertBatch` checks it and stored with the JSON of its calls as it arrived (the bytes the
 * parsed path would store: no parse, no schema pass over the values, no `JSON.stringify` again); the first refused
 * item is the answer, as there. Any other body, and a batch with a start that needs an id made or its parent's
 * trace read, goes the schema's way: parsed and depth-checked as every JSON body is (`admitJson`), decoded with
 * `CallCreateBatchReq` (a failure is the route's usual 422) and handled by `callUpsertBatch`.
 */
import { HttpApiDecodeError } from "@effect/platform/HttpApiError"
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { CallCreateBatchReq } from "../../../../api/TraceCall.js"
import * as TraceCalls from "../../../store/TraceCalls.js"
import { admitJson } from "../admit.js"
import { type ItemText, readBatchText } from "./batchText.js"
import { callUpsertBatch, checkedEnd, settledStart } from "./calls.js"
import { invalid } from "./ids.js"

const PATH = "/call/upsert_batch"

/** The payload as the route's own decoding gives it: a failure is its `HttpApiDecodeError` (the usual 422). */
const decodeBatch = (u: unknown) =>
  Effect.catchTag(Schema.decodeUnknown(CallCreateBatchReq)(u), "ParseError", HttpApiDecodeError.refailParseError)

/**
 * The items as stored, or the first item's reason to refuse (a 400), or `undefined` when a start needs more than
 * its own fields and the batch's earlier starts (an id made, a parent's trace read).
 */
export const storedItems = (
  batch: ReadonlyArray<ItemText>
): { readonly items: ReadonlyArray<TraceCalls.BatchTextItem> } | string | undefined => {
  const traces = new Map<string, string>()
  const items: Array<TraceCalls.BatchTextItem> = new Array(batch.length)
  for (let i = 0; i < batch.length; i++) {
    const item = batch[i]!
    if (item.mode === "start") {
      const start = settledStart(item.start, traces)
      if (start === undefined || typeof start === "string") return start
      items[i] = { mode: "start", start }
    } else {
      const end = item.end
      const ended = checkedEnd(end)
      if (typeof ended === "string") return ended
      items[i] = {
        mode: "end",
        end: {
          project_id: end.project_id,
          id: end.id,
          ended_at: ended.iso,
          output: end.output ?? null,
          summary: end.summary,
          exception: end.exception ?? null,
          wb_run_step_end: end.wb_run_step_end ?? null
        }
      }
    }
  }
  return { items }
}

/**
 * The route's answer for items {@link storedItems} gave, `{res}` with `{id, trace_id}` for a start and `{}` for an
 * end, as JSON written directly: the ids are call ids (UUIDs or hex ids, checked), which JSON writes as they are.
 */
export const resultsText = (items: ReadonlyArray<TraceCalls.BatchTextItem>): string => {
  const parts: Array<string> = new Array(items.length)
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!
    parts[i] = item.mode === "start" ? `{"id":"${item.start.id}","trace_id":"${item.start.trace_id}"}` : "{}"
  }
  return `{"res":[${parts.join(",")}]}`
}

/** `POST /call/upsert_batch`, given the request (see the module's comment). */
export const callUpsertBatchText = ({ request }: { readonly request: HttpServerRequest.HttpServerRequest }) =>
  Effect.gen(function* () {
    const text = yield* Effect.orDie(request.text)
    const batch = readBatchText(text)
    const stored = batch === undefined ? undefined : storedItems(batch)
    if (typeof stored === "string") return yield* invalid(stored)
    if (stored !== undefined) {
      const calls = yield* TraceCalls.TraceCalls
      yield* calls.batchText(stored.items)
      // The response the route's success schema gives, without a schema pass over thousands of results.
      return HttpServerResponse.text(resultsText(stored.items), { contentType: "application/json" })
    }
    const admitted = yield* admitJson(request, PATH)
    if (Either.isLeft(admitted)) return admitted.left
    const payload = yield* Effect.flatMap(Effect.orDie(admitted.right.json), decodeBatch)
    return yield* callUpsertBatch({ payload })
  })
