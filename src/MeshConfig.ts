/**
 * The mesh's configuration (spec "Enabling it"), read through Effect's `Config` so a host can provide
 * it from any `ConfigProvider` and tests from a map.
 *
 * Every variable has its spec default and, where the spec names one, its legacy `QUEEN_UDP_*` alias;
 * the `QUEEN_MESH_*` name wins when both are set. The peer list is parsed tolerantly, exactly as the
 * spec describes; any other malformed value fails with a `ConfigError` naming the variable rather than
 * falling back to a default.
 *
 * @since 0.1.0
 */
import { randomBytes } from "node:crypto"
import { isIP } from "node:net"
import {
  Config,
  ConfigError,
  ConfigProvider,
  Context,
  Duration,
  Effect,
  Either,
  Layer,
  Option,
  Redacted
} from "effect"
import * as Rules from "./internal/rules.js"

/**
 * A configured peer to dial.
 *
 * @since 0.1.0
 * @category models
 */
export interface Peer {
  readonly host: string
  readonly port: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface MeshConfigShape {
  /** This node's id, announced in HELLO (`QUEEN_SERVER_ID`, else `HOSTNAME`, else `queen-` + 8 hex). */
  readonly serverId: string
  /** `QUEEN_SYNC_ENABLED`: the mesh runs only when this is on and there is at least one peer. */
  readonly enabled: boolean
  /** `QUEEN_MESH_PEERS` / `QUEEN_UDP_PEERS`. */
  readonly peers: ReadonlyArray<Peer>
  /** `QUEEN_MESH_PORT` / `QUEEN_UDP_NOTIFY_PORT`: the listening port, also the default peer port. 0 = ephemeral. */
  readonly port: number
  /** `QUEEN_MESH_BIND_HOST`: the address the listener binds. */
  readonly bindHost: string
  /** `QUEEN_SYNC_SECRET`: empty means open mode. */
  readonly secret: Redacted.Redacted<string>
  /** `QUEEN_SYNC_HEARTBEAT_MS`. */
  readonly heartbeatInterval: Duration.Duration
  /** `QUEEN_SYNC_DEAD_THRESHOLD_MS`. */
  readonly deadThreshold: Duration.Duration
  /** `QUEEN_MESH_HANDSHAKE_TIMEOUT_MS`: how long an accepted connection may take to send its HELLO. */
  readonly handshakeTimeout: Duration.Duration
  /** `QUEEN_CACHE_REFRESH_INTERVAL_MS`: the host's reconcile period, the backstop for lost hints. */
  readonly cacheRefreshInterval: Duration.Duration
  /** `QUEEN_MESH_HOTLIST_FLUSH_MS`: the window over which hot-list marks are coalesced. */
  readonly hotlistFlushWindow: Duration.Duration
  /** `QUEEN_MESH_SEND_QUEUE`: frames each peer's send queue holds before dropping. */
  readonly sendQueueCapacity: number
  /** `QUEEN_MESH_MAX_INBOUND`: concurrent inbound connections; more are refused at once. */
  readonly maxInbound: number
  /** `QUEEN_MESH_MAX_UNAUTHENTICATED_PER_IP`: inbound connections one address may hold before its HELLO. */
  readonly maxUnauthenticatedPerAddress: number
  /** `QUEEN_MESH_HELLO_MAX_BYTES`: the first frame's cap, checked from its length prefix. */
  readonly helloMaxBytes: number
  /** `QUEEN_MESH_AUTH_FAILURE_DELAY_MS`: pause before closing a refused connection (it holds no buffer). */
  readonly authFailureDelay: Duration.Duration
  /** `QUEEN_MESH_IDLE_TIMEOUT_MS`: an authenticated inbound link silent this long is closed. */
  readonly idleTimeout: Duration.Duration
  /** `QUEEN_MESH_AUTH`: `legacy` (the spec's HELLO), `permissive` or `required` (challenge-response v2). */
  readonly auth: AuthMode
  /** `QUEEN_MESH_CHALLENGE_WAIT_MS`: how long a permissive dialer waits for a challenge. */
  readonly challengeWait: Duration.Duration
  /** `QUEEN_MESH_CLUSTER_LABEL`: bound into v2 HELLOs, so two clusters sharing a secret stay apart. */
  readonly clusterLabel: string
  /** `QUEEN_MESH_TLS`: `off`, or `psk` for TLS 1.3 links keyed from the secret. */
  readonly tls: "off" | "psk"
}

/**
 * How HELLOs are authenticated (see the README's Security section).
 *
 * @since 0.1.0
 * @category models
 */
export type AuthMode = "legacy" | "permissive" | "required"

/**
 * The mesh's configuration as a service.
 *
 * @since 0.1.0
 * @category tags
 */
export class MeshConfig extends Context.Tag("queen-mesh/MeshConfig")<MeshConfig, MeshConfigShape>() {}

/**
 * The spec's defaults. `serverId` is left empty here; `layer` fills it from {@link defaultServerId}.
 *
 * @since 0.1.0
 * @category defaults
 */
export const defaults: MeshConfigShape = {
  serverId: "",
  enabled: true,
  peers: [],
  port: 6633,
  bindHost: "0.0.0.0",
  secret: Redacted.make(""),
  heartbeatInterval: Duration.millis(1000),
  deadThreshold: Duration.millis(5000),
  handshakeTimeout: Duration.millis(5000),
  cacheRefreshInterval: Duration.millis(60000),
  hotlistFlushWindow: Duration.millis(20),
  sendQueueCapacity: 1024,
  maxInbound: 64,
  maxUnauthenticatedPerAddress: 8,
  helloMaxBytes: 4096,
  authFailureDelay: Duration.millis(1000),
  idleTimeout: Duration.millis(5000),
  auth: "legacy",
  challengeWait: Duration.millis(500),
  clusterLabel: "",
  tls: "off"
}

/**
 * `queen-` followed by 8 random lowercase hex characters.
 *
 * @since 0.1.0
 * @category defaults
 */
export const randomServerId = (): string => `queen-${randomBytes(4).toString("hex")}`

/**
 * Whether the mesh runs at all: enabled and at least one peer (spec "Enabling it").
 *
 * @since 0.1.0
 * @category predicates
 */
export const isActive = (config: MeshConfigShape): boolean => config.enabled && config.peers.length > 0

// ---------------------------------------------------------------------------------------------
// pure parsers
// ---------------------------------------------------------------------------------------------

const DIGITS = /^\d+$/

/**
 * A TCP port: an integer in `min..65535`.
 *
 * @since 0.1.0
 * @category parsers
 */
export const parsePort = (raw: string, min = 0): Either.Either<number, string> => {
  const text = raw.trim()
  if (!DIGITS.test(text)) return Either.left(`expected a port number, got ${JSON.stringify(raw)}`)
  const port = Number(text)
  return port >= min && port <= 65535
    ? Either.right(port)
    : Either.left(`port ${port} is out of range (${min}-65535)`)
}

/**
 * A non-negative integer number of milliseconds (or a positive one where zero makes no sense).
 *
 * @since 0.1.0
 * @category parsers
 */
export const parseMillis = (raw: string, min = 0): Either.Either<number, string> => {
  const text = raw.trim()
  if (!DIGITS.test(text)) {
    return Either.left(`expected a whole number of milliseconds >= ${min}, got ${JSON.stringify(raw)}`)
  }
  const ms = Number(text)
  if (!Number.isSafeInteger(ms)) return Either.left(`${text} is too large`)
  return ms >= min ? Either.right(ms) : Either.left(`expected at least ${min}, got ${ms}`)
}

/**
 * A positive whole number of things, such as frames.
 *
 * @since 0.1.0
 * @category parsers
 */
export const parseCount = (raw: string): Either.Either<number, string> => {
  const text = raw.trim()
  const n = Number(text)
  return DIGITS.test(text) && Number.isSafeInteger(n) && n >= 1
    ? Either.right(n)
    : Either.left(`expected a whole number >= 1, got ${JSON.stringify(raw)}`)
}

const TRUE = new Set(["true", "1", "yes", "on"])
const FALSE = new Set(["false", "0", "no", "off"])

/**
 * true/false/1/0/yes/no/on/off in any case.
 *
 * @since 0.1.0
 * @category parsers
 */
export const parseBoolean = (raw: string): Either.Either<boolean, string> => {
  const text = raw.trim().toLowerCase()
  if (TRUE.has(text)) return Either.right(true)
  if (FALSE.has(text)) return Either.right(false)
  return Either.left(`expected true/false/1/0/yes/no/on/off, got ${JSON.stringify(raw)}`)
}

const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/i

/**
 * Whether `host` is a hostname (dot-separated labels of letters, digits, `-` and `_`, at most 253
 * characters) or an IP literal.
 *
 * @since 0.1.0
 * @category parsers
 */
export const isValidHost = (host: string): boolean => {
  if (isIP(host) !== 0) return true
  if (host.length === 0 || host.length > 253) return false
  const labels = host.endsWith(".") ? host.slice(0, -1).split(".") : host.split(".")
  // A name of digits and dots only is an IPv4 address or nothing.
  if (labels.every((label) => /^\d+$/.test(label))) return false
  return labels.every((label) => LABEL.test(label))
}

/**
 * One entry of the peer list: `host`, `host:port`, `[v6]:port`, `[v6]` or a bare IPv6 literal. A
 * non-numeric port tail falls back to the mesh port; a numeric one must be a valid port, and so must
 * the mesh port a bare host falls back to (0 is never a peer's port). The host must be a hostname or an
 * IP literal.
 *
 * @since 0.1.0
 * @category parsers
 */
export const parsePeer = (raw: string, meshPort: number): Either.Either<Peer, string> => {
  let entry = raw.trim().replace(/^https?:\/\//i, "")
  const slash = entry.indexOf("/")
  if (slash >= 0) entry = entry.slice(0, slash)
  entry = entry.trim()
  if (entry === "") return Either.left(`peer ${JSON.stringify(raw)} has no host`)

  let host: string
  let tail: string | undefined
  if (entry.startsWith("[")) {
    const close = entry.indexOf("]")
    if (close < 0) return Either.left(`peer ${JSON.stringify(raw)} has an unclosed [`)
    host = entry.slice(1, close).trim()
    const rest = entry.slice(close + 1)
    tail = rest.startsWith(":") ? rest.slice(1) : undefined
  } else {
    const first = entry.indexOf(":")
    if (first >= 0 && first === entry.lastIndexOf(":")) {
      host = entry.slice(0, first).trim()
      tail = entry.slice(first + 1)
    } else {
      // No colon, or several: a plain host or a bare IPv6 literal.
      host = entry
      tail = undefined
    }
  }
  if (host === "") return Either.left(`peer ${JSON.stringify(raw)} has no host`)
  if (!isValidHost(host)) {
    return Either.left(`peer ${JSON.stringify(raw)}: ${JSON.stringify(host)} is not a hostname or IP address`)
  }
  if (tail === undefined || !DIGITS.test(tail.trim())) {
    if (meshPort === 0) {
      return Either.left(
        `peer ${JSON.stringify(raw)} has no port and the mesh port is 0 (ephemeral): give the peer's port`
      )
    }
    return Either.right({ host, port: meshPort })
  }
  return Either.map(
    Either.mapLeft(parsePort(tail, 1), (why) => `peer ${JSON.stringify(raw)}: ${why}`),
    (port) => ({ host, port })
  )
}

/**
 * The name a peer goes by in logs, stats and metric labels: `host:port` as configured, an IPv6
 * literal in brackets.
 *
 * @example
 * ```ts
 * import { MeshConfig } from "queen-mesh"
 *
 * assert.strictEqual(MeshConfig.peerName({ host: "queen-b", port: 6633 }), "queen-b:6633")
 * assert.strictEqual(MeshConfig.peerName({ host: "::1", port: 6633 }), "[::1]:6633")
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export const peerName = (peer: Peer): string =>
  peer.host.includes(":") ? `[${peer.host}]:${peer.port}` : `${peer.host}:${peer.port}`

/**
 * The same list without repeats (the first of each `host:port` kept), and the repeated entries.
 *
 * @since 0.1.0
 * @category parsers
 */
export const dedupePeers = (
  peers: ReadonlyArray<Peer>
): { readonly peers: ReadonlyArray<Peer>; readonly duplicates: ReadonlyArray<Peer> } => {
  const seen = new Set<string>()
  const out: Array<Peer> = []
  const duplicates: Array<Peer> = []
  for (const peer of peers) {
    const key = `${peer.host.toLowerCase()}\u0000${peer.port}`
    if (seen.has(key)) duplicates.push(peer)
    else {
      seen.add(key)
      out.push(peer)
    }
  }
  return { peers: out, duplicates }
}

/**
 * The comma-separated peer list; empty entries are skipped.
 *
 * @example
 * ```ts
 * import { Either } from "effect"
 * import { MeshConfig } from "queen-mesh"
 *
 * assert.deepStrictEqual(
 *   MeshConfig.parsePeers("queen-b, queen-c:7000", 6633),
 *   Either.right([
 *     { host: "queen-b", port: 6633 },
 *     { host: "queen-c", port: 7000 }
 *   ])
 * )
 * assert.strictEqual(Either.isLeft(MeshConfig.parsePeers("queen-b:99999", 6633)), true)
 * ```
 *
 * @since 0.1.0
 * @category parsers
 */
export const parsePeers = (raw: string, meshPort: number): Either.Either<ReadonlyArray<Peer>, string> => {
  const peers: Array<Peer> = []
  for (const part of raw.split(",")) {
    if (part.trim() === "") continue
    const peer = parsePeer(part, meshPort)
    if (Either.isLeft(peer)) return Either.left(peer.left)
    peers.push(peer.right)
  }
  return Either.right(peers)
}

// ---------------------------------------------------------------------------------------------
// Config
// ---------------------------------------------------------------------------------------------

/** A variable and its legacy alias as one optional string; the primary name wins. */
const variable = (
  name: string,
  alias?: string
): Config.Config<Option.Option<{ name: string; value: string }>> => {
  // A variable set to an empty (or blank) value counts as unset, as upstream reads it: the alias or
  // the default applies.
  const read = (key: string) =>
    Config.option(Config.string(key)).pipe(
      Config.map((value) =>
        Option.flatMap(value, (v) => (v.trim() === "" ? Option.none() : Option.some({ name: key, value: v })))
      )
    )
  if (alias === undefined) return read(name)
  return Config.all([read(name), read(alias)]).pipe(
    Config.map(([primary, legacy]) => Option.orElse(primary, () => legacy))
  )
}

const parsed = <A>(
  name: string,
  alias: string | undefined,
  description: string,
  fallback: A,
  parse: (raw: string) => Either.Either<A, string>
): Config.Config<A> =>
  variable(name, alias).pipe(
    Config.mapOrFail(
      Option.match({
        onNone: () => Either.right(fallback),
        onSome: ({ name: used, value }) =>
          Either.mapLeft(parse(value), (why) => ConfigError.InvalidData([used], `${used}: ${why}`))
      })
    ),
    Config.withDescription(description)
  )

const millis = (name: string, description: string, fallback: Duration.Duration, min: number, max: number) =>
  parsed(name, undefined, description, fallback, (raw) =>
    Either.flatMap(parseMillis(raw, min), (ms) =>
      ms <= max ? Either.right(Duration.millis(ms)) : Either.left(`expected at most ${max}, got ${ms}`)
    )
  )

const count = (name: string, description: string, fallback: number, max: number) =>
  parsed(name, undefined, description, fallback, (raw) =>
    Either.flatMap(parseCount(raw), (n) =>
      n <= max ? Either.right(n) : Either.left(`expected at most ${max}, got ${n}`)
    )
  )

const oneOf = <const A extends string>(
  name: string,
  description: string,
  fallback: NoInfer<A>,
  values: ReadonlyArray<A>
) =>
  parsed(name, undefined, description, fallback, (raw) => {
    const text = raw.trim().toLowerCase()
    const found = values.find((value) => value === text)
    return found === undefined
      ? Either.left(`expected one of ${values.join("|")}, got ${JSON.stringify(raw)}`)
      : Either.right(found)
  })

const HOUR = 3_600_000
const DAY = 24 * HOUR

/**
 * The whole configuration as one `Config`, read from whatever `ConfigProvider` is current.
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<MeshConfigShape> = Config.all({
  port: parsed(
    "QUEEN_MESH_PORT",
    "QUEEN_UDP_NOTIFY_PORT",
    "mesh listening port, also the port of peers given without one",
    defaults.port,
    (raw) => parsePort(raw)
  ),
  rawPeers: variable("QUEEN_MESH_PEERS", "QUEEN_UDP_PEERS"),
  enabled: parsed("QUEEN_SYNC_ENABLED", undefined, "turn the mesh on or off", defaults.enabled, parseBoolean),
  bindHost: Config.string("QUEEN_MESH_BIND_HOST").pipe(
    Config.withDefault(defaults.bindHost),
    Config.withDescription("address the mesh listener binds")
  ),
  secret: Config.redacted("QUEEN_SYNC_SECRET").pipe(
    Config.withDefault(defaults.secret),
    Config.withDescription("shared secret for the HELLO MAC; empty is open mode")
  ),
  heartbeatInterval: millis(
    "QUEEN_SYNC_HEARTBEAT_MS",
    "heartbeat period on every link",
    defaults.heartbeatInterval,
    1,
    HOUR
  ),
  deadThreshold: millis(
    "QUEEN_SYNC_DEAD_THRESHOLD_MS",
    "silence after which a peer counts as dead",
    defaults.deadThreshold,
    1,
    DAY
  ),
  handshakeTimeout: millis(
    "QUEEN_MESH_HANDSHAKE_TIMEOUT_MS",
    "time an accepted connection has to send HELLO",
    defaults.handshakeTimeout,
    1,
    10 * 60_000
  ),
  cacheRefreshInterval: millis(
    "QUEEN_CACHE_REFRESH_INTERVAL_MS",
    "the host's reconcile period",
    defaults.cacheRefreshInterval,
    1,
    DAY
  ),
  hotlistFlushWindow: millis(
    "QUEEN_MESH_HOTLIST_FLUSH_MS",
    "window over which hot-list marks are coalesced",
    defaults.hotlistFlushWindow,
    1,
    60_000
  ),
  sendQueueCapacity: count(
    "QUEEN_MESH_SEND_QUEUE",
    "frames each peer's send queue holds before dropping",
    defaults.sendQueueCapacity,
    1_000_000
  ),
  maxInbound: count(
    "QUEEN_MESH_MAX_INBOUND",
    "concurrent inbound mesh connections",
    defaults.maxInbound,
    65_536
  ),
  maxUnauthenticatedPerAddress: count(
    "QUEEN_MESH_MAX_UNAUTHENTICATED_PER_IP",
    "inbound connections one address may hold before its HELLO",
    defaults.maxUnauthenticatedPerAddress,
    65_536
  ),
  helloMaxBytes: parsed(
    "QUEEN_MESH_HELLO_MAX_BYTES",
    undefined,
    "the first frame's cap in bytes",
    defaults.helloMaxBytes,
    (raw) =>
      Either.flatMap(parseCount(raw), (n) =>
        n >= 256 && n <= 65_536 ? Either.right(n) : Either.left(`expected 256 to 65536, got ${n}`)
      )
  ),
  authFailureDelay: millis(
    "QUEEN_MESH_AUTH_FAILURE_DELAY_MS",
    "pause before closing a refused connection",
    defaults.authFailureDelay,
    0,
    60_000
  ),
  idleTimeout: parsed(
    "QUEEN_MESH_IDLE_TIMEOUT_MS",
    undefined,
    "an authenticated inbound link silent this long is closed (default: the dead threshold)",
    Option.none<Duration.Duration>(),
    (raw) =>
      Either.flatMap(parseMillis(raw, 1), (ms) =>
        ms <= DAY
          ? Either.right(Option.some(Duration.millis(ms)))
          : Either.left(`expected at most ${DAY}, got ${ms}`)
      )
  ),
  auth: oneOf("QUEEN_MESH_AUTH", "how HELLOs are authenticated", defaults.auth, [
    "legacy",
    "permissive",
    "required"
  ] as const),
  challengeWait: millis(
    "QUEEN_MESH_CHALLENGE_WAIT_MS",
    "how long a permissive dialer waits for a challenge",
    defaults.challengeWait,
    1,
    60_000
  ),
  clusterLabel: Config.string("QUEEN_MESH_CLUSTER_LABEL").pipe(
    Config.withDefault(defaults.clusterLabel),
    Config.withDescription("cluster label bound into v2 HELLOs")
  ),
  tls: oneOf("QUEEN_MESH_TLS", "TLS on mesh links", defaults.tls, ["off", "psk"] as const),
  serverId: Config.option(Config.nonEmptyString("QUEEN_SERVER_ID")),
  hostname: Config.option(Config.nonEmptyString("HOSTNAME"))
}).pipe(
  Config.mapOrFail(({ rawPeers, serverId, hostname, idleTimeout, ...rest }) => {
    const peers = Option.match(rawPeers, {
      onNone: () => Either.right<ReadonlyArray<Peer>>([]),
      onSome: ({ name, value }) =>
        Either.mapLeft(parsePeers(value, rest.port), (why) =>
          ConfigError.InvalidData([name], `${name}: ${why}`)
        )
    })
    return Either.flatMap(peers, (peers) =>
      Either.mapLeft(
        check({
          ...rest,
          peers,
          idleTimeout: Option.getOrElse(idleTimeout, () => rest.deadThreshold),
          serverId: Option.getOrElse(
            Option.orElse(serverId, () => hostname),
            randomServerId
          )
        }),
        ({ names, message }) => ConfigError.InvalidData([...names], message)
      )
    )
  })
)

/**
 * The rules between variables: a configuration that would mislead is refused, naming every variable
 * involved.
 *
 * @since 0.1.0
 * @category parsers
 */
export const check = (
  config: MeshConfigShape
): Either.Either<MeshConfigShape, { readonly names: ReadonlyArray<string>; readonly message: string }> => {
  const heartbeat = Duration.toMillis(config.heartbeatInterval)
  const dead = Duration.toMillis(config.deadThreshold)
  if (heartbeat >= dead) {
    return Either.left({
      names: ["QUEEN_SYNC_HEARTBEAT_MS", "QUEEN_SYNC_DEAD_THRESHOLD_MS"],
      message: `QUEEN_SYNC_HEARTBEAT_MS (${heartbeat}) must be below QUEEN_SYNC_DEAD_THRESHOLD_MS (${dead}), or idle peers flap between alive and dead`
    })
  }
  if (Duration.toMillis(config.idleTimeout) < heartbeat) {
    return Either.left({
      names: ["QUEEN_MESH_IDLE_TIMEOUT_MS", "QUEEN_SYNC_HEARTBEAT_MS"],
      message: `QUEEN_MESH_IDLE_TIMEOUT_MS (${Duration.toMillis(config.idleTimeout)}) must be at least QUEEN_SYNC_HEARTBEAT_MS (${heartbeat})`
    })
  }
  if (Rules.serverId(config.serverId) === undefined) {
    return Either.left({
      names: ["QUEEN_SERVER_ID"],
      message: `QUEEN_SERVER_ID must be 1 to ${Rules.MAX_SERVER_ID_BYTES} bytes: peers refuse a HELLO with a longer server id`
    })
  }
  if (!Rules.fitsBytes(config.clusterLabel, Rules.MAX_LABEL_BYTES)) {
    return Either.left({
      names: ["QUEEN_MESH_CLUSTER_LABEL"],
      message: `QUEEN_MESH_CLUSTER_LABEL must be at most ${Rules.MAX_LABEL_BYTES} bytes: a longer one makes every challenge undecodable`
    })
  }
  const secret = Redacted.value(config.secret)
  if (config.auth === "required" && secret === "") {
    return Either.left({
      names: ["QUEEN_MESH_AUTH", "QUEEN_SYNC_SECRET"],
      message: "QUEEN_MESH_AUTH=required needs QUEEN_SYNC_SECRET: with no secret nothing can be proven"
    })
  }
  if (config.tls === "psk" && secret === "") {
    return Either.left({
      names: ["QUEEN_MESH_TLS", "QUEEN_SYNC_SECRET"],
      message: "QUEEN_MESH_TLS=psk needs QUEEN_SYNC_SECRET: the link keys are derived from it"
    })
  }
  return Either.right(config)
}

/**
 * Reads the configuration from the current `ConfigProvider`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig: Layer.Layer<MeshConfig, ConfigError.ConfigError> = Layer.effect(MeshConfig, config)

/**
 * Reads the configuration from the process environment, whatever `ConfigProvider` is current.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerFromEnv: Layer.Layer<MeshConfig, ConfigError.ConfigError> = Layer.effect(
  MeshConfig,
  Effect.withConfigProvider(config, ConfigProvider.fromEnv())
)

/**
 * A configuration given in code: the spec's defaults overridden by `options`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Partial<MeshConfigShape> = {}): Layer.Layer<MeshConfig> =>
  Layer.sync(MeshConfig, () => make(options))

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Partial<MeshConfigShape> = {}): MeshConfigShape => ({
  ...defaults,
  serverId: randomServerId(),
  ...options
})
