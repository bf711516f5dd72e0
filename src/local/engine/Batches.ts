/**
 * From the wire to the trainer: trajectory groups as an RL job carries them (choices with their logprobs)
 * become the trainer's token sequences, and SFT conversations (`{messages, tools?}` lines) become sequences
 * whose assistant turns are learned.
 *
 * @since 0.1.0
 */
import type { Choice } from "../../api/ChatCompletion.js"
import { contentText, type Message, type Tool } from "../../api/ChatMessage.js"
import type { TrajectoryGroup } from "../../api/Trajectory.js"
import { type MessageOrChoice, renderTrajectory } from "./ChatTemplate.js"
import type { TrainingSequence } from "./LanguageModel.js"
import type { RlGroup } from "./Trainer.js"

/**
 * The trainer's groups of an RL job: each trajectory's conversation rendered to tokens (the choices'
 * sampled tokens trainable, with their recorded logprobs), its `additional_histories` rendered alike (each
 * with its own tools; their choices trained with the trajectory's advantage), its reward, and the group's
 * failed rollouts. Throws `EngineError` when a recorded token is not a token of this tokenizer.
 */
export const rlGroupsOf = (groups: ReadonlyArray<TrajectoryGroup>): Array<RlGroup> =>
  groups.map((group) => ({
    items: group.trajectories.map((trajectory) => ({
      sequence: renderTrajectory(trajectory.messages_and_choices, trajectory.tools),
      additional: trajectory.additional_histories?.map((history) =>
        renderTrajectory(history.messages_and_choices, history.tools)
      ),
      reward: trajectory.reward
    })),
    exceptions: group.exceptions?.length ?? 0
  }))

/** One SFT example: a conversation and the tools offered in it. */
export interface SftExample {
  readonly messages: ReadonlyArray<Message>
  readonly tools?: ReadonlyArray<Tool> | null | undefined
}

const asChoice = (message: Message): Choice => ({
  index: 0,
  message: { role: "assistant", content: contentText("content" in message ? message.content : "") },
  finish_reason: "stop"
})

const isAssistant = (message: Message): boolean => "role" in message && message.role === "assistant"

/**
 * The sequence of an SFT example: assistant turns are learned (`all` of them, or the `last` one only), the
 * rest is context. An example with no assistant turn to learn gives a sequence with nothing to learn.
 */
export const sftSequenceOf = (example: SftExample, assistantTurns: "all" | "last" = "all"): TrainingSequence => {
  const last = example.messages.findLastIndex(isAssistant)
  const entries: Array<MessageOrChoice> = example.messages.map((message, i) =>
    isAssistant(message) && (assistantTurns === "all" || i === last) ? asChoice(message) : message
  )
  return renderTrajectory(entries, example.tools)
}
