/**
 * The service's official TypeScript SDK (npm `weave`, used unchanged as an independent client) against the
 * real local server: it traces ops (nested, one that throws, one given the dataset) and publishes a dataset; then
 * everything is read back through `TraceClient`: the calls with their parent links, exception and derived status,
 * the op object and its uploaded source, the dataset object, its table rows and its row refs, and the dataset
 * input expanded by `expand_columns`. Every request the SDK made must have gone to the local server and been
 * answered 2xx (it retries 429/5xx and swallows some errors, so a passing SDK call alone proves little).
 *
 * The SDK is configured by env only (`WF_TRACE_SERVER_URL`, `WANDB_API_KEY`), which is process-global: the
 * test sets it for its own run and restores it afterwards, and imports the SDK after setting it. With
 * `"entity/project"` given to `weave.init` the SDK makes no account look-up; `WANDB_BASE_URL` points its
 * account API at the local server too, so nothing can reach wandb.ai even by mistake.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { describe, expect, layer } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import type { Call } from "../../src/api/TraceCall.js"
import * as TraceClient from "../../src/client/TraceClient.js"
import * as LocalBackend from "../../src/LocalBackend.js"
import { API_KEY } from "../support/clients.js"
import { Backend } from "./support.js"

const ENTITY = "sdk-ent"
const PROJECT = "sdk-proj"
const PROJECT_ID = `${ENTITY}/${PROJECT}`

/** Sets env vars for the scope and restores the previous values (or their absence) when it closes. */
const withEnv = (vars: Readonly<Record<string, string>>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const saved = new Map(Object.keys(vars).map((name) => [name, process.env[name]]))
      for (const [name, value] of Object.entries(vars)) process.env[name] = value
      return saved
    }),
    (saved) =>
      Effect.sync(() => {
        for (const [name, value] of saved) {
          if (value === undefined) delete process.env[name]
          else process.env[name] = value
        }
      })
  )

interface Exchange {
  readonly method: string
  readonly url: string
  readonly status: number
}

/**
 * Records every exchange made through the global `fetch` (which the SDK uses; `TraceClient` runs over undici's
 * own client, not through it) until the scope closes, when the original `fetch` is put back.
 */
const recordFetch = Effect.acquireRelease(
  Effect.sync(() => {
    const original = globalThis.fetch
    const log: Array<Exchange> = []
    globalThis.fetch = async (input, init) => {
      const request = new Request(input, init)
      const response = await original(input, init)
      log.push({ method: request.method, url: request.url, status: response.status })
      return response
    }
    return { original, log }
  }),
  ({ original }) =>
    Effect.sync(() => {
      globalThis.fetch = original
    })
).pipe(Effect.map(({ log }): ReadonlyArray<Exchange> => log))

/** A promise the SDK returns, bounded in time so a stuck SDK fails the test instead of hanging it. */
const sdk = <A>(what: string, run: () => Promise<A>) =>
  Effect.tryPromise({ try: run, catch: (error) => new Error(`${what}: ${String(error)}`) }).pipe(
    Effect.timeoutFail({ duration: "20 seconds", onTimeout: () => new Error(`${what}: timed out`) })
  )

const opName = (call: Call) => /\/op\/([^:/]+):/.exec(call.op_name)?.[1]

const weaveOf = (call: Call | undefined) =>
  (call?.summary as { readonly weave?: Record<string, unknown> } | null | undefined)?.weave

describe("the official weave SDK against the local server", () => {
  // Live services: the time limits below must run on the real clock.
  layer(Backend, { timeout: 120_000, excludeTestServices: true })("on the real server", (it) => {
    it.scoped(
      "traces ops and publishes a dataset; TraceClient reads back calls, op, source, dataset and rows",
      () =>
        Effect.gen(function* () {
          const { url } = yield* LocalBackend.LocalBackend
          yield* withEnv({
            WF_TRACE_SERVER_URL: url,
            WANDB_BASE_URL: url,
            WANDB_API_KEY: API_KEY,
            WEAVE_PRINT_CALL_LINK: "false"
          })
          const exchanges = yield* recordFetch
          const weave = yield* Effect.promise(() => import("weave"))
          const client = yield* sdk("init", () => weave.init(PROJECT_ID, { printCallLink: false }))

          // Names and parameter names are given explicitly: the test transform may rename functions.
          const square = weave.op(async (x: number) => x * x, { name: "square", parameterNames: ["x"] })
          const sumOfSquares = weave.op(
            async (a: number, b: number) => ({ total: (await square(a)) + (await square(b)) }),
            { name: "sumOfSquares", parameterNames: ["a", "b"] }
          )
          const explode = weave.op(
            async (why: string): Promise<never> => {
              throw new Error(`boom: ${why}`)
            },
            { name: "explode", parameterNames: ["why"] }
          )
          const result = yield* sdk("sumOfSquares", () => sumOfSquares(3, 4))
          expect(result).toEqual({ total: 25 })
          const thrown = yield* sdk("explode", () => explode("on purpose")).pipe(Effect.flip)
          expect(thrown.message).toContain("boom: on purpose")

          const dataset = new weave.Dataset({
            name: "sdk-dataset",
            rows: [
              { id: "0", question: "2+2", answer: 4 },
              { id: "1", question: "héllo", answer: 1.5 }
            ]
          })
          const datasetRef = yield* sdk("dataset.save", () => dataset.save())
          // The SDK's row type carries the row's ref as `__savedRef`.
          const row: { readonly id?: string; readonly __savedRef?: { uri(): string } | Promise<{ uri(): string }> } =
            dataset.getRow(1)
          const rowRef = yield* sdk("row ref", async () => (await row.__savedRef)?.uri())
          // An op given the dataset: the SDK sends the dataset's ref as the input.
          const countRows = weave.op(async (ds: { readonly length: number }) => ds.length, {
            name: "countRows",
            parameterNames: ["dataset"]
          })
          expect(yield* sdk("countRows", () => countRows(dataset))).toBe(2)
          yield* sdk("flush", () => client.waitForBatchProcessing())

          // Everything the SDK sent went to the local server and was answered 2xx: no retries, no swallowed errors.
          const paths = exchanges.map((e) => `${e.method} ${new URL(e.url).pathname}`)
          expect(exchanges.every((e) => e.url.startsWith(url))).toBe(true)
          expect(exchanges.filter((e) => e.status < 200 || e.status >= 300)).toEqual([])
          for (const path of ["/file/create", "/obj/create", "/call/upsert_batch", "/table/create", "/table/query"]) {
            expect(paths).toContain(`POST ${path}`)
          }

          const http = yield* Layer.build(NodeHttpClient.layerUndici)
          const trace = yield* TraceClient.make({ apiKey: Redacted.make(API_KEY), baseUrl: url }).pipe(
            Effect.provide(http)
          )

          // The calls: three roots (sumOfSquares, explode, countRows) and two children of sumOfSquares.
          const calls = Chunk.toReadonlyArray(
            yield* Stream.runCollect(trace.callsStreamQuery({ project_id: PROJECT_ID }))
          )
          expect(calls.map(opName).sort()).toEqual(["countRows", "explode", "square", "square", "sumOfSquares"])
          const root = calls.find((c) => opName(c) === "sumOfSquares")
          const failed = calls.find((c) => opName(c) === "explode")
          const children = calls.filter((c) => opName(c) === "square")
          expect(root?.parent_id).toBeNull()
          expect(root?.inputs).toEqual({ a: 3, b: 4 })
          expect(root?.output).toEqual({ total: 25 })
          expect(root?.ended_at).not.toBeNull()
          expect(weaveOf(root)).toMatchObject({ status: "success", trace_name: "sumOfSquares" })
          expect(children.map((c) => c.parent_id)).toEqual([root?.id, root?.id])
          expect(children.map((c) => c.trace_id)).toEqual([root?.trace_id, root?.trace_id])
          expect(children.map((c) => c.inputs.x)).toEqual([3, 4])
          expect(children.map((c) => c.output)).toEqual([9, 16])
          expect(failed?.parent_id).toBeNull()
          expect(failed?.trace_id).not.toBe(root?.trace_id)
          expect(failed?.inputs).toEqual({ why: "on purpose" })
          expect(failed?.exception).toContain("boom: on purpose")
          expect(weaveOf(failed)).toMatchObject({ status: "error", trace_name: "explode" })

          // The op object, and the source the SDK uploaded for it.
          const opRef = /^weave:\/\/\/([^/]+)\/([^/]+)\/op\/([^:/]+):([^/]+)$/.exec(root?.op_name ?? "")
          expect(opRef?.slice(1, 4)).toEqual([ENTITY, PROJECT, "sumOfSquares"])
          const { obj: op } = yield* trace.objRead({
            project_id: PROJECT_ID,
            object_id: "sumOfSquares",
            digest: opRef?.[4] ?? ""
          })
          expect(op.kind).toBe("op")
          expect(op.is_latest).toBe(1)
          const files = (op.val as { readonly files?: Record<string, string> }).files ?? {}
          const sourceDigest = Object.values(files)[0]
          expect(sourceDigest).toBeDefined()
          const source = new TextDecoder().decode(
            yield* trace.fileContent({ project_id: PROJECT_ID, digest: sourceDigest ?? "" })
          )
          // Read by the digest the SDK computed itself: the server's file digest agrees with it.
          expect(source).toContain("await square(a)")

          // The dataset object, and its rows through its table ref.
          expect(datasetRef.uri()).toMatch(new RegExp(`^weave:///${PROJECT_ID}/object/sdk-dataset:`))
          const { obj: ds } = yield* trace.objRead({
            project_id: PROJECT_ID,
            object_id: "sdk-dataset",
            digest: datasetRef.digest
          })
          expect(ds.kind).toBe("object")
          expect(ds.base_object_class).toBe("Dataset")
          const rowsRef = (ds.val as { readonly rows?: unknown }).rows
          expect(typeof rowsRef).toBe("string")
          const tableDigest = /^weave:\/\/\/[^/]+\/[^/]+\/table\/([^/]+)$/.exec(String(rowsRef))?.[1] ?? ""
          const { rows } = yield* trace.tableQuery({ project_id: PROJECT_ID, digest: tableDigest })
          expect(rows.map((row) => row.val)).toEqual([
            { id: "0", question: "2+2", answer: 4 },
            { id: "1", question: "héllo", answer: 1.5 }
          ])
          // The dataset's ref and the ref the SDK gives a row of it resolve through refs/read_batch.
          expect(rowRef).toMatch(new RegExp(`^${datasetRef.uri()}/attr/rows/id/${rows[1]?.digest}$`))
          const { vals } = yield* trace.refsReadBatch({ refs: [datasetRef.uri(), rowRef ?? ""] })
          expect((vals[0] as { readonly name?: unknown }).name).toBe("sdk-dataset")
          expect(vals[1]).toEqual({ id: "1", question: "héllo", answer: 1.5 })

          // The call given the dataset holds its ref; expand_columns answers the dataset object in its place.
          const counted = calls.find((c) => opName(c) === "countRows")
          expect(counted?.inputs).toEqual({ dataset: datasetRef.uri() })
          expect(counted?.output).toBe(2)
          const expanded = Chunk.toReadonlyArray(
            yield* Stream.runCollect(
              trace.callsStreamQuery({
                project_id: PROJECT_ID,
                filter: { call_ids: [counted?.id ?? ""] },
                expand_columns: ["inputs.dataset"]
              })
            )
          )
          expect(expanded[0]?.inputs.dataset).toEqual({ ...(ds.val as object), _ref: datasetRef.uri() })
        }),
      90_000
    )
  })
})
