/**
 * Receive throughput: one authenticated peer streams `MESSAGE_AVAILABLE` frames over loopback TCP
 * into a receiver that dispatches each to a counting waker. The sender is the baseline's (HELLO with
 * the right HMAC, then writes coalesced 512 frames at a time, honouring back-pressure), so both
 * receivers get the identical byte stream. Measured in the receiver, from its first wake to its last:
 * wall time and `process.cpuUsage()`.
 */
import * as Net from "node:net"
import { Effect } from "effect"
import * as Mesh from "../src/Mesh.js"
import * as Waker from "../src/Waker.js"
import * as Baseline from "./baseline.js"
import { fromParent, toParent } from "./ipc.js"
import { wakerNode } from "./nodes.js"

export interface ReceiverParams {
  readonly frames: number
  readonly secret: string
  /** A port nothing listens on: the mesh needs one configured peer to be active. */
  readonly dummyPeerPort: number
}

export interface SenderParams {
  readonly port: number
  readonly frames: number
  readonly secret: string
  readonly framesPerWrite: number
}

export interface ReceiveResult {
  readonly frames: number
  readonly wallNs: number
  readonly cpuUserUs: number
  readonly cpuSystemUs: number
}

/** Counts wakes; measures from the first to the `target`-th. */
class Meter {
  count = 0
  private startNs = 0
  private startCpu: NodeJS.CpuUsage = { user: 0, system: 0 }
  readonly done: Promise<ReceiveResult>
  private resolve: (result: ReceiveResult) => void = () => {}

  constructor(readonly target: number) {
    this.done = new Promise((resolve) => {
      this.resolve = resolve
    })
  }

  hit(): void {
    const n = ++this.count
    if (n === 1) {
      this.startNs = Number(process.hrtime.bigint())
      this.startCpu = process.cpuUsage()
    } else if (n === this.target) {
      const wallNs = Number(process.hrtime.bigint()) - this.startNs
      const cpu = process.cpuUsage(this.startCpu)
      // The first wake opens the window, so it covers target - 1 frames.
      this.resolve({ frames: n - 1, wallNs, cpuUserUs: cpu.user, cpuSystemUs: cpu.system })
    }
  }
}

export const receiveMesh = async (params: ReceiverParams): Promise<void> => {
  const meter = new Meter(params.frames)
  // A counting waker as a host would write one: an effect, and its synchronous twin for the hot path.
  const runtime = wakerNode(
    { serverId: "recv-mesh", port: 0, peers: [params.dummyPeerPort], secret: params.secret },
    Waker.sync(() => meter.hit())
  )
  const mesh = await runtime.runPromise(Effect.service(Mesh.Mesh))
  if (mesh.port._tag === "None") throw new Error("the mesh did not bind")
  toParent({ kind: "ready", data: { port: mesh.port.value } })
  const result = await meter.done
  const stats = await runtime.runPromise(mesh.stats)
  toParent({ kind: "result", data: { ...result, invalid: stats.enabled ? stats.frames_invalid : -1 } })
  await fromParent().take("stop", 600_000)
  await runtime.dispose()
}

export const receiveBaseline = async (params: ReceiverParams): Promise<void> => {
  const meter = new Meter(params.frames)
  const node = new Baseline.BaselineNode({
    serverId: "recv-base",
    port: 0,
    secret: params.secret,
    peers: [{ host: "127.0.0.1", port: params.dummyPeerPort }],
    onWake: () => meter.hit()
  })
  const port = await node.start()
  toParent({ kind: "ready", data: { port } })
  const result = await meter.done
  toParent({ kind: "result", data: { ...result, invalid: 0 } })
  await fromParent().take("stop", 600_000)
  node.close()
}

export const send = async (params: SenderParams): Promise<void> => {
  // 512 frames over 64 partitions: one buffer, written again and again, same bytes for both receivers.
  const frames: Array<Buffer> = []
  for (let i = 0; i < params.framesPerWrite; i++) {
    frames.push(
      Baseline.encodeFrame(Baseline.TAG_MESSAGE_AVAILABLE, {
        queue: "orders",
        partition: `p-${i % 64}`,
        tenant: "ac3e0000-0000-4000-8000-00000000ac3e"
      })
    )
  }
  const chunk = Buffer.concat(frames)
  const socket = Net.createConnection({ host: "127.0.0.1", port: params.port, noDelay: true })
  socket.on("error", (error) => toParent({ kind: "error", data: `sender: ${error.message}` }))
  await new Promise<void>((resolve) => socket.once("connect", () => resolve()))
  socket.write(Baseline.helloFrame("sender", params.secret))
  let left = params.frames
  while (left > 0) {
    const n = Math.min(left, params.framesPerWrite)
    const ok = socket.write(n === params.framesPerWrite ? chunk : Buffer.concat(frames.slice(0, n)))
    left -= n
    if (!ok) await new Promise<void>((resolve) => socket.once("drain", () => resolve()))
  }
  toParent({ kind: "sent" })
  await fromParent().take("stop", 600_000)
  socket.destroy()
}
