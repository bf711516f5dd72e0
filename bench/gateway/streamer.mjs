// A child process of `bench/gatewayAgents.ts`'s time-to-first-token runs: the agent, in its own process (as an
// agent is, and off the gateway's event loop). Reads one JSON request a line on stdin (`{baseUrl, apiKey, model,
// request}`), streams it with the `openai` SDK (a new client each time: a new connection, as a new agent's), and
// writes one JSON line a request: `{first, last, count}`, the ms from the call to the first and to the last chunk
// with content, and the count of such chunks.
import { createInterface } from "node:readline"
import OpenAI from "openai"

const lines = createInterface({ input: process.stdin })
for await (const line of lines) {
  const { baseUrl, apiKey, model, request } = JSON.parse(line)
  const openai = new OpenAI({ baseURL: baseUrl, apiKey })
  const arrivals = []
  const start = performance.now()
  const stream = await openai.chat.completions.create({ model, stream: true, ...request })
  for await (const chunk of stream) {
    if ((chunk.choices[0]?.delta.content ?? "") !== "") arrivals.push(performance.now() - start)
  }
  process.stdout.write(
    `${JSON.stringify({ first: arrivals[0] ?? null, last: arrivals.at(-1) ?? null, count: arrivals.length })}\n`
  )
}
