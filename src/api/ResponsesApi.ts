/**
 * The Responses API's endpoints, as the embedded backend serves them (the hosted training service serves
 * chat completions only; a rollout translates for it, see `ResponsesChat`):
 *
 * - `POST /v1/responses`: a `Response`, or with `stream: true` its server-sent events. The body is read by
 *   the handler and decoded with `ResponseCreateRequest`, so a bad request is a 400 in the OpenAI shape naming
 *   the field (not the framework's 422);
 * - `GET /v1/responses/{response_id}`: a stored response; `DELETE` the same path deletes it;
 * - `GET /v1/responses/{response_id}/input_items` (`after`, `limit` 1-100, default 20, `order` `asc` or
 *   `desc`, default `desc`): a page of its input items.
 *
 * @since 0.1.0
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { InputItemList, Response, ResponseDeleted } from "./Responses.js"

const ResponsePath = Schema.Struct({ response_id: Schema.String })

/** `POST /v1/responses` (the body is decoded by the handler; see the module). */
export const createResponse = HttpApiEndpoint.post("createResponse", "/v1/responses").addSuccess(Response)

/** `GET /v1/responses/{response_id}` */
export const getResponse = HttpApiEndpoint.get("getResponse", "/v1/responses/:response_id")
  .setPath(ResponsePath)
  .addSuccess(Response)

/** `DELETE /v1/responses/{response_id}` */
export const deleteResponse = HttpApiEndpoint.del("deleteResponse", "/v1/responses/:response_id")
  .setPath(ResponsePath)
  .addSuccess(ResponseDeleted)

/** The query of the input items' page; its values are checked by the handler (a 400 naming the parameter). */
export const InputItemsParams = Schema.Struct({
  after: Schema.optional(Schema.String),
  limit: Schema.optional(Schema.String),
  order: Schema.optional(Schema.String)
})

/** `GET /v1/responses/{response_id}/input_items` */
export const listInputItems = HttpApiEndpoint.get("listInputItems", "/v1/responses/:response_id/input_items")
  .setPath(ResponsePath)
  .setUrlParams(InputItemsParams)
  .addSuccess(InputItemList)

/** The Responses API's group. */
export class ResponsesGroup extends HttpApiGroup.make("responses", { topLevel: true })
  .add(createResponse)
  .add(getResponse)
  .add(deleteResponse)
  .add(listInputItems) {}
