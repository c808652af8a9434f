/**
 * The receive side of the mesh (spec "Topology", "The handshake"): accepted connections are
 * receive-only. The first frame must be a HELLO that verifies within the handshake timeout; after it,
 * every frame refreshes the sender's liveness and goes to `Dispatch`. Every frame read after the HELLO
 * is accounted for: dispatched, or rejected as invalid, unknown or oversized (and counted). A framing
 * error closes only that connection; nothing thrown while handling a chunk escapes it.
 *
 * Defences, each with a default, a variable and a counter (`MeshConfig`): the HELLO deadline; the
 * first frame capped at a few KiB, refused as soon as its length prefix shows otherwise; a cap on
 * concurrent inbound connections and on unauthenticated ones per remote address; a short pause before
 * closing a refused connection, holding no buffer; an idle deadline closing an authenticated link that
 * went silent; per-tag frame caps after the HELLO (an oversized frame is skipped, never buffered); and
 * a turn of the event loop after a large frame, so one peer's megabytes cannot hold up another's wakes.
 *
 * In `QUEEN_MESH_AUTH=permissive|required` the listener writes one challenge frame as soon as it
 * accepts (the only bytes it ever writes on an inbound link) and verifies the v2 HELLO against it.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { MeshTest } from "queen-mesh"
 *
 * // `b` dials `a` and authenticates; `a`'s listener counts the inbound link.
 * const program = Effect.gen(function* () {
 *   const network = yield* MeshTest.network
 *   const a = yield* MeshTest.node(network, { serverId: "a", peers: ["b"] })
 *   const b = yield* MeshTest.node(network, { serverId: "b", peers: ["a"] })
 *   yield* MeshTest.eventually(MeshTest.linked(b))
 *   const stats = yield* a.mesh.stats
 *   assert.strictEqual(stats.enabled && stats.inbound.authenticated, 1)
 * })
 *
 * Effect.runPromise(Effect.scoped(program))
 * ```
 *
 * @since 0.1.0
 */
import { Clock, Context, Data, Deferred, Duration, Effect, Either, Layer, Option, type Scope } from "effect"
import { Dispatch } from "./Dispatch.js"
import * as Frame from "./Frame.js"
import { FrameDecoder } from "./FrameDecoder.js"
import * as Handshake from "./Handshake.js"
import { BatchScanner, parseItems, yieldToEventLoop } from "./internal/batchScan.js"
import { applyHistogram } from "./internal/metricNames.js"
import * as Quick from "./internal/quick.js"
import { SelfDialsService } from "./internal/selfDials.js"
import { printable } from "./internal/text.js"
import { Liveness } from "./Liveness.js"
import * as MeshConfig from "./MeshConfig.js"
import {
  type FramingError,
  HandshakeError,
  handshakeReasons as HandshakeErrorReasons,
  type TransportError
} from "./MeshError.js"
import { MeshEvents } from "./MeshEvent.js"
import { type Connection, Transport } from "./Transport.js"

/**
 * What the listener counts: every inbound connection and every frame read after a HELLO.
 *
 * @since 0.1.0
 * @category models
 */
export interface ListenerCounts {
  /** Frames read after a HELLO (upstream's `messages_received`): dispatched + invalid + unknown + oversized. */
  readonly framesRead: number
  readonly framesDispatched: number
  readonly framesInvalid: number
  readonly framesUnknown: number
  readonly framesOversized: number
  /** Items of batches skipped for breaking a rule (their batch was still dispatched). */
  readonly itemsInvalid: number
  /** Refused connections by reason; their sum is `handshake_failures`. */
  readonly rejections: Readonly<Record<HandshakeError.Reason, number>>
  /** Connections that closed without sending a byte (TCP health probes): not handshake failures. */
  readonly closedSilent: number
  /** Authenticated links closed for silence longer than the idle timeout. */
  readonly closedIdle: number
  /** Legacy HELLOs accepted in `permissive` mode. */
  readonly legacyAccepted: number
  /** Our own dials recognised and closed (the peer list names this node): never refusals. */
  readonly selfDials: number
  readonly inboundOpen: number
  /** Inbound connections open now whose HELLO verified. */
  readonly inboundOpenAuthenticated: number
  /** Inbound connections whose HELLO verified, since the start. */
  readonly inboundAuthenticated: number
  /** Frames read, by tag byte (only tags with a count). */
  readonly readByTag: ReadonlyArray<readonly [tag: number, frames: number]>
  /** Frames read by sender (its server id; at most 64 senders, the rest under `_other`) and tag. */
  readonly readByPeer: ReadonlyArray<
    readonly [peer: string, byTag: ReadonlyArray<readonly [tag: number, frames: number]>]
  >
  /** Chunks applied, by receive-to-apply time class: index i counts chunks of up to 2^i microseconds. */
  readonly applyMicros: ReadonlyArray<number>
}

/**
 * The running listener: its bound port and its counters.
 *
 * @since 0.1.0
 * @category models
 */
export interface ListenerShape {
  /** The bound port; none when the mesh is not active (nothing binds). */
  readonly port: Option.Option<number>
  readonly counts: Effect.Effect<ListenerCounts>
}

/**
 * The receive side of a running mesh.
 *
 * @since 0.1.0
 * @category tags
 */
export class Listener extends Context.Tag("queen-mesh/Listener")<Listener, ListenerShape>() {}

/** How often, at most, a HELLO carrying our own server id from another node is logged at warning level. */
const OWN_ID_WARNING_INTERVAL_MS = 60_000
/** How often, at most, a rising handshake-failure count is logged at warning level. */
const HANDSHAKE_WARNING_INTERVAL_MS = 10_000
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

const zeroRejections = (): Record<HandshakeError.Reason, number> => {
  const out = {} as Record<HandshakeError.Reason, number>
  for (const reason of Object.keys(HandshakeErrorReasons) as Array<HandshakeError.Reason>) out[reason] = 0
  return out
}

const v2Reason = (reason: Handshake.HandshakeV2Reason): HandshakeError.Reason =>
  reason === "NoSecret" ? "InvalidHello" : reason

/** A verified HELLO from one of this node's own dialers (the peer list names this node). */
class OwnDial extends Data.TaggedError("OwnDial") {}

/** One turn of the event loop: lets other sockets' data in before this one's next chunk. */
const nextTurn = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

/**
 * Binds the listener (when the mesh is active) for the life of the scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<
  ListenerShape,
  TransportError,
  Scope.Scope | MeshConfig.MeshConfig | Transport | Liveness | Dispatch | MeshEvents | SelfDialsService
> = Effect.gen(function* () {
  const config = yield* MeshConfig.MeshConfig
  const selfDials = yield* SelfDialsService
  const transport = yield* Transport
  const liveness = yield* Liveness
  const { apply } = yield* Dispatch
  const events = yield* MeshEvents
  const clock = yield* Effect.clock

  const c = {
    framesRead: 0,
    framesDispatched: 0,
    framesInvalid: 0,
    framesUnknown: 0,
    framesOversized: 0,
    itemsInvalid: 0,
    closedSilent: 0,
    closedIdle: 0,
    legacyAccepted: 0,
    selfDials: 0,
    inboundOpen: 0,
    inboundOpenAuthenticated: 0,
    inboundAuthenticated: 0
  }
  const rejections = zeroRejections()
  const readByTag = new Float64Array(256)
  // Per sender, bounded: a replayed HELLO can announce any id, so past 64 they share one row.
  const readByPeer = new Map<string, Float64Array>()
  const rowFor = (peer: string): Float64Array => {
    let row = readByPeer.get(peer)
    if (row === undefined) {
      const key = readByPeer.size >= 64 ? "_other" : peer
      row = readByPeer.get(key)
      if (row === undefined) {
        row = new Float64Array(256)
        readByPeer.set(key, row)
      }
    }
    return row
  }
  const applyMicros = new Float64Array(24)
  const observeApply = applyHistogram(config.serverId)
  const unauthenticated = new Map<string, number>()
  let lastWarningAt = Number.NEGATIVE_INFINITY
  let failuresAtLastWarning = 0
  let ownIdWarnedAt = Number.NEGATIVE_INFINITY
  const handshakeFailures = () => {
    let sum = 0
    for (const reason in rejections) sum += rejections[reason as HandshakeError.Reason]
    return sum
  }

  const refused = (remote: string, error: HandshakeError) =>
    Effect.gen(function* () {
      rejections[error.reason]++
      events.emit({ _tag: "HandshakeFailed", remote, reason: error.reason })
      const now = yield* Clock.currentTimeMillis
      if (error.reason === "OwnServerId") {
        // Not our own dial (that is recognised by its nonce): another node uses our server id.
        if (now - ownIdWarnedAt < OWN_ID_WARNING_INTERVAL_MS) return
        ownIdWarnedAt = now
        return yield* Effect.logWarning(
          "another node announces this node's server id: refusing it (do two nodes share QUEEN_SERVER_ID?)"
        ).pipe(Effect.annotateLogs({ remote }))
      }
      const total = handshakeFailures()
      if (now - lastWarningAt >= HANDSHAKE_WARNING_INTERVAL_MS) {
        yield* Effect.logWarning("mesh handshake refused").pipe(
          Effect.annotateLogs({
            remote,
            reason: printable(error.message),
            handshake_failures: total,
            since_last_warning: total - failuresAtLastWarning
          })
        )
        lastWarningAt = now
        failuresAtLastWarning = total
      } else {
        yield* Effect.logDebug("mesh handshake refused").pipe(
          Effect.annotateLogs({ remote, reason: printable(error.message) })
        )
      }
    })

  const verifyOptions = (challenge: Option.Option<Handshake.Challenge>): Handshake.VerifyOptions => ({
    secret: config.secret,
    mode: config.auth,
    challenge,
    selfId: config.serverId,
    label: config.clusterLabel
  })

  const judgeHello = (
    tag: number,
    payload: Uint8Array,
    challenge: Option.Option<Handshake.Challenge>
  ): Either.Either<string, HandshakeError | OwnDial> => {
    if (tag !== Frame.Tag.HELLO) return Either.left(new HandshakeError({ reason: "NotHello" }))
    let json: unknown
    try {
      json = JSON.parse(Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength).toString("utf8"))
    } catch {
      return Either.left(new HandshakeError({ reason: "InvalidHello", detail: "not JSON" }))
    }
    const decoded = Frame.decodeJson(tag, json)
    if (Either.isLeft(decoded) || decoded.right._tag !== "Hello") {
      return Either.left(new HandshakeError({ reason: "InvalidHello" }))
    }
    const hello = decoded.right
    if (typeof json !== "object" || json === null || Array.isArray(json)) {
      return Either.left(new HandshakeError({ reason: "InvalidHello" }))
    }
    // Legacy mode ignores the v2 fields altogether, as a legacy listener would.
    const v2 =
      config.auth === "legacy"
        ? Option.none<Handshake.HelloV2Fields>()
        : Handshake.readHelloV2Fields(json as Readonly<Record<string, unknown>>)
    if (v2 === undefined) {
      return Either.left(new HandshakeError({ reason: "InvalidHello", detail: "bad v2 fields" }))
    }
    if (Frame.MAX_SERVER_ID_BYTES < Buffer.byteLength(hello.server_id)) {
      return Either.left(new HandshakeError({ reason: "InvalidHello", detail: "server_id too long" }))
    }
    const verdict = Handshake.verifyHello(
      { server_id: hello.server_id, nonce: hello.nonce, mac: hello.mac, v2 },
      verifyOptions(challenge)
    )
    if (Either.isLeft(verdict)) {
      if (verdict.left.reason === "OwnServerId" && selfDials.isOwnHello(hello.nonce)) {
        return Either.left(new OwnDial())
      }
      return Either.left(new HandshakeError({ reason: v2Reason(verdict.left.reason) }))
    }
    // Legacy verification knows nothing of our id; the rule holds in every mode.
    if (verdict.right.serverId === config.serverId) {
      // One of our own dialers, its entry naming this node: recognised, not refused.
      if (selfDials.isOwnHello(hello.nonce)) return Either.left(new OwnDial())
      return Either.left(new HandshakeError({ reason: "OwnServerId" }))
    }
    if (verdict.right.version === 1 && config.auth === "permissive") c.legacyAccepted++
    return Either.right(verdict.right.serverId)
  }

  const handle = (connection: Connection): Effect.Effect<void> =>
    Effect.gen(function* () {
      const ip = Option.getOrElse(connection.remoteAddress, () => "unknown")
      const remote = ip
      if (c.inboundOpen >= config.maxInbound) {
        rejections.TooManyConnections++
        events.emit({ _tag: "HandshakeFailed", remote, reason: "TooManyConnections" })
        return yield* Effect.logDebug("mesh connection refused: too many inbound").pipe(
          Effect.annotateLogs({ remote })
        )
      }
      const pending = unauthenticated.get(ip) ?? 0
      if (pending >= config.maxUnauthenticatedPerAddress) {
        rejections.TooManyConnections++
        events.emit({ _tag: "HandshakeFailed", remote, reason: "TooManyConnections" })
        return yield* Effect.logDebug(
          "mesh connection refused: too many unauthenticated from one address"
        ).pipe(Effect.annotateLogs({ remote }))
      }
      c.inboundOpen++
      unauthenticated.set(ip, pending + 1)
      let counted = true
      let verified = false
      const authenticated = () => {
        if (!counted) return
        counted = false
        const left = (unauthenticated.get(ip) ?? 1) - 1
        if (left <= 0) unauthenticated.delete(ip)
        else unauthenticated.set(ip, left)
      }
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          authenticated()
          c.inboundOpen--
          if (verified) c.inboundOpenAuthenticated--
        })
      )

      const challenge =
        config.auth === "legacy"
          ? Option.none<Handshake.Challenge>()
          : Option.some(yield* Handshake.makeChallenge(config.serverId, config.clusterLabel))
      if (Option.isSome(challenge)) {
        const written = yield* Effect.either(
          connection.write(Handshake.encodeChallengeFrame(challenge.value))
        )
        if (Either.isLeft(written)) return
      }

      // Until the HELLO verifies, no frame may be larger than a HELLO could be.
      const decoder = new FrameDecoder({ maxFrameLength: config.helloMaxBytes })
      const hello = yield* Deferred.make<string>()
      let bytesIn = 0
      let peer: string | undefined
      let refusal: HandshakeError | OwnDial | undefined
      let refresh: (() => void) | undefined
      let peerRow: Float64Array | undefined
      let lastChunkAt = clock.unsafeCurrentTimeMillis()
      let large = false
      // What a chunk's frames still need once the decoder is done with it: the effects that apply
      // them, in order.
      let later: Array<Effect.Effect<void>> = []
      let invalidNotes: Array<{ readonly tag: number; readonly detail: string }> = []

      const onOversized = (tag: number, length: number) => {
        c.framesRead++
        c.framesOversized++
        readByTag[tag]!++
        if (peerRow !== undefined) peerRow[tag]!++
        if (invalidNotes.length < 8)
          invalidNotes.push({ tag, detail: `frame of ${length} bytes over its cap` })
      }

      // Runs inside the decoder: the HELLO is judged before the next frame's length is read, and a frame
      // the host can take synchronously is applied at once, unless an earlier one in the chunk waits for
      // an effect (order is kept).
      const collect = (tag: number, payload: Uint8Array) => {
        if (refusal !== undefined) return
        const from = peer
        if (from === undefined) {
          const verdict = judgeHello(tag, payload, challenge)
          if (Either.isLeft(verdict)) {
            refusal = verdict.left
            return
          }
          peer = verdict.right
          authenticated()
          verified = true
          c.inboundAuthenticated++
          c.inboundOpenAuthenticated++
          decoder.maxFrameLength = Frame.MAX_FRAME_LENGTH
          decoder.maxLengthOf = Frame.maxLengthOf
          decoder.onOversized = onOversized
          refresh = liveness.register(peer)
          peerRow = rowFor(peer)
          return
        }
        c.framesRead++
        readByTag[tag]!++
        peerRow![tag]!++
        if (payload.length >= LARGE_FRAME) large = true
        if (
          payload.length >= SLICED_BATCH &&
          (tag === Frame.Tag.MESSAGE_AVAILABLE_BATCH || tag === Frame.Tag.HOTLIST_DIRTY_BATCH)
        ) {
          // Decoded now (the payload is a view of the chunk), checked and applied in slices later.
          const text = Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength).toString("utf8")
          later.push(slicedBatch(from, tag, text))
          return
        }
        const decoded = Frame.decodePayload(tag, payload)
        if (Either.isLeft(decoded)) {
          c.framesInvalid++
          if (invalidNotes.length < 8) invalidNotes.push({ tag, detail: decoded.left.detail })
          return
        }
        const frame = decoded.right
        if (frame._tag === "Unknown") {
          c.framesUnknown++
          return
        }
        c.framesDispatched++
        if (
          (frame._tag === "MessageAvailableBatch" || frame._tag === "HotlistDirtyBatch") &&
          frame.skipped !== undefined
        ) {
          c.itemsInvalid += frame.skipped
        }
        if (later.length > 0) {
          later.push(Effect.suspend(() => apply(from, frame) ?? Effect.void))
          return
        }
        const applying = apply(from, frame)
        if (applying !== undefined) later.push(applying)
      }

      // A large batch, in slices: the whole text is checked as JSON first (exactly JSON.parse's
      // grammar), then its items parsed and applied a slice at a time; invalid items are skipped and
      // counted as in any batch, so an invalid batch costs no more than a valid one.
      const slicedBatch = (from: string, tag: number, text: string): Effect.Effect<void> =>
        Effect.gen(function* () {
          const scanner = new BatchScanner(text)
          while (scanner.step(SCAN_SLICE, 4) === "more") yield* yieldToEventLoop
          const result = scanner.result()
          if (result._tag !== "Items") {
            c.framesInvalid++
            events.emit({
              _tag: "InvalidFrame",
              from,
              tag,
              detail: "batch is not an object with an items array"
            })
            return
          }
          c.framesDispatched++
          for (let start = 0; start < result.count; start += ITEM_SLICE) {
            const raw = parseItems(text, result.ranges, start, Math.min(result.count, start + ITEM_SLICE))
            const items: Array<Frame.QueueItem> = []
            for (const u of raw) {
              const item = Quick.item(u)
              if (item === undefined) c.itemsInvalid++
              else items.push(item)
            }
            const frame: Frame.Frame =
              tag === Frame.Tag.MESSAGE_AVAILABLE_BATCH
                ? { _tag: "MessageAvailableBatch", items }
                : { _tag: "HotlistDirtyBatch", items }
            const applying = apply(from, frame)
            if (applying !== undefined) yield* applying
            yield* yieldToEventLoop
          }
        })

      const onChunk = (
        chunk: Uint8Array
      ): Effect.Effect<void, FramingError | HandshakeError | OwnDial> | undefined => {
        const started = performance.now()
        bytesIn += chunk.length
        lastChunkAt = clock.unsafeCurrentTimeMillis()
        const wasAuthenticated = peer !== undefined
        let failure: FramingError | undefined
        try {
          failure = decoder.push(chunk, collect)
        } catch (defect) {
          // A defect in handling one chunk ends this connection, never the process.
          return Effect.die(defect)
        }
        if (refusal !== undefined) return Effect.fail(refusal)
        if (failure !== undefined && peer === undefined) {
          const reason = failure.reason === "FrameTooLarge" ? "OversizedHello" : "InvalidHello"
          return Effect.fail(new HandshakeError({ reason, detail: failure.message }))
        }
        refresh?.()
        const from = peer
        if (from !== undefined && !wasAuthenticated) Deferred.unsafeDone(hello, Effect.succeed(from))
        if (failure === undefined && later.length === 0 && invalidNotes.length === 0 && !large) {
          // The common case: every frame was applied inside the decoder.
          recordApply(started)
          return undefined
        }
        const effects = later
        const notes = invalidNotes
        const yieldAfter = large
        later = []
        invalidNotes = []
        large = false
        return Effect.gen(function* () {
          for (const effect of effects) yield* effect
          recordApply(started)
          if (from !== undefined && notes.length > 0) {
            const peerName = printable(from)
            for (const note of notes) {
              events.emit({ _tag: "InvalidFrame", from, tag: note.tag, detail: note.detail })
              yield* Effect.logDebug("skipped an invalid frame").pipe(
                Effect.annotateLogs({ peer: peerName, tag: note.tag, reason: printable(note.detail) })
              )
            }
          }
          if (failure !== undefined) return yield* failure
          if (yieldAfter) yield* nextTurn
        })
      }

      const recordApply = (started: number) => {
        const micros = (performance.now() - started) * 1000
        observeApply(micros / 1e6)
        applyMicros[Math.min(23, micros <= 1 ? 0 : Math.ceil(Math.log2(micros)))]!++
      }

      const read = connection.read(onChunk).pipe(
        Effect.zipRight(
          Effect.suspend((): Effect.Effect<void, FramingError | HandshakeError> => {
            const failure = decoder.end()
            if (peer === undefined) {
              if (bytesIn === 0) {
                c.closedSilent++
                return Effect.void
              }
              return Effect.fail(new HandshakeError({ reason: "Closed" }))
            }
            return failure === undefined ? Effect.void : Effect.fail(failure)
          })
        )
      )
      // After the HELLO: close an inbound link silent past the idle timeout (the peer is gone or
      // stalled; its dialer will reconnect).
      const idleMillis = Duration.toMillis(config.idleTimeout)
      const idle: Effect.Effect<void> = Effect.suspend(() => {
        const silent = clock.unsafeCurrentTimeMillis() - lastChunkAt
        if (silent >= idleMillis) {
          c.closedIdle++
          return Effect.logInfo("closing a silent inbound mesh link").pipe(
            Effect.annotateLogs({ remote, peer: printable(peer ?? "?"), silent_ms: silent })
          )
        }
        return Effect.zipRight(Effect.sleep(Duration.millis(idleMillis - silent)), idle)
      })

      const deadline = Deferred.await(hello).pipe(
        Effect.timeoutFail({
          duration: config.handshakeTimeout,
          onTimeout: () => new HandshakeError({ reason: "Timeout" })
        }),
        Effect.zipRight(idle)
      )
      yield* Effect.raceFirst(read, deadline).pipe(
        Effect.catchTags({
          OwnDial: () =>
            Effect.sync(() => {
              c.selfDials++
            }).pipe(Effect.zipRight(Effect.logDebug("closed our own dial: the peer list names this node"))),
          HandshakeError: (error) =>
            Effect.zipRight(
              refused(remote, error),
              // Hold the connection a moment before closing, reading nothing and holding no buffer, so
              // a client retrying bad HELLOs gets no faster feedback than this.
              Effect.sleep(config.authFailureDelay)
            ),
          FramingError: (error) =>
            Effect.logWarning("closing a mesh connection: bad framing").pipe(
              Effect.annotateLogs({
                remote,
                peer: printable(peer ?? "unauthenticated"),
                reason: error.message
              })
            ),
          TransportError: (error: TransportError) =>
            Effect.logDebug("inbound mesh connection broke").pipe(
              Effect.annotateLogs({
                remote,
                peer: printable(peer ?? "unauthenticated"),
                reason: error.message
              })
            )
        }),
        Effect.catchAllCause((cause) => Effect.logError("inbound mesh connection failed", cause))
      )
    }).pipe(Effect.scoped, Effect.withSpan("queen-mesh.inbound"), Effect.annotateLogs({ module: "Listener" }))

  const active = MeshConfig.isActive(config)
  const port = active
    ? Option.some(yield* transport.listen({ host: config.bindHost, port: config.port }, handle))
    : Option.none<number>()

  const tags = (counts: Float64Array) => {
    const out: Array<readonly [number, number]> = []
    for (let tag = 0; tag < counts.length; tag++) if (counts[tag]! > 0) out.push([tag, counts[tag]!])
    return out
  }

  return {
    port,
    counts: Effect.sync(() => ({
      ...c,
      rejections: { ...rejections, TlsHandshake: transport.handshakeFailures?.() ?? 0 },
      readByTag: tags(readByTag),
      readByPeer: [...readByPeer].map(([peer, row]) => [peer, tags(row)] as const),
      applyMicros: [...applyMicros]
    }))
  }
})

/**
 * The listener, bound in the layer's scope; nothing binds when the mesh is not active.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<
  Listener,
  TransportError,
  MeshConfig.MeshConfig | Transport | Liveness | Dispatch | MeshEvents | SelfDialsService
> = Layer.scoped(Listener, make)

/**
 * The sum of refusals by reason: the stats' `handshake_failures`.
 *
 * @since 0.1.0
 * @category models
 */
export const handshakeFailuresOf = (counts: ListenerCounts): number => {
  let sum = 0
  for (const value of Object.values(counts.rejections)) sum += value
  return sum
}
