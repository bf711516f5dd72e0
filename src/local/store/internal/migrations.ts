import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { weightsDigest } from "./digest.js"

/** Migration 1: every table of the store. */
const initial = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE models (
    id TEXT PRIMARY KEY NOT NULL,
    entity TEXT NOT NULL,
    project TEXT NOT NULL,
    name TEXT NOT NULL,
    base_model TEXT NOT NULL,
    run_id TEXT,
    created_at TEXT NOT NULL,
    UNIQUE (entity, project, name)
  )`
  yield* sql`CREATE TABLE checkpoints (
    id TEXT PRIMARY KEY NOT NULL,
    model_id TEXT NOT NULL REFERENCES models (id) ON DELETE CASCADE,
    step INTEGER NOT NULL,
    metrics TEXT NOT NULL,
    weights BLOB NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (model_id, step)
  )`
  yield* sql`CREATE TABLE training_jobs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    model_id TEXT NOT NULL REFERENCES models (id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('rl', 'sft')),
    status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed')),
    request TEXT NOT NULL,
    created_at TEXT NOT NULL,
    started_at TEXT,
    finished_at TEXT,
    step INTEGER,
    error_message TEXT
  )`
  yield* sql`CREATE INDEX training_jobs_model_status ON training_jobs (model_id, status, seq)`
  yield* sql`CREATE TABLE job_events (
    id TEXT PRIMARY KEY NOT NULL,
    job_id TEXT NOT NULL REFERENCES training_jobs (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (job_id, seq)
  )`
  yield* sql`CREATE TABLE logs (
    id TEXT PRIMARY KEY NOT NULL,
    model_id TEXT NOT NULL REFERENCES models (id) ON DELETE CASCADE,
    split TEXT NOT NULL,
    step INTEGER NOT NULL,
    trajectory_groups TEXT NOT NULL,
    metrics TEXT NOT NULL,
    created_at TEXT NOT NULL
  )`
  yield* sql`CREATE INDEX logs_model_split_step ON logs (model_id, split, step)`
  yield* sql`CREATE TABLE idempotency_keys (
    key TEXT NOT NULL,
    request TEXT NOT NULL,
    body_hash TEXT NOT NULL,
    status INTEGER NOT NULL,
    response TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (key, request)
  )`
})

/** Migration 2: uploaded files (the server's `/v1/local/files` extension), their bytes kept in the row. */
const files = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE files (
    id TEXT PRIMARY KEY NOT NULL,
    bytes INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    content BLOB NOT NULL,
    created_at TEXT NOT NULL
  )`
})

/**
 * Migration 3: calls of the trace surface. A row may hold an end whose start has not arrived yet
 * (`has_start = 0`); JSON columns hold JSON text, `output` NULL when the call has none. Soft deletion sets
 * `deleted_at`.
 */
const traceCalls = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE trace_calls (
    project_id TEXT NOT NULL,
    id TEXT NOT NULL,
    has_start INTEGER NOT NULL DEFAULT 0,
    trace_id TEXT,
    parent_id TEXT,
    op_name TEXT,
    display_name TEXT,
    thread_id TEXT,
    turn_id TEXT,
    started_at TEXT,
    started_key REAL,
    attributes TEXT,
    inputs TEXT,
    ended_at TEXT,
    output TEXT,
    summary TEXT,
    exception TEXT,
    wb_user_id TEXT,
    wb_run_id TEXT,
    wb_run_step INTEGER,
    wb_run_step_end INTEGER,
    deleted_at TEXT,
    PRIMARY KEY (project_id, id)
  )`
  yield* sql`CREATE INDEX trace_calls_started ON trace_calls (project_id, started_key, id)`
  yield* sql`CREATE INDEX trace_calls_trace ON trace_calls (project_id, trace_id)`
  yield* sql`CREATE INDEX trace_calls_parent ON trace_calls (project_id, parent_id)`
})

/**
 * Migration 4: objects, tables and files of the trace surface. Object versions are rows in creation order
 * (`version_index`), soft-deleted by `deleted_at`; `val` is the JSON text the digest was computed from. Table
 * rows and tables are content-addressed (a table lists its row digests as a JSON array); files keep their bytes.
 */
const traceObjects = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE trace_objects (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id TEXT NOT NULL,
    object_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    version_index INTEGER NOT NULL,
    kind TEXT NOT NULL,
    base_object_class TEXT,
    leaf_object_class TEXT,
    val TEXT NOT NULL,
    created_at TEXT NOT NULL,
    deleted_at TEXT
  )`
  yield* sql`CREATE INDEX trace_objects_versions ON trace_objects (project_id, object_id, version_index)`
  yield* sql`CREATE TABLE trace_table_rows (
    project_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    val TEXT NOT NULL,
    PRIMARY KEY (project_id, digest)
  )`
  yield* sql`CREATE TABLE trace_tables (
    project_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    row_digests TEXT NOT NULL,
    PRIMARY KEY (project_id, digest)
  )`
  yield* sql`CREATE TABLE trace_files (
    project_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    content BLOB NOT NULL,
    PRIMARY KEY (project_id, digest)
  )`
})

/**
 * Migration 5: feedback and LLM token prices of the trace surface. Feedback rows keep creation order (`seq`);
 * `payload` and `extra` (the scorer and span fields) are JSON text. Prices are project-level, by `llm_id`.
 */
const traceFeedback = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE trace_feedback (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id TEXT NOT NULL,
    id TEXT NOT NULL,
    weave_ref TEXT NOT NULL,
    wb_user_id TEXT NOT NULL,
    creator TEXT,
    created_at TEXT NOT NULL,
    feedback_type TEXT NOT NULL,
    payload TEXT NOT NULL,
    annotation_ref TEXT,
    runnable_ref TEXT,
    call_ref TEXT,
    trigger_ref TEXT,
    queue_id TEXT,
    extra TEXT NOT NULL,
    UNIQUE (project_id, id)
  )`
  yield* sql`CREATE INDEX trace_feedback_ref ON trace_feedback (project_id, weave_ref)`
  yield* sql`CREATE TABLE trace_costs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id TEXT NOT NULL,
    id TEXT NOT NULL,
    llm_id TEXT NOT NULL,
    provider_id TEXT NOT NULL,
    effective_date TEXT NOT NULL,
    prompt_token_cost REAL NOT NULL,
    completion_token_cost REAL NOT NULL,
    prompt_token_cost_unit TEXT NOT NULL,
    completion_token_cost_unit TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (project_id, id)
  )`
  yield* sql`CREATE INDEX trace_costs_llm ON trace_costs (project_id, llm_id)`
})

/**
 * Migration 6: stored responses of the Responses API (`/v1/responses` with `store`): the response and its input
 * items as JSON text, and the response it continues.
 */
const responses = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE responses (
    id TEXT PRIMARY KEY NOT NULL,
    previous_response_id TEXT,
    input_items TEXT NOT NULL,
    response TEXT NOT NULL,
    created_at INTEGER NOT NULL
  )`
})

/**
 * Migration 7: each checkpoint's weights carry their SHA-256 digest (hex), written with them and verified when
 * they are loaded (`Checkpoints.weights`), so damaged weights are an error naming the checkpoint, never
 * sampled. Checkpoints stored before get theirs here, from the weights as they are now.
 */
const checkpointDigests = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE checkpoints ADD COLUMN digest TEXT`
  const rows = yield* sql<{ readonly id: string; readonly weights: Uint8Array }>`SELECT id, weights FROM checkpoints`
  for (const row of rows) yield* sql`UPDATE checkpoints SET digest = ${weightsDigest(row.weights)} WHERE id = ${row.id}`
})

/**
 * Migration 8: training jobs in the published record's shape (`TrainingJobResponse`): the statuses renamed
 * (`queued` `PENDING`, `running` `RUNNING`, `succeeded` `COMPLETED`, `failed` `FAILED`; `CANCELLED` allowed),
 * `started_at` and `finished_at` renamed `training_start` and `training_end`, and `progress` and `updated_at`
 * added (a finished job's progress 1 when it completed; its `updated_at` the last of its times).
 *
 * SQLite cannot change a CHECK constraint in place, so the table is rebuilt, and `job_events` with it: dropping
 * the old `training_jobs` while events still referenced it would delete them (`ON DELETE CASCADE` runs on a
 * DROP, and the migration runs in a transaction, where foreign keys cannot be switched off). The new tables are
 * filled first, the old ones dropped children first, then renamed (SQLite rewrites `job_events`' reference to
 * the new `training_jobs` as it renames it).
 */
const jobRecords = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE training_jobs_8 (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    model_id TEXT NOT NULL REFERENCES models (id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('rl', 'sft')),
    status TEXT NOT NULL CHECK (status IN ('PENDING', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED')),
    request TEXT NOT NULL,
    progress REAL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    training_start TEXT,
    training_end TEXT,
    step INTEGER,
    error_message TEXT
  )`
  yield* sql`INSERT INTO training_jobs_8 (seq, id, model_id, kind, status, request, progress, created_at, updated_at,
      training_start, training_end, step, error_message)
    SELECT seq, id, model_id, kind,
      CASE status WHEN 'queued' THEN 'PENDING' WHEN 'running' THEN 'RUNNING' WHEN 'succeeded' THEN 'COMPLETED'
        ELSE 'FAILED' END,
      request, CASE status WHEN 'succeeded' THEN 1.0 ELSE NULL END, created_at,
      COALESCE(finished_at, started_at, created_at), started_at, finished_at, step, error_message
    FROM training_jobs ORDER BY seq`
  yield* sql`CREATE TABLE job_events_8 (
    id TEXT PRIMARY KEY NOT NULL,
    job_id TEXT NOT NULL REFERENCES training_jobs_8 (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (job_id, seq)
  )`
  yield* sql`INSERT INTO job_events_8 (id, job_id, seq, type, data, created_at)
    SELECT id, job_id, seq, type, data, created_at FROM job_events`
  yield* sql`DROP TABLE job_events`
  yield* sql`DROP TABLE training_jobs`
  yield* sql`ALTER TABLE training_jobs_8 RENAME TO training_jobs`
  yield* sql`ALTER TABLE job_events_8 RENAME TO job_events`
  yield* sql`CREATE INDEX training_jobs_model_status ON training_jobs (model_id, status, seq)`
})

/** The store's migrations, in order, for `Migrator.fromRecord`. */
export const migrations = {
  "1_initial": initial,
  "2_files": files,
  "3_trace_calls": traceCalls,
  "4_trace_objects": traceObjects,
  "5_trace_feedback": traceFeedback,
  "6_responses": responses,
  "7_checkpoint_digests": checkpointDigests,
  "8_job_records": jobRecords
}
