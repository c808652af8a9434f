/**
 * The PostgreSQL lane as the mesh runs it (docs/postgres.md): the connection (`pgConnection`, loaded with
 * the `pg` driver only when a lane is built), the members heard on it (`members`), the receive path
 * after the envelope (`receiver`), and here what joins them: the lane's status as the mesh hears it, the
 * heartbeat of a quiet lane, the catch-up after a reconnection, and the lane's part of the stats body.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Latch from "effect/Latch"
import * as Result from "effect/Result"
import type * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type * as Lane from "../../Lane.js"
import type * as MeshStats from "../../MeshStats.js"
import * as Keyring from "../keyring.js"
import { loop } from "../loop.js"
import * as Stall from "../stall.js"
import * as Codec from "../wire/codec.js"
import * as Frames from "../wire/frames.js"
import { LaneMembers } from "./members.js"
import type * as PgConnection from "./pgConnection.js"
import { LaneReceiver } from "./receiver.js"
import * as Refusals from "./refusals.js"
import type { LaneShape, LaneStatus } from "./running.js"

/** The lane's options, checked, with the channel resolved. */
export interface Settings {
  readonly url: string
  readonly channel: string
  readonly checkInterval: Duration.Duration
  readonly probeTimeout: Duration.Duration
  readonly connectTimeout: Duration.Duration
  readonly reconnect: Schedule.Schedule<unknown, unknown> | undefined
  readonly heartbeatInterval: Duration.Duration | undefined
  readonly deadThreshold: Duration.Duration | undefined
  readonly forgetAfter: Duration.Duration
  readonly maxMembers: number
  readonly maxBufferedFrames: number
  readonly maxBufferedBytes: number
  readonly maxBufferedAge: Duration.Duration
}

/** A re-established connection, as the host hears of it: what may have been missed since when. */
export interface CatchUpEvent {
  readonly channel: string
  readonly downSince: number
  readonly reconnects: number
}

/** What a connection failure most likely means, for the start-up error. */
const likelyCause = (reason: PgConnection.PgLaneErrorReason): string => {
  switch (reason) {
    case "Connect":
      return "the server cannot be reached or refused the login: check QUEEN_MESH_PG_URL (host, port, user, password, sslmode) and the network between this node and the database"
    case "ReadOnly":
      return "the server is read-only (a standby or a read replica): point the lane at the primary"
    case "Deaf":
    case "NotListening":
      return "notifications do not come back: a pooler in transaction mode (PgBouncer, RDS Proxy) between the node and the database, or a server that rewrites the channel; connect the lane directly or through session pooling"
    case "Listen":
      return "LISTEN was refused: the role may lack the right to connect, or the server does not allow LISTEN"
    default:
      return "the connection failed while starting; the lane keeps retrying"
  }
}

const sumOf = (record: Readonly<Record<string, number>>): number => {
  let n = 0
  for (const value of Object.values(record)) n += value
  return n
}

/** A lane that could not be made at all: down for good, saying why. Unreachable with checked options. */
const brokenLane = (channel: string, detail: string): LaneShape => ({
  kind: "pg",
  offer: () => false,
  status: Effect.succeed("down"),
  statusChanges: Stream.make<[LaneStatus]>("down"),
  members: Effect.succeed([]),
  stats: Effect.succeed({
    kind: "pg",
    status: "down",
    last_error: detail,
    channel,
    epoch: "",
    notifications_sent: 0,
    notifications_received: 0,
    bytes_sent: 0,
    bytes_received: 0,
    frames_sent: 0,
    frames_received: 0,
    refused: Refusals.zeroes(Refusals.reasons),
    dropped: 0,
    buffered: 0,
    reconnects: 0,
    queue_usage: null,
    members_alive: 0,
    members: []
  })
})

/**
 * A quiet lane's heartbeat: one notification per period unless something else went out in it (any
 * notification says we are alive just as well), and never while frames wait (a heartbeat behind a large
 * batch would only find the buffer full).
 */
class Heartbeat {
  private sentSinceTick = false
  private readonly frame: Uint8Array

  constructor(
    serverId: string,
    private readonly connection: () => PgConnection.PgLaneShape | undefined
  ) {
    this.frame = Codec.encode(Frames.heartbeat(serverId))
  }

  /** Something went out: the period needs no heartbeat. */
  sent(): void {
    this.sentSinceTick = true
  }

  /** Beats now, unless frames wait. */
  beat(): void {
    const connection = this.connection()
    if (connection !== undefined && connection.pending() === 0 && connection.offer(this.frame)) {
      this.sentSinceTick = true
    }
  }

  /** The end of a period: a beat if nothing went out and the lane is up. */
  tick(up: boolean): void {
    if (!this.sentSinceTick && up) this.beat()
    this.sentSinceTick = false
  }
}

/**
 * The lane's status as the mesh hears it: each change one `LaneStatus` event, the members told, a beat
 * when it comes up (so the others hear at once that we are here again), and since when it was down.
 */
class StatusWatch {
  status: LaneStatus = "starting"
  /** When the lane last went down, ms since the epoch (what a catch-up reports). */
  downSince = 0

  constructor(
    private readonly context: Lane.BuildContext,
    private readonly members: LaneMembers,
    private readonly heartbeat: Heartbeat,
    private readonly clock: Clock.Clock
  ) {}

  changed(state: PgConnection.PgLaneState): void {
    if (state.status === this.status) return
    if (state.status === "down" && this.status === "up") this.downSince = this.clock.currentTimeMillisUnsafe()
    this.status = state.status
    this.context.events.emit({
      _tag: "LaneStatus",
      status: state.status,
      detail: state.error === undefined ? null : state.error.message
    })
    this.members.status(state.status)
    if (state.status === "up") this.heartbeat.beat()
  }
}

/** The lane's part of the stats body, from the connection's counters, the receiver's and the members. */
const statsOf = (
  channel: string,
  connection: PgConnection.PgLaneShape,
  receiver: LaneReceiver,
  members: LaneMembers
): Effect.Effect<MeshStats.LaneStats> =>
  Effect.zipWith(
    connection.stats,
    members.list,
    (s, list): MeshStats.LaneStats => ({
      kind: "pg",
      status: s.status,
      last_error: s.lastError ?? null,
      channel,
      epoch: s.epoch,
      notifications_sent: s.notificationsSent,
      notifications_received: s.notificationsReceived,
      bytes_sent: s.bytesSent,
      bytes_received: s.bytesReceived,
      frames_sent: s.framesSent,
      frames_received: s.framesReceived,
      refused: {
        ...s.refused,
        invalid_frame: receiver.invalidFrames,
        handshake_frame: receiver.handshakeFrames,
        unknown_frame: receiver.unknownFrames,
        overloaded: receiver.overloaded
      },
      dropped: sumOf(s.dropped),
      buffered: s.bufferedFrames,
      reconnects: s.reconnects,
      queue_usage: s.queueUsage ?? null,
      members_alive: members.alive,
      members: list.map((member) => ({
        server_id: member.serverId,
        alive: member.alive,
        last_seen_ms_ago: member.lastSeenMsAgo,
        epoch: member.epoch,
        found_by: "lane"
      }))
    })
  )

/** The start-up lines: what the lane runs with, and a warning for open mode. */
const logStart = (
  settings: Settings,
  keyring: Keyring.Auth,
  heartbeat: Duration.Duration,
  dead: Duration.Duration
) =>
  Effect.andThen(
    Effect.logInfo("PostgreSQL lane starting").pipe(
      Effect.annotateLogs({
        channel: settings.channel,
        key_id: keyring === "open" ? "(open)" : keyring.primary.id,
        check_interval_ms: Duration.toMillis(settings.checkInterval),
        heartbeat_ms: Duration.toMillis(heartbeat),
        dead_threshold_ms: Duration.toMillis(dead)
      })
    ),
    keyring === "open"
      ? Effect.logWarning(
          "PostgreSQL lane in open mode: no secret, so any client of the database can NOTIFY hints onto the lane"
        )
      : Effect.void
  )

/**
 * Builds the lane for one mesh, in the mesh's scope. `catchUp` runs after every re-established
 * connection, in a fiber of its own.
 */
export const make = (
  driver: typeof PgConnection,
  settings: Settings,
  catchUp: (event: CatchUpEvent) => Effect.Effect<void>,
  context: Lane.BuildContext
): Effect.Effect<LaneShape, never, Scope.Scope> =>
  Effect.gen(function* () {
    const config = context.config
    const channel = settings.channel
    const keyring = Keyring.fromSecrets(config.secret, config.acceptedSecrets)
    const heartbeatInterval = settings.heartbeatInterval ?? config.heartbeatInterval
    const deadThreshold = settings.deadThreshold ?? config.deadThreshold
    const clock = yield* Clock.Clock
    const services = yield* Effect.context<never>()
    const members = new LaneMembers(
      context,
      clock,
      Duration.toMillis(deadThreshold),
      Duration.toMillis(settings.forgetAfter),
      settings.maxMembers
    )
    const receiver = new LaneReceiver(context, members, yield* Latch.make(false))
    let connection: PgConnection.PgLaneShape | undefined
    const heartbeat = new Heartbeat(config.serverId, () => connection)
    const watch = new StatusWatch(context, members, heartbeat, clock)
    yield* logStart(settings, keyring, heartbeatInterval, deadThreshold)

    const made = yield* Effect.result(
      driver.make(
        {
          url: settings.url,
          channel,
          serverId: config.serverId,
          keyring,
          checkInterval: settings.checkInterval,
          probeTimeout: settings.probeTimeout,
          connectTimeout: settings.connectTimeout,
          maxBufferedFrames: settings.maxBufferedFrames,
          maxBufferedBytes: settings.maxBufferedBytes,
          maxBufferedAge: settings.maxBufferedAge,
          ...(settings.reconnect === undefined ? {} : { reconnect: settings.reconnect })
        },
        {
          onFrames: (from, frames, epoch) => receiver.receive(from, frames, epoch),
          onRefused: (reason) => {
            if (context.events.listening("LaneRefused")) context.events.emit({ _tag: "LaneRefused", reason })
          },
          onStateChange: (state) => watch.changed(state),
          onCatchUp: () => {
            const downSince = watch.downSince
            Effect.runForkWith(services)(
              Effect.gen(function* () {
                const reconnects = connection === undefined ? 1 : (yield* connection.stats).reconnects
                yield* Effect.logInfo("PostgreSQL lane back: the host catches up").pipe(
                  Effect.annotateLogs({ down_since: new Date(downSince).toISOString() })
                )
                yield* catchUp({ channel, downSince, reconnects })
              }).pipe(Effect.annotateLogs({ module: "Postgres", channel }))
            )
          }
        }
      )
    )
    if (Result.isFailure(made)) {
      yield* Effect.logError(`PostgreSQL lane cannot start: ${made.failure.message}`)
      return brokenLane(channel, made.failure.message)
    }
    const pg = made.success
    connection = pg

    // The first attempt's outcome: a lane that does not come up says why, once, as an error.
    yield* pg.started.pipe(
      Effect.catch((error) =>
        Effect.logError(`PostgreSQL lane did not come up: ${error.message}`).pipe(
          Effect.annotateLogs({ reason: error.reason, likely_cause: likelyCause(error.reason) })
        )
      ),
      Effect.forkScoped
    )
    const annotations = { module: "Postgres", channel }
    yield* loop("Postgres.apply", receiver.drain, { before: receiver.ready, annotations })
    yield* loop(
      "Postgres.heartbeat",
      Effect.sync(() => heartbeat.tick(watch.status === "up")),
      { sleep: heartbeatInterval, annotations }
    )
    // Often enough that a member turns dead close to the threshold, never busier than 50 times a second.
    const sweepEvery = Duration.clamp(Duration.divideUnsafe(heartbeatInterval, 2), {
      minimum: Duration.millis(20),
      maximum: Duration.seconds(1)
    })
    // Woken late (this process was held up), it reads the notifications that came meanwhile first.
    yield* loop("Postgres.members", members.sweep, { before: Stall.sleep(sweepEvery), annotations })

    return {
      kind: "pg",
      offer: (bytes) => {
        heartbeat.sent()
        return pg.offer(bytes)
      },
      status: Effect.map(pg.state, (state) => state.status),
      statusChanges: pg.changes.pipe(
        Stream.map((state) => state.status),
        Stream.changes
      ),
      members: members.list,
      stats: statsOf(channel, pg, receiver, members)
    } satisfies LaneShape
  }).pipe(Effect.annotateLogs({ module: "Postgres" }))
