/**
 * The handlers of the api's groups: health and system check, the models group, chat completions and the model
 * list, the jobs group (see `jobs.ts`), the uploaded files extension (see `files.ts`), and each group of the
 * trace surface from its module under `trace/` (calls, objects and dataset delete, tables, files, refs,
 * feedback, costs, threads, completions, OTel export, service).
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { QueueCheck } from "../../../api/Health.js"
import * as Database from "../../store/Database.js"
import { LocalApi } from "../LocalApi.js"
import { DashboardLive } from "./dashboard.js"
import { DashboardTracesLive, SignInLive } from "./dashboardTraces.js"
import * as Files from "./files.js"
import { createChatCompletion, listModels } from "./inference.js"
import * as Jobs from "./jobs.js"
import * as Models from "./models.js"
import * as OpenAiResponses from "./openAiResponses.js"
import { PolicyCache } from "./policyCache.js"
import { Sampling } from "./sampling.js"
import * as TraceCalls from "./trace/calls.js"
import * as TraceCompletions from "./trace/completions.js"
import * as TraceCosts from "./trace/costs.js"
import * as TraceFeedback from "./trace/feedback.js"
import * as TraceFiles from "./trace/files.js"
import * as TraceObjects from "./trace/objects.js"
import * as TraceOtel from "./trace/otel.js"
import * as TraceRefs from "./trace/refs.js"
import * as TraceService from "./trace/service.js"
import * as TraceTables from "./trace/tables.js"
import * as TraceThreads from "./trace/threads.js"
import { callUpsertBatchText } from "./trace/upsertBatch.js"

/** A real query through the SQL client, within two seconds. */
const databaseCheck = Database.ping.pipe(
  Effect.timeout("2 seconds"),
  Effect.catchAllCause((cause) => Effect.as(Effect.logWarning("system check: database check failed", cause), false))
)

/**
 * The queue checks. The embedded backend runs all work on one CPU worker; there is no GPU queue, so that
 * check reports success with `available: false` rather than failing the system check.
 */
const queueCheck = (available: boolean) =>
  Effect.gen(function* () {
    const start = yield* Clock.currentTimeMillis
    const end = yield* Clock.currentTimeMillis
    const check: QueueCheck = { success: true, duration: (end - start) / 1000, errors: [], available }
    return check
  })

const systemCheck = Effect.gen(function* () {
  const [database, cpu_queue, gpu_queue] = yield* Effect.all([databaseCheck, queueCheck(true), queueCheck(false)], {
    concurrency: "unbounded"
  })
  const body = { api: true, database, cpu_queue, gpu_queue }
  const ok = database && cpu_queue.success === true && gpu_queue.success === true
  return ok ? body : HttpServerResponse.unsafeJson(body, { status: 503 })
})

/** The health group: `/v1/health` and `/v1/system-check`. */
export const HealthLive = HttpApiBuilder.group(LocalApi, "health", (handlers) =>
  handlers.handle("health", () => Effect.succeed({ status: "ok" })).handle("systemCheck", () => systemCheck)
)

/** The models group, over the store (see `models.ts`). */
export const ModelsLive = HttpApiBuilder.group(LocalApi, "models", (handlers) =>
  handlers
    .handle("createModel", Models.createModel)
    .handle("deleteModel", Models.deleteModel)
    .handle("deleteCheckpoints", Models.deleteCheckpoints)
    .handle("listCheckpoints", Models.listCheckpoints)
    .handle("log", Models.log)
    .handle("listBaseModels", () => Models.listBaseModels)
)

/** The jobs group, over the store (see `jobs.ts`); the worker runs the jobs it enqueues. */
export const JobsLive = HttpApiBuilder.group(LocalApi, "jobs", (handlers) =>
  handlers
    .handle("createTrainingJob", Jobs.createTrainingJob)
    .handle("createSftTrainingJob", Jobs.createSftTrainingJob)
    .handle("getTrainingJob", Jobs.getTrainingJob)
    .handle("listTrainingJobEvents", Jobs.listTrainingJobEvents)
)

/** The chat group, over the engine (both paths), with one cache of trained policies. */
export const ChatLive = HttpApiBuilder.group(LocalApi, "chat", (handlers) =>
  Effect.map(Sampling, (budget) => {
    const complete = createChatCompletion(new PolicyCache(), budget)
    return handlers.handle("createChatCompletion", complete).handle("createChatCompletionSlash", complete)
  })
)

/** The Responses API, translated onto the engine's chat completions (see `openAiResponses.ts`). */
export const ResponsesLive = HttpApiBuilder.group(LocalApi, "responses", (handlers) =>
  Effect.map(Sampling, (budget) =>
    handlers
      .handle("createResponse", OpenAiResponses.createResponse(new PolicyCache(), budget))
      .handle("getResponse", OpenAiResponses.getResponse)
      .handle("deleteResponse", OpenAiResponses.deleteResponse)
      .handle("listInputItems", OpenAiResponses.listInputItems)
  )
)

/** The inference group's model list. */
export const InferenceLive = HttpApiBuilder.group(LocalApi, "inference", (handlers) =>
  handlers.handle("listModels", () => listModels)
)

/** The uploaded files extension, over the store's `Files`. */
export const FilesLive = HttpApiBuilder.group(LocalApi, "files", (handlers) =>
  handlers.handle("uploadFile", () => Files.uploadFile).handle("getFileContent", Files.getFileContent)
)

/** The trace surface's calls, over the store's `TraceCalls` (see `trace/calls.ts`). */
export const TraceCallsLive = HttpApiBuilder.group(LocalApi, "traceCalls", (handlers) =>
  handlers
    .handle("callStart", TraceCalls.callStart)
    .handle("callEnd", TraceCalls.callEnd)
    // Reads its body's text itself (see `trace/upsertBatch.ts`).
    .handleRaw("callUpsertBatch", callUpsertBatchText)
    .handle("callRead", TraceCalls.callRead)
    .handle("callUpdate", TraceCalls.callUpdate)
    .handle("callsDelete", TraceCalls.callsDelete)
    .handle("callsQueryStats", TraceCalls.callsQueryStats)
    .handle("callsStreamQuery", TraceCalls.callsStreamQuery)
)

/** The trace surface's objects, over the store's `TraceObjects` (see `trace/objects.ts`). */
export const TraceObjectsLive = HttpApiBuilder.group(LocalApi, "traceObjects", (handlers) =>
  handlers
    .handle("objCreate", TraceObjects.objCreate)
    .handle("objRead", TraceObjects.objRead)
    .handle("objsQuery", TraceObjects.objsQuery)
    .handle("objDelete", TraceObjects.objDelete)
)

/** The trace surface's tables, over the store's `TraceObjects` (see `trace/tables.ts`). */
export const TraceTablesLive = HttpApiBuilder.group(LocalApi, "traceTables", (handlers) =>
  handlers
    .handle("tableCreate", TraceTables.tableCreate)
    .handle("tableUpdate", TraceTables.tableUpdate)
    .handle("tableQuery", TraceTables.tableQuery)
    .handle("tableQueryStream", TraceTables.tableQueryStream)
    .handle("tableQueryStats", TraceTables.tableQueryStats)
)

/** The trace surface's files and their plural aliases, over the store's `TraceObjects` (see `trace/files.ts`). */
export const TraceFilesLive = HttpApiBuilder.group(LocalApi, "traceFiles", (handlers) =>
  handlers
    .handle("fileCreate", TraceFiles.fileCreate)
    .handle("filesCreate", TraceFiles.fileCreate)
    .handle("fileContent", TraceFiles.fileContent)
    .handle("filesContent", TraceFiles.fileContent)
)

/** The trace surface's refs (see `trace/refs.ts`). */
export const TraceRefsLive = HttpApiBuilder.group(LocalApi, "traceRefs", (handlers) =>
  handlers.handle("refsReadBatch", TraceRefs.refsReadBatch)
)

/** The trace surface's dataset delete (see `trace/objects.ts`). */
export const TraceDatasetsLive = HttpApiBuilder.group(LocalApi, "traceDatasets", (handlers) =>
  handlers.handle("datasetDelete", TraceObjects.datasetDelete)
)

/** The trace surface's feedback (see `trace/feedback.ts`). */
export const TraceFeedbackLive = HttpApiBuilder.group(LocalApi, "traceFeedback", (handlers) =>
  handlers
    .handle("feedbackCreate", TraceFeedback.feedbackCreate)
    .handle("feedbackQuery", TraceFeedback.feedbackQuery)
    .handle("feedbackPurge", TraceFeedback.feedbackPurge)
    .handle("feedbackReplace", TraceFeedback.feedbackReplace)
)

/** The trace surface's costs (see `trace/costs.ts`). */
export const TraceCostsLive = HttpApiBuilder.group(LocalApi, "traceCosts", (handlers) =>
  handlers
    .handle("costCreate", TraceCosts.costCreate)
    .handle("costQuery", TraceCosts.costQuery)
    .handle("costPurge", TraceCosts.costPurge)
)

/** The trace surface's threads (see `trace/threads.ts`). */
export const TraceThreadsLive = HttpApiBuilder.group(LocalApi, "traceThreads", (handlers) =>
  handlers.handle("threadsStreamQuery", TraceThreads.threadsStreamQuery)
)

/** The trace surface's completions, answered by the engine and traced as calls (see `trace/completions.ts`). */
export const TraceCompletionsLive = HttpApiBuilder.group(LocalApi, "traceCompletions", (handlers) =>
  Effect.map(Sampling, (budget) => {
    const cache = new PolicyCache()
    return handlers
      .handle("completionsCreate", TraceCompletions.completionsCreate(cache, budget))
      .handle("completionsCreateStream", TraceCompletions.completionsCreateStream(cache, budget))
  })
)

/** The trace surface's OpenTelemetry export, both paths (see `trace/otel.ts`). */
export const TraceOtelLive = HttpApiBuilder.group(LocalApi, "traceOtel", (handlers) =>
  handlers.handle("otelExportTraces", TraceOtel.otelExport).handle("otelExportTrace", TraceOtel.otelExport)
)

/** The trace surface's `/health` and `/server_info` (see `trace/service.ts`). */
export const TraceServiceLive = HttpApiBuilder.group(LocalApi, "traceService", (handlers) =>
  handlers.handle("traceHealth", TraceService.traceHealth).handle("serverInfo", TraceService.serverInfo)
)

/** Every group's handlers. */
export const HandlersLive = Layer.mergeAll(
  HealthLive,
  ModelsLive,
  JobsLive,
  ChatLive,
  ResponsesLive,
  InferenceLive,
  FilesLive,
  DashboardLive,
  DashboardTracesLive,
  SignInLive,
  TraceCallsLive,
  TraceObjectsLive,
  TraceTablesLive,
  TraceFilesLive,
  TraceRefsLive,
  TraceDatasetsLive,
  TraceFeedbackLive,
  TraceCostsLive,
  TraceThreadsLive,
  TraceCompletionsLive,
  TraceOtelLive,
  TraceServiceLive
)
