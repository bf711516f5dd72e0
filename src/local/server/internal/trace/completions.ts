/**
 * The completions of the trace surface, answered by the local engine (the same models as
 * `/v1/chat/completions`: base models by name, trained checkpoints by their `wandb-artifact:///` name) and, with
 * `track_llm_call` (the default), traced as a call of op `weave.completions_create` in the project: inputs the
 * request's `inputs`, output the whole response, `summary.usage` keyed by model.
 *
 * - `POST /completions/create` → `{response, weave_call_id}` (`weave_call_id` null when not tracked).
 * - `POST /completions/create_stream` → JSON lines: `{"_meta": {"weave_call_id": ...}}` first, then each
 *   chat-completions chunk as the engine decodes it; the call starts when the stream begins and ends, when the
 *   stream does, with the chunks joined into the response `create` would have recorded
 *   (`api/internal/chunkJoin.ts`), or with an exception (and what came so far) when it breaks off. The usage
 *   chunk is sent only when `stream_options.include_usage` asks for it.
 * - `inputs` that are not a valid chat-completions request, or that the engine refuses, are 400 `{reason}`
 *   naming the field; an unknown model is 404 `{reason}`; a full sampling queue (see `../sampling.ts`) 429
 *   `{reason}` with `retry-after`. Nothing is traced for a refused request.
 */
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { ChatCompletion, ChatCompletionRequest, type Usage } from "../../../../api/ChatCompletion.js"
import { ChunkJoin } from "../../../../api/internal/chunkJoin.js"
import type { JsonObject, JsonValue } from "../../../../api/Json.js"
import { InvalidRequest, NotFound } from "../../../../api/TraceError.js"
import type { CompletionsCreateReq } from "../../../../api/TraceMisc.js"
import { EngineError } from "../../../engine/EngineError.js"
import type { Policy } from "../../../engine/policy/Policy.js"
import { prepare as prepareDecoding, runRounds } from "../../../engine/Sampler.js"
import * as TraceCalls from "../../../store/TraceCalls.js"
import { chunkStream, resolvePolicy } from "../inference.js"
import { type PolicyCache, promptStatesOf } from "../policyCache.js"
import { RETRY_AFTER_SECONDS, type SamplingBudget } from "../sampling.js"
import { checkProject, newId } from "./ids.js"
import { jsonLinesStream } from "./jsonLines.js"

/** The op name of a traced completion. */
export const COMPLETIONS_OP = "weave.completions_create"

const now = Effect.map(Clock.currentTimeMillis, (ms) => ({ iso: new Date(ms).toISOString(), micros: ms * 1000 }))

const decodeRequest = (inputs: CompletionsCreateReq["inputs"], stream: boolean) =>
  Schema.decodeUnknown(ChatCompletionRequest)({ ...inputs, stream }).pipe(
    Effect.mapError(
      (error) => new InvalidRequest({ reason: `Invalid inputs: ${ParseResult.TreeFormatter.formatErrorSync(error)}` })
    )
  )

const refused = (error: EngineError) =>
  new InvalidRequest({ reason: error.param === null ? error.message : `${error.param}: ${error.message}` })

/** The request checked by the engine (its refusal a 400 with the reason), ready to decode. */
const checked = (policy: Policy, request: ChatCompletionRequest, model: string, budget: SamplingBudget) =>
  Effect.try({
    try: () =>
      prepareDecoding(policy, request, {
        modelName: model,
        limits: budget.limits,
        promptStates: promptStatesOf(policy)
      }),
    catch: (error) => error
  }).pipe(Effect.catchAll((error) => (error instanceof EngineError ? Effect.fail(refused(error)) : Effect.die(error))))

/** The 429 of a full sampling queue, with the reason and `retry-after`. */
const busy = (budget: SamplingBudget, tokens: number) =>
  HttpServerResponse.unsafeJson(
    { reason: budget.refusal(tokens) },
    { status: 429, headers: { "retry-after": String(RETRY_AFTER_SECONDS) } }
  )

/** A checked request: the project, the decoded request and its policy. */
const prepare = (cache: PolicyCache, payload: CompletionsCreateReq, stream: boolean) =>
  Effect.gen(function* () {
    yield* checkProject(payload.project_id)
    const request = yield* decodeRequest(payload.inputs, stream)
    const model = request.model ?? payload.inputs.model
    // A damaged checkpoint: a 500 here (the trace surface's errors have no kind for it), its message logged.
    const policy = yield* Effect.orDie(resolvePolicy(model, cache))
    if (Option.isNone(policy)) return yield* Effect.fail(new NotFound({ reason: `Model ${model} not found` }))
    return { request, model, policy: policy.value }
  })

const usageSummary = (model: string, usage: Usage | null | undefined): JsonObject => ({
  usage: {
    [model]: {
      prompt_tokens: usage?.prompt_tokens ?? 0,
      completion_tokens: usage?.completion_tokens ?? 0,
      total_tokens: usage?.total_tokens ?? 0,
      requests: 1
    }
  }
})

/** A traced completion's call: started when made, ended by `end`. */
const tracedCall = (payload: CompletionsCreateReq, track: boolean) =>
  Effect.gen(function* () {
    if (!track) return undefined
    const store = yield* TraceCalls.TraceCalls
    const id = yield* newId
    const traceId = yield* newId
    const started = yield* now
    const start: TraceCalls.CallStart = {
      project_id: payload.project_id,
      id,
      trace_id: traceId,
      parent_id: null,
      op_name: COMPLETIONS_OP,
      display_name: null,
      thread_id: null,
      turn_id: null,
      started_at: started.iso,
      started_key: started.micros,
      attributes: {},
      // The inputs schema is an open record of JSON values.
      inputs: payload.inputs as JsonObject,
      wb_user_id: payload.wb_user_id ?? null,
      wb_run_id: null,
      wb_run_step: null
    }
    const end = (output: Option.Option<JsonValue>, summary: JsonObject, exception: string | null) =>
      Effect.flatMap(now, (ended) =>
        store.batch([
          {
            mode: "end",
            end: {
              project_id: payload.project_id,
              id,
              ended_at: ended.iso,
              output,
              summary,
              exception,
              wb_run_step_end: null
            }
          }
        ])
      )
    return { id, start, end, begin: store.batch([{ mode: "start", start }]) }
  })

/** `POST /completions/create` over a policy cache. */
export const completionsCreate =
  (cache: PolicyCache, budget: SamplingBudget) =>
  ({ payload }: { readonly payload: CompletionsCreateReq }) =>
    Effect.gen(function* () {
      const { request, model, policy } = yield* prepare(cache, payload, false)
      const call = yield* tracedCall(payload, payload.track_llm_call !== false)
      const prepared = yield* checked(policy, request, model, budget)
      if (!(yield* budget.reserve(prepared.tokens))) return busy(budget, prepared.tokens)
      const completion = yield* runRounds(prepared.rounds())
      // The encoded completion is plain JSON (every field a JSON value).
      const response = Schema.encodeSync(ChatCompletion)(completion) as unknown as JsonObject
      if (call !== undefined) {
        yield* call.begin
        yield* call.end(Option.some(response), usageSummary(model, completion.usage), null)
      }
      return { response, weave_call_id: call?.id ?? null }
    })

/** `POST /completions/create_stream` over a policy cache. */
export const completionsCreateStream =
  (cache: PolicyCache, budget: SamplingBudget) =>
  ({ payload }: { readonly payload: CompletionsCreateReq }) =>
    Effect.gen(function* () {
      const { request, model, policy } = yield* prepare(cache, payload, true)
      const wantsUsage = request.stream_options?.include_usage === true
      // Usage is always decoded, to trace it; the client gets the usage chunk only when it asked for it.
      const engineRequest = { ...request, stream_options: { ...request.stream_options, include_usage: true } }
      const prepared = yield* checked(policy, engineRequest, model, budget)
      if (!(yield* budget.reserve(prepared.tokens))) return busy(budget, prepared.tokens)
      const chunks = prepared.stream()
      const call = yield* tracedCall(payload, payload.track_llm_call !== false)
      if (call !== undefined) yield* call.begin
      // The response recorded: the chunks joined into the completion `completions/create` would have recorded.
      const joined = new ChunkJoin()
      let finished = false
      const lines = chunkStream(chunks).pipe(
        Stream.tap((chunk) =>
          Effect.sync(() => {
            joined.add(chunk)
          })
        ),
        Stream.filter(
          (chunk) => wantsUsage || chunk.choices.length > 0 || chunk.usage === null || chunk.usage === undefined
        ),
        Stream.onEnd(
          Effect.sync(() => {
            finished = true
          })
        ),
        Stream.catchAll((error) =>
          Stream.fromEffect(
            Effect.as(
              Effect.logError("trace completion stream failed", error),
              error instanceof EngineError ? { error: error.message } : { error: "Internal Server Error" }
            )
          )
        ),
        Stream.ensuring(
          call === undefined
            ? Effect.void
            : Effect.suspend(() => {
                const completion = joined.completion()
                return call.end(
                  completion === undefined
                    ? Option.none()
                    : Option.some(Schema.encodeSync(ChatCompletion)(completion) as unknown as JsonObject),
                  usageSummary(model, joined.usage),
                  finished ? null : "The stream ended before the completion did"
                )
              })
        )
      )
      return jsonLinesStream(Stream.concat(Stream.make({ _meta: { weave_call_id: call?.id ?? null } }), lines))
    })
