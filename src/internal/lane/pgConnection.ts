/**
 * The PostgreSQL lane's connection: the mesh frames carried over LISTEN/NOTIFY, beside the TCP mesh, on
 * one dedicated `pg.Client` per node. It LISTENs on the cluster's channel and sends each tick's frames
 * as `pg_notify` in autocommit, outside any host transaction (a notification is delivered on commit).
 * Envelopes, MACs and replay checks live in `pgEnvelope`; this module owns the connection's life.
 *
 * Liveness is ours, never the socket's (a LISTEN connection can die silently): on connect, and every
 * `checkInterval` after, `pg_listening_channels()` must name the channel and a probe notification sent
 * to the channel must come back within `probeTimeout` (extended while the notifications queued ahead of
 * it are still arriving: a busy connection is not a deaf one). A connection that fails either is closed and
 * re-established, and after every re-established connection the host is told to catch up
 * (`onCatchUp`), since notifications sent while we were away are lost for good. The probe is a fresh
 * random nonce sent with `pg_notify` on the lane's own connection, so it proves the whole round trip
 * (a pooler in transaction mode LISTENs on one server connection and notifies from another, and the
 * nonce never comes back); it never reaches `onFrames`, and other nodes' probes are counted and ignored.
 *
 * Start-up never fails for connection reasons: `make` fails only on invalid options, then keeps
 * (re)connecting in the background, reporting `down` with the reason. The first attempt's outcome is a
 * typed error on `started`, so a host sees at once why the lane is deaf (a standby, a pooler in
 * transaction mode) instead of it coming up silently deaf; `awaitUp` waits for the lane to be up.
 *
 * The send buffer (`sendBuffer`, bounded in frames and bytes as high-water marks): what waits while
 * the connection is down is sent after the reconnect, unless it waited longer than `maxBufferedAge`.
 * Unlike the TCP mesh, which discards on reconnect, peers on this lane did not restart: they missed
 * exactly our hints, which are idempotent and ordered (a later flag frame still wins), so late is better
 * than the peers' backoff, up to an age at which the reconcile loop has healed them anyway.
 *
 * The `pg` module is imported here only, and this module only by the optional PostgreSQL entry point.
 *
 * @internal
 */

import { randomBytes } from "node:crypto"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import type * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import * as Result from "effect/Result"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import pg from "pg"
import { loop } from "../loop.js"
import * as Stall from "../stall.js"
import * as Names from "../wire/names.js"
import { LENGTH_PREFIX_BYTES, MAX_FRAME_LENGTH } from "../wire/payloads.js"
import * as Envelope from "./pgEnvelope.js"
import * as Refusals from "./refusals.js"
import { SendBuffer } from "./sendBuffer.js"
import { trace } from "./trace.js"

// ---------------------------------------------------------------------------------------------
// errors, options, state, stats
// ---------------------------------------------------------------------------------------------

/**
 * Why the lane is not up: bad options (`make` fails), a connection that could not be made, LISTEN or
 * pg_notify refused, a server that is read-only (a standby), a connection that is deaf (the probe did not
 * come back) or no longer listening, or one that was lost or failed a send or a check.
 */
export type PgLaneErrorReason =
  | "InvalidOptions"
  | "Connect"
  | "Listen"
  | "ReadOnly"
  | "Deaf"
  | "NotListening"
  | "Lost"
  | "Send"
  | "Check"

export class PgLaneError extends Data.TaggedError("PgLaneError")<{
  readonly reason: PgLaneErrorReason
  readonly detail: string
  readonly cause?: unknown
}> {
  override get message(): string {
    return this.detail
  }
}

export interface PgLaneOptions {
  /** A connection string. */
  readonly url: string
  /** The cluster's channel: 1 to 63 bytes, used as is (LISTEN quotes it). */
  readonly channel: string
  readonly serverId: string
  /** Keys, or `"open"`: no MAC (the host warns at start). */
  readonly keyring: Envelope.Auth
  readonly checkInterval?: Duration.Input
  readonly probeTimeout?: Duration.Input
  readonly connectTimeout?: Duration.Input
  /** The pause between connection attempts; reset once a connection came up. Ending it stops retrying. */
  readonly reconnect?: Schedule.Schedule<unknown, PgLaneError>
  readonly maxBufferedFrames?: number
  readonly maxBufferedBytes?: number
  /** Frames that waited longer than this for a connection are discarded at the reconnect. */
  readonly maxBufferedAge?: Duration.Input
  /** The most one notification carries, in bytes: PostgreSQL refuses 8000 or more. */
  readonly payloadLimit?: number
}

/**
 * How many `probeTimeout` windows a check waits while notifications keep arriving: a backlog (a peer's
 * 16 MiB batch read on a loaded machine) delays the answer without making the connection deaf, and a
 * connection that only ever hears others' notifications is still judged, after this many.
 */
export const BUSY_WINDOWS = 10

export const defaults = {
  checkInterval: Duration.seconds(5),
  probeTimeout: Duration.seconds(3),
  connectTimeout: Duration.seconds(10),
  reconnect: Schedule.min([Schedule.exponential("250 millis"), Schedule.spaced("5 seconds")]),
  maxBufferedFrames: 1024,
  maxBufferedBytes: 4 * 1024 * 1024,
  maxBufferedAge: Duration.seconds(30),
  payloadLimit: Envelope.DEFAULT_PAYLOAD_LIMIT
} as const

/** What the host hears from the lane. Every handler is called synchronously; a throw is counted. */
export interface PgLaneHandlers {
  /** The frames of one accepted notification, in order, with its sender's boot epoch. */
  readonly onFrames: (from: string, frames: ReadonlyArray<Envelope.ReceivedFrame>, epoch: string) => void
  readonly onRefused?: (reason: PgLaneRefusal) => void
  readonly onStateChange?: (state: PgLaneState) => void
  /** After every re-established connection (not the first): notifications may have been missed. */
  readonly onCatchUp?: () => void
}

export type PgLaneStatus = "starting" | "up" | "down"

export interface PgLaneState {
  readonly status: PgLaneStatus
  /** Why the lane is down (or last went down). */
  readonly error: PgLaneError | undefined
}

/** The refusals counted as such; our own notifications are counted apart. */
export type PgLaneRefusal = Refusals.EnvelopeRefusal

/**
 * Counters since `make`. Frames: offered = sent + every `dropped` + buffered (a split batch counts once).
 * `itemsDropped`: items of batches that went out without them, each too large for any notification.
 */
export interface PgLaneStats {
  readonly status: PgLaneStatus
  readonly lastError: string | undefined
  readonly epoch: string
  readonly notificationsSent: number
  readonly notificationsReceived: number
  readonly framesOffered: number
  readonly framesSent: number
  readonly framesReceived: number
  readonly bytesSent: number
  readonly bytesReceived: number
  readonly refused: { readonly [R in PgLaneRefusal]: number }
  readonly own: number
  readonly probesSent: number
  readonly probesReceived: number
  /** Other nodes' probes seen on the channel. */
  readonly probesForeign: number
  readonly bufferedFrames: number
  readonly bufferedBytes: number
  readonly dropped: {
    readonly bufferFull: number
    readonly tooLarge: number
    readonly invalid: number
    readonly stale: number
    readonly sendFailed: number
    readonly closed: number
  }
  readonly itemsDropped: number
  /** Connections that came up; `reconnects` of them after the first. */
  readonly connects: number
  readonly reconnects: number
  /** Connection attempts that never came up. */
  readonly failedAttempts: number
  readonly checksFailed: number
  /** Throws from the host's handlers. */
  readonly handlerErrors: number
  /** `pg_notification_queue_usage()` at the last check: the server's queue, 0 to 1. */
  readonly queueUsage: number | undefined
}

export interface PgLaneShape {
  readonly serverId: string
  readonly channel: string
  readonly epoch: string
  /** Hands one encoded mesh frame to the lane. Never blocks; false when it was dropped (and counted). */
  readonly offer: (frame: Uint8Array) => boolean
  /** Frames offered and not yet sent (waiting, or being sent now): synchronous, for the heartbeat. */
  readonly pending: () => number
  readonly state: Effect.Effect<PgLaneState>
  /** The current state, then every change. */
  readonly changes: Stream.Stream<PgLaneState>
  /** Completes once the lane is up (at once when it is). */
  readonly awaitUp: Effect.Effect<void>
  /** The outcome of the first connection attempt: why the lane did not come up at start, if it did not. */
  readonly started: Effect.Effect<void, PgLaneError>
  readonly stats: Effect.Effect<PgLaneStats>
}

// ---------------------------------------------------------------------------------------------
// one connection
// ---------------------------------------------------------------------------------------------

const sqlStateOf = (u: unknown): string | undefined =>
  typeof u === "object" && u !== null && "code" in u && typeof u.code === "string" ? u.code : undefined

const describe = (u: unknown): string => (u instanceof Error ? u.message : String(u))

/** SQLSTATE 25006 `read_only_sql_transaction`: also what a standby answers LISTEN and NOTIFY with. */
const READ_ONLY = "25006"

const quoteIdent = (name: string): string => `"${name.replace(/"/g, '""')}"`

/** The database's time now, in ms since the epoch, as a float8 (which `pg` reads as a number). */
const DATABASE_NOW = "(extract(epoch from clock_timestamp()) * 1000)::float8"

const millis = (duration: Duration.Duration): string => `${Duration.toMillis(duration)} ms`

type Rows = ReadonlyArray<Record<string, unknown>>

/**
 * One `pg.Client` and the deferred its loss completes: the session ends when `lost` does, whoever found
 * the problem (the client's events, a send, a check).
 */
class Connection {
  constructor(
    readonly client: pg.Client,
    readonly lost: Deferred.Deferred<never, PgLaneError>
  ) {}

  fail(error: PgLaneError): Effect.Effect<void> {
    return Effect.asVoid(Deferred.fail(this.lost, error))
  }

  /** One statement; a read-only refusal is named as such, anything else as `reason`, `what` failed. */
  query(
    sql: string,
    params: ReadonlyArray<unknown>,
    reason: "Listen" | "Send" | "Check",
    what: string
  ): Effect.Effect<Rows, PgLaneError> {
    return Effect.tryPromise({
      try: () => this.client.query<Record<string, unknown>>(sql, [...params]),
      catch: (cause) => queryError(cause, reason, what)
    }).pipe(Effect.map((result) => result.rows))
  }

  /** Ends the session with `error`, from outside any fiber. */
  failUnsafe(error: PgLaneError): void {
    Deferred.doneUnsafe(this.lost, Exit.fail(error))
  }
}

/** A failed statement: a read-only refusal is named as such, anything else as `reason`, `what` failed. */
const queryError = (cause: unknown, reason: "Listen" | "Send" | "Check", what: string): PgLaneError =>
  sqlStateOf(cause) === READ_ONLY
    ? new PgLaneError({
        reason: "ReadOnly",
        detail: `the server is read-only (a standby?): pg_notify is refused (${describe(cause)})`,
        cause
      })
    : new PgLaneError({ reason, detail: `${what} failed: ${describe(cause)}`, cause })

const ignore = () => {}

/** Ends a client politely, then for sure: a dead socket must not keep the process or a backend alive. */
const close = (client: pg.Client): Promise<void> => {
  client.removeAllListeners("notification")
  client.removeAllListeners("end")
  client.removeAllListeners("error")
  client.on("error", ignore)
  return new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      client.connection.stream.destroy()
      resolve()
    }, 2000)
    timer.unref()
    client.end().then(
      () => {
        clearTimeout(timer)
        resolve()
      },
      () => {
        clearTimeout(timer)
        client.connection.stream.destroy()
        resolve()
      }
    )
  })
}

// ---------------------------------------------------------------------------------------------
// the lane
// ---------------------------------------------------------------------------------------------

interface Resolved {
  readonly url: string
  readonly channel: string
  readonly serverId: string
  readonly auth: Envelope.Auth
  readonly checkInterval: Duration.Duration
  readonly probeTimeout: Duration.Duration
  readonly connectTimeout: Duration.Duration
  readonly reconnect: Schedule.Schedule<unknown, PgLaneError>
  readonly maxBufferedFrames: number
  readonly maxBufferedBytes: number
  readonly maxBufferedAge: Duration.Duration
  readonly payloadLimit: number
  readonly applicationName: string
}

/** `application_name` is at most 63 bytes of printable ASCII; the server id is there to find the backend. */
const applicationNameOf = (serverId: string): string =>
  `queen-mesh lane ${serverId}`.replace(/[^\x20-\x7e]/g, "?").slice(0, 63)

const invalid = (detail: string) => new PgLaneError({ reason: "InvalidOptions", detail })

const resolve = (options: PgLaneOptions): Result.Result<Resolved, PgLaneError> => {
  if (typeof options.url !== "string" || options.url === "") return Result.fail(invalid("url is empty"))
  if (Names.serverId(options.serverId) === undefined) {
    return Result.fail(invalid(Names.describeName("server_id", options.serverId)))
  }
  const channel = options.channel
  if (channel === "" || !Names.fitsBytes(channel, 63) || channel.includes("\u0000")) {
    return Result.fail(invalid("channel must be 1 to 63 bytes, without NUL"))
  }
  const authProblem = Envelope.checkAuth(options.keyring)
  if (authProblem !== undefined) return Result.fail(invalid(authProblem))
  const maxFrames = options.maxBufferedFrames ?? defaults.maxBufferedFrames
  const maxBytes = options.maxBufferedBytes ?? defaults.maxBufferedBytes
  if (!Number.isSafeInteger(maxFrames) || maxFrames < 1 || !Number.isSafeInteger(maxBytes) || maxBytes < 1) {
    return Result.fail(invalid("maxBufferedFrames and maxBufferedBytes must be positive integers"))
  }
  const payloadLimit = options.payloadLimit ?? defaults.payloadLimit
  // The epoch is only needed for the overhead here; the real sender is made with the real epoch.
  const overhead = new Envelope.Sender(options.serverId, "0".repeat(16), channel, options.keyring).overhead
  if (!Number.isSafeInteger(payloadLimit) || payloadLimit > Envelope.DEFAULT_PAYLOAD_LIMIT) {
    return Result.fail(
      invalid(`payloadLimit must be an integer of at most ${Envelope.DEFAULT_PAYLOAD_LIMIT}`)
    )
  }
  if (payloadLimit - overhead < 512) {
    return Result.fail(
      invalid(`payloadLimit ${payloadLimit} leaves no room after the ${overhead}-byte envelope`)
    )
  }
  return Result.succeed({
    url: options.url,
    channel,
    serverId: options.serverId,
    auth: options.keyring,
    checkInterval: Duration.fromInputUnsafe(options.checkInterval ?? defaults.checkInterval),
    probeTimeout: Duration.fromInputUnsafe(options.probeTimeout ?? defaults.probeTimeout),
    connectTimeout: Duration.fromInputUnsafe(options.connectTimeout ?? defaults.connectTimeout),
    reconnect: options.reconnect ?? defaults.reconnect,
    maxBufferedFrames: maxFrames,
    maxBufferedBytes: maxBytes,
    maxBufferedAge: Duration.fromInputUnsafe(options.maxBufferedAge ?? defaults.maxBufferedAge),
    payloadLimit,
    applicationName: applicationNameOf(options.serverId)
  })
}

const emptyRefused = (): Record<PgLaneRefusal, number> => Refusals.zeroes(Refusals.EnvelopeRefusal.literals)

/** How often, at most, refused notifications are logged at warning (with the counts since the last). */
const REFUSAL_WARNING_INTERVAL_MS = 60_000

/**
 * The lane's long-lived state and its methods: the send buffer, the sender, the replay state, the
 * counters, the pending probe, and whether it has been up before. Only the lane's own fibers and the
 * current client's 'notification' handler change it.
 */
class Lane {
  readonly buffer: SendBuffer
  readonly sender: Envelope.Sender
  readonly replay = new Envelope.ReplayState()
  readonly self: Envelope.Self
  /** How our own notifications' bodies begin (see `Envelope.ownPrefix`). */
  readonly ownPrefix: string
  /** The lone notification's statement up to its payload (see {@link notifyPrefix}). */
  readonly notify: string
  readonly annotations: Readonly<Record<string, unknown>>
  /**
   * The current connection as `open` needs it: our backend (-1 before the first connection) and the
   * database time at which it began to LISTEN.
   */
  readonly session = { processId: 0, ownPid: -1, listenedAt: Number.POSITIVE_INFINITY }
  /** Milliseconds to add to `Date.now()` for the database's time, as last measured. */
  private clockOffset = 0
  /** Refusals not yet reported by a warning, and when the last warning was (monotonic ms). */
  private refusalsUnreported = 0
  private lastRefusalWarningAt = Number.NEGATIVE_INFINITY

  closed = false
  everUp = false
  /** The current session came up (the reconnect schedule restarts after it). */
  sessionUp = false
  pendingProbe: { readonly nonce: string; readonly arrived: Deferred.Deferred<void> } | undefined = undefined
  /**
   * A check's answer and its probe come back behind every notification queued for this connection
   * before them: while notifications keep arriving the connection is busy, not deaf, and the deadline
   * waits for a window without any, up to {@link BUSY_WINDOWS} windows.
   */
  readonly busy: Stall.Busy = { progress: () => this.notificationsReceived, windows: BUSY_WINDOWS }

  notificationsSent = 0
  notificationsReceived = 0
  framesOffered = 0
  framesSent = 0
  framesReceived = 0
  bytesSent = 0
  bytesReceived = 0
  readonly refused = emptyRefused()
  own = 0
  probesSent = 0
  probesReceived = 0
  probesForeign = 0
  readonly dropped = { bufferFull: 0, tooLarge: 0, invalid: 0, stale: 0, sendFailed: 0, closed: 0 }
  itemsDropped = 0
  connects = 0
  reconnects = 0
  failedAttempts = 0
  checksFailed = 0
  handlerErrors = 0
  queueUsage: number | undefined = undefined
  lastError: string | undefined = undefined

  constructor(
    readonly options: Resolved,
    readonly handlers: PgLaneHandlers,
    readonly epoch: string,
    readonly state: SubscriptionRef.SubscriptionRef<PgLaneState>,
    readonly first: Deferred.Deferred<void, PgLaneError>,
    private readonly services: Context.Context<never>
  ) {
    this.buffer = new SendBuffer(options.maxBufferedFrames, options.maxBufferedBytes)
    this.sender = new Envelope.Sender(options.serverId, epoch, options.channel, options.auth)
    this.self = { serverId: options.serverId, epoch }
    this.ownPrefix = Envelope.ownPrefix(this.self)
    this.notify = notifyPrefix(options.channel)
    this.annotations = { module: "PgLane", server_id: options.serverId, channel: options.channel }
  }

  // --- the hot path -------------------------------------------------------------------------

  offer(frame: Uint8Array): boolean {
    trace.tracer?.stamp("offered")
    this.framesOffered++
    if (this.closed) {
      this.dropped.closed++
      return false
    }
    if (frame.length <= LENGTH_PREFIX_BYTES) {
      this.dropped.invalid++
      return false
    }
    if (frame.length > LENGTH_PREFIX_BYTES + MAX_FRAME_LENGTH) {
      this.dropped.tooLarge++
      return false
    }
    if (!this.buffer.push(frame, performance.now())) {
      this.dropped.bufferFull++
      return false
    }
    return true
  }

  // --- receiving ----------------------------------------------------------------------------

  /** The client's 'notification' handler: nothing a notification carries may throw out of it. */
  readonly onNotification = (message: pg.Notification): void => {
    trace.tracer?.stamp("notified")
    try {
      this.receive(message.channel, message.payload, message.processId)
    } catch (cause) {
      this.handlerErrors++
      this.log(Effect.logWarning("a notification could not be handled", cause))
    }
  }

  private receive(channel: string, payload: string | undefined, processId: number): void {
    if (channel !== this.options.channel) return
    this.notificationsReceived++
    if (payload === undefined) {
      this.refuse("malformed")
      return
    }
    // Our own notification come back, as each does: counted, nothing else to do. Only our code sends
    // from our backend, and all it sends is ASCII, so its length is its size.
    if (processId === this.session.ownPid && this.sender.isEcho(payload)) {
      trace.tracer?.stamp("echoed")
      this.bytesReceived += payload.length
      this.own++
      return
    }
    this.bytesReceived += Buffer.byteLength(payload, "utf8")
    const nonce = Envelope.probeNonce(payload)
    if (nonce !== undefined) {
      const pending = this.pendingProbe
      if (pending !== undefined && pending.nonce === nonce) {
        this.probesReceived++
        Deferred.doneUnsafe(pending.arrived, Exit.void)
      } else this.probesForeign++
      return
    }
    const session = this.session
    session.processId = processId
    const opened = Envelope.open(
      payload,
      channel,
      this.options.auth,
      this.self,
      this.replay,
      session,
      this.ownPrefix
    )
    if (Result.isFailure(opened)) {
      const reason = opened.failure
      if (reason === "own") {
        trace.tracer?.stamp("echoed")
        this.own++
        return
      }
      this.refuse(reason)
      return
    }
    const { from, frames, epoch } = opened.success
    this.framesReceived += frames.length
    if (frames.length > 0) this.call(() => this.handlers.onFrames(from, frames, epoch))
  }

  private refuse(reason: PgLaneRefusal): void {
    this.refused[reason]++
    this.warnRefused(reason)
    this.call(() => this.handlers.onRefused?.(reason))
  }

  /**
   * A refused notification is worth a warning, at most once a minute with the count since the last one:
   * a flood of forgeries costs one line a minute. Our own server id on another boot is named as such (a
   * replay of our previous boot, or another process configured with our id).
   */
  private warnRefused(reason: PgLaneRefusal): void {
    this.refusalsUnreported++
    const now = performance.now()
    if (now - this.lastRefusalWarningAt < REFUSAL_WARNING_INTERVAL_MS) return
    this.lastRefusalWarningAt = now
    const since = this.refusalsUnreported
    this.refusalsUnreported = 0
    const refused = Object.values(this.refused).reduce((a, b) => a + b, 0)
    this.log(
      Effect.logWarning(
        reason === "own_server_id"
          ? "PostgreSQL lane: a notification carries this node's server id from another boot (a replay of a previous boot, or another node with the same id); refused"
          : "PostgreSQL lane: notifications refused"
      ).pipe(Effect.annotateLogs({ reason, refused, since_last_warning: since }))
    )
  }

  /** Calls a host handler; a throw is counted and logged, never propagated into the lane. */
  call(f: () => void): void {
    try {
      f()
    } catch (cause) {
      this.handlerErrors++
      this.log(Effect.logWarning("a PostgreSQL lane handler threw", cause))
    }
  }

  private log(effect: Effect.Effect<void>): void {
    Effect.runForkWith(this.services)(Effect.annotateLogs(effect, this.annotations))
  }

  // --- sending ------------------------------------------------------------------------------

  /**
   * Sends what waits on `conn` and, when that is done, what came meanwhile: one statement in flight at a
   * time, so everything offered while one travels goes out together in the next. Hand-written on
   * promises rather than as an Effect loop because it is the wake's hot path: the fiber hops of the loop
   * cost about a sixth of a lane wake on a quiet node (bench/lane.ts). A failure ends the connection and
   * counts the frames lost. Returns how to stop it.
   */
  pump(conn: Connection): () => void {
    let busy = false
    let stopped = false
    const next = (): void => {
      if (busy || stopped) return
      const frames = this.buffer.take()
      const take = this.buffer.takes
      if (frames.length === 0) {
        this.buffer.release(take)
        return
      }
      trace.tracer?.stamp("tick")
      let sealed: Envelope.Sealed
      try {
        sealed = Envelope.seal(this.sender, frames, this.options.payloadLimit)
      } catch (cause) {
        // Total by construction; a defect here must not escape into the tick that called us.
        this.buffer.release(take)
        this.dropped.sendFailed += frames.length
        conn.failUnsafe(
          new PgLaneError({ reason: "Send", detail: `sealing failed: ${describe(cause)}`, cause })
        )
        return
      }
      let whole = 0
      for (const d of sealed.dropped) {
        if (d.items > 0) this.itemsDropped += d.items
        else {
          whole++
          if (d.reason === "invalid") this.dropped.invalid++
          else this.dropped.tooLarge++
        }
      }
      const carried = frames.length - whole
      trace.tracer?.stamp("sealed")
      busy = true
      sendPayloads(conn.client, this.options.channel, this.notify, sealed.payloads).then(
        () => {
          trace.tracer?.stamp("acked")
          busy = false
          this.buffer.release(take)
          this.framesSent += carried
          this.notificationsSent += sealed.payloads.length
          for (const payload of sealed.payloads) this.bytesSent += payload.length
          next()
        },
        (cause: unknown) => {
          busy = false
          this.buffer.release(take)
          this.dropped.sendFailed += carried
          conn.failUnsafe(queryError(cause, "Send", "pg_notify"))
        }
      )
    }
    this.buffer.attach(next)
    next()
    return () => {
      stopped = true
      this.buffer.attach(undefined)
    }
  }

  // --- liveness -----------------------------------------------------------------------------

  /** pg_notify a fresh nonce to the channel and wait for it to come back on this connection. */
  probe(conn: Connection): Effect.Effect<void, PgLaneError> {
    const timeout = this.options.probeTimeout
    return Effect.gen({ self: this }, function* () {
      const nonce = randomBytes(16).toString("hex")
      const arrived = yield* Deferred.make<void>()
      this.pendingProbe = { nonce, arrived }
      this.probesSent++
      yield* conn
        .query(
          "SELECT pg_notify($1, $2)",
          [this.options.channel, Envelope.probe(nonce)],
          "Check",
          "the probe's pg_notify"
        )
        .pipe(
          Stall.within(
            timeout,
            () =>
              new PgLaneError({
                reason: "Deaf",
                detail: `the server did not answer pg_notify within ${millis(timeout)}`
              }),
            this.busy
          )
        )
      yield* Deferred.await(arrived).pipe(
        Stall.within(
          timeout,
          () =>
            new PgLaneError({
              reason: "Deaf",
              detail:
                `no notification came back within ${millis(timeout)}: a pooler in transaction mode ` +
                "(e.g. PgBouncer), or a channel the server rewrites"
            }),
          this.busy
        )
      )
    }).pipe(
      Effect.ensuring(
        Effect.sync(() => {
          this.pendingProbe = undefined
        })
      )
    )
  }

  /** The connection still LISTENs on the channel (and the queue usage, while we ask), then a probe. */
  check(conn: Connection): Effect.Effect<void, PgLaneError> {
    const timeout = this.options.probeTimeout
    return Effect.gen({ self: this }, function* () {
      const sentAt = Date.now()
      const rows = yield* conn
        .query(
          `SELECT array(SELECT pg_listening_channels()) AS channels, pg_notification_queue_usage() AS usage, ${DATABASE_NOW} AS now`,
          [],
          "Check",
          "the listening check"
        )
        .pipe(
          Stall.within(
            timeout,
            () =>
              new PgLaneError({
                reason: "Check",
                detail: `the server did not answer a check within ${millis(timeout)}`
              }),
            this.busy
          )
        )
      const row = rows[0]
      const usage = row?.usage
      if (typeof usage === "number") this.queueUsage = usage
      this.measured(row?.now, sentAt, Date.now())
      const channels = row?.channels
      if (!Array.isArray(channels) || !channels.includes(this.options.channel)) {
        return yield* new PgLaneError({
          reason: "NotListening",
          detail: `the connection no longer listens on ${JSON.stringify(this.options.channel)}`
        })
      }
      yield* this.probe(conn)
    })
  }

  // --- identity and time --------------------------------------------------------------------

  /** The database's clock read at some point between `sentAt` and `answeredAt`: the offset anew. */
  private measured(now: unknown, sentAt: number, answeredAt: number): void {
    if (typeof now !== "number" || !Number.isFinite(now)) return
    this.clockOffset = now - (sentAt + answeredAt) / 2
    if (this.session.ownPid >= 0) this.sender.bind(this.session.ownPid, this.clockOffset)
  }

  /**
   * A new connection: its backend, which its notifications name and by which our own are known, and the
   * database's clock; then the moment it begins to LISTEN, before which nothing it hears was sealed.
   */
  identify(conn: Connection): Effect.Effect<void, PgLaneError> {
    return Effect.gen({ self: this }, function* () {
      const sentAt = Date.now()
      const rows = yield* conn.query(
        `SELECT pg_backend_pid() AS pid, ${DATABASE_NOW} AS now`,
        [],
        "Listen",
        "reading the backend's pid"
      )
      const answeredAt = Date.now()
      const pid = rows[0]?.pid
      if (typeof pid !== "number" || !Number.isSafeInteger(pid) || pid < 0) {
        return yield* new PgLaneError({ reason: "Listen", detail: "pg_backend_pid() did not answer a pid" })
      }
      this.session.ownPid = pid
      this.measured(rows[0]?.now, sentAt, answeredAt)
      this.sender.bind(pid, this.clockOffset)
    })
  }

  /** Marks the moment the connection begins to LISTEN, in the database's time. */
  listening(): void {
    this.session.listenedAt = Date.now() + this.clockOffset
  }

  // --- state --------------------------------------------------------------------------------

  private setState(next: PgLaneState): Effect.Effect<void> {
    return Effect.andThen(
      SubscriptionRef.set(this.state, next),
      Effect.sync(() => this.call(() => this.handlers.onStateChange?.(next)))
    )
  }

  /** The connection listens and its probe came back: up, then the catch-up if it is a reconnect. */
  up(): Effect.Effect<void> {
    return Effect.gen({ self: this }, function* () {
      this.sessionUp = true
      this.connects++
      const cutoff = performance.now() - Duration.toMillis(this.options.maxBufferedAge)
      this.dropped.stale += this.buffer.dropOlderThan(cutoff)
      const reconnect = this.everUp
      this.everUp = true
      yield* this.setState({ status: "up", error: undefined })
      yield* Deferred.succeed(this.first, undefined)
      yield* Effect.logInfo(reconnect ? "PostgreSQL lane up again" : "PostgreSQL lane up")
      if (reconnect) {
        this.reconnects++
        this.call(() => this.handlers.onCatchUp?.())
      }
    })
  }

  down(error: PgLaneError): Effect.Effect<void> {
    return Effect.gen({ self: this }, function* () {
      // Another failed attempt for the reason already reported is no news: it is logged at debug, so a
      // database away for minutes costs one warning, not one per attempt.
      const again = !this.sessionUp && this.lastError === error.message
      if (!this.sessionUp) this.failedAttempts++
      this.lastError = error.message
      yield* this.setState({ status: "down", error })
      yield* Deferred.fail(this.first, error)
      yield* (again ? Effect.logDebug : Effect.logWarning)(`PostgreSQL lane down: ${error.message}`)
    })
  }

  stats(status: PgLaneStatus): PgLaneStats {
    return {
      status,
      lastError: this.lastError,
      epoch: this.epoch,
      notificationsSent: this.notificationsSent,
      notificationsReceived: this.notificationsReceived,
      framesOffered: this.framesOffered,
      framesSent: this.framesSent,
      framesReceived: this.framesReceived,
      bytesSent: this.bytesSent,
      bytesReceived: this.bytesReceived,
      refused: { ...this.refused },
      own: this.own,
      probesSent: this.probesSent,
      probesReceived: this.probesReceived,
      probesForeign: this.probesForeign,
      bufferedFrames: this.buffer.length,
      bufferedBytes: this.buffer.size,
      dropped: { ...this.dropped },
      itemsDropped: this.itemsDropped,
      connects: this.connects,
      reconnects: this.reconnects,
      failedAttempts: this.failedAttempts,
      checksFailed: this.checksFailed,
      handlerErrors: this.handlerErrors,
      queueUsage: this.queueUsage
    }
  }
}

/** At most this many notifications, or about this many bytes, per statement. */
const STATEMENT_NOTIFICATIONS = 64
const STATEMENT_BYTES = 512 * 1024

const BACKSLASH = /\\/g
const QUOTE = /'/g

/**
 * `text` as an escape string constant, `E'...'`: backslashes and quotes doubled, which reads the same
 * whatever `standard_conforming_strings` says. Payloads are ASCII without NUL (see `pgEnvelope`), so
 * nothing else needs escaping.
 */
const quoteLiteral = (text: string): string => {
  let escaped = text
  if (escaped.includes("\\")) escaped = escaped.replace(BACKSLASH, "\\\\")
  if (escaped.includes("'")) escaped = escaped.replace(QUOTE, "''")
  return `E'${escaped}'`
}

/** How the lone notification of a send begins: `NOTIFY "<channel>", ` (the payload follows). */
const notifyPrefix = (channel: string): string => `NOTIFY ${quoteIdent(channel)}, `

/**
 * Sends payloads in order, in autocommit. A lone one, the wake's case, is `NOTIFY "<channel>",
 * E'<payload>'` in the simple protocol: one message and no plan, where the parameterised `pg_notify` is
 * five messages (parse, bind, describe, execute, sync) and a plan, each time (bench/lane.ts measured the
 * difference on the wake's path). Several go as one statement, `pg_notify` over `unnest` of a text
 * array: one round trip and one commit, and PostgreSQL queues a transaction's notifications in the
 * order they were made, which is the array's (a function scan, no reordering).
 */
const sendPayloads = (
  client: pg.Client,
  channel: string,
  notify: string,
  payloads: ReadonlyArray<string>
): Promise<unknown> => {
  if (payloads.length === 1) {
    // The wake's case, without an async function's promise around pg's (nor its throws).
    let sent: Promise<unknown>
    try {
      sent = client.query(notify + quoteLiteral(payloads[0]!))
    } catch (cause) {
      return Promise.reject(cause)
    }
    trace.tracer?.stamp("handed")
    return sent
  }
  return sendSeveral(client, channel, notify, payloads)
}

const sendSeveral = async (
  client: pg.Client,
  channel: string,
  notify: string,
  payloads: ReadonlyArray<string>
): Promise<void> => {
  let at = 0
  while (at < payloads.length) {
    let end = at
    let bytes = 0
    while (end < payloads.length && end - at < STATEMENT_NOTIFICATIONS && bytes < STATEMENT_BYTES) {
      bytes += payloads[end]!.length
      end++
    }
    const sent =
      end - at === 1
        ? client.query(notify + quoteLiteral(payloads[at]!))
        : client.query("SELECT pg_notify($1, p) FROM unnest($2::text[]) AS u(p)", [
            channel,
            payloads.slice(at, end)
          ])
    trace.tracer?.stamp("handed")
    await sent
    at = end
  }
}

// ---------------------------------------------------------------------------------------------
// sessions and the supervisor
// ---------------------------------------------------------------------------------------------

/** Connects; the client is ended with the scope, and its loss completes `lost`. */
const connect = (lane: Lane): Effect.Effect<Connection, PgLaneError, Scope.Scope> =>
  Effect.gen(function* () {
    const lost = yield* Deferred.make<never, PgLaneError>()
    const acquire = Effect.callback<Connection, PgLaneError>((resume) => {
      const client = new pg.Client({
        connectionString: lane.options.url,
        keepAlive: true,
        keepAliveInitialDelayMillis: 10_000,
        application_name: lane.options.applicationName,
        connectionTimeoutMillis: Duration.toMillis(lane.options.connectTimeout)
      })
      const conn = new Connection(client, lost)
      const loseWith = (error: PgLaneError) => Deferred.doneUnsafe(lost, Exit.fail(error))
      client.on("error", (cause) =>
        loseWith(
          new PgLaneError({ reason: "Lost", detail: `the connection failed: ${describe(cause)}`, cause })
        )
      )
      client.on("end", () => loseWith(new PgLaneError({ reason: "Lost", detail: "the connection ended" })))
      client.on("notification", lane.onNotification)
      let abandoned = false
      client.connect().then(
        () => {
          if (abandoned) void close(client)
          else resume(Effect.succeed(conn))
        },
        (cause) => {
          void close(client)
          resume(
            Effect.fail(
              new PgLaneError({ reason: "Connect", detail: `cannot connect: ${describe(cause)}`, cause })
            )
          )
        }
      )
      return Effect.sync(() => {
        abandoned = true
      })
    })
    return yield* Effect.acquireRelease(Effect.interruptible(acquire), (conn) =>
      Effect.promise(() => close(conn.client))
    )
  })

/**
 * The lane's session does not wait for its commits to reach the disk. A notification is delivered at
 * commit, and NOTIFY gives its transaction an id, so with the default every send waited for a WAL
 * flush before any listener heard it; a hint has nothing to make durable (notifications are never
 * written to disk, and a crash loses them whatever the setting). Set by a statement rather than in the
 * startup packet, which a session pooler may refuse.
 */
const NO_WAL_FLUSH = "SET synchronous_commit TO off"

/** One connection from connect to loss: fails with why it ended, never succeeds. */
const session = (lane: Lane): Effect.Effect<never, PgLaneError, Scope.Scope> =>
  Effect.gen(function* () {
    const conn = yield* connect(lane)
    yield* conn.query(NO_WAL_FLUSH, [], "Listen", "setting synchronous_commit")
    yield* lane.identify(conn)
    lane.listening()
    yield* conn.query(`LISTEN ${quoteIdent(lane.options.channel)}`, [], "Listen", "LISTEN")
    yield* lane.check(conn)
    yield* lane.up()
    const annotations = lane.annotations
    const stopSending = lane.pump(conn)
    yield* Effect.addFinalizer(() => Effect.sync(stopSending))
    yield* loop(
      "PgLane.check",
      lane.check(conn).pipe(
        Effect.tapError(() =>
          Effect.sync(() => {
            lane.checksFailed++
          })
        ),
        Effect.catch((error) => conn.fail(error))
      ),
      { before: Effect.sleep(lane.options.checkInterval), annotations: { ...annotations, fiber: "check" } }
    )
    return yield* Deferred.await(conn.lost)
  })

const errorOf = (cause: Cause.Cause<PgLaneError>): PgLaneError =>
  Option.getOrElse(
    Cause.findErrorOption(cause),
    () =>
      new PgLaneError({
        reason: "Lost",
        detail: `the connection's fiber died: ${Cause.pretty(cause)}`,
        cause
      })
  )

/** Sessions one after another, with the reconnect schedule between them, until the scope closes. */
const supervise = (lane: Lane): Effect.Effect<void> =>
  Effect.gen(function* () {
    // The reconnect schedule's step (it sleeps the pause it computes); made anew to start the schedule over.
    let next = yield* Schedule.toStepWithSleep(lane.options.reconnect)
    let retrying = true
    while (retrying) {
      const iteration = Effect.gen(function* () {
        lane.sessionUp = false
        const exit = yield* Effect.exit(Effect.scoped(session(lane)))
        const error = Exit.isFailure(exit)
          ? errorOf(exit.cause)
          : new PgLaneError({ reason: "Lost", detail: "the connection ended" })
        yield* lane.down(error)
        if (lane.sessionUp) next = yield* Schedule.toStepWithSleep(lane.options.reconnect)
        const paused = yield* Effect.result(next(error))
        if (Result.isFailure(paused)) {
          retrying = false
          yield* Effect.logError("PostgreSQL lane: the reconnect schedule ended; the lane stays down")
        }
      })
      yield* iteration.pipe(
        Effect.catchCause((cause) =>
          Effect.logError("PostgreSQL lane supervisor failed; it carries on", cause)
        )
      )
    }
  })

// ---------------------------------------------------------------------------------------------
// constructor
// ---------------------------------------------------------------------------------------------

/**
 * The lane for `options`, connected in the background for the life of the scope. Fails only on invalid
 * options; connection problems show in the state, in `started` and in `stats`.
 */
export const make = (
  options: PgLaneOptions,
  handlers: PgLaneHandlers
): Effect.Effect<PgLaneShape, PgLaneError, Scope.Scope> =>
  Effect.gen(function* () {
    const resolved = yield* Effect.fromResult(resolve(options))
    const boot = yield* Clock.currentTimeMillis
    const random = yield* Random.nextIntBetween(0, 0x10000)
    const epoch = Envelope.makeEpoch(boot, random)
    const state = yield* SubscriptionRef.make<PgLaneState>({ status: "starting", error: undefined })
    const first = yield* Deferred.make<void, PgLaneError>()
    const services = yield* Effect.context<never>()
    const lane = new Lane(resolved, handlers, epoch, state, first, services)
    yield* supervise(lane).pipe(
      Effect.annotateLogs(lane.annotations),
      Effect.interruptible,
      Effect.forkScoped
    )
    // Runs before the supervisor is interrupted (finalizers run in reverse): no frame is taken after, and
    // a caller still waiting for the first attempt hears that there will be none.
    yield* Effect.addFinalizer(() =>
      Effect.andThen(
        Effect.sync(() => {
          lane.closed = true
        }),
        Deferred.fail(
          first,
          new PgLaneError({ reason: "Lost", detail: "the lane was closed before it came up" })
        )
      )
    )
    const current = SubscriptionRef.get(state)
    return {
      serverId: resolved.serverId,
      channel: resolved.channel,
      epoch,
      offer: (frame) => lane.offer(frame),
      pending: () => lane.buffer.length,
      state: current,
      changes: SubscriptionRef.changes(state),
      awaitUp: SubscriptionRef.changes(state).pipe(
        Stream.filter((s) => s.status === "up"),
        Stream.take(1),
        Stream.runDrain
      ),
      started: Deferred.await(first),
      stats: Effect.map(current, (s) => lane.stats(s.status))
    } satisfies PgLaneShape
  })
