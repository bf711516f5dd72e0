/**
 * Chat messages as the chat-completions convention sends them: the developer, system,
 * user, assistant, tool, function and custom-role messages, the generic (author-based) message, their
 * content parts, tool definitions and tool calls.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { JsonObject, type JsonValue, OtherKeys } from "./Json.js"

/** A text content part. */
export const TextPart = Schema.Struct({ type: Schema.Literal("text"), text: Schema.String }).annotations({
  identifier: "TextPart"
})
/** @see {@link TextPart} */
export type TextPart = typeof TextPart.Type

/** A refusal content part (assistant messages). */
export const RefusalPart = Schema.Struct({ type: Schema.Literal("refusal"), refusal: Schema.String }).annotations({
  identifier: "RefusalPart"
})
/** @see {@link RefusalPart} */
export type RefusalPart = typeof RefusalPart.Type

/** An image content part. */
export const ImagePart = Schema.Struct({
  type: Schema.Literal("image_url"),
  image_url: Schema.Struct({ url: Schema.String, detail: Schema.optional(Schema.Literal("auto", "low", "high")) })
}).annotations({ identifier: "ImagePart" })
/** @see {@link ImagePart} */
export type ImagePart = typeof ImagePart.Type

/** An audio input content part. */
export const InputAudioPart = Schema.Struct({
  type: Schema.Literal("input_audio"),
  input_audio: Schema.Struct({ data: Schema.String, format: Schema.Literal("wav", "mp3") })
}).annotations({ identifier: "InputAudioPart" })
/** @see {@link InputAudioPart} */
export type InputAudioPart = typeof InputAudioPart.Type

/** A file content part. */
export const FilePart = Schema.Struct({
  type: Schema.Literal("file"),
  file: Schema.Struct({
    file_data: Schema.optional(Schema.String),
    file_id: Schema.optional(Schema.String),
    filename: Schema.optional(Schema.String)
  })
}).annotations({ identifier: "FilePart" })
/** @see {@link FilePart} */
export type FilePart = typeof FilePart.Type

/**
 * Any other content part a custom-role message may carry (`audio_url`, `video_url`, `thinking`, embeddings):
 * a `type` and its other keys, kept as they are.
 */
export const OtherPart = Schema.Struct({ type: Schema.String }, OtherKeys).annotations({ identifier: "OtherPart" })
/** @see {@link OtherPart} */
export type OtherPart = typeof OtherPart.Type

/** Content of system, developer and tool messages: a string or text parts. */
export const TextContent = Schema.Union(Schema.String, Schema.Array(TextPart))
/** @see {@link TextContent} */
export type TextContent = typeof TextContent.Type

/** A function the model may call: its name, description and JSON-schema parameters. */
export const FunctionDefinition = Schema.Struct({
  name: Schema.String,
  description: Schema.optional(Schema.NullOr(Schema.String)),
  parameters: Schema.optional(Schema.NullOr(JsonObject)),
  strict: Schema.optional(Schema.NullOr(Schema.Boolean))
}).annotations({ identifier: "FunctionDefinition" })
/** @see {@link FunctionDefinition} */
export type FunctionDefinition = typeof FunctionDefinition.Type

/** A tool offered to the model: `{type: "function", function}`. */
export const Tool = Schema.Struct({ type: Schema.Literal("function"), function: FunctionDefinition }).annotations({
  identifier: "Tool"
})
/** @see {@link Tool} */
export type Tool = typeof Tool.Type

/** A function call: its name and JSON-encoded arguments. */
export const FunctionCall = Schema.Struct({ name: Schema.String, arguments: Schema.String }).annotations({
  identifier: "FunctionCall"
})
/** @see {@link FunctionCall} */
export type FunctionCall = typeof FunctionCall.Type

/** A call of a function tool, as an assistant message records it. */
export const FunctionToolCall = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("function"),
  function: FunctionCall
}).annotations({ identifier: "FunctionToolCall" })
/** @see {@link FunctionToolCall} */
export type FunctionToolCall = typeof FunctionToolCall.Type

/** A call of a custom tool: free-form input. */
export const CustomToolCall = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("custom"),
  custom: Schema.Struct({ name: Schema.String, input: Schema.String })
}).annotations({ identifier: "CustomToolCall" })
/** @see {@link CustomToolCall} */
export type CustomToolCall = typeof CustomToolCall.Type

/** A developer message. */
export const DeveloperMessage = Schema.Struct({
  role: Schema.Literal("developer"),
  content: TextContent,
  name: Schema.optional(Schema.String)
}).annotations({ identifier: "DeveloperMessage" })
/** @see {@link DeveloperMessage} */
export type DeveloperMessage = typeof DeveloperMessage.Type

/** A system message. */
export const SystemMessage = Schema.Struct({
  role: Schema.Literal("system"),
  content: TextContent,
  name: Schema.optional(Schema.String)
}).annotations({ identifier: "SystemMessage" })
/** @see {@link SystemMessage} */
export type SystemMessage = typeof SystemMessage.Type

/** A user message: text, or text, image, audio and file parts. */
export const UserMessage = Schema.Struct({
  role: Schema.Literal("user"),
  content: Schema.Union(Schema.String, Schema.Array(Schema.Union(TextPart, ImagePart, InputAudioPart, FilePart))),
  name: Schema.optional(Schema.String)
}).annotations({ identifier: "UserMessage" })
/** @see {@link UserMessage} */
export type UserMessage = typeof UserMessage.Type

/** An assistant message sent as context (a turn not sampled in this trajectory, or a prefill). */
export const AssistantMessage = Schema.Struct({
  role: Schema.Literal("assistant"),
  content: Schema.optional(
    Schema.NullOr(Schema.Union(Schema.String, Schema.Array(Schema.Union(TextPart, RefusalPart))))
  ),
  name: Schema.optional(Schema.String),
  refusal: Schema.optional(Schema.NullOr(Schema.String)),
  audio: Schema.optional(Schema.NullOr(Schema.Struct({ id: Schema.String }))),
  function_call: Schema.optional(Schema.NullOr(FunctionCall)),
  tool_calls: Schema.optional(Schema.Array(Schema.Union(FunctionToolCall, CustomToolCall))),
  reasoning: Schema.optional(Schema.NullOr(Schema.String)),
  reasoning_content: Schema.optional(Schema.NullOr(Schema.String))
}).annotations({ identifier: "AssistantMessage" })
/** @see {@link AssistantMessage} */
export type AssistantMessage = typeof AssistantMessage.Type

/** A tool result message, answering the call `tool_call_id`. */
export const ToolMessage = Schema.Struct({
  role: Schema.Literal("tool"),
  content: TextContent,
  tool_call_id: Schema.String
}).annotations({ identifier: "ToolMessage" })
/** @see {@link ToolMessage} */
export type ToolMessage = typeof ToolMessage.Type

/** A (deprecated) function result message. */
export const FunctionMessage = Schema.Struct({
  role: Schema.Literal("function"),
  content: Schema.NullOr(Schema.String),
  name: Schema.String
}).annotations({ identifier: "FunctionMessage" })
/** @see {@link FunctionMessage} */
export type FunctionMessage = typeof FunctionMessage.Type

/** A message with a custom role (any role string), as the engine accepts for templates that know it. */
export const CustomMessage = Schema.Struct({
  role: Schema.String,
  content: Schema.optional(Schema.Union(Schema.String, Schema.Array(Schema.Union(Schema.String, OtherPart)))),
  name: Schema.optional(Schema.String),
  tool_call_id: Schema.optional(Schema.NullOr(Schema.String)),
  tool_calls: Schema.optional(Schema.NullOr(Schema.Array(FunctionToolCall))),
  reasoning: Schema.optional(Schema.NullOr(Schema.String)),
  tools: Schema.optional(Schema.NullOr(Schema.Array(Tool)))
}).annotations({ identifier: "CustomMessage" })
/** @see {@link CustomMessage} */
export type CustomMessage = typeof CustomMessage.Type

/** The generic message: an `author` with a role, and content objects (the "harmony" message form). */
export const GenericMessage = Schema.Struct({
  author: Schema.Struct({
    role: Schema.Literal("user", "assistant", "system", "developer", "tool"),
    name: Schema.optional(Schema.NullOr(Schema.String))
  }),
  content: Schema.optional(Schema.Array(JsonObject)),
  channel: Schema.optional(Schema.NullOr(Schema.String)),
  recipient: Schema.optional(Schema.NullOr(Schema.String)),
  content_type: Schema.optional(Schema.NullOr(Schema.String))
}).annotations({ identifier: "GenericMessage" })
/** @see {@link GenericMessage} */
export type GenericMessage = typeof GenericMessage.Type

/** Any message of a chat-completions request (the first member that fits wins, most specific first). */
export const Message = Schema.Union(
  DeveloperMessage,
  SystemMessage,
  UserMessage,
  AssistantMessage,
  ToolMessage,
  FunctionMessage,
  CustomMessage,
  GenericMessage
).annotations({ identifier: "Message" })
/** @see {@link Message} */
export type Message = typeof Message.Type

/** Extract the plain text of a message's content (text parts joined), or `""` when it has none. */
export const contentText = (content: unknown): string => {
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return ""
  let out = ""
  for (const part of content as ReadonlyArray<JsonValue>) {
    if (typeof part === "string") out += part
    else if (part !== null && typeof part === "object" && !Array.isArray(part)) {
      const text = (part as { readonly text?: unknown }).text
      if (typeof text === "string") out += text
    }
  }
  return out
}
