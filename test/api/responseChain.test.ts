/**
 * Following a `previous_response_id` chain: newest first to the first response; a missing one named (with the
 * one that continued it); a cycle named, not followed; a chain past the bound refused by its length.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import { follow, type Link } from "../../src/api/internal/responseChain.js"

/** A store of links by id; `reads` counts what was asked of it. */
const storeOf = (links: ReadonlyArray<Link>) => {
  const byId = new Map(links.map((link) => [link.id, link]))
  const reads: Array<string> = []
  const get = (id: string) =>
    Effect.sync(() => {
      reads.push(id)
      return Option.fromNullable(byId.get(id))
    })
  return { get, reads }
}

const chain = (previousId: string | null, links: ReadonlyArray<Link>, max?: number) => {
  const store = storeOf(links)
  const result = Effect.runSync(follow(previousId, store.get, (link) => link, max))
  return { result: Either.map(result, (found) => found.map((link) => link.id)), reads: store.reads }
}

const messageOf = (result: Either.Either<unknown, { readonly message: string; readonly param: string }>) =>
  Either.match(result, { onLeft: (error) => [error.param, error.message], onRight: () => [] })

describe("follow (previous_response_id)", () => {
  it("gives the chain newest first, and nothing for no previous response", () => {
    const links = [
      { id: "r1", previousResponseId: null },
      { id: "r2", previousResponseId: "r1" },
      { id: "r3", previousResponseId: "r2" }
    ]
    expect(chain("r3", links).result).toEqual(Either.right(["r3", "r2", "r1"]))
    expect(chain(null, links).result).toEqual(Either.right([]))
  })

  it("names a missing response, and the one that continued it", () => {
    const links = [{ id: "r2", previousResponseId: "gone" }]
    expect(messageOf(chain("nope", links).result)).toEqual([
      "previous_response_id",
      "Previous response with id 'nope' not found."
    ])
    expect(messageOf(chain("r2", links).result)).toEqual([
      "previous_response_id",
      "Previous response with id 'gone' (continued by 'r2') not found."
    ])
  })

  it("names a cycle after one pass, without following it", () => {
    const links = [
      { id: "a", previousResponseId: "c" },
      { id: "b", previousResponseId: "a" },
      { id: "c", previousResponseId: "b" }
    ]
    const { result, reads } = chain("c", links)
    expect(messageOf(result)).toEqual([
      "previous_response_id",
      "Previous response with id 'c' continues a cycle: 'a' continues 'c', which the chain passed already."
    ])
    expect(reads).toEqual(["c", "b", "a"])
    const self = chain("s", [{ id: "s", previousResponseId: "s" }])
    expect(messageOf(self.result)[1]).toContain("'s' continues 's'")
  })

  it("refuses a chain longer than the bound by its length; one at the bound is followed", () => {
    const links = Array.from({ length: 5 }, (_, i) => ({
      id: `r${i}`,
      previousResponseId: i === 0 ? null : `r${i - 1}`
    }))
    expect(chain("r4", links, 5).result).toEqual(Either.right(["r4", "r3", "r2", "r1", "r0"]))
    const long = chain("r4", links, 4)
    expect(messageOf(long.result)).toEqual([
      "previous_response_id",
      "Previous response with id 'r4' continues a chain longer than 4 responses."
    ])
    expect(long.reads).toHaveLength(4)
  })
})
