/**
 * A stream started before its answer is given: a server that streams a completion answers once the first value
 * has come, so that a completion refused before it produces anything keeps its own status (a 4xx), not a 200
 * followed by an error event.
 */
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Take from "effect/Take"

/** How many chunks a started stream runs ahead of its reader before it waits (its memory is bounded by it). */
export const AHEAD = 64

/** A stream started: its first value (none for an empty stream), and the whole stream, that value first. */
export interface Started<A, E> {
  readonly first: Option.Option<A>
  readonly stream: Stream.Stream<A, E>
}

/**
 * Runs `stream` in a fiber of the scope into a bounded queue, and waits for its first chunk: the failure when it
 * failed before producing anything, else the whole stream (that chunk, then the rest as it comes; whatever has
 * come while the reader was busy is read at once, in one chunk). Closing the scope interrupts the stream.
 */
export const started = <A, E>(
  stream: Stream.Stream<A, E>
): Effect.Effect<Exit.Exit<Started<A, E>, E>, never, Scope.Scope> =>
  startedFrom(Stream.toQueue(stream, { strategy: "suspend", capacity: AHEAD }))

/**
 * {@link started}, from the queue a stream's fiber already fills (made by `queue`, in the reader's scope; e.g.
 * `Rollout.chatQueue` in the rollout's runtime): its first chunk waited for, then the rest read from the same
 * queue, the only one between the stream and its reader.
 */
export const startedFrom = <A, E, R>(
  queue: Effect.Effect<Queue.Dequeue<Take.Take<A, E>>, never, R>
): Effect.Effect<Exit.Exit<Started<A, E>, E>, never, R> =>
  Effect.flatMap(queue, (queue) =>
    Effect.map(Queue.take(queue), (first) =>
      Take.match(first, {
        onEnd: () => Exit.succeed({ first: Option.none(), stream: Stream.empty }),
        onFailure: (cause) => Exit.failCause(cause),
        onSuccess: (chunk) =>
          Exit.succeed({
            first: Chunk.head(chunk),
            stream: Stream.concat(Stream.fromChunk(chunk), Stream.flattenTake(Stream.fromQueue(queue)))
          })
      })
    )
  )
