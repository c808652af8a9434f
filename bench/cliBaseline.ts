/**
 * The CLI baseline, as lean as the floor: `queen-mesh node`'s wake contract (docs/cli.md, "queen-mesh
 * node") hand-written on plain `node:net` with the same framing (`u32 BE length | u8 tag | JSON`) and
 * the same HELLO as ours (`bench/baseline.ts`'s codec), and nothing else: a stdin line becomes a frame
 * written at once on every connected outbound link; a received frame is decoded and its `wake` line
 * written to stdout in the same turn (the lines of one socket chunk in one write, dropped past
 * `QUEEN_MESH_STDOUT_BUFFER` pending). Heartbeats every `QUEEN_SYNC_HEARTBEAT_MS` keep its links
 * alive on the other side; reconnect with backoff. No send queue, no timers between a byte and its line.
 *
 * It prints `listening` and `peer_up`, and answers `{"op":"stats"}` with `{"event":"stats","outbound":
 * <connected dialled links>,"inbound":<authenticated accepted links>}` (the cluster bench's readiness).
 * With `QUEEN_BENCH_QUIET=1` it prints no wake lines and counts them, served as `{"messages_received":N}`
 * on an HTTP port of its own (`http_port` in `listening`), as the quiet receive benchmark reads ours.
 *
 * `node .bench-dist/bench/cliBaseline.js` with the environment of `queen-mesh node`.
 */
import { createHmac, timingSafeEqual } from "node:crypto"
import * as Http from "node:http"
import * as Net from "node:net"
import * as B from "./baseline.js"

const env = process.env
const serverId = env.QUEEN_SERVER_ID ?? "cli-baseline"
const secret = env.QUEEN_SYNC_SECRET ?? ""
const peers = (env.QUEEN_MESH_PEERS ?? "")
  .split(",")
  .filter((p) => p.trim() !== "")
  .map((p) => ({ host: p.slice(0, p.lastIndexOf(":")), port: Number(p.slice(p.lastIndexOf(":") + 1)) }))
const QUIET = env.QUEEN_BENCH_QUIET === "1"
const STDOUT_LIMIT = Number(env.QUEEN_MESH_STDOUT_BUFFER ?? String(4 * 1024 * 1024))
const HEARTBEAT = B.encodeFrame(B.TAG_HEARTBEAT, undefined)
let received = 0
let inbound = 0

const out = (text: string) => {
  if (process.stdout.writableLength + text.length <= STDOUT_LIMIT) process.stdout.write(text)
}

/** Outbound links, one per peer: the connected socket or `undefined`. */
const links: Array<Net.Socket | undefined> = peers.map(() => undefined)
const dial = (i: number, backoff: number) => {
  const { host, port } = peers[i]!
  const socket = Net.createConnection({ host, port, noDelay: true })
  socket.on("connect", () => {
    socket.write(B.helloFrame(serverId, secret))
    links[i] = socket
    backoff = 250
  })
  socket.on("data", () => {})
  socket.on("error", () => {})
  socket.on("close", () => {
    links[i] = undefined
    setTimeout(() => dial(i, Math.min(backoff * 2, 5000)), backoff)
  })
}
for (let i = 0; i < peers.length; i++) dial(i, 250)
setInterval(
  () => {
    for (const s of links) s?.write(HEARTBEAT)
  },
  Number(env.QUEEN_SYNC_HEARTBEAT_MS ?? "1000")
)

const verified = (payload: Buffer): string | undefined => {
  let v: { server_id?: unknown; nonce?: unknown; mac?: unknown }
  try {
    v = JSON.parse(payload.toString("utf8"))
  } catch {
    return undefined
  }
  const { server_id, nonce, mac } = v ?? {}
  if (typeof server_id !== "string" || server_id === "" || typeof nonce !== "string") return undefined
  if (secret === "") return server_id
  if (typeof mac !== "string" || !/^[0-9a-f]{64}$/i.test(mac)) return undefined
  const want = createHmac("sha256", secret).update(nonce, "utf8").digest()
  return timingSafeEqual(want, Buffer.from(mac, "hex")) ? server_id : undefined
}

const wakeLine = (item: B.Item, from: string) =>
  `${JSON.stringify({ event: "wake", from, tenant: item.tenant ?? null, queue: item.queue, partition: item.partition })}\n`

Net.createServer((socket) => {
  socket.setNoDelay(true)
  const parser = new B.Parser()
  let peer: string | undefined
  let lines = ""
  const timeout = setTimeout(() => peer === undefined && socket.destroy(), 5000)
  const onFrame = (tag: number, payload: Buffer) => {
    if (peer === undefined) {
      peer = tag === B.TAG_HELLO ? verified(payload) : undefined
      if (peer === undefined) return void socket.destroy()
      clearTimeout(timeout)
      inbound++
      lines += `${JSON.stringify({ event: "peer_up", server_id: peer })}\n`
      return
    }
    const items =
      tag === B.TAG_MESSAGE_AVAILABLE
        ? [B.decodeItem(payload)]
        : tag === B.TAG_MESSAGE_AVAILABLE_BATCH
          ? (B.decodeItems(payload) ?? [])
          : []
    for (const item of items) {
      if (item === undefined) continue
      if (QUIET) received++
      else lines += wakeLine(item, peer)
    }
  }
  socket.on("data", (chunk: Buffer) => {
    if (!parser.push(chunk, onFrame)) socket.destroy()
    if (lines !== "") out(lines)
    lines = ""
  })
  socket.on("error", () => {})
  socket.on("close", () => {
    clearTimeout(timeout)
    if (peer !== undefined) inbound--
  })
}).listen(
  Number(env.QUEEN_MESH_PORT ?? "6633"),
  env.QUEEN_MESH_BIND_ADDR ?? "0.0.0.0",
  function (this: Net.Server) {
    const address = this.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    const counter = QUIET
      ? Http.createServer((_, response) => response.end(`{"messages_received":${received}}`)).listen(
          0,
          "127.0.0.1"
        )
      : undefined
    const listening = (httpPort: number | null) =>
      out(`${JSON.stringify({ event: "listening", server_id: serverId, port, http_port: httpPort })}\n`)
    if (counter === undefined) listening(null)
    else counter.on("listening", () => listening((counter.address() as Net.AddressInfo).port))
  }
)

/** A stdin chunk's pushes leave as one write per link, at once. */
let partial = ""
process.stdin.setEncoding("utf8")
process.stdin.on("data", (chunk: string) => {
  const text = partial + chunk
  const frames: Array<Buffer> = []
  let start = 0
  for (let nl = text.indexOf("\n"); nl >= 0; nl = text.indexOf("\n", start)) {
    let v: unknown
    try {
      v = JSON.parse(text.slice(start, nl))
    } catch {}
    start = nl + 1
    const op = typeof v === "object" && v !== null ? Reflect.get(v, "op") : undefined
    const items =
      op === "message_available"
        ? [B.checkItem(v)]
        : op === "message_available_batch"
          ? (B.checkItems(v) ?? [])
          : []
    for (const item of items)
      if (item !== undefined) frames.push(B.encodeFrame(B.TAG_MESSAGE_AVAILABLE, item))
    if (op === "stats")
      out(
        `${JSON.stringify({ event: "stats", outbound: links.filter((s) => s !== undefined).length, inbound })}\n`
      )
  }
  partial = text.slice(start)
  if (frames.length === 0) return
  const bytes = frames.length === 1 ? frames[0]! : Buffer.concat(frames)
  for (const s of links) s?.write(bytes)
})
process.stdin.on("end", () => process.exit(0))
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => process.exit(0))
