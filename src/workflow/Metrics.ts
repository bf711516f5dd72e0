/**
 * The metrics a client computes over a set of trajectory groups (as the reference client
 * of the training service computes them), as a pure function: the same numbers the log endpoint of the embedded backend returns.
 *
 * - `reward`: the mean reward over trajectories;
 * - `reward_std_dev`: the mean, over groups with more than one trajectory, of the group's population std;
 * - `exception_rate`: exceptions / (trajectories + exceptions);
 * - every numeric trajectory metric (booleans as 0/1): its mean over the trajectories that have it;
 * - `group_<metric>`: the mean of a group-level metric over the groups that have it;
 * - `num_scenarios` (groups), `num_trajectories`, `num_groups_submitted`, `num_groups_trainable` (groups
 *   whose rewards differ).
 *
 * A mean over nothing is left out rather than reported as NaN.
 *
 * @since 0.1.0
 */
import { compute as computeMetrics, mean as meanOf, populationStd as std } from "../api/internal/metrics.js"
import type { TrajectoryGroup } from "../api/Trajectory.js"

/** Metrics by name: finite numbers. */
export type Metrics = Record<string, number>

/** The metrics of a set of trajectory groups (see the module comment). */
export const compute: (groups: ReadonlyArray<TrajectoryGroup>) => Metrics = computeMetrics

/** The population standard deviation of some numbers (0 for fewer than two). */
export const populationStd: (values: ReadonlyArray<number>) => number = std

/** The mean of some numbers, or `undefined` for none. */
export const mean: (values: ReadonlyArray<number>) => number | undefined = meanOf
