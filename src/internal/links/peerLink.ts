/**
 * One configured peer's link as the `Peers` service owns it: the bounded send queue, the link state
 * the stats show, and the accounting of every frame handed to it (spec "Topology": drop rather than
 * buffer). Only `Peers` and its dialer fiber change it, through these methods.
 *
 * The send queue is a plain array taken whole by the writer rather than `Queue.dropping` + `takeAll`:
 * measured here, about 4-5x cheaper per offer on the broadcast hot path. It is bounded in frames and
 * in bytes. On an idle link a frame skips the queue and is written at once (`direct`).
 *
 * Accounting, per link, under the counters' one names (`Membership.LinkCounters`): handed = written +
 * dropped_full + dropped_down + discarded + queued.
 * `dropped_down`: handed while the link was down (never queued: it would be stale by the reconnect).
 * `discarded`: queued (or being written) when the link broke, thrown away then (a stale hint is worse
 * than none).
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Membership from "../../Membership.js"
import type { Peer } from "../../MeshConfig.js"
import { TagCounts } from "../metrics/tagCounts.js"

/** One link as the stats read it: a copy, taken at once. */
export interface PeerLinkState extends Membership.Link {
  readonly host: string
  readonly port: number
  /** `host:port`, bracketed for an IPv6 literal: the peer's name in logs and metric labels. */
  readonly name: string
  /** The entry names this node itself: not dialled, not a link, not counted for readiness. */
  readonly self: boolean
  /** How the entry came: the configured list, DNS discovery or another `Discovery`. */
  readonly foundBy: "config" | "dns" | "discovery"
  /** The server id the peer's v2 challenge gave, the last time it sent one. */
  readonly learnedId: Option.Option<string>
  /** Frames written, by tag (only tags with a count). */
  readonly writtenByTag: ReadonlyArray<readonly [tag: number, frames: number]>
  /** Frames dropped for any cause, by tag (only tags with a count). */
  readonly droppedByTag: ReadonlyArray<readonly [tag: number, frames: number]>
}

/** The counters a link keeps itself; `queued` and `queued_bytes` are read off the queue. */
type OwnCounters = Omit<Membership.LinkCounters, "queued" | "queued_bytes">

/** A link's counters before anything happened (and a self entry's, which never has a link). */
export const NO_COUNTERS: Membership.LinkCounters = {
  handed: 0,
  written: 0,
  dropped_full: 0,
  dropped_down: 0,
  discarded: 0,
  queued: 0,
  queued_bytes: 0,
  reconnects: 0,
  silent_closes: 0,
  stalled_closes: 0
}

const ownCounters = ({ queued: _q, queued_bytes: _b, ...own }: Membership.LinkCounters): OwnCounters => own

export class PeerLink {
  /** Every frame handed to it, by where it went, under the names the stats and metrics use. */
  private readonly counts: { -readonly [K in keyof OwnCounters]: number } = ownCounters(NO_COUNTERS)
  /** Frames written, by tag byte. */
  private readonly writtenByTag = new TagCounts()
  /** Frames dropped (full, down or discarded), by tag byte. */
  private readonly droppedByTag = new TagCounts()

  private connected = false
  /** This entry of the peer list is this node itself: never dialled again, never handed a frame. */
  private self = false
  private resolvedIp: string | undefined = undefined
  private upHost: string | undefined = undefined
  private lastResolvedIp: string | undefined = undefined
  private lastError: string | undefined = undefined
  private learnedId: string | undefined = undefined

  private items: Array<Uint8Array> = []
  private bytes = 0
  private waiting: (() => void) | undefined = undefined
  /** Frames the writer took and has not finished writing: discarded too if the link breaks meanwhile. */
  private inFlight: ReadonlyArray<Uint8Array> = []
  private inFlightBytes = 0
  private direct: ((bytes: Uint8Array) => boolean) | undefined = undefined
  /** The writer holds frames it took and is writing them. */
  private writing = false

  /** When the writer took the frames it is writing now (`undefined` while it writes nothing). */
  private writingSince: number | undefined = undefined

  /** A frame other than a heartbeat was taken since the last heartbeat tick (`heartbeat`). */
  private carried = false

  constructor(
    readonly peer: Peer,
    readonly name: string,
    readonly capacity: number,
    readonly capacityBytes: number,
    /** Observes the frames of each write (the frames-per-write histogram). */
    private readonly observeWrite: (frames: number) => void = () => {},
    readonly foundBy: PeerLinkState["foundBy"] = "config"
  ) {}

  /** Frames waiting, including those the writer holds while it writes them. */
  get queued(): number {
    return this.items.length + this.inFlight.length
  }

  /** Whether this entry was recognised as this node itself. */
  get isSelf(): boolean {
    return this.self
  }

  get isConnected(): boolean {
    return this.connected && !this.self
  }

  snapshot(): PeerLinkState {
    return {
      host: this.peer.host,
      port: this.peer.port,
      name: this.name,
      connected: this.isConnected,
      self: this.self,
      foundBy: this.foundBy,
      learnedId: Option.fromNullishOr(this.learnedId),
      resolvedIp: Option.fromNullishOr(this.resolvedIp),
      lastResolvedIp: Option.fromNullishOr(this.lastResolvedIp),
      lastError: Option.fromNullishOr(this.lastError),
      counters: { ...this.counts, queued: this.queued, queued_bytes: this.bytes + this.inFlightBytes },
      writtenByTag: this.writtenByTag.entries(),
      droppedByTag: this.droppedByTag.entries()
    }
  }

  /** Hands one encoded frame to the link. Never blocks; false when it was dropped (and counted). */
  offer(bytes: Uint8Array): boolean {
    // Not a link at all: nothing is handed to it, so nothing is counted as dropped either.
    if (this.self) return false
    this.counts.handed++
    if (!this.connected) {
      this.counts.dropped_down++
      this.droppedByTag.add(bytes[4]!)
      return false
    }
    const direct = this.direct
    if (direct !== undefined && !this.writing && this.items.length === 0 && direct(bytes)) {
      this.carried = true
      this.counts.written++
      this.writtenByTag.add(bytes[4]!)
      if (this.directInTick++ === 0) setImmediate(this.endDirectTick)
      return true
    }
    // The frames the writer holds count against the bounds too: all of them are held for this peer.
    if (
      this.items.length + this.inFlight.length >= this.capacity ||
      this.bytes + this.inFlightBytes + bytes.length > this.capacityBytes
    ) {
      this.counts.dropped_full++
      this.droppedByTag.add(bytes[4]!)
      return false
    }
    this.items.push(bytes)
    this.bytes += bytes.length
    this.carried = true
    const waiting = this.waiting
    if (waiting !== undefined) {
      this.waiting = undefined
      waiting()
    }
    return true
  }

  /**
   * The heartbeat tick's frame. With `skipBusy`, a link that took another frame since the last tick
   * carries no heartbeat this one: the peer's liveness counts any frame (spec "Topology"), so the link
   * is never silent for two intervals. False when it was skipped or dropped.
   */
  heartbeat(bytes: Uint8Array, skipBusy: boolean): boolean {
    const carried = this.carried
    this.carried = false
    if (skipBusy && carried && this.connected) return false
    const taken = this.offer(bytes)
    this.carried = false
    return taken
  }

  /**
   * Frames the direct path took this turn of the event loop. The transport writes them as one write
   * when the turn ends (a lone frame at once), so the frames-per-write histogram is observed once per
   * turn, not per frame.
   */
  private directInTick = 0
  private readonly endDirectTick = () => {
    const frames = this.directInTick
    this.directInTick = 0
    this.observeWrite(frames)
  }

  /** The link is up: frames flow from now on, written at once when `direct` takes them. */
  up(remoteAddress: string | undefined, direct: ((bytes: Uint8Array) => boolean) | undefined): void {
    this.connected = true
    this.resolvedIp = remoteAddress
    this.upHost = remoteAddress?.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, "")
    if (remoteAddress !== undefined) this.lastResolvedIp = remoteAddress
    this.direct = direct
    this.writing = false
  }

  /** The peer's v2 challenge named its server id. */
  learned(serverId: string): void {
    this.learnedId = serverId
  }

  /** Who the link reaches, as far as it knows: the server id its challenge gave, the address it is up to. */
  get identity(): { readonly learnedId: string | undefined; readonly host: string | undefined } {
    return { learnedId: this.learnedId, host: this.host }
  }

  /** The server id the peer's v2 challenge gave, the last time it sent one. */
  get learnedServerId(): string | undefined {
    return this.learnedId
  }

  /** The address the link is up to, an IPv4-mapped IPv6 address as its IPv4 form (asked every tick). */
  get host(): string | undefined {
    return this.upHost
  }

  /** Since when the writer has been writing what it holds, if it is (writes not draining). */
  get writeStartedAt(): number | undefined {
    return this.writingSince
  }

  /** The outbound liveness check closed the link, for this reason. */
  closedBy(reason: "peer silent" | "write stalled"): void {
    if (reason === "peer silent") this.counts.silent_closes++
    else this.counts.stalled_closes++
  }

  /** Our own listener recognised this entry's HELLO: the entry names this node. */
  markSelf(): void {
    this.self = true
  }

  /** Why the last dial or link failed, for the stats. */
  failed(reason: string): void {
    this.lastError = reason
  }

  /** The link is down: what is still queued is discarded and counted. */
  down(): void {
    if (this.connected && !this.self) this.counts.reconnects++
    this.connected = false
    this.carried = false
    this.resolvedIp = undefined
    this.upHost = undefined
    this.direct = undefined
    this.writing = false
    this.writingSince = undefined
    for (const frame of this.items) this.droppedByTag.add(frame[4]!)
    for (const frame of this.inFlight) this.droppedByTag.add(frame[4]!)
    this.counts.discarded += this.items.length + this.inFlight.length
    this.items = []
    this.inFlight = []
    this.inFlightBytes = 0
    this.bytes = 0
  }

  /** Takes every waiting frame, oldest first, for one coalesced write; they are being written now. */
  takeAll(now: number): Array<Uint8Array> {
    const all = this.items
    this.items = []
    this.writing = true
    this.writingSince = now
    this.inFlight = all
    this.inFlightBytes = this.bytes
    this.bytes = 0
    return all
  }

  /** The writer finished writing frames it took. */
  wrote(frames: ReadonlyArray<Uint8Array>): void {
    this.writingSince = undefined
    this.inFlight = []
    this.inFlightBytes = 0
    this.counts.written += frames.length
    for (const frame of frames) this.writtenByTag.add(frame[4]!)
    this.observeWrite(frames.length)
    this.writing = false
  }

  /** Completes once at least one frame is waiting. */
  readonly available: Effect.Effect<void> = Effect.callback<void>((resume) => {
    if (this.items.length > 0) return resume(Effect.void)
    this.waiting = () => resume(Effect.void)
    return Effect.sync(() => {
      this.waiting = undefined
    })
  })
}
