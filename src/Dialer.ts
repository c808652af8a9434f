/**
 * The send side of the mesh (spec "Topology"): one fiber per configured peer, for the mesh's lifetime.
 * It dials, sends HELLO, discards whatever queued while the link was down (a stale hint is worse than
 * none), then writes the peer's queue, every waiting frame coalesced into one write, and a heartbeat
 * whenever the link has been idle for the heartbeat interval. Outbound connections are send-only: the
 * dialer reads from them only to notice the close.
 *
 * Any failure marks the peer disconnected and retries on a `Schedule` from 250 ms, doubling, capped at
 * 5 s, and reset after a successful connect (one that stayed up for a heartbeat interval).
 *
 * @since 0.1.0
 */
import { Clock, Data, Duration, Effect, Option, type Redacted, Schedule } from "effect"
import * as Frame from "./Frame.js"
import * as Handshake from "./Handshake.js"
import type { Peer } from "./MeshConfig.js"
import type { TransportError } from "./MeshError.js"
import type { Counters } from "./MeshStats.js"
import { Transport } from "./Transport.js"

/**
 * A peer's bounded send queue of encoded frames. Offering never blocks: a frame that does not fit is
 * refused, and the caller counts the drop. The writer takes every waiting frame at once.
 *
 * @since 0.1.0
 * @category models
 */
export class SendQueue {
  private items: Array<Uint8Array> = []
  private waiting: (() => void) | undefined = undefined

  constructor(readonly capacity: number) {}

  get size(): number {
    return this.items.length
  }

  /** Queues `bytes` unless full; wakes the writer. */
  offer(bytes: Uint8Array): boolean {
    if (this.items.length >= this.capacity) return false
    this.items.push(bytes)
    const waiting = this.waiting
    if (waiting !== undefined) {
      this.waiting = undefined
      waiting()
    }
    return true
  }

  /** Takes every waiting frame, oldest first. */
  takeAll(): Array<Uint8Array> {
    const all = this.items
    this.items = []
    return all
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

/**
 * One configured peer: its send queue and what the stats show of its link.
 *
 * @since 0.1.0
 * @category models
 */
export interface PeerLink {
  readonly peer: Peer
  readonly queue: SendQueue
  connected: boolean
  resolvedIp: Option.Option<string>
  /**
   * Sends one encoded frame: written at once when the link is idle and the transport can take it
   * without waiting, else queued. False when the queue is full and the frame is dropped.
   */
  offer: (bytes: Uint8Array) => boolean
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const makePeerLink = (peer: Peer, capacity: number): Effect.Effect<PeerLink> =>
  Effect.sync(() => {
    const queue = new SendQueue(capacity)
    return { peer, queue, connected: false, resolvedIp: Option.none(), offer: (bytes) => queue.offer(bytes) }
  })

/**
 * Why a link session ended. `connected`: it got as far as a connection and a HELLO written;
 * `established`: the link then stayed up for at least one heartbeat interval, which is what resets the
 * backoff (a peer that refuses our HELLO closes at once, and must not be redialled in a tight loop).
 *
 * @since 0.1.0
 * @category errors
 */
export class LinkDown extends Data.TaggedError("LinkDown")<{
  readonly connected: boolean
  readonly established: boolean
  readonly cause: TransportError | "closed by peer"
}> {}

/**
 * The reconnect delays: 250 ms doubling, capped at 5 s (`union` takes the shorter delay), started
 * afresh after a session that was established.
 *
 * @since 0.1.0
 * @category schedules
 */
export const reconnectSchedule: Schedule.Schedule<LinkDown, LinkDown> = Schedule.passthrough<
  unknown,
  LinkDown,
  never
>(Schedule.exponential(Duration.millis(250)).pipe(Schedule.union(Schedule.spaced(Duration.seconds(5))))).pipe(
  Schedule.resetWhen((down) => down.established)
)

/**
 * @since 0.1.0
 * @category models
 */
export interface DialerOptions {
  readonly serverId: string
  readonly secret: Redacted.Redacted<string>
  readonly heartbeatInterval: Duration.DurationInput
  readonly counters: Counters
}

/**
 * Runs the link to one peer until interrupted.
 *
 * @since 0.1.0
 * @category constructors
 */
export const run = (link: PeerLink, options: DialerOptions): Effect.Effect<never, never, Transport> =>
  Effect.gen(function* () {
    const transport = yield* Transport
    const { counters } = options
    const heartbeat = Frame.encode(Frame.heartbeat())
    const { host, port } = link.peer

    const heartbeatMillis = Duration.toMillis(Duration.decode(options.heartbeatInterval))

    const session = Effect.gen(function* () {
      let upSince: number | undefined
      const down = (cause: TransportError | "closed by peer") =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Effect.fail(
            new LinkDown({
              connected: upSince !== undefined,
              established: upSince !== undefined && now - upSince >= heartbeatMillis,
              cause
            })
          )
        )
      const connection = yield* Effect.catchAll(transport.dial(host, port), down)
      const hello = yield* Handshake.makeHello(options.serverId, options.secret)
      yield* Effect.catchAll(connection.write(Frame.encode(hello)), down)
      link.queue.takeAll()
      upSince = yield* Clock.currentTimeMillis
      link.connected = true
      link.resolvedIp = Option.orElse(connection.remoteAddress, () => link.resolvedIp)
      yield* Effect.logInfo("mesh link up").pipe(
        Effect.annotateLogs({ resolved_ip: Option.getOrElse(connection.remoteAddress, () => "unknown") })
      )

      let writing = false
      let active = false
      // On an idle link a frame skips the queue and the writer fiber: the transport takes it now.
      const tryWrite = connection.unsafeTryWrite
      if (tryWrite !== undefined) {
        link.offer = (bytes) => {
          if (writing || link.queue.size > 0 || !tryWrite(bytes)) return link.queue.offer(bytes)
          counters.sent++
          active = true
          return true
        }
      }
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          link.offer = (bytes) => link.queue.offer(bytes)
        })
      )

      const writer = Effect.gen(function* () {
        yield* link.queue.available
        const frames = link.queue.takeAll()
        writing = true
        yield* connection.write(frames.length === 1 ? frames[0]! : Buffer.concat(frames))
        writing = false
        counters.sent += frames.length
        active = true
      }).pipe(Effect.forever)
      // A heartbeat after every interval in which nothing else was written.
      const heartbeats = Effect.gen(function* () {
        yield* Effect.sleep(options.heartbeatInterval)
        if (!active) {
          yield* connection.write(heartbeat)
          counters.sent++
        }
        active = false
      }).pipe(Effect.forever)
      // Outbound connections carry nothing back; reading only notices the close.
      const closed = Effect.zipRight(
        connection.read<never>(() => undefined),
        Effect.fail("closed by peer" as const)
      )

      // The first of the three to end (each only ends by failing) ends the session.
      return yield* Effect.raceFirst(writer, Effect.raceFirst(heartbeats, closed)).pipe(Effect.catchAll(down))
    }).pipe(
      Effect.scoped,
      Effect.ensuring(
        Effect.sync(() => {
          link.connected = false
        })
      ),
      Effect.tapError((down) => {
        const reason = describe(down.cause)
        if (down.established) return Effect.logWarning("mesh link down").pipe(Effect.annotateLogs({ reason }))
        if (down.connected) {
          // The listener closes on a HELLO it refuses, and says nothing more.
          return Effect.logWarning(
            "mesh link closed right after the handshake; does the peer share the secret?"
          ).pipe(Effect.annotateLogs({ reason }))
        }
        return Effect.logDebug("mesh dial failed").pipe(Effect.annotateLogs({ reason }))
      })
    )

    return yield* Effect.retry(session, reconnectSchedule).pipe(
      // The schedule never ends, so only an interruption leaves the loop.
      Effect.catchAll(() => Effect.never)
    )
  }).pipe(Effect.annotateLogs({ module: "Dialer", peer: `${link.peer.host}:${link.peer.port}` }))

const describe = (cause: TransportError | "closed by peer"): string =>
  typeof cause === "string" ? cause : cause.message
