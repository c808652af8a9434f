/**
 * The PostgreSQL lane: the mesh's frames carried over the `LISTEN`/`NOTIFY` of the database every
 * replica already shares, beside the TCP mesh or instead of it (docs/postgres.md). With a lane and no
 * peers a node binds no mesh port: nothing to firewall, no ceiling of three replicas, and every node
 * knows every other's liveness by server id from the lane's heartbeats, with no peer list.
 *
 * A host provides {@link layer} (or {@link layerConfig}, which reads `QUEEN_MESH_PG_URL` and
 * `QUEEN_MESH_PG_CHANNEL`) beside the host services; the mesh looks the lane up when it starts and
 * builds it in its own scope. This module is imported only by hosts that use it (it is not in the root
 * barrel), and it loads the `pg` driver, an optional peer dependency, only when its layer is built.
 *
 * What the lane does, in the mesh's terms:
 *
 * - every broadcast frame is also handed to the lane, which coalesces a tick's frames into as few
 *   notifications as fit under PostgreSQL's 8000-byte payload limit (a batch is split by items), each
 *   sealed with the sender's id, boot epoch, a sequence number and a MAC under the mesh keyring;
 * - a received notification is checked (MAC, epoch, sequence: anyone who can connect to the database
 *   can NOTIFY) and its frames go through the same dispatch as a TCP link's; HELLO and CHALLENGE frames
 *   mean nothing on the lane and are counted and ignored; our own notifications are ignored;
 * - the senders of authenticated notifications are the lane's members, alive while heard within the
 *   dead threshold (heartbeats every `heartbeatInterval` keep a quiet node heard), forgotten after a
 *   long silence;
 * - the connection is checked every `checkInterval` (`pg_listening_channels()` and a probe sent to
 *   itself), re-established with backoff and re-LISTENed; after every re-established connection the
 *   host is told to catch up ({@link PostgresOptions.onCatchUp}, {@link PostgresLane}), since whatever
 *   was notified meanwhile is lost for good;
 * - start-up never fails for a connection reason: the lane reports `down` (health, `/readyz`, stats,
 *   metrics, a `LaneStatus` event) and the first attempt's failure is logged as an error naming the
 *   likely cause (a pooler in transaction mode, a read-only server, ...).
 *
 * @since 0.1.0
 */
import { createHash } from "node:crypto"
import {
  type Clock,
  Config,
  ConfigError,
  Context,
  Data,
  Duration,
  Effect,
  Either,
  Layer,
  Option,
  PubSub,
  Redacted,
  Runtime,
  type Schedule,
  type Scope,
  Stream
} from "effect"
import * as Frame from "./Frame.js"
import * as Keyring from "./internal/keyring.js"
import {
  type LaneContext,
  LaneFactory,
  type LaneFactoryShape,
  type LaneMember,
  type LaneShape,
  type LaneStatus
} from "./internal/lane.js"
import { loop } from "./internal/loop.js"
import type * as PgConnection from "./internal/pgConnection.js"
import type * as Envelope from "./internal/pgEnvelope.js"
import type * as MeshStats from "./MeshStats.js"

// ---------------------------------------------------------------------------------------------
// options
// ---------------------------------------------------------------------------------------------

/**
 * What a host tells the lane. Only `url` is required; the lane's timing follows the mesh's
 * configuration (heartbeat, dead threshold) unless given here.
 *
 * @since 0.1.0
 * @category models
 */
export interface PostgresOptions {
  /** A connection string, `postgres://user:password@host:port/database[?sslmode=...]`. */
  readonly url: string | Redacted.Redacted<string>
  /**
   * The channel every node of the cluster LISTENs on: 1 to 63 bytes, used as is (case matters).
   * Default: {@link channelFor} the cluster label, `queen_mesh` without one.
   */
  readonly channel?: string
  /** How often the connection proves it still hears the channel (default 5 s). */
  readonly checkInterval?: Duration.DurationInput
  /** How long a probe or a check may take before the connection is deemed deaf (default 3 s). */
  readonly probeTimeout?: Duration.DurationInput
  /** How long a connection attempt may take (default 10 s). */
  readonly connectTimeout?: Duration.DurationInput
  /** The pauses between connection attempts (default 250 ms doubling, capped at 5 s). */
  readonly reconnect?: Schedule.Schedule<unknown, unknown>
  /** The heartbeat period on a quiet lane (default: the mesh's `heartbeatInterval`). */
  readonly heartbeatInterval?: Duration.DurationInput
  /** Silence after which a lane member is dead (default: the mesh's `deadThreshold`). */
  readonly deadThreshold?: Duration.DurationInput
  /** Silence after which a lane member is forgotten (default 10 minutes). */
  readonly forgetAfter?: Duration.DurationInput
  /** The most members the lane remembers; the longest silent is forgotten first (default 256). */
  readonly maxMembers?: number
  /** Frames held while the connection is down, at most (default 1024; then dropped and counted). */
  readonly maxBufferedFrames?: number
  /** Bytes held while the connection is down, at most (default 4 MiB). */
  readonly maxBufferedBytes?: number
  /** Frames older than this when the connection comes back are discarded, not sent (default 30 s). */
  readonly maxBufferedAge?: Duration.DurationInput
  /**
   * Run after every re-established connection (not the first): notifications sent while the lane was
   * away are lost, so the host re-reads what it may have missed. Runs in its own fiber; a failure or a
   * defect is logged.
   */
  readonly onCatchUp?: (catchUp: CatchUp) => Effect.Effect<void, unknown>
}

/**
 * The defaults of the options a host leaves out.
 *
 * @since 0.1.0
 * @category options
 */
export const defaults = {
  channel: "queen_mesh",
  checkInterval: Duration.seconds(5),
  probeTimeout: Duration.seconds(3),
  connectTimeout: Duration.seconds(10),
  forgetAfter: Duration.minutes(10),
  maxMembers: 256,
  maxBufferedFrames: 1024,
  maxBufferedBytes: 4 * 1024 * 1024,
  maxBufferedAge: Duration.seconds(30)
} as const

/**
 * One re-established connection: what the lane may have missed, from `downSince` (the time the lane
 * last went down, in ms since the epoch) until now.
 *
 * @since 0.1.0
 * @category models
 */
export interface CatchUp {
  readonly channel: string
  readonly downSince: number
  /** Connections re-established so far, this one included. */
  readonly reconnects: number
}

/**
 * Why the lane's layer cannot be built: options it cannot use, or the `pg` package missing. Never a
 * connection problem: those show in the lane's status.
 *
 * @since 0.1.0
 * @category errors
 */
export class PostgresError extends Data.TaggedError("PostgresError")<{
  readonly reason: "InvalidOptions" | "MissingDriver"
  readonly detail: string
  readonly cause?: unknown
}> {
  override get message(): string {
    return this.detail
  }
}

// ---------------------------------------------------------------------------------------------
// the channel
// ---------------------------------------------------------------------------------------------

/** PostgreSQL truncates identifiers to 63 bytes; a longer channel would name another one. */
const MAX_CHANNEL_BYTES = 63

/**
 * Why `channel` cannot be a channel, or `undefined` when it can: 1 to 63 bytes, no control character.
 *
 * @since 0.1.0
 * @category channel
 */
export const channelProblem = (channel: string): string | undefined => {
  if (channel === "") return "a channel cannot be empty"
  if (Buffer.byteLength(channel, "utf8") > MAX_CHANNEL_BYTES) return "a channel is at most 63 bytes"
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
  if (/[\u0000-\u001f\u007f]/.test(channel)) return "a channel cannot hold control characters"
  return undefined
}

/**
 * The default channel of a cluster: `queen_mesh` without a label, `queen_mesh_<label>` for a label of
 * lowercase letters, digits and `_` that fits, and otherwise a readable prefix of the label plus 16 hex
 * digits of its SHA-256, so two labels never share a channel (the lane's MAC keys are bound to the
 * channel, so two clusters sharing a secret stay apart as they do on TCP). Always a valid channel.
 *
 * @example
 * ```ts
 * import { strictEqual } from "node:assert"
 * import * as Postgres from "queen-mesh/Postgres"
 *
 * strictEqual(Postgres.channelFor(""), "queen_mesh")
 * strictEqual(Postgres.channelFor("eu_west"), "queen_mesh_eu_west")
 * ```
 *
 * @since 0.1.0
 * @category channel
 */
export const channelFor = (label: string): string => {
  if (label === "") return defaults.channel
  const plain = `${defaults.channel}_${label}`
  if (/^[a-z0-9_]+$/.test(label) && plain.length <= MAX_CHANNEL_BYTES) return plain
  const readable = label
    .toLowerCase()
    .replace(/[^a-z0-9_]+/g, "_")
    .slice(0, MAX_CHANNEL_BYTES - defaults.channel.length - 18)
  const digest = createHash("sha256").update(label, "utf8").digest("hex").slice(0, 16)
  return `${defaults.channel}_${readable}_${digest}`
}

// ---------------------------------------------------------------------------------------------
// checking the options
// ---------------------------------------------------------------------------------------------

/**
 * Why `url` cannot be a connection string, or `undefined` when it can: a `postgres:` or `postgresql:`
 * URL. The reason never repeats the string, which holds a password.
 *
 * @since 0.1.0
 * @category options
 */
export const urlProblem = (url: string): string | undefined => {
  if (url.trim() === "") return "the connection string is empty"
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return "the connection string is not a URL (expected postgres://user:password@host:port/database)"
  }
  if (parsed.protocol !== "postgres:" && parsed.protocol !== "postgresql:") {
    return `the connection string's scheme is ${JSON.stringify(parsed.protocol)} (expected postgres: or postgresql:)`
  }
  return undefined
}

interface Resolved {
  readonly url: string
  readonly channel: string | undefined
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
  readonly onCatchUp: PostgresOptions["onCatchUp"]
}

const invalid = (detail: string) => new PostgresError({ reason: "InvalidOptions", detail })

const positiveDuration = (
  name: string,
  input: Duration.DurationInput | undefined,
  fallback: Duration.Duration
): Either.Either<Duration.Duration, PostgresError> => {
  if (input === undefined) return Either.right(fallback)
  const decoded = Duration.decodeUnknown(input)
  return Option.isSome(decoded) && Duration.greaterThan(decoded.value, Duration.zero)
    ? Either.right(decoded.value)
    : Either.left(invalid(`${name} must be a positive duration`))
}

const positiveCount = (name: string, value: number | undefined, fallback: number) =>
  value === undefined
    ? Either.right(fallback)
    : Number.isSafeInteger(value) && value >= 1
      ? Either.right(value)
      : Either.left(invalid(`${name} must be a positive integer`))

const optionalDuration = (name: string, input: Duration.DurationInput | undefined) =>
  input === undefined
    ? Either.right(undefined)
    : Either.map(positiveDuration(name, input, Duration.zero), (d): Duration.Duration | undefined => d)

/** The options checked, with their defaults. */
const resolve = (options: PostgresOptions): Either.Either<Resolved, PostgresError> =>
  Either.gen(function* () {
    const url = typeof options.url === "string" ? options.url : Redacted.value(options.url)
    const badUrl = urlProblem(url)
    if (badUrl !== undefined) return yield* Either.left(invalid(badUrl))
    if (options.channel !== undefined) {
      const bad = channelProblem(options.channel)
      if (bad !== undefined) return yield* Either.left(invalid(bad))
    }
    const heartbeatInterval = yield* optionalDuration("heartbeatInterval", options.heartbeatInterval)
    const deadThreshold = yield* optionalDuration("deadThreshold", options.deadThreshold)
    if (
      heartbeatInterval !== undefined &&
      deadThreshold !== undefined &&
      !Duration.lessThan(heartbeatInterval, deadThreshold)
    ) {
      return yield* Either.left(invalid("heartbeatInterval must be shorter than deadThreshold"))
    }
    return {
      url,
      channel: options.channel,
      checkInterval: yield* positiveDuration("checkInterval", options.checkInterval, defaults.checkInterval),
      probeTimeout: yield* positiveDuration("probeTimeout", options.probeTimeout, defaults.probeTimeout),
      connectTimeout: yield* positiveDuration(
        "connectTimeout",
        options.connectTimeout,
        defaults.connectTimeout
      ),
      reconnect: options.reconnect,
      heartbeatInterval,
      deadThreshold,
      forgetAfter: yield* positiveDuration("forgetAfter", options.forgetAfter, defaults.forgetAfter),
      maxMembers: yield* positiveCount("maxMembers", options.maxMembers, defaults.maxMembers),
      maxBufferedFrames: yield* positiveCount(
        "maxBufferedFrames",
        options.maxBufferedFrames,
        defaults.maxBufferedFrames
      ),
      maxBufferedBytes: yield* positiveCount(
        "maxBufferedBytes",
        options.maxBufferedBytes,
        defaults.maxBufferedBytes
      ),
      maxBufferedAge: yield* positiveDuration(
        "maxBufferedAge",
        options.maxBufferedAge,
        defaults.maxBufferedAge
      ),
      onCatchUp: options.onCatchUp
    }
  })

// ---------------------------------------------------------------------------------------------
// members
// ---------------------------------------------------------------------------------------------

interface MemberState {
  epoch: string
  lastSeen: number
  alive: boolean
}

const byUtf8 = (a: string, b: string): number =>
  Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"))

/**
 * The other nodes heard on the lane, by the server id of their authenticated notifications. The Map's
 * order is the order of last hearing, so the first entry is the longest silent: the one evicted when
 * the table is full. `alive` changes only here (hearing, the sweep), and each change is one `PeerUp` or
 * `PeerDown` event, so the members the mesh reads agree with the events it has seen.
 *
 * A connection hears the channel from its LISTEN on, a moment before its self-test ends and the lane
 * reports `up`; a node heard in that moment is announced once the lane is up, so health never counts a
 * live member against a lane it still thinks is starting.
 */
class LaneMembers {
  private readonly table = new Map<string, MemberState>()
  private up = false
  /** Alive, but heard while the lane was not up: not announced yet. */
  private readonly unannounced = new Set<string>()

  constructor(
    private readonly context: LaneContext,
    private readonly clock: Clock.Clock,
    private readonly deadMillis: number,
    private readonly forgetMillis: number,
    private readonly max: number
  ) {}

  heard(serverId: string, epoch: string): void {
    const now = this.clock.unsafeCurrentTimeMillis()
    const known = this.table.get(serverId)
    if (known !== undefined) {
      this.table.delete(serverId)
      known.epoch = epoch
      known.lastSeen = now
      this.table.set(serverId, known)
      if (!known.alive) {
        known.alive = true
        this.announceUp(serverId)
      }
      return
    }
    if (this.table.size >= this.max) {
      const oldest = this.table.entries().next()
      if (oldest.done !== true) {
        this.table.delete(oldest.value[0])
        if (oldest.value[1].alive) this.announceDown(oldest.value[0])
      }
    }
    this.table.set(serverId, { epoch, lastSeen: now, alive: true })
    this.announceUp(serverId)
  }

  /** The lane's status changed: once up, the members heard meanwhile are announced. */
  status(status: LaneStatus): void {
    this.up = status === "up"
    if (!this.up || this.unannounced.size === 0) return
    const waiting = [...this.unannounced]
    this.unannounced.clear()
    for (const serverId of waiting) {
      if (this.table.get(serverId)?.alive === true) this.context.events.emit({ _tag: "PeerUp", serverId })
    }
  }

  private announceUp(serverId: string): void {
    if (this.up) this.context.events.emit({ _tag: "PeerUp", serverId })
    else this.unannounced.add(serverId)
  }

  private announceDown(serverId: string): void {
    if (!this.unannounced.delete(serverId)) this.context.events.emit({ _tag: "PeerDown", serverId })
  }

  /** Members silent past the dead threshold turn dead; past `forgetAfter`, they are forgotten. */
  readonly sweep: Effect.Effect<void> = Effect.sync(() => {
    const now = this.clock.unsafeCurrentTimeMillis()
    for (const [serverId, member] of this.table) {
      const silent = now - member.lastSeen
      if (member.alive && silent > this.deadMillis) {
        member.alive = false
        this.announceDown(serverId)
      }
      if (silent > this.forgetMillis) {
        this.table.delete(serverId)
        this.context.events.emit({
          _tag: "MemberLeft",
          peer: serverId,
          foundBy: "lane",
          reason: "silent on the lane long enough to be forgotten"
        })
      }
    }
  })

  readonly list: Effect.Effect<ReadonlyArray<LaneMember>> = Effect.sync(() => {
    const now = this.clock.unsafeCurrentTimeMillis()
    const out: Array<LaneMember> = []
    for (const [serverId, member] of this.table) {
      out.push({
        serverId,
        alive: member.alive,
        lastSeenMsAgo: Math.max(0, now - member.lastSeen),
        epoch: member.epoch
      })
    }
    return out.sort((a, b) => byUtf8(a.serverId, b.serverId))
  })

  get alive(): number {
    let n = 0
    for (const member of this.table.values()) if (member.alive) n++
    return n
  }
}

// ---------------------------------------------------------------------------------------------
// receiving
// ---------------------------------------------------------------------------------------------

/** Effects waiting to apply frames, at most; past it a frame is dropped and counted `overloaded`. */
const MAX_PENDING_APPLIES = 65_536

/**
 * The lane's receive path after the envelope: each frame decoded by the frame table and handed to the
 * mesh's dispatch, in the order received. Where the host services apply a frame synchronously it is
 * applied here and now, from the notification's event; once one frame needs an effect, later frames
 * wait behind it (the TCP receive path keeps the same order).
 */
class LaneReceiver {
  invalidFrames = 0
  handshakeFrames = 0
  unknownFrames = 0
  overloaded = 0
  private readonly waiting: Array<Effect.Effect<void>> = []
  private running = false
  private readonly work: Effect.Latch

  constructor(
    private readonly context: LaneContext,
    private readonly members: LaneMembers,
    latch: Effect.Latch
  ) {
    this.work = latch
  }

  /** The frames of one authenticated notification. */
  receive(from: string, frames: ReadonlyArray<Envelope.ReceivedFrame>, epoch: string): void {
    this.members.heard(from, epoch)
    for (const frame of frames) this.frame(from, frame)
  }

  private frame(from: string, received: Envelope.ReceivedFrame): void {
    const { tag, json } = received
    if (tag === Frame.Tag.HELLO || tag === Frame.Tag.CHALLENGE) {
      // The lane authenticates each notification; a handshake frame on it means nothing.
      this.handshakeFrames++
      return
    }
    // An empty payload travels as `null`: only a heartbeat may have one.
    const decoded =
      json === null && tag === Frame.Tag.HEARTBEAT
        ? Either.right(Frame.heartbeat())
        : Frame.decodeJson(tag, json)
    if (Either.isLeft(decoded)) {
      this.invalidFrames++
      if (this.context.events.listening()) {
        this.context.events.emit({ _tag: "InvalidFrame", from, tag, detail: decoded.left.detail })
      }
      return
    }
    const frame = decoded.right
    if (frame._tag === "Unknown") {
      this.unknownFrames++
      return
    }
    // Liveness was recorded for the notification; a heartbeat has nothing else to do.
    if (frame._tag === "Heartbeat") return
    this.apply(from, frame)
  }

  private apply(from: string, frame: Frame.Frame): void {
    const apply = this.context.apply
    if (this.running || this.waiting.length > 0) {
      if (this.waiting.length >= MAX_PENDING_APPLIES) {
        this.overloaded++
        return
      }
      this.waiting.push(Effect.suspend(() => apply(from, frame) ?? Effect.void))
      this.work.unsafeOpen()
      return
    }
    const applying = apply(from, frame)
    if (applying !== undefined) {
      this.waiting.push(applying)
      this.work.unsafeOpen()
    }
  }

  /** Completes once frames wait to be applied. */
  get ready(): Effect.Effect<void> {
    return this.work.await
  }

  /** Runs what waits, in order; frames arriving meanwhile queue behind it. */
  readonly drain: Effect.Effect<void> = Effect.suspend(() => {
    this.work.unsafeClose()
    const batch = this.waiting.splice(0, this.waiting.length)
    if (batch.length === 0) return Effect.void
    this.running = true
    return Effect.forEach(batch, (effect) => effect, { discard: true }).pipe(
      Effect.ensuring(
        Effect.sync(() => {
          this.running = false
          if (this.waiting.length > 0) this.work.unsafeOpen()
        })
      )
    )
  })
}

// ---------------------------------------------------------------------------------------------
// the lane
// ---------------------------------------------------------------------------------------------

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
    refused: {},
    dropped: 0,
    buffered: 0,
    reconnects: 0,
    queue_usage: null,
    members_alive: 0,
    members: []
  })
})

/** Builds the lane for one mesh, in the mesh's scope. */
const makeLane = (
  driver: typeof PgConnection,
  options: Resolved,
  catchUps: PubSub.PubSub<CatchUp>,
  context: LaneContext
): Effect.Effect<LaneShape, never, Scope.Scope> =>
  Effect.gen(function* () {
    const config = context.config
    const channel = options.channel ?? channelFor(config.clusterLabel)
    const keyring = Keyring.fromSecrets(config.secret, config.acceptedSecrets)
    const heartbeatInterval = options.heartbeatInterval ?? config.heartbeatInterval
    const deadThreshold = options.deadThreshold ?? config.deadThreshold
    const clock = yield* Effect.clock
    const runtime = yield* Effect.runtime<never>()
    const run = Runtime.runFork(runtime)
    const members = new LaneMembers(
      context,
      clock,
      Duration.toMillis(deadThreshold),
      Duration.toMillis(options.forgetAfter),
      options.maxMembers
    )
    const receiver = new LaneReceiver(context, members, yield* Effect.makeLatch(false))

    yield* Effect.logInfo("PostgreSQL lane starting").pipe(
      Effect.annotateLogs({
        channel,
        key_id: keyring === "open" ? "(open)" : keyring.primary.id,
        check_interval_ms: Duration.toMillis(options.checkInterval),
        heartbeat_ms: Duration.toMillis(heartbeatInterval),
        dead_threshold_ms: Duration.toMillis(deadThreshold)
      })
    )
    if (keyring === "open") {
      yield* Effect.logWarning(
        "PostgreSQL lane in open mode: no secret, so any client of the database can NOTIFY hints onto the lane"
      )
    }

    let lastStatus: LaneStatus = "starting"
    let downSince = 0
    let sentSinceTick = false
    let connection: PgConnection.PgLaneShape | undefined
    const heartbeat = Frame.encode(Frame.heartbeat(config.serverId))
    // Not while frames wait: the notification that carries them says we are alive just as well, and a
    // heartbeat behind a large batch would only find the buffer full.
    const beat = () => {
      if (connection !== undefined && connection.pending() === 0 && connection.offer(heartbeat)) {
        sentSinceTick = true
      }
    }

    const made = yield* Effect.either(
      driver.make(
        {
          url: options.url,
          channel,
          serverId: config.serverId,
          keyring,
          checkInterval: options.checkInterval,
          probeTimeout: options.probeTimeout,
          connectTimeout: options.connectTimeout,
          maxBufferedFrames: options.maxBufferedFrames,
          maxBufferedBytes: options.maxBufferedBytes,
          maxBufferedAge: options.maxBufferedAge,
          ...(options.reconnect === undefined ? {} : { reconnect: options.reconnect })
        },
        {
          onFrames: (from, frames, epoch) => receiver.receive(from, frames, epoch),
          onStateChange: (state) => {
            if (state.status === lastStatus) return
            if (state.status === "down" && lastStatus === "up") downSince = clock.unsafeCurrentTimeMillis()
            lastStatus = state.status
            context.events.emit({
              _tag: "LaneStatus",
              status: state.status,
              detail: state.error === undefined ? null : state.error.message
            })
            members.status(state.status)
            // Tell the others at once that we are here (again).
            if (state.status === "up") beat()
          },
          onCatchUp: () => {
            const since = downSince
            run(
              Effect.gen(function* () {
                const reconnects = connection === undefined ? 1 : (yield* connection.stats).reconnects
                const event: CatchUp = { channel, downSince: since, reconnects }
                yield* Effect.logInfo("PostgreSQL lane back: the host catches up").pipe(
                  Effect.annotateLogs({ down_since: new Date(event.downSince).toISOString() })
                )
                yield* PubSub.publish(catchUps, event)
                if (options.onCatchUp !== undefined) yield* options.onCatchUp(event)
              }).pipe(
                Effect.catchAllCause((cause) =>
                  Effect.logError("the host's PostgreSQL catch-up failed", cause)
                ),
                Effect.annotateLogs({ module: "Postgres", channel })
              )
            )
          }
        }
      )
    )
    if (Either.isLeft(made)) {
      yield* Effect.logError(`PostgreSQL lane cannot start: ${made.left.message}`)
      return brokenLane(channel, made.left.message)
    }
    const pg = made.right
    connection = pg

    // The first attempt's outcome: a lane that does not come up says why, once, as an error.
    yield* pg.started.pipe(
      Effect.catchAll((error) =>
        Effect.logError(`PostgreSQL lane did not come up: ${error.message}`).pipe(
          Effect.annotateLogs({ reason: error.reason, likely_cause: likelyCause(error.reason) })
        )
      ),
      Effect.forkScoped
    )
    const annotations = { module: "Postgres", channel }
    yield* loop("Postgres.apply", receiver.drain, {
      before: receiver.ready,
      annotations
    })
    // A quiet lane still says it is alive; any notification sent within the period already did.
    yield* loop(
      "Postgres.heartbeat",
      Effect.sync(() => {
        if (!sentSinceTick && lastStatus === "up") beat()
        sentSinceTick = false
      }),
      { sleep: heartbeatInterval, annotations }
    )
    // Often enough that a member turns dead close to the threshold, never busier than 50 times a second.
    const sweepEvery = Duration.clamp(Duration.unsafeDivide(heartbeatInterval, 2), {
      minimum: Duration.millis(20),
      maximum: Duration.seconds(1)
    })
    yield* loop("Postgres.members", members.sweep, { sleep: sweepEvery, annotations })

    const status = Effect.map(pg.state, (state) => state.status)
    const lane: LaneShape = {
      kind: "pg",
      offer: (bytes) => {
        sentSinceTick = true
        return pg.offer(bytes)
      },
      status,
      statusChanges: pg.changes.pipe(
        Stream.map((state) => state.status),
        Stream.changes
      ),
      members: members.list,
      stats: Effect.zipWith(pg.stats, members.list, (s, list): MeshStats.LaneStats => {
        const refused: Record<string, number> = { ...s.refused }
        refused.invalid_frame = receiver.invalidFrames
        refused.handshake_frame = receiver.handshakeFrames
        refused.unknown_frame = receiver.unknownFrames
        refused.overloaded = receiver.overloaded
        return {
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
          refused,
          dropped: sumOf(s.dropped),
          buffered: s.bufferedFrames,
          reconnects: s.reconnects,
          queue_usage: s.queueUsage ?? null,
          members_alive: members.alive,
          members: list.map((member) => ({
            server_id: member.serverId,
            alive: member.alive,
            last_seen_ms_ago: member.lastSeenMsAgo,
            epoch: member.epoch
          }))
        }
      })
    }
    return lane
  }).pipe(Effect.annotateLogs({ module: "Postgres" }))

// ---------------------------------------------------------------------------------------------
// the host's side
// ---------------------------------------------------------------------------------------------

/**
 * What the host reads from the lane beside the mesh: the catch-ups, one per re-established connection.
 *
 * @since 0.1.0
 * @category models
 */
export interface PostgresLaneShape {
  /** Every catch-up from the moment of subscribing (a subscriber 64 behind misses the oldest). */
  readonly catchUps: Stream.Stream<CatchUp>
}

/**
 * The lane's host-facing side, provided by {@link layer} beside the mesh's lane factory (compose with
 * `Layer.provideMerge` to keep it in the host's context).
 *
 * @since 0.1.0
 * @category tags
 */
export class PostgresLane extends Context.Tag("queen-mesh/Postgres")<PostgresLane, PostgresLaneShape>() {}

/** The connection module, loaded on first use: `pg` is an optional peer dependency. */
const loadDriver: Effect.Effect<typeof PgConnection, PostgresError> = Effect.tryPromise({
  try: () => import("./internal/pgConnection.js"),
  catch: (cause) =>
    new PostgresError({
      reason: "MissingDriver",
      detail: `the PostgreSQL lane needs the pg package (npm install pg): ${cause instanceof Error ? cause.message : String(cause)}`,
      cause
    })
})

/**
 * The PostgreSQL lane for the mesh: provide it beside the host services, e.g.
 * `Mesh.layerTcp().pipe(Layer.provideMerge(Postgres.layer({ url })))`. Fails only on options it cannot
 * use or a missing `pg` package; a database that cannot be reached leaves the lane `down` and retrying.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: PostgresOptions): Layer.Layer<LaneFactory | PostgresLane, PostgresError> =>
  Layer.scopedContext(
    Effect.gen(function* () {
      const resolved = yield* resolve(options)
      const driver = yield* loadDriver
      const catchUps = yield* Effect.acquireRelease(PubSub.sliding<CatchUp>(64), PubSub.shutdown)
      const factory: LaneFactoryShape = {
        kind: "pg",
        make: (context) => makeLane(driver, resolved, catchUps, context)
      }
      return Context.make(LaneFactory, factory).pipe(
        Context.add(PostgresLane, { catchUps: Stream.fromPubSub(catchUps) })
      )
    })
  )

/**
 * `QUEEN_MESH_PG_URL` (a connection string, kept redacted) and `QUEEN_MESH_PG_CHANNEL` (default: from
 * the cluster label, see {@link channelFor}). A malformed value fails with a `ConfigError` naming the
 * variable, never repeating the connection string.
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<{
  readonly url: Redacted.Redacted<string>
  readonly channel: Option.Option<string>
}> = Config.all({
  url: Config.redacted("QUEEN_MESH_PG_URL").pipe(
    Config.mapOrFail((url): Either.Either<Redacted.Redacted<string>, ConfigError.ConfigError> => {
      const bad = urlProblem(Redacted.value(url))
      return bad === undefined
        ? Either.right(url)
        : Either.left(ConfigError.InvalidData(["QUEEN_MESH_PG_URL"], `QUEEN_MESH_PG_URL: ${bad}`))
    }),
    Config.withDescription("connection string of the PostgreSQL lane; unset, there is no lane")
  ),
  channel: Config.option(Config.string("QUEEN_MESH_PG_CHANNEL")).pipe(
    Config.mapOrFail((channel): Either.Either<Option.Option<string>, ConfigError.ConfigError> => {
      if (Option.isNone(channel)) return Either.right(channel)
      const bad = channelProblem(channel.value)
      return bad === undefined
        ? Either.right(channel)
        : Either.left(ConfigError.InvalidData(["QUEEN_MESH_PG_CHANNEL"], `QUEEN_MESH_PG_CHANNEL: ${bad}`))
    }),
    Config.withDescription("channel of the PostgreSQL lane; default queen_mesh or queen_mesh_<label>")
  )
})

/**
 * {@link layer} with the URL and the channel from {@link config} (the current `ConfigProvider`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  options: Omit<PostgresOptions, "url" | "channel"> = {}
): Layer.Layer<LaneFactory | PostgresLane, PostgresError | ConfigError.ConfigError> =>
  Layer.unwrapEffect(
    Effect.map(config, (settings) =>
      layer({
        ...options,
        url: settings.url,
        ...(Option.isSome(settings.channel) ? { channel: settings.channel.value } : {})
      })
    )
  )

/**
 * {@link layerConfig} when `QUEEN_MESH_PG_URL` is set and not empty, and no lane otherwise: for a host
 * whose replicas run with the lane or without it by configuration alone. Without a lane, `PostgresLane`
 * is still provided and its `catchUps` never emit.
 *
 * @example
 * ```ts
 * import { ConfigProvider, Effect, Layer } from "effect"
 * import { Mesh, MeshConfig } from "queen-mesh"
 * import * as Postgres from "queen-mesh/Postgres"
 *
 * // QUEEN_MESH_PG_URL is not set: the mesh runs without a lane (and, with no peers, is inactive).
 * const MeshLive = Mesh.layerTcp().pipe(
 *   Layer.provideMerge(Postgres.layerConfigIfSet()),
 *   Layer.provide(MeshConfig.layer({ serverId: "queen-a" })),
 *   Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map())))
 * )
 *
 * const program = Effect.gen(function* () {
 *   const mesh = yield* Mesh.Mesh
 *   const stats = yield* mesh.stats
 *   console.log(stats.enabled) // false
 * })
 *
 * Effect.runPromise(program.pipe(Effect.provide(MeshLive), Effect.scoped))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfigIfSet = (
  options: Omit<PostgresOptions, "url" | "channel"> = {}
): Layer.Layer<PostgresLane, PostgresError | ConfigError.ConfigError> =>
  Layer.unwrapEffect(
    Effect.map(Config.option(Config.string("QUEEN_MESH_PG_URL")), (url) =>
      Option.isSome(url) && url.value.trim() !== ""
        ? layerConfig(options)
        : Layer.succeed(PostgresLane, { catchUps: Stream.never })
    )
  )
