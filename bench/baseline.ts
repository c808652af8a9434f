/**
 * The baseline: the same wire (spec "Framing", "The frame set", "The handshake") written by hand on
 * plain `node:net`, the way a user would write it instead of using queen-mesh. It exists only to be
 * measured against; nothing in `src/` uses it.
 *
 * What it has: `u32 BE length | u8 tag | JSON` framing with the 16 MiB cap, HELLO with
 * HMAC-SHA256 checked in constant time, `JSON.parse` plus hand checks of the payload, a bounded array
 * send queue per peer that drops when full, writes coalesced per event-loop turn, reconnect with
 * backoff, heartbeats, and dispatch of every wake to a callback. What it lacks is everything that makes
 * the library a library: typed errors, Schemas, scopes, stats, events, the other frame effects.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto"
import * as Net from "node:net"

export const TAG_MESSAGE_AVAILABLE = 1
export const TAG_MESSAGE_AVAILABLE_BATCH = 2
export const TAG_HEARTBEAT = 3
export const TAG_HELLO = 4
export const MAX_FRAME = 16 * 1024 * 1024

export interface Item {
  readonly queue: string
  readonly partition: string
  readonly tenant?: string | undefined
}

// ---------------------------------------------------------------------------------------------
// codec
// ---------------------------------------------------------------------------------------------

/** `u32 BE length | u8 tag | JSON`; `undefined` payload is an empty one. */
export const encodeFrame = (tag: number, payload: object | undefined): Buffer => {
  const json = payload === undefined ? "" : JSON.stringify(payload)
  const bytes = Buffer.byteLength(json)
  if (bytes + 1 > MAX_FRAME) throw new Error(`frame of ${bytes + 1} bytes exceeds the cap`)
  const out = Buffer.allocUnsafe(5 + bytes)
  out.writeUInt32BE(bytes + 1, 0)
  out[4] = tag
  if (bytes > 0) out.write(json, 5, "utf8")
  return out
}

/** The hand checks a careful user writes after `JSON.parse`. */
export const checkItem = (value: unknown): Item | undefined => {
  if (typeof value !== "object" || value === null) return undefined
  const { queue, partition, tenant } = value as { queue?: unknown; partition?: unknown; tenant?: unknown }
  if (typeof queue !== "string" || queue === "" || typeof partition !== "string") return undefined
  if (tenant === undefined || tenant === null || tenant === "") return { queue, partition }
  return typeof tenant === "string" ? { queue, partition, tenant } : undefined
}

export const checkItems = (value: unknown): Array<Item> | undefined => {
  if (typeof value !== "object" || value === null) return undefined
  const items = (value as { items?: unknown }).items
  if (!Array.isArray(items)) return undefined
  const out: Array<Item> = new Array(items.length)
  for (let i = 0; i < items.length; i++) {
    const item = checkItem(items[i])
    if (item === undefined) return undefined
    out[i] = item
  }
  return out
}

export interface Hello {
  readonly server_id: string
  readonly nonce: string
  readonly mac: string
}

const checkHello = (value: unknown): Hello | undefined => {
  if (typeof value !== "object" || value === null) return undefined
  const { server_id, nonce, mac } = value as { server_id?: unknown; nonce?: unknown; mac?: unknown }
  return typeof server_id === "string" && typeof nonce === "string" && typeof mac === "string"
    ? { server_id, nonce, mac }
    : undefined
}

const parseJson = (payload: Uint8Array): unknown => {
  try {
    return JSON.parse(Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength).toString("utf8"))
  } catch {
    return undefined
  }
}

/** `JSON.parse` plus hand checks for the wake frames. */
export const decodeItem = (payload: Uint8Array): Item | undefined => checkItem(parseJson(payload))
export const decodeItems = (payload: Uint8Array): Array<Item> | undefined => checkItems(parseJson(payload))

export const mac = (secret: string, nonce: string): string =>
  createHmac("sha256", secret).update(nonce, "utf8").digest("hex")

export const helloFrame = (serverId: string, secret: string): Buffer => {
  const nonce = randomBytes(16).toString("hex")
  return encodeFrame(TAG_HELLO, { server_id: serverId, nonce, mac: secret === "" ? "" : mac(secret, nonce) })
}

const verifyHello = (hello: Hello, secret: string): boolean => {
  if (hello.server_id === "") return false
  if (secret === "") return true
  if (!/^[0-9a-f]{64}$/i.test(hello.mac)) return false
  return timingSafeEqual(Buffer.from(mac(secret, hello.nonce), "hex"), Buffer.from(hello.mac, "hex"))
}

/**
 * Reassembles frames: the usual "append, then slice off whole frames" loop, copying only a leftover.
 */
export class Parser {
  private pending: Buffer | undefined = undefined

  /** Returns false once the stream is invalid (zero or oversized length). */
  push(chunk: Buffer, onFrame: (tag: number, payload: Buffer) => void): boolean {
    let buf = this.pending === undefined ? chunk : Buffer.concat([this.pending, chunk])
    this.pending = undefined
    let offset = 0
    while (buf.length - offset >= 4) {
      const length = buf.readUInt32BE(offset)
      if (length === 0 || length > MAX_FRAME) return false
      if (buf.length - offset - 4 < length) break
      onFrame(buf[offset + 4]!, buf.subarray(offset + 5, offset + 4 + length))
      offset += 4 + length
    }
    if (offset < buf.length) {
      buf = buf.subarray(offset)
      // Keep a copy: the chunk may be reused by the caller.
      this.pending = Buffer.from(buf)
    }
    return true
  }
}

// ---------------------------------------------------------------------------------------------
// the node
// ---------------------------------------------------------------------------------------------

export interface BaselineOptions {
  readonly serverId: string
  readonly port: number
  readonly host?: string
  readonly secret: string
  readonly peers: ReadonlyArray<{ readonly host: string; readonly port: number }>
  /** Every received wake, with the sending peer's server id. */
  readonly onWake: (item: Item, from: string) => void
  /** A peer's HELLO was accepted on an inbound connection. */
  readonly onPeerUp?: (serverId: string) => void
  readonly queueCapacity?: number
  readonly heartbeatMs?: number
}

class PeerLink {
  socket: Net.Socket | undefined = undefined
  connected = false
  queue: Array<Buffer> = []
  writable = true
  scheduled = false
  backoff = 250
  timer: NodeJS.Timeout | undefined = undefined
  lastWrite = 0

  constructor(
    readonly host: string,
    readonly port: number
  ) {}
}

export class BaselineNode {
  readonly links: Array<PeerLink>
  readonly lastSeen = new Map<string, number>()
  sent = 0
  received = 0
  dropped = 0
  handshakeFailures = 0
  private server: Net.Server | undefined = undefined
  private closed = false
  private heartbeat: NodeJS.Timeout | undefined = undefined
  private readonly capacity: number
  private readonly accepted = new Set<Net.Socket>()

  constructor(readonly options: BaselineOptions) {
    this.capacity = options.queueCapacity ?? 1024
    this.links = options.peers.map((p) => new PeerLink(p.host, p.port))
  }

  start(): Promise<number> {
    for (const link of this.links) this.dial(link)
    const every = this.options.heartbeatMs ?? 1000
    this.heartbeat = setInterval(() => {
      const now = Date.now()
      for (const link of this.links) {
        if (link.connected && now - link.lastWrite >= every) this.enqueue(link, HEARTBEAT)
      }
    }, every)
    return new Promise((resolve, reject) => {
      const server = Net.createServer((socket) => this.accept(socket))
      this.server = server
      server.once("error", reject)
      server.listen(this.options.port, this.options.host ?? "127.0.0.1", () => {
        const address = server.address()
        resolve(typeof address === "object" && address !== null ? address.port : this.options.port)
      })
    })
  }

  close(): void {
    this.closed = true
    if (this.heartbeat !== undefined) clearInterval(this.heartbeat)
    for (const link of this.links) {
      if (link.timer !== undefined) clearTimeout(link.timer)
      link.socket?.destroy()
    }
    for (const socket of this.accepted) socket.destroy()
    this.server?.close()
  }

  /** A push committed: tell every peer. Never blocks; drops when a peer's queue is full. */
  messageAvailable(item: Item): void {
    if (this.links.length === 0) return
    const frame = encodeFrame(TAG_MESSAGE_AVAILABLE, item)
    for (const link of this.links) this.enqueue(link, frame)
  }

  private enqueue(link: PeerLink, frame: Buffer): void {
    if (link.queue.length >= this.capacity) {
      this.dropped++
      return
    }
    link.queue.push(frame)
    if (!link.scheduled && link.connected && link.writable) {
      link.scheduled = true
      setImmediate(() => this.flush(link))
    }
  }

  private flush(link: PeerLink): void {
    link.scheduled = false
    const socket = link.socket
    if (socket === undefined || !link.connected || !link.writable || link.queue.length === 0) return
    const frames = link.queue
    link.queue = []
    this.sent += frames.length
    link.lastWrite = Date.now()
    if (!socket.write(frames.length === 1 ? frames[0]! : Buffer.concat(frames))) {
      link.writable = false
      socket.once("drain", () => {
        link.writable = true
        this.flush(link)
      })
    }
  }

  private dial(link: PeerLink): void {
    if (this.closed) return
    const socket = Net.createConnection({ host: link.host, port: link.port, noDelay: true })
    link.socket = socket
    socket.on("connect", () => {
      link.backoff = 250
      link.writable = true
      socket.write(helloFrame(this.options.serverId, this.options.secret))
      link.queue = [] // stale hints are worse than none
      link.connected = true
    })
    socket.on("data", () => {}) // send-only: reading only notices the close
    socket.on("error", () => {})
    socket.on("close", () => {
      link.connected = false
      link.socket = undefined
      if (this.closed) return
      link.timer = setTimeout(() => this.dial(link), link.backoff)
      link.backoff = Math.min(link.backoff * 2, 5000)
    })
  }

  private accept(socket: Net.Socket): void {
    this.accepted.add(socket)
    socket.setNoDelay(true)
    const parser = new Parser()
    let peer: string | undefined
    const timeout = setTimeout(() => {
      if (peer === undefined) {
        this.handshakeFailures++
        socket.destroy()
      }
    }, 5000)
    const onWake = this.options.onWake
    const onFrame = (tag: number, payload: Buffer) => {
      if (peer === undefined) {
        const hello = tag === TAG_HELLO ? checkHello(parseJson(payload)) : undefined
        if (hello === undefined || !verifyHello(hello, this.options.secret)) {
          this.handshakeFailures++
          socket.destroy()
          return
        }
        peer = hello.server_id
        clearTimeout(timeout)
        this.options.onPeerUp?.(peer)
        return
      }
      this.received++
      if (tag === TAG_MESSAGE_AVAILABLE) {
        const item = decodeItem(payload)
        if (item !== undefined) onWake(item, peer)
      } else if (tag === TAG_MESSAGE_AVAILABLE_BATCH) {
        const items = decodeItems(payload)
        if (items !== undefined) for (const item of items) onWake(item, peer)
      }
    }
    socket.on("data", (chunk: Buffer) => {
      if (!parser.push(chunk, onFrame)) socket.destroy()
      if (peer !== undefined) this.lastSeen.set(peer, Date.now())
    })
    socket.on("error", () => {})
    socket.on("close", () => {
      clearTimeout(timeout)
      this.accepted.delete(socket)
    })
  }
}

const HEARTBEAT = encodeFrame(TAG_HEARTBEAT, undefined)

// ---------------------------------------------------------------------------------------------
// the parked-pop registry a user would pair with it
// ---------------------------------------------------------------------------------------------

/** `queue\0tenant` to the resolvers of the pops parked there. */
export class BaselineWaker {
  private readonly parked = new Map<string, Set<(outcome: "woken" | "timeout") => void>>()

  wake = (item: Item): void => {
    const key = `${item.queue}\u0000${item.tenant ?? ""}`
    const waiters = this.parked.get(key)
    if (waiters === undefined) return
    this.parked.delete(key)
    for (const resolve of waiters) resolve("woken")
  }

  awaitWake(queue: string, tenant: string, maxWaitMs: number): Promise<"woken" | "timeout"> {
    const key = `${queue}\u0000${tenant}`
    return new Promise((resolve) => {
      let waiters = this.parked.get(key)
      if (waiters === undefined) {
        waiters = new Set()
        this.parked.set(key, waiters)
      }
      const done = (outcome: "woken" | "timeout") => {
        clearTimeout(timer)
        waiters.delete(done)
        resolve(outcome)
      }
      const timer = setTimeout(() => done("timeout"), maxWaitMs)
      waiters.add(done)
    })
  }

  get parkedCount(): number {
    let n = 0
    for (const set of this.parked.values()) n += set.size
    return n
  }
}
