/**
 * Fairness under a hostile peer (issue "Hostile input", item 4): an authenticated peer sends
 * `MESSAGE_AVAILABLE_BATCH` frames of just under 16 MiB back to back to a mesh node, while a good peer
 * sends one `MESSAGE_AVAILABLE` every 50 ms. The good peer writes its send time (`CLOCK_MONOTONIC`, ns)
 * into the item's partition; the receiver's waker stamps the wake, so each figure is one way. Variants:
 * no flood (the control), valid batches, and batches whose last item is invalid. The three roles are
 * separate processes; the receiver is the real mesh node (`Mesh.layer` over TCP, a counting waker).
 */
import * as Net from "node:net"
import { Effect } from "effect"
import * as Frame from "../src/Frame.js"
import * as Mesh from "../src/Mesh.js"
import * as Waker from "../src/Waker.js"
import * as Baseline from "./baseline.js"
import { fromParent, nowNs, toParent } from "./ipc.js"
import { wakerNode } from "./nodes.js"
import { distribution, sleep } from "./stats.js"

export interface FairRecvParams {
  readonly secret: string
  readonly dummyPeerPort: number
}

/** The node under attack: counts flood items, stamps good wakes. Answers `report` with the figures. */
export const fairReceiver = async (params: FairRecvParams): Promise<void> => {
  const latencies: Array<number> = []
  let floodItems = 0
  const hit = (item: Frame.QueueItem) => {
    if (item.queue === "good") {
      const sent = Number(item.partition)
      latencies.push((nowNs() - sent) / 1000)
    } else floodItems++
  }
  const runtime = wakerNode(
    { serverId: "fair-recv", port: 0, peers: [params.dummyPeerPort], secret: params.secret },
    Waker.sync(hit)
  )
  const mesh = await runtime.runPromise(Effect.service(Mesh.Mesh))
  if (mesh.port._tag === "None") throw new Error("the mesh did not bind")
  toParent({ kind: "ready", data: { port: mesh.port.value } })
  const inbox = fromParent()
  for (;;) {
    const message = await inbox.take("report", 600_000).catch(() => undefined)
    if (message === undefined) break
    const stats = await runtime.runPromise(mesh.stats)
    toParent({
      kind: "report",
      data: {
        wakeUs: distribution(latencies),
        floodItems,
        framesReceived: stats.enabled ? stats.messages_received : -1,
        framesInvalid: stats.enabled ? stats.frames_invalid : -1,
        itemsInvalid: stats.enabled ? stats.items_invalid : -1
      }
    })
    latencies.length = 0
    floodItems = 0
  }
  await runtime.dispose()
}

const connect = (port: number, serverId: string, secret: string): Promise<Net.Socket> =>
  new Promise((resolve, reject) => {
    const socket = Net.createConnection({ host: "127.0.0.1", port, noDelay: true })
    socket.once("error", reject)
    socket.once("connect", () => {
      socket.removeListener("error", reject)
      socket.on("error", () => {})
      socket.write(Baseline.helloFrame(serverId, secret))
      resolve(socket)
    })
  })

/** The good peer: one wake every `everyMs` for `durationMs`, its send time in the partition. */
export const fairGood = async (params: {
  readonly port: number
  readonly secret: string
  readonly durationMs: number
  readonly everyMs: number
}): Promise<void> => {
  const socket = await connect(params.port, "fair-good", params.secret)
  await sleep(100)
  const end = Date.now() + params.durationMs
  let sent = 0
  while (Date.now() < end) {
    const at = nowNs()
    socket.write(
      Baseline.encodeFrame(Baseline.TAG_MESSAGE_AVAILABLE, {
        queue: "good",
        partition: String(at),
        tenant: "t"
      })
    )
    sent++
    await sleep(params.everyMs)
  }
  toParent({ kind: "done", data: sent })
  await fromParent()
    .take("stop", 600_000)
    .catch(() => undefined)
  socket.destroy()
}

/** A batch frame of just under the 16 MiB cap; with `invalid`, its last item has an empty queue. */
const hostileFrame = (invalid: boolean): { frame: Buffer; items: number } => {
  const items: Array<{ queue: string; partition: string; tenant: string }> = []
  let bytes = 12 // {"items":[]}
  const limit = Frame.MAX_FRAME_LENGTH - 1 - 64
  for (let i = 0; ; i++) {
    const item = { queue: "flood", partition: `p-${i}`, tenant: "ac3e0000-0000-4000-8000-00000000ac3e" }
    const size = JSON.stringify(item).length + 1
    if (bytes + size > limit) break
    bytes += size
    items.push(item)
  }
  if (invalid)
    items[items.length - 1] = { queue: "", partition: "x", tenant: "ac3e0000-0000-4000-8000-00000000ac3e" }
  return { frame: Baseline.encodeFrame(Baseline.TAG_MESSAGE_AVAILABLE_BATCH, { items }), items: items.length }
}

/** The hostile peer: batch after batch, back to back with back-pressure, reconnecting if dropped. */
export const fairHostile = async (params: {
  readonly port: number
  readonly secret: string
  readonly invalid: boolean
}): Promise<void> => {
  const { frame, items } = hostileFrame(params.invalid)
  let written = 0
  let reconnects = 0
  fromParent().handle("report", () => toParent({ kind: "written", data: { written, reconnects } }))
  toParent({ kind: "ready", data: { frameBytes: frame.length, items } })
  // Until the driver stops the process.
  for (;;) {
    const socket = await connect(params.port, "fair-hostile", params.secret)
    let closed = false
    socket.once("close", () => {
      closed = true
    })
    while (!closed) {
      written++
      if (!socket.write(frame)) {
        await new Promise<void>((resolve) => {
          const done = () => {
            socket.removeListener("drain", done)
            socket.removeListener("close", done)
            resolve()
          }
          socket.once("drain", done)
          socket.once("close", done)
        })
      }
    }
    socket.destroy()
    reconnects++
    await sleep(50)
  }
}
