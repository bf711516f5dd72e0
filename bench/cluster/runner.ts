/**
 * A runner of `bench/cluster.ts`: `<cluster url> <port> <capacity>`, the bench's agents registered, the backend
 * named by env (`EFFECT_RL_TRAINING_URL`, ..., `WANDB_API_KEY`).
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Backend from "../../src/Backend.js"
import * as RolloutCluster from "../../src/workflow/RolloutCluster.js"
import { agents } from "./agents.js"

const [cluster, port, capacity] = process.argv.slice(2)
if (cluster === undefined || port === undefined) throw new Error("usage: <cluster url> <port> [capacity]")

Layer.launch(RolloutCluster.runner({ cluster, agents, port: Number(port), capacity: Number(capacity ?? 4) })).pipe(
  Effect.provide(Backend.hosted()),
  NodeRuntime.runMain
)
