import { describe, expect, it } from "@effect/vitest"
import type { Trajectory, TrajectoryGroup } from "../../src/api/Trajectory.js"
import { compute, populationStd } from "../../src/workflow/Metrics.js"

const trajectory = (reward: number, metrics?: Trajectory["metrics"]): Trajectory => ({
  messages_and_choices: [],
  reward,
  ...(metrics === undefined ? {} : { metrics })
})

describe("Metrics.compute", () => {
  it("computes the client metrics of rl-math.md by hand", () => {
    const groups: ReadonlyArray<TrajectoryGroup> = [
      // rewards 0 and 1: std 0.5, trainable
      {
        trajectories: [trajectory(0, { turns: 2, solved: false }), trajectory(1, { turns: 4, solved: true })],
        metrics: { difficulty: 3 },
        exceptions: [{ type: "Timeout", message: "slow", traceback: "" }]
      },
      // rewards 1, 1, 1: std 0, not trainable
      {
        trajectories: [trajectory(1, { turns: 6 }), trajectory(1), trajectory(1, { solved: true })],
        metrics: { difficulty: 5, hard: true }
      },
      // one trajectory: not in reward_std_dev, not trainable
      { trajectories: [trajectory(0.5)] }
    ]
    expect(compute(groups)).toEqual({
      reward: (0 + 1 + 1 + 1 + 1 + 0.5) / 6,
      reward_std_dev: (0.5 + 0) / 2,
      exception_rate: 1 / 7,
      turns: (2 + 4 + 6) / 3,
      solved: (0 + 1 + 1) / 3,
      group_difficulty: 4,
      group_hard: 1,
      num_scenarios: 3,
      num_trajectories: 6,
      num_groups_submitted: 3,
      num_groups_trainable: 1
    })
  })

  it("leaves out means over nothing", () => {
    expect(compute([])).toEqual({
      num_scenarios: 0,
      num_trajectories: 0,
      num_groups_submitted: 0,
      num_groups_trainable: 0
    })
    expect(compute([{ trajectories: [], exceptions: [{ type: "E", message: "m", traceback: "" }] }])).toMatchObject({
      exception_rate: 1,
      num_trajectories: 0
    })
  })

  it("takes the population standard deviation", () => {
    expect(populationStd([2, 4, 4, 4, 5, 5, 7, 9])).toBe(2)
    expect(populationStd([3])).toBe(0)
  })
})
