/**
 * The real embedded backend for the workflow tests, with both real clients pointed at it: the package's own
 * `Backend.local` (the layer users run), with the test key; and a one-turn task the loop tests train on.
 */
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import type { ChatCompletion } from "../../src/api/ChatCompletion.js"
import type { Message, Tool } from "../../src/api/ChatMessage.js"
import { isChoice, type MessageOrChoice } from "../../src/api/Trajectory.js"
import * as Backend from "../../src/Backend.js"
import * as Policy from "../../src/workflow/Policy.js"
import * as Reward from "../../src/workflow/Reward.js"
import * as Rollout from "../../src/workflow/Rollout.js"
import { DATA_ROOT } from "../server/support.js"
import { API_KEY } from "../support/clients.js"

/** The real embedded backend and both real clients against it. */
export const WorkflowBackend = Backend.local({ apiKey: Redacted.make(API_KEY), allowDirs: [DATA_ROOT] })

/** The base model the embedded backend serves. */
export const TINY = "effect-rl/tiny"

/** One turn: the model picks a letter (constrained to a, b or c). */
export const pick = (scenario: string) =>
  Effect.gen(function* () {
    const completion = yield* Rollout.chat({
      messages: [{ role: "user", content: `pick ${scenario}` } as Message],
      structured_outputs: { choice: ["a", "b", "c"] },
      max_completion_tokens: 2
    })
    return completion.choices[0]?.message.content ?? ""
  })

/** 1 for the scenario's letter, else 0. */
export const reward = Reward.fromFunction<string, string>(({ scenario, value }) => (value === scenario ? 1 : 0))

/** One turn: the model answers "yes" or "no" (constrained), sampled with `seed` when one is given. */
export const yesOrNo = (question: string, seed?: number) =>
  Effect.gen(function* () {
    const completion = yield* Rollout.chat({
      messages: [{ role: "user", content: question } as Message],
      structured_outputs: { choice: ["yes", "no"] },
      max_completion_tokens: 4,
      ...(seed === undefined ? {} : { seed })
    })
    return completion.choices[0]?.message.content ?? ""
  })

/**
 * `yesOrNo` with one seed per rollout, counted up in the order the loop starts them (the fibers start in fork
 * order): a run samples the same answers every time, under any load.
 */
export const seededYesOrNo = () => {
  let next = 0
  return (question: string) => Effect.suspend(() => yesOrNo(question, next++))
}

/**
 * A trajectory entry without what differs between two runs of the same conversation (completion and call
 * ids), to compare what two ways of writing an agent recorded.
 */
export const normalized = (entry: MessageOrChoice): unknown => {
  const json = JSON.parse(JSON.stringify(entry)) as Record<string, unknown>
  const calls = (isChoice(entry) ? (json.message as Record<string, unknown>) : json).tool_calls
  if (Array.isArray(calls)) for (const call of calls) call.id = "<id>"
  if (typeof json.tool_call_id === "string") json.tool_call_id = "<id>"
  return json
}

/**
 * A two-turn tool conversation written by hand with `Rollout.chat` (a system prompt and a question, a turn
 * that must call a tool, the call's `result`, a turn without calls): what an agent written another way
 * should record for the same conversation.
 */
export const toolTurnsByHand = (
  policy: Policy.Policy,
  options: {
    readonly system: string
    readonly question: string
    readonly tools: ReadonlyArray<Tool>
    readonly request: Partial<Policy.Request>
    readonly result: string
  }
) =>
  Rollout.run(
    policy,
    Effect.gen(function* () {
      const { request, tools } = options
      const messages: Array<Message> = [
        { role: "system", content: options.system },
        { role: "user", content: options.question }
      ]
      const first = yield* Rollout.chat({ ...request, messages, tools, tool_choice: "required" })
      const call = first.choices[0]!.message.tool_calls![0]!
      messages.push(Rollout.assistantMessage(first.choices[0]!), {
        role: "tool",
        tool_call_id: call.id!,
        content: options.result
      })
      yield* Rollout.chat({ ...request, messages, tools, tool_choice: "none" })
    })
  )

/** The kinds of a trajectory's entries: a role, or `choice`. */
export const entryKinds = (entries: ReadonlyArray<MessageOrChoice>): ReadonlyArray<string> =>
  entries.map((e) => (isChoice(e) ? "choice" : (e as { readonly role: string }).role))

/** A policy that answers every request at once with `content` (no backend: what is tested is around it). */
export const instant = (name: string, content: string): Policy.Policy =>
  Policy.make({
    name,
    complete: (request) =>
      Effect.succeed({
        id: `chatcmpl-${name}`,
        object: "chat.completion",
        created: 0,
        model: request.model,
        choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content } }],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 }
      } as unknown as ChatCompletion)
  })
