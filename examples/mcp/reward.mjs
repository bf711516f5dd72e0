// The reward of the `mcp` example's tasks for `effect-rl train-mcp --reward examples/mcp/reward.mjs`: a function of
// {scenario, value}, `value` the tool loop's outcome. 0.5 for an answer that is the result of the right call, 0.25
// for the right tool, 0.25 for the right city (the scenario's `tools[0]` and `city`), as examples/mcp.ts scores.
export const reward = ({ scenario, value }) => {
  const call = value.calls[0]
  let city
  try {
    city = call === undefined ? undefined : JSON.parse(call.arguments).city
  } catch {
    city = undefined
  }
  const rightTool = call?.name === scenario.tools[0]
  const rightCity = city === scenario.city
  const correct = rightTool && rightCity && value.answer?.trim() === call.result
  return {
    reward: 0.5 * Number(correct) + 0.25 * Number(rightTool) + 0.25 * Number(rightCity),
    metrics: { correct: Number(correct), right_tool: Number(rightTool), right_city: Number(rightCity) }
  }
}
