/**
 * The send side of the mesh (spec "Topology"): one dialer fiber per configured peer, in a `FiberMap`,
 * each with its bounded send queue and link state, owned by this service and changed only by it.
 *
 * A dialer dials (resolving the name afresh on every attempt), sends HELLO, then writes the peer's
 * queue, every waiting frame coalesced into one write, and a heartbeat carrying our server id every
 * heartbeat interval, as upstream does. Outbound connections are send-only: the dialer reads from them
 * only to notice the close. Frames handed to a link that is down are dropped at once and counted (a
 * stale hint is worse than none); frames queued when a link breaks are discarded and counted.
 *
 * Any failure marks the link down and retries on the reconnect `Schedule` (default from 250 ms,
 * doubling, capped at 5 s, started afresh after a link that was established: up for a heartbeat
 * interval past the listener's auth-failure delay, so a peer refusing our HELLO is not redialled in a
 * tight loop). A peer that keeps failing is logged at warning
 * on the first failure and on every change of reason, then at most once a minute.
 *
 * @since 0.1.0
 */
import {
  Cause,
  Clock,
  Context,
  Data,
  Deferred,
  Duration,
  Effect,
  Either,
  Fiber,
  FiberMap,
  Layer,
  Option,
  type Redacted,
  Schedule,
  type Scope
} from "effect"
import * as Frame from "./Frame.js"
import { FrameDecoder } from "./FrameDecoder.js"
import * as Handshake from "./Handshake.js"
import { writeHistogram } from "./internal/metricNames.js"
import { PeerLink } from "./internal/peerLink.js"
import { type SelfDials, SelfDialsService } from "./internal/selfDials.js"
import * as MeshConfig from "./MeshConfig.js"
import { TransportError } from "./MeshError.js"
import { type Connection, Transport } from "./Transport.js"

/**
 * One configured peer as the stats show it.
 *
 * @since 0.1.0
 * @category models
 */
export interface PeerState {
  readonly host: string
  readonly port: number
  readonly connected: boolean
  /** The entry names this node itself: not dialled, not a link, not counted for readiness. */
  readonly self: boolean
  /** The remote address of the established link; none while it is down. */
  readonly resolvedIp: Option.Option<string>
  /** The last address a link to it was established with. */
  readonly lastResolvedIp: Option.Option<string>
  readonly queued: number
  readonly queuedBytes: number
  readonly handed: number
  readonly written: number
  readonly droppedFull: number
  readonly droppedDown: number
  readonly discarded: number
  readonly reconnects: number
  readonly lastError: Option.Option<string>
  /** Frames written, by tag (only tags with a count). */
  readonly writtenByTag: ReadonlyArray<readonly [tag: number, frames: number]>
  /** Frames dropped for any cause, by tag (only tags with a count). */
  readonly droppedByTag: ReadonlyArray<readonly [tag: number, frames: number]>
  /** Coalesced writes by size class: index i counts writes of 2^i to 2^(i+1)-1 frames. */
  readonly writeSizes: ReadonlyArray<number>
}

/**
 * The send side of a running mesh: one link per configured peer.
 *
 * @since 0.1.0
 * @category models
 */
export interface PeersShape {
  /**
   * Hands one encoded frame to every peer's link, synchronously: never blocks, never fails; a link
   * that cannot take it drops it and counts why. Returns how many links took it.
   */
  readonly broadcast: (bytes: Uint8Array) => number
  /** How many peers are configured (0 when the mesh is not active). */
  readonly size: number
  /** Every configured peer's link, now. */
  readonly links: Effect.Effect<ReadonlyArray<PeerState>>
}

/**
 * The peers' links, as the mesh API sees them.
 *
 * @since 0.1.0
 * @category tags
 */
export class Peers extends Context.Tag("queen-mesh/Peers")<Peers, PeersShape>() {}

/**
 * Why a link session ended. `connected`: it got as far as a connection and a HELLO written;
 * `established`: the link then stayed up for at least one heartbeat interval, which is what resets the
 * backoff.
 *
 * @since 0.1.0
 * @category errors
 */
export class LinkDown extends Data.TaggedError("LinkDown")<{
  readonly connected: boolean
  readonly established: boolean
  readonly cause: TransportError | "closed by peer" | "no challenge" | `invalid challenge (${string})`
}> {}

/**
 * The default reconnect delays: 250 ms doubling, capped at 5 s (`union` takes the shorter delay),
 * started afresh after a session that was established (spec "Topology").
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
 * Options of the dialers.
 *
 * @since 0.1.0
 * @category models
 */
export interface PeersOptions {
  /** The delays between dials of one peer. Default {@link reconnectSchedule}. */
  readonly reconnectSchedule?: Schedule.Schedule<unknown, LinkDown>
}

/** Bytes a peer's send queue holds at most, whatever its frame capacity. */
const QUEUE_BYTES = 32 * 1024 * 1024
/** While a peer keeps failing with the same reason, a warning at most this often. */
const FAILURE_WARNING_INTERVAL_MS = 60_000

/** The same verdict without the socket error it wraps (and the closures that error's stack holds). */
const forget = (down: LinkDown): LinkDown =>
  typeof down.cause === "string"
    ? down
    : new LinkDown({
        connected: down.connected,
        established: down.established,
        cause: new TransportError({ reason: down.cause.reason, address: down.cause.address })
      })

/**
 * The reason an operator reads: refused, not resolved, timed out, or the error's own words.
 *
 * @since 0.1.0
 * @category errors
 */
export const describeFailure = (cause: LinkDown["cause"]): string => {
  if (typeof cause === "string") return cause
  if (cause.reason === "Resolve") return "not resolved"
  if (cause.reason === "Timeout") return "timed out"
  if (cause.reason === "Closed") return "closed"
  const code = cause.cause instanceof Error ? Reflect.get(cause.cause, "code") : undefined
  if (code === "ECONNREFUSED") return "refused"
  if (cause.cause instanceof Error && cause.cause.message === "connection refused") return "refused"
  if (code === "ECONNRESET") return "reset"
  if (code === "ENOTFOUND" || code === "EAI_AGAIN") return "not resolved"
  if (code === "ETIMEDOUT") return "timed out"
  return cause.message
}

const counted = (counts: Float64Array): ReadonlyArray<readonly [number, number]> => {
  const out: Array<readonly [number, number]> = []
  for (let tag = 0; tag < counts.length; tag++) if (counts[tag]! > 0) out.push([tag, counts[tag]!])
  return out
}

const stateOf = (link: PeerLink): PeerState => ({
  host: link.peer.host,
  port: link.peer.port,
  connected: link.connected && !link.self,
  self: link.self,
  resolvedIp: Option.fromNullable(link.resolvedIp),
  lastResolvedIp: Option.fromNullable(link.lastResolvedIp),
  queued: link.queued,
  queuedBytes: link.queuedBytes,
  handed: link.handed,
  written: link.written,
  droppedFull: link.droppedFull,
  droppedDown: link.droppedDown,
  discarded: link.discarded,
  reconnects: link.reconnects,
  lastError: Option.fromNullable(link.lastError),
  writtenByTag: counted(link.writtenByTag),
  droppedByTag: counted(link.droppedByTag),
  writeSizes: [...link.writeSizes]
})

/**
 * The name a peer goes by in logs and metrics: `host:port` as configured.
 *
 * @example
 * ```ts
 * import { Peers } from "queen-mesh"
 *
 * assert.strictEqual(Peers.peerName({ host: "queen-b", port: 6633 }), "queen-b:6633")
 * assert.strictEqual(Peers.peerName({ host: "::1", port: 6633 }), "[::1]:6633")
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const peerName = (peer: MeshConfig.Peer): string =>
  peer.host.includes(":") ? `[${peer.host}]:${peer.port}` : `${peer.host}:${peer.port}`

/**
 * Starts a dialer fiber per configured peer (none when the mesh is not active) in the current scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: PeersOptions = {}
): Effect.Effect<PeersShape, never, Scope.Scope | MeshConfig.MeshConfig | Transport | SelfDialsService> =>
  Effect.gen(function* () {
    const config = yield* MeshConfig.MeshConfig
    const transport = yield* Transport
    const selfDials = yield* SelfDialsService
    const active = MeshConfig.isActive(config)
    const queueBytes = Math.max(QUEUE_BYTES, config.sendQueueCapacity * 64)
    // A peer listed twice would get every frame twice: merged, with a warning.
    const { peers: distinct, duplicates } = MeshConfig.dedupePeers(config.peers)
    if (active && duplicates.length > 0) {
      yield* Effect.logWarning("the peer list names a peer more than once; dialling it once").pipe(
        Effect.annotateLogs({ module: "Peers", duplicates: duplicates.map(peerName).join(",") })
      )
    }
    const links = active
      ? distinct.map(
          (peer) =>
            new PeerLink(
              peer,
              peerName(peer),
              config.sendQueueCapacity,
              queueBytes,
              writeHistogram(config.serverId, peerName(peer))
            )
        )
      : []
    const dialers = yield* FiberMap.make<string>()
    const schedule = options.reconnectSchedule ?? reconnectSchedule
    for (const link of links) {
      yield* FiberMap.run(
        dialers,
        link.name,
        dial(link, transport, {
          serverId: config.serverId,
          secret: config.secret,
          heartbeatInterval: config.heartbeatInterval,
          authFailureDelay: config.authFailureDelay,
          schedule,
          auth: config.auth,
          challengeWait: config.challengeWait,
          handshakeTimeout: config.handshakeTimeout,
          label: config.clusterLabel,
          selfDials,
          startGrace: config.deadThreshold
        })
      )
    }

    const broadcast = (bytes: Uint8Array): number => {
      let taken = 0
      for (let i = 0; i < links.length; i++) if (links[i]!.offer(bytes)) taken++
      return taken
    }
    return { broadcast, size: links.length, links: Effect.sync(() => links.map(stateOf)) }
  })

/**
 * The peers configured in `MeshConfig`, over the `Transport` provided.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: PeersOptions = {}
): Layer.Layer<Peers, never, MeshConfig.MeshConfig | Transport | SelfDialsService> =>
  Layer.scoped(Peers, make(options))

interface DialOptions {
  readonly serverId: string
  readonly secret: Redacted.Redacted<string>
  readonly heartbeatInterval: Duration.Duration
  readonly authFailureDelay: Duration.Duration
  readonly schedule: Schedule.Schedule<unknown, LinkDown>
  readonly auth: MeshConfig.AuthMode
  readonly challengeWait: Duration.Duration
  readonly handshakeTimeout: Duration.Duration
  readonly label: string
  readonly selfDials: SelfDials
  /** How long a peer never reached yet may fail before it is warned about (it may be starting too). */
  readonly startGrace: Duration.Duration
}

/** `u32 BE length | u8 tag | JSON` of any object (the v2 HELLO carries fields the Frame model omits). */
const encodeObject = (tag: number, payload: object): Uint8Array => {
  const json = Buffer.from(JSON.stringify(payload), "utf8")
  const out = Buffer.allocUnsafe(5 + json.length)
  out.writeUInt32BE(1 + json.length, 0)
  out[4] = tag
  json.copy(out, 5)
  return out
}

const legacyHello = (hello: Frame.Hello) => ({ bytes: Frame.encode(hello), nonce: hello.nonce })

/** The link to one peer, for as long as the scope lasts. */
const dial = (link: PeerLink, transport: Context.Tag.Service<Transport>, options: DialOptions) =>
  Effect.gen(function* () {
    const heartbeat = Frame.encode(Frame.heartbeat(options.serverId))
    // Established: up past the moment a listener refusing our HELLO would have closed on us (its
    // failure delay), plus a heartbeat interval. Only that resets the backoff.
    const establishedMillis =
      Duration.toMillis(options.heartbeatInterval) + Duration.toMillis(options.authFailureDelay)
    let lastReason: string | undefined
    let lastWarningAt = Number.NEGATIVE_INFINITY
    let failuresSinceWarning = 0
    // Until the peer is reached once, failures within the start grace are only info: in a rolling
    // start the peers come up one by one, and that is no cause for a warning.
    let reached = false
    const startedAt = yield* Clock.currentTimeMillis

    const session = Effect.gen(function* () {
      let upSince: number | undefined
      const down = (cause: LinkDown["cause"]) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Effect.fail(
            new LinkDown({
              connected: upSince !== undefined,
              established: upSince !== undefined && now - upSince >= establishedMillis,
              cause
            })
          )
        )
      const connection: Connection = yield* Effect.catchAll(
        transport.dial(link.peer.host, link.peer.port),
        down
      )
      // Outbound connections carry nothing back but, from a v2 listener, one challenge frame first;
      // after it, reading only notices the close.
      const challenge = yield* Deferred.make<Option.Option<Handshake.Challenge>>()
      let badChallenge: string | undefined
      const firstFrame = new FrameDecoder({ maxFrameLength: 1 + Handshake.MAX_CHALLENGE_PAYLOAD_BYTES })
      let waiting = true
      const settle = (value: Option.Option<Handshake.Challenge>) => {
        waiting = false
        Deferred.unsafeDone(challenge, Effect.succeed(value))
      }
      const reader = yield* Effect.fork(
        connection.read<never>((chunk) => {
          if (!waiting) return undefined
          const failure = firstFrame.push(chunk, (tag, payload) => {
            if (!waiting) return
            const decoded =
              tag === Handshake.CHALLENGE_TAG
                ? Handshake.decodeChallenge(payload)
                : Either.left("not a challenge")
            if (Either.isLeft(decoded)) badChallenge = decoded.left
            settle(Either.isRight(decoded) ? Option.some(decoded.right) : Option.none())
          })
          if (failure !== undefined) settle(Option.none())
          return undefined
        })
      )
      const hello: { readonly bytes: Uint8Array; readonly nonce: string } =
        options.auth === "legacy"
          ? legacyHello(yield* Handshake.makeHello(options.serverId, options.secret))
          : yield* Effect.gen(function* () {
              const wait = options.auth === "required" ? options.handshakeTimeout : options.challengeWait
              const got = yield* Deferred.await(challenge).pipe(
                Effect.timeout(wait),
                Effect.catchAll(() => Effect.succeed(Option.none<Handshake.Challenge>()))
              )
              if (Option.isSome(got)) {
                const v2 = yield* Handshake.helloV2(
                  options.serverId,
                  options.secret,
                  got.value,
                  options.label
                )
                return { bytes: encodeObject(Frame.Tag.HELLO, Handshake.helloV2Payload(v2)), nonce: v2.nonce }
              }
              // Required: a legacy HELLO is a credential anyone can replay; never fall back to it.
              if (options.auth === "required") {
                return yield* down(
                  badChallenge === undefined ? "no challenge" : `invalid challenge (${badChallenge})`
                )
              }
              return legacyHello(yield* Handshake.makeHello(options.serverId, options.secret))
            })
      // If this entry of the peer list is this node, our own listener will recognise the nonce.
      const forget = options.selfDials.helloSent(hello.nonce, establishedMillis, () => link.markSelf())
      yield* Effect.addFinalizer(() => Effect.sync(forget))
      yield* Effect.catchAll(connection.write(hello.bytes), down)
      upSince = yield* Clock.currentTimeMillis
      link.up(Option.getOrUndefined(connection.remoteAddress), connection.unsafeTryWrite)
      yield* Effect.logInfo("mesh link up").pipe(
        Effect.annotateLogs({ resolved_ip: Option.getOrElse(connection.remoteAddress, () => "unknown") })
      )

      const writer = Effect.gen(function* () {
        yield* link.available
        const frames = link.takeAll()
        link.writing = true
        yield* connection.write(frames.length === 1 ? frames[0]! : Buffer.concat(frames))
        link.wrote(frames)
      }).pipe(Effect.forever)
      // A heartbeat every interval, busy or not, as upstream sends them.
      const heartbeats = Effect.forever(
        Effect.zipRight(
          Effect.sleep(options.heartbeatInterval),
          Effect.sync(() => link.offer(heartbeat))
        )
      )
      const closed = Effect.zipRight(Fiber.join(reader), Effect.fail("closed by peer" as const))
      return yield* Effect.raceFirst(writer, Effect.raceFirst(heartbeats, closed)).pipe(Effect.catchAll(down))
    }).pipe(
      Effect.scoped,
      Effect.withSpan("queen-mesh.dial", { attributes: { peer: link.name } }),
      Effect.ensuring(Effect.sync(() => link.down(undefined))),
      Effect.tapError((down) =>
        Effect.gen(function* () {
          // Our own listener closed on our own HELLO: no failure, and the loop below stops.
          if (link.self) return
          const reason = describeFailure(down.cause)
          link.lastError = reason
          if (down.connected) reached = true
          if (down.established) {
            lastReason = undefined
            failuresSinceWarning = 0
            return yield* Effect.logWarning("mesh link down").pipe(Effect.annotateLogs({ reason }))
          }
          // A peer that keeps failing the same way is logged on the first failure and on every change
          // of reason, then at most once a minute, whether it refuses the connection or closes on our
          // HELLO (the listener says nothing more when it refuses one).
          const message = down.connected
            ? "mesh link closed right after the handshake; does the peer share the secret?"
            : "mesh peer unreachable"
          const key = `${down.connected}:${reason}`
          failuresSinceWarning++
          const now = yield* Clock.currentTimeMillis
          if (!reached && now - startedAt < Duration.toMillis(options.startGrace)) {
            return yield* Effect.logInfo("mesh peer not reachable yet; retrying").pipe(
              Effect.annotateLogs({ reason })
            )
          }
          if (key !== lastReason || now - lastWarningAt >= FAILURE_WARNING_INTERVAL_MS) {
            yield* Effect.logWarning(message).pipe(
              Effect.annotateLogs({ reason, failures: failuresSinceWarning })
            )
            lastReason = key
            lastWarningAt = now
            failuresSinceWarning = 0
          }
        })
      )
    )

    // The retry loop, driving the schedule by hand: `Effect.retry` would hand each attempt the previous
    // failure as the schedule's input, and through it (an error's captured stack holds its socket
    // callback, whose closure holds the attempt before) every failed dial would stay reachable.
    const driver = yield* Schedule.driver(options.schedule)
    while (true) {
      const exit = yield* Effect.exit(session)
      if (link.self) {
        yield* Effect.logInfo("the peer list names this node itself: not dialling it")
        return yield* Effect.never
      }
      if (exit._tag === "Success") continue
      const failure = Cause.failureOption(exit.cause)
      if (Option.isNone(failure)) return yield* Effect.failCause(exit.cause)
      const down = failure.value
      const next = yield* Effect.either(driver.next(forget(down)))
      // A schedule that ends leaves the peer alone; the default never ends.
      if (Either.isLeft(next)) {
        yield* Effect.logWarning("mesh peer given up: the reconnect schedule ended")
        return yield* Effect.never
      }
    }
  }).pipe(Effect.annotateLogs({ module: "Peers", peer: link.name }))
