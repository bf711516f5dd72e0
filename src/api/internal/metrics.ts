/**
 * The metrics a client computes when it logs a set of trajectory groups (as the reference
 * client of the training service computes them); the log endpoint stores them and returns them.
 *
 * - `reward`: the mean reward over trajectories;
 * - `reward_std_dev`: the mean, over groups with more than one trajectory, of the group's population std;
 * - `exception_rate`: exceptions / (trajectories + exceptions);
 * - every numeric trajectory metric (booleans as 0/1): its mean over the trajectories that have it;
 * - `group_<metric>`: the mean of a group-level metric over the groups that have it;
 * - `num_scenarios` (groups), `num_trajectories`, `num_groups_submitted`, `num_groups_trainable` (groups whose
 *   rewards differ).
 *
 * A mean over nothing is left out rather than reported as NaN. The computed names win over trajectory
 * metrics of the same name.
 *
 * @since 0.1.0
 */
import type { TrajectoryGroup } from "../Trajectory.js"

/** Metrics by name: finite numbers. */
export type Metrics = Record<string, number>

/**
 * The names {@link compute} gives of its own (beside the trajectories' metrics and the `group_` means of the
 * groups' metrics); a trajectory metric of one of these names is shadowed.
 */
export const COMPUTED: ReadonlySet<string> = new Set([
  "reward",
  "reward_std_dev",
  "exception_rate",
  "num_scenarios",
  "num_trajectories",
  "num_groups_submitted",
  "num_groups_trainable"
])

/**
 * The metrics a rollout measures of itself (`Rollout.run` records them in every trajectory beside the agent's
 * own): its duration, completions and tokens.
 */
export const MEASURED: ReadonlySet<string> = new Set([
  "duration_seconds",
  "completions",
  "prompt_tokens",
  "completion_tokens"
])

/** The mean of some numbers, or `undefined` for none. */
export const mean = (values: ReadonlyArray<number>): number | undefined =>
  values.length === 0 ? undefined : values.reduce((a, b) => a + b, 0) / values.length

/** The population standard deviation of some numbers (0 for fewer than two). */
export const populationStd = (values: ReadonlyArray<number>): number => {
  const mu = mean(values)
  if (mu === undefined || values.length < 2) return 0
  return Math.sqrt(values.reduce((sum, v) => sum + (v - mu) ** 2, 0) / values.length)
}

const numeric = (value: number | boolean): number => (typeof value === "boolean" ? (value ? 1 : 0) : value)

const collect = (into: Map<string, Array<number>>, metrics: Readonly<Record<string, number | boolean>> | undefined) => {
  for (const [name, value] of Object.entries(metrics ?? {})) {
    const v = numeric(value)
    if (!Number.isFinite(v)) continue
    const values = into.get(name)
    if (values === undefined) into.set(name, [v])
    else values.push(v)
  }
}

/** The metrics of a set of trajectory groups (see the module comment). */
export const compute = (groups: ReadonlyArray<TrajectoryGroup>): Metrics => {
  const rewards: Array<number> = []
  const stds: Array<number> = []
  const trajectoryMetrics = new Map<string, Array<number>>()
  const groupMetrics = new Map<string, Array<number>>()
  let exceptions = 0
  let trainable = 0
  for (const group of groups) {
    const groupRewards = group.trajectories.map((t) => t.reward)
    rewards.push(...groupRewards)
    const std = populationStd(groupRewards)
    if (groupRewards.length > 1) stds.push(std)
    if (std > 0) trainable++
    exceptions += group.exceptions?.length ?? 0
    for (const trajectory of group.trajectories) collect(trajectoryMetrics, trajectory.metrics)
    collect(groupMetrics, group.metrics)
  }
  const out: Metrics = {}
  for (const [name, values] of trajectoryMetrics) out[name] = mean(values)!
  for (const [name, values] of groupMetrics) out[`group_${name}`] = mean(values)!
  const reward = mean(rewards)
  if (reward !== undefined) out.reward = reward
  const rewardStd = mean(stds)
  if (rewardStd !== undefined) out.reward_std_dev = rewardStd
  if (rewards.length + exceptions > 0) out.exception_rate = exceptions / (rewards.length + exceptions)
  out.num_scenarios = groups.length
  out.num_trajectories = rewards.length
  out.num_groups_submitted = groups.length
  out.num_groups_trainable = trainable
  return out
}
