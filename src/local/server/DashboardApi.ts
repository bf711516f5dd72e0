/**
 * The dashboard's read endpoints: an extension of the embedded backend under `/v1/local/`, not in the hosted
 * contract. Each takes the key like every route (`Authorization: Bearer <key>`); errors are `{"detail": ...}`
 * naming what was wrong: 404 for an unknown model, log entry or trajectory, 400 for a bad `limit`, `cursor`
 * or `sort`.
 *
 * - `GET /v1/local/models`: `{data: [...]}`, every model with `latest_step`, `last_reward`,
 *   `last_val_reward` (the last logged `train` and `val` rewards), `job_status` (its latest job's) and `jobs`.
 * - `GET /v1/local/models/{model_id}/overview`: `{model, logs, agent_metrics, rollout_metrics, gradient_steps,
 *   checkpoints, jobs}`: every log entry (`id, split, step, metrics` as the log endpoint stored them), the names
 *   among those metrics that are the agents' own (the trajectories' metrics, each a mean over the entry's
 *   trajectories, and `group_<name>` of the groups') and those the rollouts measured (duration, completions,
 *   tokens), in the order they first appear, every `gradient_step` event of the model's jobs (`job_id, index,
 *   metrics`), the checkpoints (`deleted: true` for the steps a job made that retention deleted since) and the
 *   jobs (their events are the training surface's events endpoint).
 * - `GET /v1/local/models/{model_id}/live`: `text/event-stream`; an `overview` event (data: the overview
 *   above) at once and whenever it changes, a comment line every 15 s, closed after 10 minutes (reconnect).
 *   Read it with `fetch` and the `Authorization` header (`EventSource` cannot send one).
 * - `GET /v1/local/logs/{log_id}/trajectories?limit=&cursor=&sort=`: a page of a log entry's trajectories,
 *   `{log, total, data, next_cursor, groups}`: `log` with its model's `model_id` and `model_name`; each row
 *   `group, index, reward, metrics, turns, tool_calls, preview` (no messages), at most `limit` (1 to 200, default 50) of them; `cursor` is the `next_cursor` of
 *   the page before (null on the last page); `sort` is `reward_desc`, `reward_asc` or `position` (default);
 *   `groups` is each group's reward spread (`size, mean, min, max, std`).
 * - `GET /v1/local/logs/{log_id}/trajectories/{group}/{index}`: `{log, trajectory}`, the trajectory as logged
 *   (messages and choices with their logprobs, tools, reward, metrics, metadata).
 *
 * The traces pages read the trace surface's store (`project` is `entity/project`, as the trace surface names
 * projects; 400 without it, 404 for an unknown call):
 *
 * - `GET /v1/local/trace/projects`: `{data: [...]}`, every traced project (at most 200) with `calls`,
 *   `traces` and `latest_started_at`, the latest active first.
 * - `GET /v1/local/trace/traces?project=&limit=&cursor=`: a page of the project's traces (root calls), latest
 *   first, `{data, next_cursor}`: each root without inputs and outputs (`id, trace_id, op_name, display_name,
 *   started_at, ended_at, latency_ms, status, exception, usage, feedback`) and `calls`, how many calls its
 *   trace holds; at most `limit` (1 to 200, default 50); `cursor` is the `next_cursor` of the page before.
 * - `GET /v1/local/trace/calls/{id}/tree?project=`: `{project_id, trace_id, calls, truncated}`, the trace that
 *   holds the call, its calls by start (at most 5,000; `truncated` when there are more), each as above with
 *   `parent_id`; a call's `usage` is its own `summary.usage`, else its children's added up.
 * - `GET /v1/local/trace/calls/{id}?project=`: the call in full, as above with `attributes`, `inputs`,
 *   `output` and `summary`.
 *
 * One route takes no key: `POST /v1/local/sign-in` with `{token}`, a one-time sign-in token the server
 * printed in its dashboard link (`<url>/ui/#token=<token>`, see `SignIn`), answers `{api_key}` once and burns
 * the token; a token used before, unknown or expired is a 401 `{"detail"}` saying which (never echoing it).
 *
 * The page itself is served at `/ui/` (static files, no data, no key needed); see `internal/assets.ts`.
 *
 * @since 0.1.0
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"

/** The path of the dashboard's page on the server. */
export const UI_PATH = "/ui/"

const ModelPath = Schema.Struct({ model_id: Schema.String })
const LogPath = Schema.Struct({ log_id: Schema.String })

/** The query of a trajectory page; checked by the handler, which names a bad value in its 400. */
export const PageParams = Schema.Struct({
  limit: Schema.optional(Schema.String),
  cursor: Schema.optional(Schema.String),
  sort: Schema.optional(Schema.String)
})

/** `GET /v1/local/models` (extension): every model with its latest step, rewards and job status. */
export const listModelSummaries = HttpApiEndpoint.get("listModelSummaries", "/v1/local/models").addSuccess(
  Schema.Struct({ data: Schema.Array(Schema.Unknown) })
)

/** `GET /v1/local/models/{model_id}/overview` (extension): what the model page shows. */
export const modelOverview = HttpApiEndpoint.get("modelOverview", "/v1/local/models/:model_id/overview")
  .setPath(ModelPath)
  .addSuccess(Schema.Unknown)

/** `GET /v1/local/models/{model_id}/live` (extension): the overview as server-sent events, as it changes. */
export const modelLive = HttpApiEndpoint.get("modelLive", "/v1/local/models/:model_id/live")
  .setPath(ModelPath)
  .addSuccess(Schema.String)

/** `GET /v1/local/logs/{log_id}/trajectories` (extension): a bounded page of a log entry's trajectories. */
export const trajectoryPage = HttpApiEndpoint.get("trajectoryPage", "/v1/local/logs/:log_id/trajectories")
  .setPath(LogPath)
  .setUrlParams(PageParams)
  .addSuccess(Schema.Unknown)

/** `GET /v1/local/logs/{log_id}/trajectories/{group}/{index}` (extension): one trajectory in full. */
export const getTrajectory = HttpApiEndpoint.get("getTrajectory", "/v1/local/logs/:log_id/trajectories/:group/:index")
  .setPath(Schema.Struct({ log_id: Schema.String, group: Schema.String, index: Schema.String }))
  .addSuccess(Schema.Unknown)

const CallPath = Schema.Struct({ id: Schema.String })
const ProjectParams = Schema.Struct({ project: Schema.optional(Schema.String) })

/** The query of a page of traces; checked by the handler, which names a bad value in its 400. */
export const TracePageParams = Schema.Struct({
  project: Schema.optional(Schema.String),
  limit: Schema.optional(Schema.String),
  cursor: Schema.optional(Schema.String)
})

/** `GET /v1/local/trace/projects` (extension): every traced project with its counts. */
export const traceProjects = HttpApiEndpoint.get("traceProjects", "/v1/local/trace/projects").addSuccess(
  Schema.Struct({ data: Schema.Array(Schema.Unknown) })
)

/** `GET /v1/local/trace/traces` (extension): a bounded page of a project's traces, latest first. */
export const traceRoots = HttpApiEndpoint.get("traceRoots", "/v1/local/trace/traces")
  .setUrlParams(TracePageParams)
  .addSuccess(Schema.Unknown)

/** `GET /v1/local/trace/calls/{id}/tree` (extension): the calls of the trace holding a call. */
export const traceTree = HttpApiEndpoint.get("traceTree", "/v1/local/trace/calls/:id/tree")
  .setPath(CallPath)
  .setUrlParams(ProjectParams)
  .addSuccess(Schema.Unknown)

/** `GET /v1/local/trace/calls/{id}` (extension): one call in full, with its feedback. */
export const traceCall = HttpApiEndpoint.get("traceCall", "/v1/local/trace/calls/:id")
  .setPath(CallPath)
  .setUrlParams(ProjectParams)
  .addSuccess(Schema.Unknown)

/** The path of the sign-in endpoint, which the edge lets through without the key. */
export const SIGN_IN_PATH = "/v1/local/sign-in"

/** `POST /v1/local/sign-in` (extension, no key): a one-time token for the API key. */
export const signIn = HttpApiEndpoint.post("signIn", SIGN_IN_PATH)
  .setPayload(Schema.Struct({ token: Schema.String }))
  .addSuccess(Schema.Struct({ api_key: Schema.String }))

/** The traces pages' read endpoints (see the module comment). */
export class DashboardTracesGroup extends HttpApiGroup.make("dashboardTraces", { topLevel: true })
  .add(traceProjects)
  .add(traceRoots)
  .add(traceTree)
  .add(traceCall) {}

/** The sign-in endpoint (see the module comment). */
export class SignInGroup extends HttpApiGroup.make("signIn", { topLevel: true }).add(signIn) {}

/** The dashboard's read endpoints (see the module comment). */
export class DashboardGroup extends HttpApiGroup.make("dashboard", { topLevel: true })
  .add(listModelSummaries)
  .add(modelOverview)
  .add(modelLive)
  .add(trajectoryPage)
  .add(getTrajectory) {}
