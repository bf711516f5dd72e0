/**
 * effect-rl: reinforcement-learning training orchestration for LLM agents, on Effect.
 *
 * Every module is a namespace here and a subpath export of its own, but for the trace service's wire
 * schemas (`effect-rl/TraceCall`, `TraceObject`, `TraceMisc`, `TraceApi`, `TraceError`, `Digest`): they are
 * subpath exports only, so that importing the package does not build them (the trace client and `Tracing`
 * load them when used); so are the Responses API's (`effect-rl/Responses`, `ResponsesChat`, `ResponsesApi`); and for the agent layers and the cluster (`effect-rl/RolloutModel`, `RolloutOpenAI`,
 * `RolloutCluster`), which need optional peer dependencies.
 *
 * @since 0.1.0
 */

/** Chat completions: request, response, chunk, choice, logprobs and usage. */
export * as ChatCompletion from "./api/ChatCompletion.js"
/** Chat messages, content parts, tools and tool calls. */
export * as ChatMessage from "./api/ChatMessage.js"
/** The training service's health endpoints. */
export * as Health from "./api/Health.js"
/** The 422 validation error body. */
export * as HttpValidationError from "./api/HttpValidationError.js"
/** The inference service defined as an `HttpApi`. */
export * as InferenceApi from "./api/InferenceApi.js"
/** The inference model list. */
export * as InferenceModel from "./api/InferenceModel.js"
/** JSON values on the wire. */
export * as Json from "./api/Json.js"
/** Models, checkpoints and the cursor page envelope. */
export * as Model from "./api/Model.js"
/** The training service defined as an `HttpApi`. */
export * as TrainingApi from "./api/TrainingApi.js"
/** Training jobs, `experimental_config` and job events. */
export * as TrainingJob from "./api/TrainingJob.js"
/** Trajectories, trajectory groups and the log request. */
export * as Trajectory from "./api/Trajectory.js"
/** Where a loop runs: the embedded local backend or the hosted service, as one layer providing both clients. */
export * as Backend from "./Backend.js"
/** The error of every client call. */
export * as ApiError from "./client/ApiError.js"
/** A streamed chat completion read: joined into the unstreamed completion, or folded, through one pull loop. */
export * as ChatStream from "./client/ChatStream.js"
/** The inference service's client. */
export * as InferenceClient from "./client/InferenceClient.js"
/** The trace service's client. */
export * as TraceClient from "./client/TraceClient.js"
/** The training service's client. */
export * as TrainingClient from "./client/TrainingClient.js"
/** Runnable examples: their shape, and the report `effect-rl train <name>` prints. */
export * as Example from "./Example.js"
/** The embedded local backend started in-process (its URL, key and data directory). */
export * as LocalBackend from "./LocalBackend.js"
/** Agents outside the process (a function, an HTTP service, a command) run as rollouts through the gateway. */
export * as ExternalAgent from "./workflow/ExternalAgent.js"
/** Gathering groups of rollouts over scenarios, concurrently, with failures counted. */
export * as Gather from "./workflow/Gather.js"
/** Training scenarios written from an MCP server's tools by a model, and the relative judge of their rollouts. */
export * as McpScenarios from "./workflow/McpScenarios.js"
/** Tools from MCP servers (stdio commands, Streamable HTTP endpoints) in a rollout's tool loop; the SDK loads when used. */
export * as McpTools from "./workflow/McpTools.js"
/** The client-side metrics of a set of trajectory groups. */
export * as Metrics from "./workflow/Metrics.js"
/** The model a rollout talks to: a base model, or a trainable one that follows its checkpoints. */
export * as Policy from "./workflow/Policy.js"
/** Reward functions and their combinators; group scorers (group-relative, an LLM judge). */
export * as Reward from "./workflow/Reward.js"
/** Rollouts: agent code talking to a policy, recorded into a trajectory. */
export * as Rollout from "./workflow/Rollout.js"
/** An agent by name (rollout, reward, wire schemas), for runners of `effect-rl/RolloutCluster`. */
export * as RolloutAgent from "./workflow/RolloutAgent.js"
/** The running rollout's `fetch` and HTTP handler: chat completions and Responses, recorded, for any SDK. */
export * as RolloutFetch from "./workflow/RolloutFetch.js"
/** One HTTP listener giving each running rollout its own OpenAI endpoint and key, for agents in other processes. */
export * as RolloutGateway from "./workflow/RolloutGateway.js"
/** Where SFT training data (JSONL) is written for the backend to read. */
export * as SftData from "./workflow/SftData.js"
/** The durable record of the training jobs a loop submitted, per model and step. */
export * as Submissions from "./workflow/Submissions.js"
/** Tool agents: tools declared with a Schema and an Effect handler, and the loop that lets the policy call them. */
export * as Tools from "./workflow/Tools.js"
/** Tracing of rollouts, chat completions, rewards and training steps into the trace service. */
export * as Tracing from "./workflow/Tracing.js"
/** Logging groups, RL and SFT training jobs followed to the end, checkpoint retention. */
export * as Trainer from "./workflow/Trainer.js"
/** The training loop: steps, evaluation, a target, and resume. */
export * as TrainingLoop from "./workflow/TrainingLoop.js"
