// A worker process of `bench/gatewayAgents.ts`: the agents it is given on stdin (JSON: `{targets: [{url, key}],
// requests, body}`), all at once, each sending `requests` chat completions one after another to its own URL with
// its own key; prints each request's latency in ms as JSON `[[index, ms], ...]` (index: the request's place in its
// agent's sequence). Plain `fetch`, as an agent's SDK would use.
let input = ""
process.stdin.setEncoding("utf8")
process.stdin.on("data", (chunk) => {
  input += chunk
})
process.stdin.on("end", async () => {
  const { targets, requests, body } = JSON.parse(input)
  const latencies = []
  await Promise.all(
    targets.map(async ({ url, key }) => {
      const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
      for (let i = 0; i < requests; i++) {
        const start = performance.now()
        const response = await fetch(url, { method: "POST", headers, body })
        const text = await response.text()
        if (response.status !== 200) throw new Error(`status ${response.status}: ${text}`)
        latencies.push([i, performance.now() - start])
      }
    })
  )
  process.stdout.write(JSON.stringify(latencies))
})
