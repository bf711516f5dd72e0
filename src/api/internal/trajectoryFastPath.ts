/**
 * A fast decoder of the entries of a trajectory's `messages_and_choices` (`Schema.Union(EntryChoice, Message)` in
 * ../Trajectory.ts), which every RL step crosses three times (the client encodes its trajectories, the server
 * decodes the job body, the training worker decodes the stored request): through the schema's union, an entry
 * cost about 25 KB of allocation a pass, a sixth of everything `npm start`'s main thread allocated. It builds what
 * the union gives, in one pass, from the chat-completions fast paths (a choice as `Choice` decodes it, a message
 * as `Message` does), and declines anything it is not sure of, which then goes to the schema (`checked`'s `fast`
 * option, in ../Trajectory.ts), so that every failure is the schema's own. The two sides of the union are the same
 * (no transformation inside), so one function serves both directions.
 *
 * @internal
 */
import { choice } from "./chatCompletionFastPath.js"
import { message } from "./chatRequestFastPath.js"
import { DECLINED, has, isRecord } from "./fastPath.js"

/**
 * An entry as the union gives it, or `undefined`. A choice (`index` and `message`, no `role`) is what `Choice`
 * gives: `EntryChoice` is `Choice` but for custom tool calls, which `choice` declines. A message (no `index`, no
 * `message`, so `EntryChoice` refuses it) is what `Message` gives. Anything else is the union's to decide.
 */
export const entry = (u: unknown): Record<string, unknown> | undefined => {
  if (!isRecord(u)) return undefined
  const choiceKeys = has(u, "index") || has(u, "message")
  if (choiceKeys) {
    if (has(u, "role") || !has(u, "index") || !has(u, "message")) return undefined
    const decoded = choice(u)
    return decoded === DECLINED ? undefined : (decoded as Record<string, unknown>)
  }
  const decoded = message(u)
  return decoded === DECLINED ? undefined : (decoded as Record<string, unknown>)
}
