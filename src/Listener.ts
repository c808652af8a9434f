/**
 * The receive side of the mesh (spec "Topology", "The handshake"): accepted connections are
 * receive-only. The first frame must be a HELLO that verifies within the handshake timeout; after it,
 * every frame refreshes the sender's liveness and is applied. A payload that fails its Schema is counted
 * and skipped, an unknown tag is skipped, and a framing error closes only that connection.
 *
 * @since 0.1.0
 */
import { Clock, Deferred, type Duration, Effect, Either, type Redacted, type Scope } from "effect"
import * as Frame from "./Frame.js"
import { FrameDecoder } from "./FrameDecoder.js"
import * as Handshake from "./Handshake.js"
import type * as Liveness from "./Liveness.js"
import { type FrameDecodeError, type FramingError, HandshakeError, type TransportError } from "./MeshError.js"
import type { MeshEvent } from "./MeshEvent.js"
import type { Counters } from "./MeshStats.js"
import { type Connection, Transport } from "./Transport.js"

/**
 * What the listener needs from the mesh around it.
 *
 * @since 0.1.0
 * @category models
 */
export interface ListenerOptions {
  readonly host: string
  readonly port: number
  readonly secret: Redacted.Redacted<string>
  readonly handshakeTimeout: Duration.DurationInput
  readonly counters: Counters
  readonly liveness: Liveness.Liveness
  /**
   * Applies one received frame from the peer `from`: at once, returning `undefined`, or by returning
   * the effect that applies it.
   */
  readonly apply: (from: string, frame: Frame.Frame) => Effect.Effect<void> | undefined
  readonly publish: (event: MeshEvent) => Effect.Effect<void>
}

type Decoded = Either.Either<Frame.Frame | Frame.UnknownFrame, FrameDecodeError>

/** The largest frame accepted before the HELLO verifies: a HELLO is a few hundred bytes. */
const HELLO_MAX_LENGTH = 64 * 1024

/** How often, at most, a rising handshake-failure count is logged at warning level. */
const HANDSHAKE_WARNING_INTERVAL_MS = 10_000

/**
 * Serves one accepted connection until it closes or breaks. Never fails: every per-connection failure
 * is counted or logged and ends only this connection.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeHandler = (options: ListenerOptions) => {
  const { counters, liveness, apply, publish } = options
  let lastWarningAt = Number.NEGATIVE_INFINITY
  let failuresAtLastWarning = 0

  const handshakeFailed = (remote: string, error: HandshakeError) =>
    Effect.gen(function* () {
      counters.handshakeFailures++
      yield* publish({ _tag: "HandshakeFailed", remote, reason: error.reason })
      const now = yield* Clock.currentTimeMillis
      if (now - lastWarningAt >= HANDSHAKE_WARNING_INTERVAL_MS) {
        yield* Effect.logWarning("mesh handshake refused").pipe(
          Effect.annotateLogs({
            remote,
            reason: error.message,
            handshake_failures: counters.handshakeFailures,
            since_last_warning: counters.handshakeFailures - failuresAtLastWarning
          })
        )
        lastWarningAt = now
        failuresAtLastWarning = counters.handshakeFailures
      } else {
        yield* Effect.logDebug("mesh handshake refused").pipe(
          Effect.annotateLogs({ remote, reason: error.message })
        )
      }
    })

  return (connection: Connection): Effect.Effect<void> =>
    Effect.gen(function* () {
      const remote = connection.remoteAddress._tag === "Some" ? connection.remoteAddress.value : "unknown"
      // Until the HELLO verifies, no frame may be larger than a HELLO could be.
      const decoder = new FrameDecoder({ maxFrameLength: HELLO_MAX_LENGTH })
      const hello = yield* Deferred.make<string>()
      let peer: string | undefined
      let refused: HandshakeError | undefined
      // Refreshes the peer's liveness; set once its HELLO is accepted.
      let touch: Liveness.Touch | undefined
      // What a chunk's frames still need once the decoder is done with it: the effects that apply
      // them, in order, and the notes on invalid frames.
      let later: Array<Effect.Effect<void>> = []
      let invalid: Array<FrameDecodeError> = []

      // Runs inside the decoder: the HELLO is judged before the next frame's length is read, and a frame
      // the host can take synchronously is applied at once, unless an earlier one in the chunk waits
      // for an effect (order is kept).
      const collect = (tag: number, payload: Uint8Array) => {
        if (refused !== undefined) return
        const decoded = Frame.decodePayload(tag, payload)
        const from = peer
        if (from === undefined) {
          const verdict = authenticate(decoded)
          if (Either.isLeft(verdict)) {
            refused = verdict.left
            return
          }
          peer = verdict.right
          decoder.maxFrameLength = Frame.MAX_FRAME_LENGTH
          return
        }
        if (Either.isLeft(decoded)) {
          counters.invalid++
          invalid.push(decoded.left)
          return
        }
        const frame = decoded.right
        if (frame._tag === "Unknown") {
          counters.unknown++
          return
        }
        counters.received++
        if (later.length > 0) {
          later.push(Effect.suspend(() => apply(from, frame) ?? Effect.void))
          return
        }
        const applying = apply(from, frame)
        if (applying !== undefined) later.push(applying)
      }

      const authenticate = (decoded: Decoded): Either.Either<string, HandshakeError> => {
        if (Either.isLeft(decoded)) {
          return Either.left(new HandshakeError({ reason: "InvalidHello", detail: decoded.left.detail }))
        }
        const frame = decoded.right
        if (frame._tag !== "Hello") return Either.left(new HandshakeError({ reason: "NotHello" }))
        return Handshake.verify(frame, options.secret)
      }

      const onChunk = (chunk: Uint8Array): Effect.Effect<void, FramingError | HandshakeError> | undefined => {
        const wasAuthenticated = peer !== undefined
        const failure = decoder.push(chunk, collect)
        const from = peer
        if (touch !== undefined && failure === undefined && later.length === 0 && invalid.length === 0) {
          // The common case: every frame was applied inside the decoder, and liveness is a plain write.
          return touch()
        }
        const effects = later
        const notes = invalid
        later = []
        invalid = []
        return Effect.gen(function* () {
          if (refused !== undefined) return yield* refused
          if (from === undefined) {
            if (failure === undefined) return
            // Not even a frame: whatever is dialling us does not speak the mesh.
            return yield* new HandshakeError({ reason: "InvalidHello", detail: failure.message })
          }
          if (!wasAuthenticated) {
            touch = yield* liveness.touch(from)
            yield* Deferred.succeed(hello, from)
            yield* Effect.logDebug("mesh peer authenticated").pipe(
              Effect.annotateLogs({ remote, peer: from })
            )
          }
          for (const effect of effects) yield* effect
          for (const error of notes) {
            yield* publish({ _tag: "InvalidFrame", from, tag: error.tag, detail: error.detail })
            yield* Effect.logDebug("skipped an invalid frame").pipe(
              Effect.annotateLogs({ peer: from, reason: error.message })
            )
          }
          const announce = touch?.()
          if (announce !== undefined) yield* announce
          if (failure !== undefined) return yield* failure
        })
      }

      const read = connection.read(onChunk).pipe(
        Effect.zipRight(
          Effect.suspend((): Effect.Effect<void, FramingError | HandshakeError> => {
            const failure = decoder.end()
            if (failure !== undefined) return Effect.fail(failure)
            return peer === undefined ? Effect.fail(new HandshakeError({ reason: "Closed" })) : Effect.void
          })
        )
      )
      const deadline = Deferred.await(hello).pipe(
        Effect.timeoutFail({
          duration: options.handshakeTimeout,
          onTimeout: () => new HandshakeError({ reason: "Timeout" })
        }),
        Effect.zipRight(Effect.never)
      )

      yield* Effect.raceFirst(read, deadline).pipe(
        Effect.catchTags({
          HandshakeError: (error) => handshakeFailed(remote, error),
          FramingError: (error) =>
            Effect.logWarning("closing a mesh connection: bad framing").pipe(
              Effect.annotateLogs({ remote, peer: peer ?? "unauthenticated", reason: error.message })
            ),
          TransportError: (error: TransportError) =>
            Effect.logDebug("inbound mesh connection broke").pipe(
              Effect.annotateLogs({ remote, peer: peer ?? "unauthenticated", reason: error.message })
            )
        }),
        Effect.catchAllCause((cause) => Effect.logError("inbound mesh connection failed", cause))
      )
    }).pipe(Effect.annotateLogs({ module: "Listener" }))
}

/**
 * Binds the listener for the life of the scope and returns the bound port.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: ListenerOptions
): Effect.Effect<number, TransportError, Scope.Scope | Transport> =>
  Effect.flatMap(Transport, (transport) =>
    transport.listen({ host: options.host, port: options.port }, makeHandler(options))
  )
