#!/usr/bin/env node
// An MCP server for the `mcp` example (examples/mcp.ts), written with the official SDK and run as its own process
// over stdio: `node examples/mcp/server.mjs`. Its tools, `weather` and `clock`, each take one of four cities and
// answer live data: the weather or the local time there, drawn anew at every call (`WORLD_SEED` fixes the sequence
// of draws; by default each start draws another). No answer can be learned from the question: an agent knows it
// only by calling the right tool for the right city and reading the result.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { z } from "zod"

const CITIES = ["Oslo", "Paris", "Lima", "Cairo"]
const WEATHERS = ["sunny", "rainy", "windy", "foggy"]
const TIMES = ["1am", "3pm", "7am", "9pm"]

let state = Number(process.env.WORLD_SEED ?? Math.floor(Math.random() * 2 ** 31))
const next = (n) => {
  // The high bits: the low bits of this generator cycle with a short period.
  state = (state * 1103515245 + 12345) % 2147483648
  return (state >>> 16) % n
}

const server = new McpServer({ name: "effect-rl-example-world", version: "1.0.0" })
const city = { city: z.enum(CITIES) }
server.registerTool("weather", { description: "Weather in a city", inputSchema: city }, async () => ({
  content: [{ type: "text", text: WEATHERS[next(WEATHERS.length)] }]
}))
server.registerTool("time", { description: "The time in a city", inputSchema: city }, async () => ({
  content: [{ type: "text", text: TIMES[next(TIMES.length)] }]
}))
await server.connect(new StdioServerTransport())
