import { describe } from "@effect/vitest"
import * as ChatCompletion from "../../src/api/ChatCompletion.js"
import { roundTrip } from "./roundTrip.js"

describe("ChatCompletion round trips", () => {
  roundTrip("ChatCompletionRequest", ChatCompletion.ChatCompletionRequest, { numRuns: 50 })
  roundTrip("StructuredOutputs", ChatCompletion.StructuredOutputs)
  roundTrip("ResponseFormat", ChatCompletion.ResponseFormat)
  roundTrip("StructuralTagResponseFormat", ChatCompletion.StructuralTagResponseFormat)
  roundTrip("LogitsProcessorConstructor", ChatCompletion.LogitsProcessorConstructor)
  roundTrip("ChatCompletion", ChatCompletion.ChatCompletion, { numRuns: 50 })
  roundTrip("Choice", ChatCompletion.Choice)
  roundTrip("ResponseMessage", ChatCompletion.ResponseMessage)
  roundTrip("ChoiceLogprobs", ChatCompletion.ChoiceLogprobs)
  roundTrip("TokenLogprob", ChatCompletion.TokenLogprob)
  roundTrip("TopLogprob", ChatCompletion.TopLogprob)
  roundTrip("PromptLogprob", ChatCompletion.PromptLogprob)
  roundTrip("Usage", ChatCompletion.Usage)
  roundTrip("ChatCompletionChunk", ChatCompletion.ChatCompletionChunk, { numRuns: 50 })
  roundTrip("ChunkChoice", ChatCompletion.ChunkChoice)
  roundTrip("Delta", ChatCompletion.Delta)
})
