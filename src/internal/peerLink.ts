/**
 * One configured peer's link as the `Peers` service owns it: the bounded send queue, the link state
 * the stats show, and the accounting of every frame handed to it (spec "Topology": drop rather than
 * buffer). Only `Peers` and its dialer fiber change it, through these methods.
 *
 * The send queue is a plain array taken whole by the writer rather than `Queue.dropping` + `takeAll`:
 * measured here, about 4-5x cheaper per offer on the broadcast hot path. It is bounded in frames and
 * in bytes. On an idle link a frame skips the queue and is written at once (`direct`).
 *
 * Accounting, per link: handed = written + dropped_full + dropped_down + discarded + queued.
 * `dropped_down`: handed while the link was down (never queued: it would be stale by the reconnect).
 * `discarded`: queued (or being written) when the link broke, thrown away then (a stale hint is worse
 * than none).
 *
 * @internal
 */
import { Effect } from "effect"
import type { Peer } from "../MeshConfig.js"

export class PeerLink {
  handed = 0
  written = 0
  droppedFull = 0
  droppedDown = 0
  discarded = 0
  reconnects = 0
  /** Frames written, by tag byte. */
  readonly writtenByTag = new Float64Array(256)
  /** Frames dropped (full, down or discarded), by tag byte. */
  readonly droppedByTag = new Float64Array(256)
  /** Frames per coalesced write, for the histogram: counts of writes of 1, 2-3, 4-7, ... frames. */
  readonly writeSizes = new Float64Array(16)

  connected = false
  /** This entry of the peer list is this node itself: never dialled again, never handed a frame. */
  self = false
  resolvedIp: string | undefined = undefined
  lastResolvedIp: string | undefined = undefined
  lastError: string | undefined = undefined

  private items: Array<Uint8Array> = []
  private bytes = 0
  private waiting: (() => void) | undefined = undefined
  /** Frames the writer took and has not finished writing: discarded too if the link breaks meanwhile. */
  private inFlight: ReadonlyArray<Uint8Array> = []
  private inFlightBytes = 0
  private direct: ((bytes: Uint8Array) => boolean) | undefined = undefined
  /** The writer holds frames it took and is writing them. */
  writing = false
  /** Something was written since the last heartbeat tick. */
  active = false

  constructor(
    readonly peer: Peer,
    readonly name: string,
    readonly capacity: number,
    readonly capacityBytes: number,
    /** Observes the frames of each write (the frames-per-write histogram). */
    private readonly observeWrite: (frames: number) => void = () => {}
  ) {}

  /** Frames waiting, including those the writer holds while it writes them. */
  get queued(): number {
    return this.items.length + this.inFlight.length
  }

  get queuedBytes(): number {
    return this.bytes + this.inFlightBytes
  }

  /** Hands one encoded frame to the link. Never blocks; false when it was dropped (and counted). */
  offer(bytes: Uint8Array): boolean {
    // Not a link at all: nothing is handed to it, so nothing is counted as dropped either.
    if (this.self) return false
    this.handed++
    if (!this.connected) {
      this.droppedDown++
      this.droppedByTag[bytes[4]!]!++
      return false
    }
    const direct = this.direct
    if (direct !== undefined && !this.writing && this.items.length === 0 && direct(bytes)) {
      this.written++
      this.writtenByTag[bytes[4]!]!++
      if (this.directInTick++ === 0) process.nextTick(this.endDirectTick)
      this.active = true
      return true
    }
    // The frames the writer holds count against the bounds too: all of them are held for this peer.
    if (
      this.items.length + this.inFlight.length >= this.capacity ||
      this.bytes + this.inFlightBytes + bytes.length > this.capacityBytes
    ) {
      this.droppedFull++
      this.droppedByTag[bytes[4]!]!++
      return false
    }
    this.items.push(bytes)
    this.bytes += bytes.length
    const waiting = this.waiting
    if (waiting !== undefined) {
      this.waiting = undefined
      waiting()
    }
    return true
  }

  /**
   * Frames the direct path took this tick. The transport writes them as one write when the tick ends
   * (a lone frame at once), so the frames-per-write histogram is observed once per tick, not per frame.
   */
  private directInTick = 0
  private readonly endDirectTick = () => {
    const frames = this.directInTick
    this.directInTick = 0
    this.writeSizes[Math.min(15, 31 - Math.clz32(frames))]!++
    this.observeWrite(frames)
  }

  /** The link is up: frames flow from now on, written at once when `direct` takes them. */
  up(remoteAddress: string | undefined, direct: ((bytes: Uint8Array) => boolean) | undefined): void {
    this.connected = true
    this.resolvedIp = remoteAddress
    if (remoteAddress !== undefined) this.lastResolvedIp = remoteAddress
    this.direct = direct
    this.writing = false
    this.active = false
  }

  /** Our own listener recognised this entry's HELLO: the entry names this node. */
  markSelf(): void {
    this.self = true
  }

  /** The link is down: what is still queued is discarded and counted. */
  down(reason: string | undefined): void {
    if (this.connected && !this.self) this.reconnects++
    this.connected = false
    this.resolvedIp = undefined
    this.direct = undefined
    this.writing = false
    if (reason !== undefined) this.lastError = reason
    for (const frame of this.items) this.droppedByTag[frame[4]!]!++
    for (const frame of this.inFlight) this.droppedByTag[frame[4]!]!++
    this.discarded += this.items.length + this.inFlight.length
    this.items = []
    this.inFlight = []
    this.inFlightBytes = 0
    this.bytes = 0
  }

  /** Takes every waiting frame, oldest first, for one coalesced write. */
  takeAll(): Array<Uint8Array> {
    const all = this.items
    this.items = []
    this.inFlight = all
    this.inFlightBytes = this.bytes
    this.bytes = 0
    return all
  }

  /** The writer finished writing frames it took. */
  wrote(frames: ReadonlyArray<Uint8Array>): void {
    this.inFlight = []
    this.inFlightBytes = 0
    this.written += frames.length
    for (const frame of frames) this.writtenByTag[frame[4]!]!++
    this.writeSizes[Math.min(15, 31 - Math.clz32(frames.length))]!++
    this.observeWrite(frames.length)
    this.writing = false
    this.active = true
  }

  /** Completes once at least one frame is waiting. */
  readonly available: Effect.Effect<void> = Effect.async<void>((resume) => {
    if (this.items.length > 0) return resume(Effect.void)
    this.waiting = () => resume(Effect.void)
    return Effect.sync(() => {
      this.waiting = undefined
    })
  })
}
