/**
 * One accepted connection, from its first byte to its close (spec "Topology", "The handshake"): the
 * receive path by name, `socket data → InboundLink.onChunk → FrameDecoder → collect → Dispatch`.
 *
 * Inbound connections are receive-only. The first frame must be a HELLO that the handshake accepts
 * within the handshake timeout; until it does, no frame may be larger than a HELLO could be. After it,
 * every chunk refreshes the sender's liveness and every frame is accounted for: dispatched, or
 * rejected as invalid, unknown or oversized (skipped unbuffered). A frame the host takes synchronously
 * is applied inside the decoder; the rest run as effects in order, with a turn of the event loop after
 * a large frame and large batches checked and applied in slices, so one peer's megabytes cannot hold
 * up another's wakes. An authenticated link silent past the idle timeout is closed. A framing error
 * closes only this connection; nothing thrown while handling a chunk escapes it.
 *
 * The counters this connection moves belong to the listener (`ListenerState`), which owns them and
 * changes them through its methods.
 *
 * @internal
 */

import type * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import {
  FrameDecodeError,
  type FramingError,
  type HandshakeError,
  type TransportError
} from "../../MeshError.js"
import type { MeshEventsShape } from "../../MeshEvent.js"
import type { Connection } from "../../Transport.js"
import type { DispatchShape } from "../mesh/dispatch.js"
import * as Stall from "../stall.js"
import { parseItems, scan, yieldToEventLoop } from "../wire/batchScan.js"
import * as Codec from "../wire/codec.js"
import { FrameDecoder } from "../wire/frameDecoder.js"
import * as Frames from "../wire/frames.js"
import * as PayloadChecks from "../wire/payloadChecks.js"
import type * as Payloads from "../wire/payloads.js"
import { printable } from "../wire/peerText.js"
import { sameBytes, WakeMemo } from "../wire/wakeMemo.js"
import * as Handshake from "./handshake.js"
import { type ListenerState, refusal } from "./listenerState.js"
import type { LivenessShape, Refresh } from "./liveness.js"
import type { SelfDials } from "./selfDials.js"

/** A frame at least this large is followed by a turn of the event loop before the next chunk. */
const LARGE_FRAME = 256 * 1024
/**
 * A batch at least this large is checked and applied in slices, with a turn of the event loop between
 * them: `JSON.parse` of 16 MiB holds the loop for a few hundred milliseconds, during which no other
 * peer's wake could be read.
 */
const SLICED_BATCH = 1024 * 1024
/** Characters scanned, and items applied, per slice of a large batch. */
const SCAN_SLICE = 1024 * 1024
const ITEM_SLICE = 4096
/** The longest heartbeat payload kept to compare the next ones with (a server id is far shorter). */
const HEARTBEAT_KEPT = 512
/** Invalid frames of one chunk described in events and logs; the rest are only counted. */
const NOTES_PER_CHUNK = 8

/** A verified HELLO from one of this node's own dialers (the peer list names this node). */
export class OwnDial extends Data.TaggedError("OwnDial") {}

/** One turn of the event loop: lets other sockets' data in before this one's next chunk. */
const nextTurn = Effect.callback<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

/** What an inbound link works with: the node's services, shared by every connection. */
export interface InboundDeps {
  readonly state: ListenerState
  readonly liveness: LivenessShape
  readonly dispatch: DispatchShape
  readonly events: MeshEventsShape
  readonly selfDials: SelfDials
  readonly clock: Clock.Clock
  readonly judge: Omit<Handshake.JudgeOptions, "challenge" | "identity">
  readonly helloMaxBytes: number
  readonly handshakeTimeout: Duration.Duration
  readonly idleTimeout: Duration.Duration
  readonly authFailureDelay: Duration.Duration
}

type ChunkFailure = FramingError | HandshakeError | OwnDial

export class InboundLink {
  /** The sender's server id, once its HELLO was accepted. */
  private peer: string | undefined = undefined
  private refusal: HandshakeError | OwnDial | undefined = undefined
  /** Until the HELLO verifies, no frame may be larger than a HELLO could be. */
  private readonly decoder: FrameDecoder
  private readonly hello: Deferred.Deferred<string>
  private bytesIn = 0
  private refresh: Refresh | undefined = undefined
  private countRead: ((tag: number) => void) | undefined = undefined
  private lastChunkAt: number
  private large = false
  /** What a chunk's frames still need once the decoder is done with it: the effects that apply them. */
  private later: Array<Effect.Effect<void>> = []
  private notes: Array<{ readonly tag: number; readonly detail: string }> = []
  /**
   * The payload of the last heartbeat this peer sent that decoded: a peer sends the same heartbeat,
   * byte for byte, every interval, and the same bytes decode to the same frame, so they skip the
   * decode (a heartbeat does nothing on receipt beyond the liveness every chunk refreshes).
   */
  private heartbeatBytes: Uint8Array | undefined = undefined
  /** The wakes this peer sent lately, decoded: a repeat is not decoded again. */
  private readonly wakes = new WakeMemo()

  constructor(
    private readonly deps: InboundDeps,
    private readonly connection: Connection,
    private readonly remote: string,
    private readonly challenge: Option.Option<Payloads.Challenge>
  ) {
    this.decoder = new FrameDecoder({ maxFrameLength: deps.helloMaxBytes })
    this.hello = Deferred.makeUnsafe<string>()
    this.lastChunkAt = deps.clock.currentTimeMillisUnsafe()
  }

  /** The connection's whole life: read until it ends, within the HELLO deadline and the idle timeout. */
  readonly run: Effect.Effect<void> = Effect.suspend(() => {
    const deps = this.deps
    // The HELLO's deadline, judged once what arrived while this process was held up has been read.
    const late = Stall.sleep(deps.handshakeTimeout).pipe(
      Effect.andThen(Deferred.isDone(this.hello)),
      Effect.flatMap((came) => (came ? Effect.never : Effect.fail(refusal("Timeout"))))
    )
    const deadline = Effect.raceFirst(Deferred.await(this.hello), late).pipe(Effect.andThen(this.idle))
    return Effect.raceFirst(this.read, deadline).pipe(
      Effect.catchTags({
        OwnDial: () => deps.state.ownDial(this.remote),
        HandshakeError: (error) =>
          Effect.andThen(
            deps.state.refused(this.remote, error),
            // Hold the connection a moment before closing, reading nothing and holding no buffer, so a
            // client retrying bad HELLOs gets no faster feedback than this.
            Effect.sleep(deps.authFailureDelay)
          ),
        FramingError: (error) =>
          Effect.logWarning("closing a mesh connection: bad framing").pipe(
            Effect.annotateLogs({ remote: this.remote, peer: this.peerName(), reason: error.message })
          ),
        TransportError: (error: TransportError) =>
          Effect.logDebug("inbound mesh connection broke").pipe(
            Effect.annotateLogs({ remote: this.remote, peer: this.peerName(), reason: error.message })
          )
      }),
      Effect.catchCause((cause) => Effect.logError("inbound mesh connection failed", cause))
    )
  })

  /** Whether this connection's HELLO was accepted. */
  get isAuthenticated(): boolean {
    return this.peer !== undefined
  }

  private peerName(): string {
    return printable(this.peer ?? "unauthenticated")
  }

  private get read(): Effect.Effect<void, ChunkFailure | TransportError> {
    return this.connection
      .read((chunk) => this.onChunk(chunk))
      .pipe(Effect.andThen(Effect.suspend(() => this.ended())))
  }

  /** The stream ended: silent (a TCP probe), before a HELLO, or inside a frame. */
  private ended(): Effect.Effect<void, FramingError | HandshakeError> {
    const failure = this.decoder.end()
    if (this.peer === undefined) {
      if (this.bytesIn === 0) {
        this.deps.state.closedSilent()
        return Effect.void
      }
      return Effect.fail(refusal("Closed"))
    }
    return failure === undefined ? Effect.void : Effect.fail(failure)
  }

  /**
   * After the HELLO: closes a link silent past the idle timeout (the peer is gone or stalled). A check
   * woken late reads what arrived meanwhile first (`Stall`): this process being held up is no silence.
   */
  private readonly idle: Effect.Effect<void> = Effect.suspend(() => {
    const idleMillis = Duration.toMillis(this.deps.idleTimeout)
    return Effect.andThen(
      Stall.until((now) => idleMillis - (now - this.lastChunkAt)),
      Effect.suspend(() => {
        this.deps.state.closedIdle()
        return Effect.logInfo("closing a silent inbound mesh link").pipe(
          Effect.annotateLogs({
            remote: this.remote,
            peer: this.peerName(),
            silent_ms: this.deps.clock.currentTimeMillisUnsafe() - this.lastChunkAt
          })
        )
      })
    )
  })

  /** Socket data: frames out of the decoder, applied at once or by the effect returned. */
  onChunk(chunk: Uint8Array): Effect.Effect<void, ChunkFailure> | undefined {
    const started = performance.now()
    this.bytesIn += chunk.length
    this.lastChunkAt = this.deps.clock.currentTimeMillisUnsafe()
    const wasAuthenticated = this.peer !== undefined
    let failure: FramingError | undefined
    try {
      failure = this.decoder.push(chunk, this.collect)
    } catch (defect) {
      // A defect in handling one chunk ends this connection, never the process.
      return Effect.die(defect)
    }
    if (this.refusal !== undefined) return Effect.fail(this.refusal)
    const from = this.peer
    if (failure !== undefined && from === undefined) {
      return Effect.fail(
        refusal(failure.reason === "FrameTooLarge" ? "OversizedHello" : "InvalidHello", failure.message)
      )
    }
    this.refresh?.()
    if (from !== undefined && !wasAuthenticated) Deferred.doneUnsafe(this.hello, Effect.succeed(from))
    if (failure === undefined && this.later.length === 0 && this.notes.length === 0 && !this.large) {
      // The common case: every frame was applied inside the decoder.
      this.deps.state.applied(started)
      return undefined
    }
    const effects = this.later
    const notes = this.notes
    const yieldAfter = this.large
    this.later = []
    this.notes = []
    this.large = false
    const deps = this.deps
    return Effect.gen(function* () {
      for (const effect of effects) yield* effect
      deps.state.applied(started)
      if (from !== undefined && notes.length > 0) {
        const peer = printable(from)
        for (const note of notes) {
          deps.events.emit({ _tag: "InvalidFrame", from, tag: note.tag, detail: note.detail })
          yield* Effect.logDebug("skipped an invalid frame").pipe(
            Effect.annotateLogs({ peer, tag: note.tag, reason: printable(note.detail) })
          )
        }
      }
      if (failure !== undefined) return yield* failure
      if (yieldAfter) yield* nextTurn
    })
  }

  private note(tag: number, detail: string): void {
    if (this.notes.length < NOTES_PER_CHUNK) this.notes.push({ tag, detail })
  }

  /**
   * Each frame the decoder completes: the HELLO is judged before the next frame's length is read, and
   * a frame the host can take synchronously is applied at once, unless an earlier one of the chunk
   * waits for an effect (order is kept).
   */
  private readonly collect = (tag: number, payload: Uint8Array): void => {
    if (this.refusal !== undefined) return
    const from = this.peer
    if (from === undefined) {
      this.judgeHello(tag, payload)
      return
    }
    const state = this.deps.state
    state.frameRead()
    this.countRead!(tag)
    if (
      tag === Frames.Tag.HEARTBEAT &&
      this.heartbeatBytes !== undefined &&
      sameBytes(this.heartbeatBytes, payload)
    ) {
      state.frameDispatched(0)
      return
    }
    if (payload.length >= LARGE_FRAME) this.large = true
    if (
      payload.length >= SLICED_BATCH &&
      (tag === Frames.Tag.MESSAGE_AVAILABLE_BATCH || tag === Frames.Tag.HOTLIST_DIRTY_BATCH)
    ) {
      // Decoded now (the payload is a view of the chunk), checked and applied in slices later.
      const text = Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength).toString("utf8")
      this.later.push(this.slicedBatch(from, tag, text))
      return
    }
    const frame =
      tag === Frames.Tag.MESSAGE_AVAILABLE ? this.wakes.decode(payload) : Codec.decodeFrame(tag, payload)
    if (frame instanceof FrameDecodeError) {
      state.frameInvalid()
      this.note(tag, frame.detail)
      return
    }
    if (frame._tag === "Unknown") {
      state.frameUnknown()
      return
    }
    // A copy: the payload is a view of the chunk.
    if (frame._tag === "Heartbeat" && payload.length <= HEARTBEAT_KEPT)
      this.heartbeatBytes = Uint8Array.from(payload)
    state.frameDispatched(
      (frame._tag === "MessageAvailableBatch" || frame._tag === "HotlistDirtyBatch") &&
        frame.skipped !== undefined
        ? frame.skipped
        : 0
    )
    const apply = this.deps.dispatch.apply
    if (this.later.length > 0) {
      this.later.push(Effect.suspend(() => apply(from, frame) ?? Effect.void))
      return
    }
    const applying = apply(from, frame)
    if (applying !== undefined) this.later.push(applying)
  }

  /** The first frame: the handshake's verdict, our own dial, or the link authenticated. */
  private judgeHello(tag: number, payload: Uint8Array): void {
    const verdict = Handshake.judge(tag, payload, {
      ...this.deps.judge,
      challenge: this.challenge,
      identity: this.connection.identity
    })
    if (Result.isFailure(verdict)) {
      const error = verdict.failure
      // Our own id on a verified HELLO: one of our own dialers (its nonce says so), or a node sharing
      // our id, which stays refused.
      this.refusal = error.reason === "OwnServerId" && this.ownNonce(payload) ? new OwnDial() : error
      return
    }
    const peer = verdict.success.serverId
    this.peer = peer
    this.deps.state.authenticated(this.remote, verdict.success.version)
    this.decoder.authenticated({
      maxLengthOf: Frames.maxLengthOf,
      onOversized: (oversizedTag, length) => {
        this.deps.state.frameRead()
        this.deps.state.frameOversized()
        this.countRead!(oversizedTag)
        this.note(oversizedTag, `frame of ${length} bytes over its cap`)
      }
    })
    this.refresh = this.deps.liveness.register(peer, {
      authVersion: verdict.success.version,
      advert: verdict.success.advert,
      keyId: verdict.success.keyId,
      remoteHost: hostOf(this.remote)
    })
    this.countRead = this.deps.state.readCounter(peer)
  }

  /** The nonce of a HELLO the handshake refused only for carrying our own id. */
  private ownNonce(payload: Uint8Array): boolean {
    const decoded = Codec.decodePayload(Frames.Tag.HELLO, payload)
    return (
      Result.isSuccess(decoded) &&
      decoded.success._tag === "Hello" &&
      this.deps.selfDials.isOwnHello(decoded.success.nonce)
    )
  }

  /**
   * A large batch, in slices: the whole text is checked as JSON first (exactly JSON.parse's grammar),
   * then its items parsed and applied a slice at a time; invalid items are skipped and counted as in
   * any batch, so an invalid batch costs no more than a valid one.
   */
  private slicedBatch(from: string, tag: number, text: string): Effect.Effect<void> {
    const deps = this.deps
    const valid = <A>(raw: ReadonlyArray<unknown>, read: (u: unknown) => A | undefined): Array<A> => {
      const items: Array<A> = []
      for (const u of raw) {
        const item = read(u)
        if (item !== undefined) items.push(item)
      }
      deps.state.itemsInvalid(raw.length - items.length)
      return items
    }
    return Effect.gen(function* () {
      const result = yield* scan(text, SCAN_SLICE, 4)
      if (result._tag !== "Items") {
        deps.state.frameInvalid()
        deps.events.emit({
          _tag: "InvalidFrame",
          from,
          tag,
          detail: "batch is not an object with an items array"
        })
        return
      }
      deps.state.frameDispatched(0)
      for (let start = 0; start < result.count; start += ITEM_SLICE) {
        const raw = parseItems(text, result.ranges, start, Math.min(result.count, start + ITEM_SLICE))
        const frame: Frames.Frame =
          tag === Frames.Tag.HOTLIST_DIRTY_BATCH
            ? { _tag: "HotlistDirtyBatch", items: valid(raw, PayloadChecks.hotItem) }
            : { _tag: "MessageAvailableBatch", items: valid(raw, PayloadChecks.item) }
        const applying = deps.dispatch.apply(from, frame)
        if (applying !== undefined) yield* applying
        yield* yieldToEventLoop
      }
    })
  }
}

/** A verified first frame written back by a v2 listener: the challenge, or none in legacy mode. */
export const challengeFor = (
  mode: Handshake.HandshakeMode,
  serverId: string,
  label: string
): Effect.Effect<Option.Option<Payloads.Challenge>> =>
  mode === "legacy"
    ? Effect.succeed(Option.none())
    : Effect.map(Handshake.makeChallenge(serverId, label), Option.some)

/** The address a connection came from, an IPv4-mapped IPv6 address as its IPv4 form. */
export const hostOf = (remote: string): string | undefined =>
  remote === "unknown" || remote === "" ? undefined : remote.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, "")
