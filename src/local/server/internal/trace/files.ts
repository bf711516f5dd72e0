/**
 * The files of the trace surface over the store's `TraceObjects`: file/create (multipart `project_id` and
 * `file`) answers the byte digest of the content (`Digest.ofBytes`, which clients compute themselves; an
 * `expected_digest` that differs is 400), file/content answers the bytes (404 for an unknown digest). The plural
 * paths are the same handlers.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import type * as Multipart from "@effect/platform/Multipart"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Digest from "../../../../api/Digest.js"
import { NotFound } from "../../../../api/TraceError.js"
import type { FileContentReadReq } from "../../../../api/TraceObject.js"
import * as TraceObjects from "../../../store/TraceObjects.js"
import { checkProject, invalid } from "./ids.js"

/** `POST /file/create` and `POST /files/create` */
export const fileCreate = ({
  payload
}: {
  readonly payload: {
    readonly project_id: string
    readonly expected_digest?: string | undefined
    readonly file: Multipart.PersistedFile
  }
}) =>
  Effect.gen(function* () {
    const store = yield* TraceObjects.TraceObjects
    const fs = yield* FileSystem.FileSystem
    yield* checkProject(payload.project_id)
    const content = yield* Effect.orDie(fs.readFile(payload.file.path))
    const digest = Digest.ofBytes(content)
    if (payload.expected_digest !== undefined && payload.expected_digest !== digest) {
      return yield* invalid(`Digest mismatch: expected ${payload.expected_digest}, computed ${digest}`)
    }
    yield* store.putFile(payload.project_id, digest, content)
    return { digest }
  })

/** `POST /file/content` and `POST /files/content`: the raw bytes. */
export const fileContent = ({ payload }: { readonly payload: FileContentReadReq }) =>
  Effect.gen(function* () {
    const store = yield* TraceObjects.TraceObjects
    yield* checkProject(payload.project_id)
    const content = yield* store.file(payload.project_id, payload.digest)
    if (Option.isNone(content)) return yield* Effect.fail(new NotFound({ reason: `File ${payload.digest} not found` }))
    return content.value
  })
