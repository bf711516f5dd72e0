import { describe } from "@effect/vitest"
import * as Schema from "effect/Schema"
import * as Health from "../../src/api/Health.js"
import * as HttpValidationError from "../../src/api/HttpValidationError.js"
import * as InferenceModel from "../../src/api/InferenceModel.js"
import * as Model from "../../src/api/Model.js"
import * as TrainingApi from "../../src/api/TrainingApi.js"
import * as TrainingJob from "../../src/api/TrainingJob.js"
import * as Trajectory from "../../src/api/Trajectory.js"
import { arbitraryOf, roundTrip } from "./roundTrip.js"

/**
 * The derived arbitrary draws up to ten elements per array at every level, so a `LogRequest` (groups of
 * trajectories of messages and choices of logprobs) reaches hundreds of kilobytes and takes about a second
 * per value to draw and check. These variants bound the outer arrays only: their values are values of the
 * real schemas, which the round trip then uses.
 */
const fewTrajectoryGroups = (max: number) =>
  Schema.Array(
    Schema.Struct({
      ...Trajectory.TrajectoryGroup.fields,
      trajectories: Schema.Array(Trajectory.Trajectory).pipe(Schema.maxItems(2))
    })
  ).pipe(Schema.maxItems(max))

const SmallTrajectoryGroup = Schema.Struct({
  ...Trajectory.TrajectoryGroup.fields,
  trajectories: Schema.Array(Trajectory.Trajectory).pipe(Schema.maxItems(3))
})
const SmallLogRequest = Schema.Struct({ ...Trajectory.LogRequest.fields, trajectory_groups: fewTrajectoryGroups(2) })
const SmallCreateTrainingJob = Schema.Struct({
  ...TrainingJob.CreateTrainingJob.fields,
  trajectory_groups: fewTrajectoryGroups(2)
})

describe("Model round trips", () => {
  roundTrip("ModelCreate", Model.ModelCreate)
  roundTrip("Model", Model.Model)
  roundTrip("DeleteModelResult", Model.DeleteModelResult)
  roundTrip("Checkpoint", Model.Checkpoint)
  roundTrip("CheckpointPage", Model.CheckpointPage)
  roundTrip("DeleteCheckpointsRequest", Model.DeleteCheckpointsRequest)
  roundTrip("DeleteCheckpointsResult", Model.DeleteCheckpointsResult)
})

describe("Trajectory round trips", () => {
  roundTrip("MessageOrChoice", Trajectory.MessageOrChoice)
  roundTrip("Trajectory", Trajectory.Trajectory, { numRuns: 50 })
  roundTrip("History", Trajectory.History, { numRuns: 50 })
  roundTrip("RolloutException", Trajectory.RolloutException)
  roundTrip("TrajectoryGroup", Trajectory.TrajectoryGroup, {
    numRuns: 50,
    arbitrary: arbitraryOf(SmallTrajectoryGroup)
  })
  roundTrip("LogRequest", Trajectory.LogRequest, { numRuns: 50, arbitrary: arbitraryOf(SmallLogRequest) })
  roundTrip("LogResult", Trajectory.LogResult)
})

describe("TrainingJob round trips", () => {
  roundTrip("ExperimentalConfig", TrainingJob.ExperimentalConfig)
  roundTrip("CreateTrainingJob", TrainingJob.CreateTrainingJob, {
    numRuns: 50,
    arbitrary: arbitraryOf(SmallCreateTrainingJob)
  })
  roundTrip("SftTrainingConfig", TrainingJob.SftTrainingConfig)
  roundTrip("CreateSftTrainingJob", TrainingJob.CreateSftTrainingJob)
  roundTrip("TrainingJob", TrainingJob.TrainingJob)
  roundTrip("TrainingStarted", TrainingJob.TrainingStarted)
  roundTrip("GradientStep", TrainingJob.GradientStep)
  roundTrip("TrainingEnded", TrainingJob.TrainingEnded)
  roundTrip("TrainingFailed", TrainingJob.TrainingFailed)
  roundTrip("TrainingJobEvent", TrainingJob.TrainingJobEvent)
  roundTrip("TrainingJobEventPage", TrainingApi.TrainingJobEventPage)
})

describe("inference, health and error round trips", () => {
  roundTrip("ModelList", InferenceModel.ModelList)
  roundTrip("SystemCheck", Health.SystemCheck)
  roundTrip("QueueCheck", Health.QueueCheck)
  roundTrip("HTTPValidationError", HttpValidationError.HTTPValidationError)
})
