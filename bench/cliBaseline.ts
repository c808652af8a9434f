/**
 * The CLI baseline: `queen-mesh node`'s contract (docs/cli.md, "queen-mesh node") for the wake path,
 * hand-written on the baseline node (`bench/baseline.ts`) the way a user would script it instead. It
 * reads the same `QUEEN_*` variables, prints the same `listening`, `peer_up` and `wake` JSON lines,
 * and takes `message_available` / `message_available_batch` commands as JSON lines on stdin. Lines
 * received in one event-loop turn are written to stdout in one write, and dropped past 4 MiB pending,
 * as the CLI's `QUEEN_MESH_STDOUT_BUFFER` does. Nothing else of the CLI: no HTTP routes, no logs.
 *
 * With `QUEEN_BENCH_QUIET=1` it prints no wake lines (as `queen-mesh node --quiet`) and counts them
 * instead, served as `{"messages_received":N}` on an HTTP port of its own (`http_port` in `listening`),
 * the way the quiet receive benchmark reads ours from its stats route.
 *
 * `node .bench-dist/bench/cliBaseline.js` with the environment of `queen-mesh node`.
 */
import * as Http from "node:http"
import * as Baseline from "./baseline.js"

const env = process.env
const serverId = env.QUEEN_SERVER_ID ?? "cli-baseline"
const port = Number(env.QUEEN_MESH_PORT ?? "6633")
const peers = (env.QUEEN_MESH_PEERS ?? "")
  .split(",")
  .map((p) => p.trim())
  .filter((p) => p !== "")
  .map((p) => {
    const at = p.lastIndexOf(":")
    return at < 0 ? { host: p, port } : { host: p.slice(0, at), port: Number(p.slice(at + 1)) }
  })
const QUIET = env.QUEEN_BENCH_QUIET === "1"
let received = 0
const STDOUT_LIMIT = Number(env.QUEEN_MESH_STDOUT_BUFFER ?? String(4 * 1024 * 1024))

let pending: Array<string> = []
let scheduled = false
const flush = () => {
  scheduled = false
  const text = pending.join("")
  pending = []
  if (process.stdout.writableLength + text.length <= STDOUT_LIMIT) process.stdout.write(text)
}
const print = (line: object) => {
  pending.push(`${JSON.stringify(line)}\n`)
  if (!scheduled) {
    scheduled = true
    setImmediate(flush)
  }
}

const node = new Baseline.BaselineNode({
  serverId,
  port,
  host: env.QUEEN_MESH_BIND_ADDR ?? env.QUEEN_MESH_BIND_HOST ?? "0.0.0.0",
  secret: env.QUEEN_SYNC_SECRET ?? "",
  peers,
  heartbeatMs: Number(env.QUEEN_SYNC_HEARTBEAT_MS ?? "1000"),
  onWake: (item, from) => {
    if (QUIET) received++
    else
      print({
        event: "wake",
        from,
        tenant: item.tenant ?? null,
        queue: item.queue,
        partition: item.partition
      })
  },
  onPeerUp: (id) => print({ event: "peer_up", server_id: id })
})

/** One stdin command; anything but the two wake commands is ignored. */
const command = (line: string) => {
  let value: unknown
  try {
    value = JSON.parse(line)
  } catch {
    return
  }
  if (typeof value !== "object" || value === null) return
  const op = Reflect.get(value, "op")
  if (op === "message_available") {
    const item = Baseline.checkItem(value)
    if (item !== undefined) node.messageAvailable(item)
  } else if (op === "message_available_batch") {
    const items = Baseline.checkItems(value)
    if (items !== undefined) for (const item of items) node.messageAvailable(item)
  }
}

let partial = ""
process.stdin.setEncoding("utf8")
process.stdin.on("data", (chunk: string) => {
  const text = partial + chunk
  let start = 0
  for (let nl = text.indexOf("\n"); nl >= 0; nl = text.indexOf("\n", start)) {
    command(text.slice(start, nl))
    start = nl + 1
  }
  partial = text.slice(start)
})
process.stdin.on("end", () => {
  node.close()
  process.exit(0)
})
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    node.close()
    process.exit(0)
  })
}

/** The counter's route when quiet; `null` otherwise, as the baseline has no HTTP routes. */
const counterRoute = (): Promise<number | null> =>
  QUIET
    ? new Promise((resolve) => {
        const server = Http.createServer((_, response) => {
          response.setHeader("content-type", "application/json")
          response.end(`{"messages_received":${received}}`)
        })
        server.listen(0, "127.0.0.1", () => {
          const address = server.address()
          resolve(typeof address === "object" && address !== null ? address.port : null)
        })
        server.unref()
      })
    : Promise.resolve(null)

node.start().then(
  async (bound) =>
    print({ event: "listening", server_id: serverId, port: bound, http_port: await counterRoute() }),
  (error: unknown) => {
    process.stderr.write(`cli baseline: ${String(error)}\n`)
    process.exit(1)
  }
)
