import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { ChatCompletion, Choice } from "../../src/api/ChatCompletion.js"
import { Tool, UserMessage } from "../../src/api/ChatMessage.js"
import { SystemCheck } from "../../src/api/Health.js"
import { HTTPValidationError } from "../../src/api/HttpValidationError.js"
import {
  CreateSftTrainingJob,
  CreateTrainingJob,
  ExperimentalConfig,
  GradientStep,
  SftTrainingConfig,
  sftExtraKeys,
  TrainingEnded,
  TrainingFailed,
  TrainingJob,
  TrainingJobEvent,
  TrainingStarted
} from "../../src/api/TrainingJob.js"
import { LogResult } from "../../src/api/Trajectory.js"

const modelId = "3f1c9a52-7d2e-4b8a-9c61-0e5f4d3b2a19"
const jobId = "8b0e6c1d-2f4a-4e7b-a3c5-9d1f0b2e4c6a"
const eventId = "c2d4e6f8-0a1b-4c3d-8e5f-7a9b1c3d5e7f"

/** A job record as the published `TrainingJobResponse` has it: its nine fields. */
const job = {
  id: jobId,
  model_id: modelId,
  status: "PENDING",
  progress: null,
  error_message: null,
  training_start: null,
  training_end: null,
  created_at: "2026-01-01T00:00:00Z",
  updated_at: "2026-01-01T00:00:00Z"
}

/** Decoding keeps `input` as it is, and so does encoding the decoded value (and the JSON of it). */
const keptBothWays = <A, I>(schema: Schema.Schema<A, I>, input: unknown) => {
  const decoded = Schema.decodeUnknownSync(schema)(input)
  expect(decoded).toStrictEqual(input)
  const encoded = Schema.encodeSync(schema)(decoded)
  expect(encoded).toStrictEqual(input)
  expect(JSON.parse(JSON.stringify(encoded))).toStrictEqual(input)
}

/** The paths of the issues of decoding `input`. */
const issuePaths = <A, I>(schema: Schema.Schema<A, I>, input: unknown) =>
  Either.match(Schema.decodeUnknownEither(schema)(input), {
    onLeft: (error) => ParseResult.ArrayFormatter.formatErrorSync(error).map((issue) => issue.path),
    onRight: () => []
  })

describe("open records keep unknown keys", () => {
  const experimentalConfig = {
    learning_rate: 5e-6,
    loss_fn: "cispo",
    importance_sampling_level: "token",
    kimi_k2_tau: null,
    future_knob: 0.25,
    schedule: { warmup_steps: 10, kind: "cosine", milestones: [100, 200] },
    tags: ["a", null, true]
  }

  it("ExperimentalConfig, alone and inside CreateTrainingJob", () => {
    keptBothWays(ExperimentalConfig, experimentalConfig)
    keptBothWays(CreateTrainingJob, {
      model_id: modelId,
      trajectory_groups: [],
      experimental_config: experimentalConfig
    })
  })

  it("ExperimentalConfig still types the keys it names", () => {
    expect(issuePaths(ExperimentalConfig, { ...experimentalConfig, learning_rate: "fast" })).toContainEqual([
      "learning_rate"
    ])
    expect(issuePaths(ExperimentalConfig, { loss_fn: "reinforce" })).toContainEqual(["loss_fn"])
  })

  it("TrainingJob: the published record's nine fields, a backend's own and others kept", () => {
    keptBothWays(TrainingJob, job)
    keptBothWays(TrainingJob, {
      ...job,
      status: "RUNNING",
      progress: 0.25,
      training_start: "2026-01-01T00:00:01Z",
      kind: "rl",
      step: 3,
      queue_position: 2,
      resources: { gpus: 8, region: "us-east" }
    })
  })

  it("TrainingJob: a status of a newer service is UNKNOWN, its name kept and sent back", () => {
    const paused = { ...job, status: "PAUSED" }
    const decoded = Schema.decodeUnknownSync(TrainingJob)(paused)
    expect(decoded.status).toBe("UNKNOWN")
    expect(decoded.unknown_status).toBe("PAUSED")
    expect(Schema.encodeSync(TrainingJob)(decoded)).toStrictEqual(paused)
    for (const status of ["PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED"]) {
      expect(Schema.decodeUnknownSync(TrainingJob)({ ...job, status })).toStrictEqual({ ...job, status })
    }
  })

  it("TrainingJob: each of the nine fields is required", () => {
    for (const key of Object.keys(job)) {
      const rest: Record<string, unknown> = { ...job }
      delete rest[key]
      expect(issuePaths(TrainingJob, rest)).toContainEqual([key])
    }
  })

  it("the data of every training job event", () => {
    const started = { id: eventId, type: "training_started", data: { num_sequences: 12, scheduler: "fifo" } }
    const step = { id: eventId, type: "gradient_step", data: { loss: 0.5, group_metric_accuracy: 0.75, note: "warm" } }
    const ended = { id: eventId, type: "training_ended", data: { checkpoint_step: 4, artifacts: ["a", "b"] } }
    const failed = { id: eventId, type: "training_failed", data: { error_message: "OOM", exit_code: 137 } }
    keptBothWays(TrainingStarted, started)
    keptBothWays(GradientStep, step)
    keptBothWays(TrainingEnded, ended)
    keptBothWays(TrainingFailed, failed)
    for (const event of [started, step, ended, failed]) keptBothWays(TrainingJobEvent, event)
  })

  it("the system check and the log result", () => {
    keptBothWays(SystemCheck, {
      api: true,
      database: true,
      cpu_queue: { success: true, duration: 0.1, errors: null, workers: 4 },
      gpu_queue: null,
      version: "2025.1"
    })
    keptBothWays(LogResult, { metrics: { reward: 0.5 }, stored: 12 })
  })

  it("an unknown key must still hold JSON", () => {
    expect(issuePaths(ExperimentalConfig, { future_knob: Number.NaN })).toContainEqual(["future_knob"])
    expect(() => Schema.encodeUnknownSync(TrainingJob)({ ...job, callback: () => 1 })).toThrow()
  })
})

describe("the SFT job body is closed, as the published schema is", () => {
  const body = { model_id: modelId, training_data_url: "wandb-artifact:///team/project/sft-data:v0" }
  const config = { batch_size: "auto", learning_rate: [1e-5, 5e-6], assistant_turns: "last" }

  it("what it names passes both ways", () => {
    keptBothWays(SftTrainingConfig, config)
    keptBothWays(SftTrainingConfig, { batch_size: 32, metric_logging: { enabled: true, target_training_step: 2 } })
    keptBothWays(CreateSftTrainingJob, { ...body, config, experimental_config: {} })
  })

  it("an unknown key anywhere, or any key in experimental_config, fails at the key", () => {
    expect(issuePaths(CreateSftTrainingJob, { ...body, epochs: 3 })).toContainEqual(["epochs"])
    expect(issuePaths(CreateSftTrainingJob, { ...body, config: { ...config, epochs: 3 } })).toContainEqual([
      "config",
      "epochs"
    ])
    expect(
      issuePaths(CreateSftTrainingJob, { ...body, config: { metric_logging: { enabled: true, every: 2 } } })
    ).toContainEqual(["config", "metric_logging", "every"])
    expect(issuePaths(CreateSftTrainingJob, { ...body, experimental_config: { packing: true } })).toContainEqual([
      "experimental_config",
      "packing"
    ])
    expect(() => Schema.encodeUnknownSync(CreateSftTrainingJob)({ ...body, config: { epochs: 3 } })).toThrow(/epochs/)
    expect(
      sftExtraKeys({
        ...body,
        seed: 1,
        config: { epochs: 3, metric_logging: { every: 2 } },
        experimental_config: { packing: true }
      })
    ).toEqual([
      ["seed"],
      ["config", "epochs"],
      ["config", "metric_logging", "every"],
      ["experimental_config", "packing"]
    ])
    expect(sftExtraKeys({ ...body, config, experimental_config: {} })).toEqual([])
  })

  it("batch_size is 1 to 32 or auto", () => {
    for (const batch_size of [0, 33, 1.5, "big"]) {
      expect(issuePaths(SftTrainingConfig, { batch_size })).toContainEqual(["batch_size"])
    }
  })
})

describe("validation errors", () => {
  it("keep the input and ctx a pydantic v2 service sends (the trace document's newest ValidationError)", () => {
    const body = {
      detail: [
        {
          loc: ["body", "config", "batch_size"],
          msg: "Input should be less than or equal to 32",
          type: "less_than_equal",
          input: 40,
          ctx: { le: 32 }
        },
        { loc: ["query", "limit"], msg: "Field required", type: "missing" }
      ]
    }
    expect(Schema.decodeUnknownSync(HTTPValidationError)(body)).toStrictEqual(body)
  })
})

describe("closed records drop unknown keys", () => {
  it("a chat message, on decode and on encode", () => {
    const message = { role: "user", content: "hi", name: "alice" }
    const withExtra = { ...message, metadata: { source: "web" }, reasoning: "dropped" }
    expect(Schema.decodeUnknownSync(UserMessage)(withExtra)).toStrictEqual(message)
    expect(Schema.encodeUnknownSync(UserMessage)(withExtra)).toStrictEqual(message)
  })

  it("a tool, a choice and a completion", () => {
    const tool = { type: "function", function: { name: "add" } }
    expect(
      Schema.decodeUnknownSync(Tool)({ ...tool, cache_control: {}, function: { ...tool.function, x: 1 } })
    ).toStrictEqual(tool)
    const choice = { index: 0, message: { role: "assistant", content: "4" }, finish_reason: "stop" }
    expect(
      Schema.decodeUnknownSync(Choice)({ ...choice, matched_stop: 2, message: { ...choice.message, extra: 1 } })
    ).toStrictEqual(choice)
    const completion = {
      model: "m",
      choices: [choice],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 }
    }
    expect(Schema.decodeUnknownSync(ChatCompletion)({ ...completion, nvext: { timing: 1 } })).toStrictEqual(completion)
  })
})
