/**
 * Broadcast cost and memory: `messageAvailable` called in a tight loop with three peers configured, two
 * live (baseline receivers in their own processes, counting frames) and one stalled (it accepts and
 * never reads, so its socket fills and its bounded queue then drops). The caller yields to the event
 * loop every `yieldEvery` calls, as a server handling requests does. Measured in the flooding process:
 * calls/s, and RSS sampled every 10,000 calls against the RSS after connect and a full GC.
 */
import * as Net from "node:net"
import { Effect } from "effect"
import * as Mesh from "../src/Mesh.js"
import * as Baseline from "./baseline.js"
import { fromParent, toParent } from "./ipc.js"
import { linksUp, localNode, until } from "./nodes.js"
import { sleep } from "./stats.js"

export interface FloodParams {
  readonly peers: ReadonlyArray<number>
  readonly secret: string
  readonly calls: number
  readonly yieldEvery: number
  /** Call `mesh.unsafeMessageAvailable` from a plain loop instead of `messageAvailable` in a fiber. */
  readonly sync: boolean
}

export interface FloodResult {
  readonly calls: number
  readonly wallNs: number
  readonly cpuUs: number
  readonly rssStart: number
  readonly rssPeak: number
  readonly rssEnd: number
  readonly heapStart: number
  readonly heapPeak: number
  /** After the flood, a pause and a full GC: what stayed. */
  readonly rssAfterGc: number
  readonly heapAfterGc: number
  readonly sent: number
  readonly dropped: number
}

const ITEMS = Array.from({ length: 64 }, (_, i) => ({
  queue: "orders",
  partition: `p-${i}`,
  tenant: "ac3e0000-0000-4000-8000-00000000ac3e"
}))
const SAMPLE_EVERY = 10_000

const gc = (): void => {
  const collect: unknown = Reflect.get(globalThis, "gc")
  if (typeof collect === "function") collect()
}

class Memory {
  rssStart = 0
  heapStart = 0
  rssPeak = 0
  heapPeak = 0

  begin(): void {
    gc()
    const m = process.memoryUsage()
    this.rssStart = this.rssPeak = m.rss
    this.heapStart = this.heapPeak = m.heapUsed
  }

  afterGc(): { rssAfterGc: number; heapAfterGc: number } {
    gc()
    const m = process.memoryUsage()
    return { rssAfterGc: m.rss, heapAfterGc: m.heapUsed }
  }

  sample(): void {
    const m = process.memoryUsage()
    if (m.rss > this.rssPeak) this.rssPeak = m.rss
    if (m.heapUsed > this.heapPeak) this.heapPeak = m.heapUsed
  }
}

const yieldTurn = Effect.callback<void>((resume) => {
  setImmediate(() => resume(Effect.void))
})

export const floodMesh = async (params: FloodParams): Promise<void> => {
  const runtime = localNode({ serverId: "flood-mesh", port: 0, peers: params.peers, secret: params.secret })
  const mesh = await runtime.runPromise(Effect.service(Mesh.Mesh))
  await until(runtime, linksUp, 10_000, "links to all three peers")
  const memory = new Memory()
  const { calls, yieldEvery } = params
  const loop = Effect.gen(function* () {
    for (let i = 1; i <= calls; i++) {
      yield* mesh.messageAvailable(ITEMS[i & 63]!)
      if (i % yieldEvery === 0) yield* yieldTurn
      if (i % SAMPLE_EVERY === 0) memory.sample()
    }
  })
  // The synchronous twin from plain code, yielding the same way the baseline's loop does.
  const syncLoop = async () => {
    for (let i = 1; i <= calls; i++) {
      mesh.unsafeMessageAvailable(ITEMS[i & 63]!)
      if (i % yieldEvery === 0) await new Promise((resolve) => setImmediate(resolve))
      if (i % SAMPLE_EVERY === 0) memory.sample()
    }
  }
  memory.begin()
  const cpu = process.cpuUsage()
  const start = process.hrtime.bigint()
  if (params.sync) await syncLoop()
  else await runtime.runPromise(loop)
  const wallNs = Number(process.hrtime.bigint() - start)
  const used = process.cpuUsage(cpu)
  memory.sample()
  // Let the live links drain what they queued.
  await sleep(300)
  memory.sample()
  const stats = await runtime.runPromise(mesh.stats)
  const result: FloodResult = {
    calls,
    wallNs,
    cpuUs: used.user + used.system,
    rssStart: memory.rssStart,
    rssPeak: memory.rssPeak,
    rssEnd: process.memoryUsage().rss,
    heapStart: memory.heapStart,
    heapPeak: memory.heapPeak,
    ...memory.afterGc(),
    sent: stats.enabled ? stats.messages_sent : -1,
    dropped: stats.enabled ? stats.messages_dropped : -1
  }
  toParent({ kind: "result", data: result })
  await fromParent().take("stop", 600_000)
  await runtime.dispose()
}

export const floodBaseline = async (params: FloodParams): Promise<void> => {
  const node = new Baseline.BaselineNode({
    serverId: "flood-base",
    port: 0,
    secret: params.secret,
    peers: params.peers.map((port) => ({ host: "127.0.0.1", port })),
    onWake: () => {}
  })
  await node.start()
  const deadline = Date.now() + 10_000
  while (!node.links.every((link) => link.connected)) {
    if (Date.now() > deadline) throw new Error("links to all three peers never came up")
    await sleep(5)
  }
  const memory = new Memory()
  const { calls, yieldEvery } = params
  memory.begin()
  const cpu = process.cpuUsage()
  const start = process.hrtime.bigint()
  for (let i = 1; i <= calls; i++) {
    node.messageAvailable(ITEMS[i & 63]!)
    if (i % yieldEvery === 0) await new Promise((resolve) => setImmediate(resolve))
    if (i % SAMPLE_EVERY === 0) memory.sample()
  }
  const wallNs = Number(process.hrtime.bigint() - start)
  const used = process.cpuUsage(cpu)
  memory.sample()
  await sleep(300)
  memory.sample()
  const result: FloodResult = {
    calls,
    wallNs,
    cpuUs: used.user + used.system,
    rssStart: memory.rssStart,
    rssPeak: memory.rssPeak,
    rssEnd: process.memoryUsage().rss,
    heapStart: memory.heapStart,
    heapPeak: memory.heapPeak,
    ...memory.afterGc(),
    sent: node.sent,
    dropped: node.dropped
  }
  toParent({ kind: "result", data: result })
  await fromParent().take("stop", 600_000)
  node.close()
}

/** A live peer: the baseline receiver, counting frames. Reports its count on `count`. */
export const sink = async (params: { readonly secret: string }): Promise<void> => {
  let frames = 0
  const node = new Baseline.BaselineNode({
    serverId: "sink",
    port: 0,
    secret: params.secret,
    peers: [],
    onWake: () => {
      frames++
    }
  })
  const port = await node.start()
  toParent({ kind: "ready", data: { port } })
  const inbox = fromParent()
  for (;;) {
    const message = await inbox.take("count", 600_000).catch(() => undefined)
    if (message === undefined) break
    toParent({ kind: "count", data: frames })
    frames = 0
  }
  node.close()
}

/**
 * `count` live peers in one process: baseline receivers on as many ports, counting frames together.
 * Reports `{ ports }` on `ready` and the frames received since the last ask on `count`.
 */
export const sinks = async (params: { readonly secret: string; readonly count: number }): Promise<void> => {
  let frames = 0
  const nodes = Array.from(
    { length: params.count },
    (_, i) =>
      new Baseline.BaselineNode({
        serverId: `sink-${i}`,
        port: 0,
        secret: params.secret,
        peers: [],
        onWake: () => {
          frames++
        }
      })
  )
  const ports = await Promise.all(nodes.map((node) => node.start()))
  toParent({ kind: "ready", data: { ports } })
  const inbox = fromParent()
  for (;;) {
    const message = await inbox.take("count", 600_000).catch(() => undefined)
    if (message === undefined) break
    toParent({ kind: "count", data: frames })
    frames = 0
  }
  for (const node of nodes) node.close()
}

/** The stalled peer: accepts, and never reads a byte. */
export const stall = async (): Promise<void> => {
  const server = Net.createServer({ pauseOnConnect: true }, (socket) => {
    socket.on("error", () => {})
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const address = server.address()
  toParent({
    kind: "ready",
    data: { port: typeof address === "object" && address !== null ? address.port : 0 }
  })
  await fromParent()
    .take("stop", 3_600_000)
    .catch(() => undefined)
  server.close()
}
