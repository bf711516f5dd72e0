/**
 * A second connection to a running backend's database (WAL allows it), for asserting what the server stored.
 * No crash recovery on open: the server's own store owns the jobs.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as LocalBackend from "../../src/LocalBackend.js"
import * as Database from "../../src/local/store/Database.js"
import * as Store from "../../src/local/store/Store.js"

/** Runs an effect against the store of the running backend's data directory. */
export const withStore = <A, E>(effect: Effect.Effect<A, E, Store.Services>) =>
  Effect.flatMap(LocalBackend.LocalBackend, ({ dataDir }) =>
    Effect.provide(effect, Layer.fresh(Store.layerWith(Database.layer({ dataDir }), { recoverOnStart: false })))
  )
