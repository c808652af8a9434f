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
 * - a received notification is checked (MAC, server id, epoch, sequence, sending backend and sealing
 *   time: anyone who can connect to the database can NOTIFY, and anyone who can LISTEN can record) and
 *   its frames go through the same dispatch as a TCP link's; HELLO and CHALLENGE frames mean nothing on
 *   the lane and are counted and ignored; our own notifications, known by the backend they come from,
 *   are ignored, and our server id from anywhere else is refused;
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
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as Redacted from "effect/Redacted"
import * as Result from "effect/Result"
import type * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as SchemaIssue from "effect/SchemaIssue"
import * as Stream from "effect/Stream"
import type * as PgConnection from "./internal/lane/pgConnection.js"
import * as PgLane from "./internal/lane/pgLane.js"
import * as Lane from "./Lane.js"

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
  readonly checkInterval?: Duration.Input
  /**
   * How long a probe or a check may take before the connection is deemed deaf (default 3 s); waited
   * again while notifications keep arriving, up to ten times (a backlog delays the answers).
   */
  readonly probeTimeout?: Duration.Input
  /** How long a connection attempt may take (default 10 s). */
  readonly connectTimeout?: Duration.Input
  /** The pauses between connection attempts (default 250 ms doubling, capped at 5 s). */
  readonly reconnect?: Schedule.Schedule<unknown, unknown>
  /** The heartbeat period on a quiet lane (default: the mesh's `heartbeatInterval`). */
  readonly heartbeatInterval?: Duration.Input
  /** Silence after which a lane member is dead (default: the mesh's `deadThreshold`). */
  readonly deadThreshold?: Duration.Input
  /** Silence after which a lane member is forgotten (default 10 minutes). */
  readonly forgetAfter?: Duration.Input
  /** The most members the lane remembers; the longest silent is forgotten first (default 256). */
  readonly maxMembers?: number
  /** Frames buffered (waiting, or in a send) past which new ones are dropped and counted (default 1024). */
  readonly maxBufferedFrames?: number
  /**
   * Bytes buffered past which new frames are dropped and counted (default 4 MiB). A mark, not a ceiling:
   * the frame that crosses it is still taken, so a batch of the largest size (16 MiB) goes out unless the
   * buffer is backed up, and the buffer holds at most this plus one frame.
   */
  readonly maxBufferedBytes?: number
  /** Frames older than this when the connection comes back are discarded, not sent (default 30 s). */
  readonly maxBufferedAge?: Duration.Input
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

/** The options checked: the lane's settings, the channel still to resolve, and the host's hook. */
interface Resolved extends Omit<PgLane.Settings, "channel"> {
  readonly channel: string | undefined
  readonly onCatchUp: PostgresOptions["onCatchUp"]
}

const invalid = (detail: string) => new PostgresError({ reason: "InvalidOptions", detail })

const positiveDuration = (
  name: string,
  input: Duration.Input | undefined,
  fallback: Duration.Duration
): Result.Result<Duration.Duration, PostgresError> => {
  if (input === undefined) return Result.succeed(fallback)
  const decoded = Duration.fromInput(input)
  return Option.isSome(decoded) && Duration.isGreaterThan(decoded.value, Duration.zero)
    ? Result.succeed(decoded.value)
    : Result.fail(invalid(`${name} must be a positive duration`))
}

const positiveCount = (
  name: string,
  value: number | undefined,
  fallback: number
): Result.Result<number, PostgresError> =>
  value === undefined
    ? Result.succeed(fallback)
    : Number.isSafeInteger(value) && value >= 1
      ? Result.succeed(value)
      : Result.fail(invalid(`${name} must be a positive integer`))

const optionalDuration = (
  name: string,
  input: Duration.Input | undefined
): Result.Result<Duration.Duration | undefined, PostgresError> =>
  input === undefined
    ? Result.succeed(undefined)
    : Result.map(positiveDuration(name, input, Duration.zero), (d): Duration.Duration | undefined => d)

/** The options checked, with their defaults. */
const resolve = (options: PostgresOptions): Result.Result<Resolved, PostgresError> =>
  Result.gen(function* () {
    const url = typeof options.url === "string" ? options.url : Redacted.value(options.url)
    const badUrl = urlProblem(url)
    if (badUrl !== undefined) return yield* Result.fail(invalid(badUrl))
    if (options.channel !== undefined) {
      const bad = channelProblem(options.channel)
      if (bad !== undefined) return yield* Result.fail(invalid(bad))
    }
    const heartbeatInterval = yield* optionalDuration("heartbeatInterval", options.heartbeatInterval)
    const deadThreshold = yield* optionalDuration("deadThreshold", options.deadThreshold)
    if (
      heartbeatInterval !== undefined &&
      deadThreshold !== undefined &&
      !Duration.isLessThan(heartbeatInterval, deadThreshold)
    ) {
      return yield* Result.fail(invalid("heartbeatInterval must be shorter than deadThreshold"))
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
export class PostgresLane extends Context.Service<PostgresLane, PostgresLaneShape>()("queen-mesh/Postgres") {}

/** The connection module, loaded on first use: `pg` is an optional peer dependency. */
const loadDriver: Effect.Effect<typeof PgConnection, PostgresError> = Effect.tryPromise({
  try: () => import("./internal/lane/pgConnection.js"),
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
export const layer = (options: PostgresOptions): Layer.Layer<Lane.Lane | PostgresLane, PostgresError> =>
  Layer.effectContext(
    Effect.gen(function* () {
      const resolved = yield* Effect.fromResult(resolve(options))
      const driver = yield* loadDriver
      const catchUps = yield* Effect.acquireRelease(PubSub.sliding<CatchUp>(64), PubSub.shutdown)
      const catchUp = (event: CatchUp) =>
        Effect.andThen(
          PubSub.publish(catchUps, event),
          resolved.onCatchUp === undefined ? Effect.void : resolved.onCatchUp(event)
        ).pipe(Effect.catchCause((cause) => Effect.logError("the host's PostgreSQL catch-up failed", cause)))
      const factory: Lane.LaneShape = {
        kind: "pg",
        make: (context) =>
          PgLane.make(
            driver,
            { ...resolved, channel: resolved.channel ?? channelFor(context.config.clusterLabel) },
            catchUp,
            context
          )
      }
      return Context.make(Lane.Lane, factory).pipe(
        Context.add(PostgresLane, { catchUps: Stream.fromPubSub(catchUps) })
      )
    })
  )

/**
 * A variable set to what it cannot be: the error names it and says why, never repeating its value.
 * Effect 4's `ConfigError` wraps a `SchemaError`; its issue carries the line, as `MeshConfig`'s do.
 */
const invalidVariable = (name: string, why: string): Config.ConfigError =>
  new Config.ConfigError(new Schema.SchemaError(new SchemaIssue.InvalidValue({ message: `${name}: ${why}` })))

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
  // The connection string of the PostgreSQL lane; unset, there is no lane.
  url: Config.Redacted("QUEEN_MESH_PG_URL").pipe(
    Config.mapEffect((url) => {
      const bad = urlProblem(Redacted.value(url))
      return bad === undefined ? Effect.succeed(url) : Effect.fail(invalidVariable("QUEEN_MESH_PG_URL", bad))
    })
  ),
  // The channel of the PostgreSQL lane; default queen_mesh or queen_mesh_<label>.
  channel: Config.option(Config.String("QUEEN_MESH_PG_CHANNEL")).pipe(
    Config.mapEffect((channel): Effect.Effect<Option.Option<string>, Config.ConfigError> => {
      if (Option.isNone(channel)) return Effect.succeed(channel)
      const bad = channelProblem(channel.value)
      return bad === undefined
        ? Effect.succeed(channel)
        : Effect.fail(invalidVariable("QUEEN_MESH_PG_CHANNEL", bad))
    })
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
): Layer.Layer<Lane.Lane | PostgresLane, PostgresError | Config.ConfigError> =>
  Layer.unwrap(
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
 *   Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env: {} })))
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
): Layer.Layer<PostgresLane, PostgresError | Config.ConfigError> =>
  Layer.unwrap(
    Effect.map(Config.option(Config.String("QUEEN_MESH_PG_URL")), (url) =>
      Option.isSome(url) && url.value.trim() !== ""
        ? layerConfig(options)
        : Layer.succeed(PostgresLane, { catchUps: Stream.never })
    )
  )
