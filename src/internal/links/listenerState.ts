/**
 * What the listener counts and bounds across all its connections: admission (concurrent inbound
 * connections, unauthenticated ones per address), refusals by reason with their throttled warnings,
 * and every frame read after a HELLO. Owned by the listener; inbound links change it only through
 * these methods.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { AuthMode } from "../../MeshConfig.js"
import { HandshakeError, handshakeReasonList } from "../../MeshError.js"
import type { MeshEventsShape } from "../../MeshEvent.js"
import type { InboundStats } from "../../MeshStats.js"
import { applyHistogram } from "../metrics/metricNames.js"
import { TagCounts } from "../metrics/tagCounts.js"
import { printable } from "../wire/peerText.js"

/** How often, at most, a HELLO carrying our own server id from another node is logged at warning. */
const OWN_ID_WARNING_INTERVAL_MS = 60_000
/** How often, at most, a rising handshake-failure count is logged at warning level. */
const HANDSHAKE_WARNING_INTERVAL_MS = 10_000
/** Senders counted apart in the per-sender frame counts; past this many (a replayed HELLO can announce
 * any id) they share one row. */
const SENDER_ROWS = 64

/** What the receive side counted, for the stats body: every frame read after a HELLO and every refusal. */
export interface Counters {
  readonly framesRead: number
  readonly framesDispatched: number
  readonly framesInvalid: number
  readonly framesUnknown: number
  readonly framesOversized: number
  readonly itemsInvalid: number
  readonly rejections: Readonly<Record<HandshakeError.Reason, number>>
  readonly inbound: InboundStats
}

/** What the listener counts for the stats body, and frames read per sender for the metrics. */
export interface ListenerCounts extends Counters {
  /** Frames read by sender (its server id; at most 64 senders, the rest under `_other`) and tag. */
  readonly readByPeer: ReadonlyArray<
    readonly [peer: string, byTag: ReadonlyArray<readonly [tag: number, frames: number]>]
  >
}

export class ListenerState {
  private framesRead = 0
  private framesDispatched = 0
  private framesInvalid = 0
  private framesUnknown = 0
  private framesOversized = 0
  private itemsSkipped = 0
  private silent = 0
  private idle = 0
  private legacyAccepted = 0
  private selfDials = 0
  private open = 0
  private openAuthenticated = 0
  private authenticatedTotal = 0
  private readonly rejections: Record<HandshakeError.Reason, number>
  private readonly readByPeer = new Map<string, TagCounts>()
  private readonly unauthenticated = new Map<string, number>()
  private lastWarningAt = Number.NEGATIVE_INFINITY
  private failuresAtLastWarning = 0
  private ownIdWarnedAt = Number.NEGATIVE_INFINITY
  private readonly observeApply: (seconds: number) => void

  constructor(
    serverId: string,
    private readonly limits: { readonly maxInbound: number; readonly maxUnauthenticatedPerAddress: number },
    private readonly events: MeshEventsShape,
    /** Connections refused below the mesh, counted by the transport (failed TLS handshakes). */
    private readonly transportRefusals: () => number,
    private readonly mode: AuthMode
  ) {
    const zero = {} as Record<HandshakeError.Reason, number>
    for (const reason of handshakeReasonList) zero[reason] = 0
    this.rejections = zero
    this.observeApply = applyHistogram(serverId)
  }

  // --- admission ---

  /** A new connection from `ip`: admitted (and counted open), or refused and counted. */
  admit(ip: string): boolean {
    const pending = this.unauthenticated.get(ip) ?? 0
    if (this.open >= this.limits.maxInbound || pending >= this.limits.maxUnauthenticatedPerAddress) {
      this.rejections.TooManyConnections++
      this.events.emit({ _tag: "HandshakeFailed", remote: ip, reason: "TooManyConnections" })
      return false
    }
    this.open++
    this.unauthenticated.set(ip, pending + 1)
    return true
  }

  /** The connection from `ip` authenticated: it no longer counts against its address's cap. */
  authenticated(ip: string, version: 1 | 2): void {
    this.release(ip)
    this.authenticatedTotal++
    this.openAuthenticated++
    if (version === 1 && this.mode === "permissive") this.legacyAccepted++
  }

  /** An admitted connection closed. */
  closed(ip: string, wasAuthenticated: boolean): void {
    if (wasAuthenticated) this.openAuthenticated--
    else this.release(ip)
    this.open--
  }

  private release(ip: string): void {
    const left = (this.unauthenticated.get(ip) ?? 1) - 1
    if (left <= 0) this.unauthenticated.delete(ip)
    else this.unauthenticated.set(ip, left)
  }

  // --- refusals ---

  private failures(): number {
    let sum = 0
    for (const reason of handshakeReasonList) sum += this.rejections[reason]
    return sum
  }

  /** A refused HELLO: counted by reason, published, and warned about at a bounded rate. */
  refused(remote: string, error: HandshakeError): Effect.Effect<void> {
    this.rejections[error.reason]++
    this.events.emit({ _tag: "HandshakeFailed", remote, reason: error.reason })
    return Effect.flatMap(Clock.currentTimeMillis, (now) => {
      if (error.reason === "OwnServerId") {
        // Not our own dial (that is recognised by its nonce): another node uses our server id.
        if (now - this.ownIdWarnedAt < OWN_ID_WARNING_INTERVAL_MS) return Effect.void
        this.ownIdWarnedAt = now
        return Effect.logWarning(
          "another node announces this node's server id: refusing it (do two nodes share QUEEN_SERVER_ID?)"
        ).pipe(Effect.annotateLogs({ remote }))
      }
      const reason = printable(error.message)
      if (now - this.lastWarningAt < HANDSHAKE_WARNING_INTERVAL_MS) {
        return Effect.logDebug("mesh handshake refused").pipe(Effect.annotateLogs({ remote, reason }))
      }
      const total = this.failures()
      const since = total - this.failuresAtLastWarning
      this.lastWarningAt = now
      this.failuresAtLastWarning = total
      return Effect.logWarning("mesh handshake refused").pipe(
        Effect.annotateLogs({ remote, reason, handshake_failures: total, since_last_warning: since })
      )
    })
  }

  /** Our own dial, recognised: not a refusal. */
  ownDial(remote: string): Effect.Effect<void> {
    this.selfDials++
    return Effect.logDebug("closed our own dial: the peer list names this node").pipe(
      Effect.annotateLogs({ remote })
    )
  }

  closedSilent(): void {
    this.silent++
  }

  closedIdle(): void {
    this.idle++
  }

  // --- frames ---

  frameRead(): void {
    this.framesRead++
  }

  frameInvalid(): void {
    this.framesInvalid++
  }

  frameUnknown(): void {
    this.framesUnknown++
  }

  frameOversized(): void {
    this.framesOversized++
  }

  /** A frame dispatched, `skipped` of its batch items left out for breaking a rule. */
  frameDispatched(skipped: number): void {
    this.framesDispatched++
    this.itemsSkipped += skipped
  }

  itemsInvalid(count: number): void {
    this.itemsSkipped += count
  }

  /** The per-tag counter of frames read from `peer`. */
  readCounter(peer: string): (tag: number) => void {
    let row = this.readByPeer.get(peer)
    if (row === undefined) {
      const key = this.readByPeer.size >= SENDER_ROWS ? "_other" : peer
      row = this.readByPeer.get(key)
      if (row === undefined) {
        row = new TagCounts()
        this.readByPeer.set(key, row)
      }
    }
    const own = row
    return (tag) => own.add(tag)
  }

  /** A chunk applied, `started` being when it arrived (`performance.now()`): the apply histogram. */
  applied(started: number): void {
    this.observeApply((performance.now() - started) / 1000)
  }

  counts(): ListenerCounts {
    return {
      framesRead: this.framesRead,
      framesDispatched: this.framesDispatched,
      framesInvalid: this.framesInvalid,
      framesUnknown: this.framesUnknown,
      framesOversized: this.framesOversized,
      itemsInvalid: this.itemsSkipped,
      rejections: { ...this.rejections, TlsHandshake: this.transportRefusals() },
      inbound: {
        open: this.open,
        authenticated: this.openAuthenticated,
        authenticated_total: this.authenticatedTotal,
        closed_silent: this.silent,
        closed_idle: this.idle,
        legacy_accepted: this.legacyAccepted,
        self_dials: this.selfDials
      },
      readByPeer: [...this.readByPeer].map(([peer, row]) => [peer, row.entries()] as const)
    }
  }
}

/** A refusal of the given reason, for the listener's own checks. */
export const refusal = (reason: HandshakeError.Reason, detail?: string): HandshakeError =>
  new HandshakeError(detail === undefined ? { reason } : { reason, detail })
