/**
 * The rollout gateway's keys: each running rollout's key kept as its SHA-256 digest only (never the key), a
 * presented key compared with `timingSafeEqual`, and an ended rollout kept as a tombstone (its digest) in a
 * bounded table, so that the agent holding its key is told the rollout ended rather than that its key is wrong;
 * anyone else is still refused. What a request presents: `Authorization: Bearer <key>`, or `api-key: <key>`
 * (Azure-style clients).
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto"

/** A key's SHA-256 digest. */
const digestOf = (key: string): Buffer => createHash("sha256").update(key).digest()

const sameDigest = (a: Buffer, b: Buffer) => a.length === b.length && timingSafeEqual(a, b)

/** The key a request's headers present: `Authorization: Bearer <key>`, else `api-key: <key>`. */
export const presentedKey = (headers: {
  readonly authorization?: string | undefined
  readonly "api-key"?: string | ReadonlyArray<string> | undefined
}): string | undefined => {
  const authorization = headers.authorization
  if (authorization !== undefined) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization)
    return match?.[1]
  }
  const header = headers["api-key"]
  return typeof header === "string" ? header : undefined
}

/** How a presented key stands against a rollout's: its own, that of the rollout now ended, or refused. */
export type Verdict = "Ok" | "Ended" | "Refused"

/** The keys of the running rollouts and the tombstones of the ended ones (at most `maxEnded`, oldest dropped). */
export class RolloutKeys {
  private readonly running = new Map<string, Buffer>()
  private readonly ended = new Map<string, Buffer>()

  constructor(private readonly maxEnded: number) {}

  /** A new random key for rollout `id`, kept as its digest. */
  issue(id: string): string {
    const key = `sk-rollout-${randomBytes(32).toString("base64url")}`
    this.running.set(id, digestOf(key))
    return key
  }

  /** What `key` (as presented, or none) may do on rollout `id`. */
  check(id: string, key: string | undefined): Verdict {
    const digest = key === undefined ? undefined : digestOf(key)
    const running = this.running.get(id)
    if (running !== undefined) return digest !== undefined && sameDigest(running, digest) ? "Ok" : "Refused"
    const tombstone = this.ended.get(id)
    return tombstone !== undefined && digest !== undefined && sameDigest(tombstone, digest) ? "Ended" : "Refused"
  }

  /** Rollout `id` has ended: its key now gets {@link Verdict} `Ended`. */
  end(id: string): void {
    const digest = this.running.get(id)
    if (digest === undefined) return
    this.running.delete(id)
    this.ended.set(id, digest)
    if (this.ended.size > this.maxEnded) this.ended.delete(this.ended.keys().next().value!)
  }
}
