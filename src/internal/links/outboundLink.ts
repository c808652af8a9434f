/**
 * The link this node dials to one configured peer, for as long as the scope lasts (spec "Topology"):
 * the send path by name, `Mesh → Peers.broadcast → PeerLink.offer → OutboundLink's writer → socket`.
 *
 * A session dials (the transport resolves the name afresh every time), reads the v2 challenge where the
 * auth mode waits for one, writes the HELLO, then writes the peer's queue (every waiting frame in one
 * write) and a heartbeat carrying our server id every heartbeat interval, skipped on a tick when the
 * link carried another frame since the last one (any frame is liveness to the peer, upstream's too).
 * Outbound connections are send-only: after the challenge, reading only notices the close.
 *
 * Any failure marks the link down and retries on the reconnect `Schedule` (default 250 ms doubling,
 * capped at 5 s, started afresh after a session that was established: up for a heartbeat interval past
 * the listener's auth-failure delay, so a peer refusing our HELLO is not redialled in a tight loop). A
 * peer that keeps failing (refusing, closing on our HELLO, or having its links closed by the liveness
 * check) is logged at warning on the first failure and on every change of reason, then at most once a
 * minute; a peer never reached yet only at info for its first dead threshold. An entry our own
 * listener recognises as this node is never dialled again.
 *
 * @internal
 */

import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Pull from "effect/Pull"
import type * as Redacted from "effect/Redacted"
import * as Result from "effect/Result"
import * as Schedule from "effect/Schedule"
import { LinkDown, TransportError } from "../../MeshError.js"
import type { MeshEventsShape } from "../../MeshEvent.js"
import type { Connection, TransportShape } from "../../Transport.js"
import * as Stall from "../stall.js"
import * as Codec from "../wire/codec.js"
import { FrameDecoder } from "../wire/frameDecoder.js"
import * as Frames from "../wire/frames.js"
import type * as Payloads from "../wire/payloads.js"
import * as Handshake from "./handshake.js"
import type { Heartbeats } from "./heartbeats.js"
import type { PeerLink } from "./peerLink.js"
import type { SelfDials } from "./selfDials.js"

/**
 * `self`, started afresh (its first delay again) on an input for which `reset` holds: effect 4's
 * `Schedule` has no `resetWhen`, so the step is taken anew from `Schedule.toStep`.
 */
const resetWhen =
  <Input>(reset: (input: Input) => boolean) =>
  <Output, Error, Env>(
    self: Schedule.Schedule<Output, Input, Error, Env>
  ): Schedule.Schedule<Output, Input, Error, Env> =>
    Schedule.fromStep(
      Effect.map(Schedule.toStep(self), (first) => {
        let step = first
        return (now: number, input: Input) =>
          reset(input)
            ? Effect.flatMap(Schedule.toStep(self), (fresh) => {
                step = fresh
                return fresh(now, input)
              })
            : step(now, input)
      })
    )

/**
 * The default reconnect delays: 250 ms doubling, capped at 5 s (`min` takes the shorter delay),
 * started afresh after a session that was established (spec "Topology").
 */
export const reconnectSchedule: Schedule.Schedule<LinkDown, LinkDown> = Schedule.passthrough<
  Duration.Duration,
  LinkDown,
  never,
  never
>(Schedule.min([Schedule.exponential(Duration.millis(250)), Schedule.spaced(Duration.seconds(5))])).pipe(
  resetWhen((down: LinkDown) => down.established)
)

/** While a peer keeps failing with the same reason, a warning at most this often. */
const FAILURE_WARNING_INTERVAL_MS = 60_000

/** The reason an operator reads: refused, not resolved, timed out, or the error's own words. */
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

/** The same verdict without the socket error it wraps (and the closures that error's stack holds). */
const forget = (down: LinkDown): LinkDown =>
  typeof down.cause === "string"
    ? down
    : new LinkDown({
        connected: down.connected,
        established: down.established,
        cause: new TransportError({ reason: down.cause.reason, address: down.cause.address })
      })

export interface OutboundOptions {
  readonly serverId: string
  readonly secret: Redacted.Redacted<string>
  readonly heartbeatInterval: Duration.Duration
  /** The node's heartbeat timer, ticking every `heartbeatInterval`. */
  readonly heartbeats: Heartbeats
  readonly authFailureDelay: Duration.Duration
  readonly schedule: Schedule.Schedule<unknown, LinkDown>
  readonly auth: Handshake.HandshakeMode
  readonly challengeWait: Duration.Duration
  readonly handshakeTimeout: Duration.Duration
  readonly label: string
  /** Upstream's HELLO v2 fields, sent in every HELLO. */
  readonly advert: Handshake.Advert
  readonly selfDials: SelfDials
  readonly events: MeshEventsShape
  /** How long a peer never reached yet may fail before it is warned about (it may be starting too). */
  readonly startGrace: Duration.Duration
  /** The silence after which a peer is dead: an established link to a peer silent this long is closed. */
  readonly deadThreshold: Duration.Duration
  /**
   * Milliseconds since the last frame from the server `link` reaches, if the node can tell which one
   * that is (the id its v2 challenge gave, or the one server that dialled in from its address).
   */
  readonly peerSilence: (link: PeerLink) => number | undefined
  /**
   * No heartbeat on a tick when the link took another frame since the last one (`PeerLink.heartbeat`).
   * Safe only while twice the interval stays within the peer's dead threshold and idle timeout (the
   * longest a busy-then-quiet link goes without a frame); the node decides (`Peers`). Default false.
   */
  readonly skipBusyHeartbeats?: boolean
}

export class OutboundLink {
  /** Established: up past the moment a listener refusing our HELLO would have closed on us (its
   * failure delay), plus a heartbeat interval. Only that resets the backoff. */
  private readonly establishedMillis: number
  private readonly heartbeat: Uint8Array
  private lastReason: string | undefined = undefined
  private lastWarningAt = Number.NEGATIVE_INFINITY
  private failuresSinceWarning = 0
  /** Until the peer is reached once, failures within the start grace are only info. */
  private reached = false
  private startedAt = 0

  constructor(
    readonly link: PeerLink,
    private readonly transport: TransportShape,
    private readonly options: OutboundOptions
  ) {
    this.establishedMillis =
      Duration.toMillis(options.heartbeatInterval) + Duration.toMillis(options.authFailureDelay)
    this.heartbeat = Codec.encode(Frames.heartbeat(options.serverId))
  }

  /**
   * The retry loop, driving the schedule by hand (`Schedule.toStepWithSleep`, taken anew to start it
   * afresh): `Effect.retry` would hand each attempt the previous failure as the schedule's input, and
   * through it (an error's captured stack holds its socket callback, whose closure holds the attempt
   * before) every failed dial would stay reachable.
   */
  get run(): Effect.Effect<never, LinkDown> {
    return this.loop.pipe(Effect.annotateLogs({ module: "Peers", peer: this.link.name }))
  }

  private get loop(): Effect.Effect<never, LinkDown> {
    return Effect.gen({ self: this }, function* () {
      this.startedAt = yield* Clock.currentTimeMillis
      let step = yield* Schedule.toStepWithSleep(this.options.schedule)
      while (true) {
        const exit = yield* Effect.exit(this.session)
        if (this.link.isSelf) {
          yield* Effect.logInfo("the peer list names this node itself: not dialling it")
          return yield* Effect.never
        }
        if (exit._tag === "Success") continue
        const failure = Cause.findErrorOption(exit.cause)
        if (Option.isNone(failure)) return yield* Effect.failCause(exit.cause)
        // Closed by the liveness check: the link was up and is known bad, so dial again at once.
        if (failure.value.cause === "peer silent" || failure.value.cause === "write stalled") {
          step = yield* Schedule.toStepWithSleep(this.options.schedule)
          continue
        }
        const next = yield* step(forget(failure.value)).pipe(
          Effect.as(true),
          Pull.catchDone(() => Effect.succeed(false))
        )
        // A schedule that ends leaves the peer alone; the default never ends.
        if (!next) {
          yield* Effect.logWarning("mesh peer given up: the reconnect schedule ended")
          return yield* Effect.never
        }
      }
    })
  }

  /** One connection's life: dial, HELLO, write until it breaks. */
  private get session(): Effect.Effect<never, LinkDown> {
    return Effect.gen({ self: this }, function* () {
      let upSince: number | undefined
      const down = (cause: LinkDown["cause"]) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Effect.fail(
            new LinkDown({
              connected: upSince !== undefined,
              established: upSince !== undefined && now - upSince >= this.establishedMillis,
              cause
            })
          )
        )
      const link = this.link
      const connection: Connection = yield* Effect.catch(
        this.transport.dial(link.peer.host, link.peer.port),
        down
      )
      const { challenge, reader } = yield* readChallenge(connection)
      const hello = yield* this.hello(challenge, down)
      // If this entry of the peer list is this node, our own listener will recognise the nonce.
      const forgetNonce = this.options.selfDials.helloSent(hello.nonce, this.establishedMillis, () => {
        link.markSelf()
        this.options.events.emit({ _tag: "SelfRecognized", peer: link.name })
      })
      yield* Effect.addFinalizer(() => Effect.sync(forgetNonce))
      yield* Effect.catch(connection.write(Codec.encode(hello)), down)
      upSince = yield* Clock.currentTimeMillis
      link.up(Option.getOrUndefined(connection.remoteAddress), connection.unsafeTryWrite)
      this.options.events.emit({
        _tag: "LinkUp",
        peer: link.name,
        remote: Option.getOrNull(connection.remoteAddress)
      })
      // Said once the link is established (the peer kept it past the moment it would have refused our
      // HELLO), and never for an entry our own listener recognised as this node meanwhile.
      yield* Effect.sleep(Duration.millis(this.establishedMillis)).pipe(
        Effect.andThen(
          Effect.suspend(() =>
            link.isSelf
              ? Effect.void
              : Effect.logInfo("mesh link up").pipe(
                  Effect.annotateLogs({
                    resolved_ip: Option.getOrElse(connection.remoteAddress, () => "unknown")
                  })
                )
          )
        ),
        Effect.forkScoped
      )
      const writer = Effect.gen(function* () {
        yield* link.available
        const frames = link.takeAll(yield* Clock.currentTimeMillis)
        yield* connection.write(frames.length === 1 ? frames[0]! : Buffer.concat(frames))
        link.wrote(frames)
      }).pipe(Effect.forever)
      // Outbound liveness, checked on every heartbeat tick: a link into a black hole stays "connected"
      // until TCP gives up, so a link up for the dead threshold whose peer has been silent inbound as
      // long, or whose writes have not drained as long, is closed (and dialled again at once).
      const deadMs = Duration.toMillis(this.options.deadThreshold)
      const up = upSince
      const verdict = (now: number): "peer silent" | "write stalled" | undefined => {
        const silent = now - up >= deadMs ? this.options.peerSilence(link) : undefined
        if (silent !== undefined && silent >= deadMs) return "peer silent"
        const writing = link.writeStartedAt
        return writing !== undefined && now - writing >= deadMs ? "write stalled" : undefined
      }
      // A heartbeat every interval on a quiet link (on a busy one too unless `skipBusyHeartbeats`):
      // on the node's one heartbeat timer, which also runs the check.
      const skipBusy = this.options.skipBusyHeartbeats === true
      const heartbeats = Effect.callback<never, "peer silent" | "write stalled">((resume) => {
        const remove = this.options.heartbeats.add((now) => {
          link.heartbeat(this.heartbeat, skipBusy)
          const reason = verdict(now)
          if (reason === undefined) return
          remove()
          // Said by `failed`, at the rate of any failure that repeats.
          link.closedBy(reason)
          resume(Effect.fail(reason))
        })
        return Effect.sync(remove)
      })
      const closed = Effect.andThen(Fiber.join(reader), Effect.fail("closed by peer" as const))
      return yield* Effect.raceFirst(writer, Effect.raceFirst(heartbeats, closed)).pipe(Effect.catch(down))
    }).pipe(
      Effect.scoped,
      // No stack trace on the span: a dial to a peer not yet up fails every few hundred milliseconds,
      // and each failure would format one, saying only that it came from here.
      Effect.withSpan(
        "queen-mesh.dial",
        { attributes: { peer: this.link.name } },
        { captureStackTrace: false }
      ),
      Effect.ensuring(
        Effect.sync(() => {
          if (this.link.isConnected) {
            this.options.events.emit({ _tag: "LinkDown", peer: this.link.name, reason: "session ended" })
          }
          this.link.down()
        })
      ),
      Effect.tapError((down) => this.failed(down))
    )
  }

  /** The HELLO to write: legacy, or the answer to the listener's challenge. */
  private hello(
    challenge: Deferred.Deferred<Result.Result<Payloads.Challenge, string>>,
    down: (cause: LinkDown["cause"]) => Effect.Effect<never, LinkDown>
  ): Effect.Effect<Payloads.Hello, LinkDown> {
    const options = this.options
    const link = this.link
    if (options.auth === "legacy")
      return Handshake.makeHello(options.serverId, options.secret, options.advert)
    return Effect.gen(function* () {
      const wait = options.auth === "required" ? options.handshakeTimeout : options.challengeWait
      // Judged once what arrived while this process was held up has been read (`Stall`).
      const got = yield* Deferred.await(challenge).pipe(
        Stall.within(wait, () => "no challenge"),
        Effect.catch(() => Effect.succeed(Result.fail("no challenge")))
      )
      if (Result.isSuccess(got)) {
        link.learned(got.success.server_id)
        return yield* Handshake.helloV2(
          options.serverId,
          options.secret,
          got.success,
          options.label,
          options.advert
        )
      }
      // Required: a legacy HELLO is a credential anyone can replay; never fall back to it.
      if (options.auth === "required") {
        return yield* down(
          got.failure === "no challenge" ? "no challenge" : `invalid challenge (${got.failure})`
        )
      }
      return yield* Handshake.makeHello(options.serverId, options.secret, options.advert)
    })
  }

  /** A session ended: the link's last error, and a log line at the rate the module comment gives. */
  private failed(down: LinkDown): Effect.Effect<void> {
    return Effect.gen({ self: this }, function* () {
      // Our own listener closed on our own HELLO: no failure, and the loop stops.
      if (this.link.isSelf) return
      const reason = describeFailure(down.cause)
      this.link.failed(reason)
      if (down.connected) this.reached = true
      // A link the liveness check closed was up, but its peer is a black hole, and stays one on the
      // next link: a failure that repeats, not a link lost once.
      const byCheck = down.cause === "peer silent" || down.cause === "write stalled"
      if (down.established && !byCheck) {
        this.lastReason = undefined
        this.failuresSinceWarning = 0
        return yield* Effect.logWarning("mesh link down").pipe(Effect.annotateLogs({ reason }))
      }
      // A peer that keeps failing the same way is warned about on the first failure and on every change
      // of reason, then at most once a minute, whether it refuses the connection, closes on our HELLO
      // (the listener says nothing more when it refuses one) or has its links closed by the check.
      const message = byCheck
        ? "mesh link closed by its liveness check; dialling again"
        : down.connected
          ? "mesh link closed right after the handshake: the peer refused our HELLO (does it share the secret?) or went away"
          : "mesh peer unreachable"
      const key = `${down.connected}:${reason}`
      this.failuresSinceWarning++
      const now = yield* Clock.currentTimeMillis
      if (!this.reached && now - this.startedAt < Duration.toMillis(this.options.startGrace)) {
        return yield* Effect.logInfo("mesh peer not reachable yet; retrying").pipe(
          Effect.annotateLogs({ reason })
        )
      }
      if (key !== this.lastReason || now - this.lastWarningAt >= FAILURE_WARNING_INTERVAL_MS) {
        const failures = this.failuresSinceWarning
        yield* Effect.logWarning(message).pipe(
          Effect.annotateLogs(
            byCheck
              ? { reason, failures, dead_threshold_ms: Duration.toMillis(this.options.deadThreshold) }
              : { reason, failures }
          )
        )
        this.lastReason = key
        this.lastWarningAt = now
        this.failuresSinceWarning = 0
      }
    })
  }
}

/**
 * Reads an outbound connection: from a v2 listener one CHALLENGE frame first (its verdict in the
 * deferred; a first frame that is no challenge is a reason), then nothing but the close.
 */
const readChallenge = (connection: Connection) =>
  Effect.gen(function* () {
    const challenge = yield* Deferred.make<Result.Result<Payloads.Challenge, string>>()
    const first = new FrameDecoder({ maxFrameLength: Frames.frames.Challenge.maxLength })
    let waiting = true
    const settle = (verdict: Result.Result<Payloads.Challenge, string>) => {
      if (!waiting) return
      waiting = false
      Deferred.doneUnsafe(challenge, Effect.succeed(verdict))
    }
    // A child of the dialer's fiber; closing the connection (the session's scope) ends its read.
    const reader = yield* Effect.forkChild(
      connection.read<never>((chunk) => {
        if (!waiting) return undefined
        const failure = first.push(chunk, (tag, payload) => settle(Handshake.readChallenge(tag, payload)))
        // Not even a frame: as good as no challenge.
        if (failure !== undefined) settle(Result.fail("no challenge"))
        return undefined
      })
    )
    return { challenge, reader }
  })
