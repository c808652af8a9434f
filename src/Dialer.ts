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
import { Clock, Data, Duration, Effect, Option, Queue, type Redacted, Schedule, Stream } from "effect"
import * as Frame from "./Frame.js"
import * as Handshake from "./Handshake.js"
import type { Peer } from "./MeshConfig.js"
import type { TransportError } from "./MeshError.js"
import type { Counters } from "./MeshStats.js"
import { Transport } from "./Transport.js"

/**
 * One configured peer: its send queue and what the stats show of its link.
 *
 * @since 0.1.0
 * @category models
 */
export interface PeerLink {
  readonly peer: Peer
  /** Encoded frames waiting to be sent; a dropping queue, so broadcasting never blocks. */
  readonly queue: Queue.Queue<Uint8Array>
  connected: boolean
  resolvedIp: Option.Option<string>
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const makePeerLink = (peer: Peer, capacity: number): Effect.Effect<PeerLink> =>
  Effect.map(Queue.dropping<Uint8Array>(capacity), (queue) => ({
    peer,
    queue,
    connected: false,
    resolvedIp: Option.none()
  }))

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

const concat = (first: Uint8Array, rest: Iterable<Uint8Array>): Uint8Array => {
  const all = [first, ...rest]
  return all.length === 1 ? first : Buffer.concat(all)
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
      yield* Queue.takeAll(link.queue)
      upSince = yield* Clock.currentTimeMillis
      link.connected = true
      link.resolvedIp = Option.orElse(connection.remoteAddress, () => link.resolvedIp)
      yield* Effect.logInfo("mesh link up").pipe(
        Effect.annotateLogs({ resolved_ip: Option.getOrElse(connection.remoteAddress, () => "unknown") })
      )

      const writer = Effect.gen(function* () {
        const first = yield* Effect.timeout(Queue.take(link.queue), options.heartbeatInterval).pipe(
          Effect.option
        )
        if (Option.isNone(first)) {
          yield* connection.write(heartbeat)
          counters.sent++
          return
        }
        const rest = yield* Queue.takeAll(link.queue)
        yield* connection.write(concat(first.value, rest))
        counters.sent += 1 + rest.length
      }).pipe(Effect.forever)
      // Outbound connections carry nothing back; reading only notices the close.
      const closed = Effect.zipRight(
        Stream.runDrain(connection.chunks),
        Effect.fail("closed by peer" as const)
      )

      return yield* Effect.raceFirst(writer, closed).pipe(Effect.catchAll(down))
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
