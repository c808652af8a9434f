/**
 * Idle cost: a node with three peers and nothing to send, so its links carry heartbeats only, for a
 * fixed time. Measured in the idle node's process: CPU (`process.cpuUsage`) over the window, and RSS
 * and heap sampled every second (start and end after a full GC with `--expose-gc`). The three peers are
 * baseline nodes in one other process that dial the idle node back, so it also receives heartbeats.
 */
import { Effect } from "effect"
import * as Mesh from "../src/Mesh.js"
import * as Baseline from "./baseline.js"
import { fromParent, toParent } from "./ipc.js"
import { hears, linksUp, localNode, until } from "./nodes.js"
import { sleep } from "./stats.js"

export interface IdleParams {
  readonly port: number
  readonly peers: ReadonlyArray<number>
  readonly secret: string
  readonly durationMs: number
}

export interface IdleResult {
  readonly durationMs: number
  readonly cpuUs: number
  readonly rssStart: number
  readonly rssEnd: number
  readonly rssMax: number
  readonly heapStart: number
  readonly heapEnd: number
  readonly heapMax: number
}

const gc = (): void => {
  const collect: unknown = Reflect.get(globalThis, "gc")
  if (typeof collect === "function") collect()
}

/** Samples the process for `durationMs` of idling. */
const measure = async (durationMs: number): Promise<IdleResult> => {
  gc()
  await sleep(200)
  gc()
  const begin = process.memoryUsage()
  let rssMax = begin.rss
  let heapMax = begin.heapUsed
  const cpu = process.cpuUsage()
  const started = Date.now()
  while (Date.now() - started < durationMs) {
    await sleep(Math.min(1_000, durationMs - (Date.now() - started)))
    const m = process.memoryUsage()
    rssMax = Math.max(rssMax, m.rss)
    heapMax = Math.max(heapMax, m.heapUsed)
  }
  const used = process.cpuUsage(cpu)
  const window = Date.now() - started
  gc()
  const end = process.memoryUsage()
  return {
    durationMs: window,
    cpuUs: used.user + used.system,
    rssStart: begin.rss,
    rssEnd: end.rss,
    rssMax,
    heapStart: begin.heapUsed,
    heapEnd: end.heapUsed,
    heapMax
  }
}

export const idleMesh = async (params: IdleParams): Promise<void> => {
  const runtime = localNode({
    serverId: "idle-mesh",
    port: params.port,
    peers: params.peers,
    secret: params.secret
  })
  await runtime.runPromise(Effect.service(Mesh.Mesh))
  await until(runtime, linksUp, 15_000, "links to the three peers")
  await until(runtime, hears(params.peers.length), 15_000, "HELLOs of the three peers")
  const result = await measure(params.durationMs)
  const stats = await runtime.runPromise(Effect.flatMap(Mesh.Mesh, (mesh) => mesh.stats))
  toParent({
    kind: "result",
    data: { ...result, framesSent: stats.enabled ? stats.messages_sent : -1 }
  })
  await fromParent().take("stop", 600_000)
  await runtime.dispose()
}

export const idleBaseline = async (params: IdleParams): Promise<void> => {
  const node = new Baseline.BaselineNode({
    serverId: "idle-base",
    port: params.port,
    secret: params.secret,
    peers: params.peers.map((port) => ({ host: "127.0.0.1", port })),
    onWake: () => {}
  })
  await node.start()
  const deadline = Date.now() + 15_000
  while (!node.links.every((link) => link.connected) || node.lastSeen.size < params.peers.length) {
    if (Date.now() > deadline) throw new Error("the idle baseline's links never came up")
    await sleep(10)
  }
  const result = await measure(params.durationMs)
  toParent({ kind: "result", data: { ...result, framesSent: node.sent } })
  await fromParent().take("stop", 600_000)
  node.close()
}

/** `count` baseline peers in one process, each dialling `peerPort` (the idle node) and sending heartbeats. */
export const idlePeers = async (params: {
  readonly secret: string
  readonly count: number
  readonly peerPort: number
}): Promise<void> => {
  const nodes = Array.from(
    { length: params.count },
    (_, i) =>
      new Baseline.BaselineNode({
        serverId: `idle-peer-${i}`,
        port: 0,
        secret: params.secret,
        peers: [{ host: "127.0.0.1", port: params.peerPort }],
        onWake: () => {}
      })
  )
  const ports = await Promise.all(nodes.map((node) => node.start()))
  toParent({ kind: "ready", data: { ports } })
  await fromParent()
    .take("stop", 3_600_000)
    .catch(() => undefined)
  for (const node of nodes) node.close()
}
