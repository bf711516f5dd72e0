import { describe } from "@effect/vitest"
import * as ChatMessage from "../../src/api/ChatMessage.js"
import { roundTrip } from "./roundTrip.js"

describe("ChatMessage round trips", () => {
  roundTrip("TextPart", ChatMessage.TextPart)
  roundTrip("RefusalPart", ChatMessage.RefusalPart)
  roundTrip("ImagePart", ChatMessage.ImagePart)
  roundTrip("InputAudioPart", ChatMessage.InputAudioPart)
  roundTrip("FilePart", ChatMessage.FilePart)
  roundTrip("OtherPart", ChatMessage.OtherPart)
  roundTrip("FunctionDefinition", ChatMessage.FunctionDefinition)
  roundTrip("Tool", ChatMessage.Tool)
  roundTrip("FunctionToolCall", ChatMessage.FunctionToolCall)
  roundTrip("CustomToolCall", ChatMessage.CustomToolCall)
  roundTrip("DeveloperMessage", ChatMessage.DeveloperMessage)
  roundTrip("SystemMessage", ChatMessage.SystemMessage)
  roundTrip("UserMessage", ChatMessage.UserMessage)
  roundTrip("AssistantMessage", ChatMessage.AssistantMessage)
  roundTrip("ToolMessage", ChatMessage.ToolMessage)
  roundTrip("FunctionMessage", ChatMessage.FunctionMessage)
  roundTrip("CustomMessage", ChatMessage.CustomMessage)
  roundTrip("GenericMessage", ChatMessage.GenericMessage)
  roundTrip("Message", ChatMessage.Message)
})
