/**
 * The mesh's configuration (spec "Enabling it"), read through Effect's `Config` so a host can provide
 * it from any `ConfigProvider` and tests from a record of variables.
 *
 * Every variable has its spec default and, where the spec names one, its legacy `QUEEN_UDP_*` alias;
 * the `QUEEN_MESH_*` name wins when both are set. The peer list is parsed tolerantly, exactly as the
 * spec describes; any other malformed value fails with a `ConfigError` naming the variable rather than
 * falling back to a default.
 *
 * @since 0.1.0
 */
import { randomBytes } from "node:crypto"
import { hostname } from "node:os"
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as SchemaIssue from "effect/SchemaIssue"
import { ipVersion } from "./internal/ipLiteral.js"
import * as Names from "./internal/wire/names.js"
import { MeshConfigError } from "./MeshError.js"

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
  /**
   * `QUEEN_MESH_BIND_ADDR`, else `QUEEN_BIND_ADDR` (upstream's names; `QUEEN_MESH_BIND_HOST` is read
   * too, deprecated): the address the listener binds, an IP address or host name without a port.
   */
  readonly bindHost: string
  /**
   * `QUEEN_MESH_ADVERTISE_HOST`: the host of the `http_addr` this node advertises in its HELLO (upstream's
   * HELLO v2). Default: the OS host name, else `HOSTNAME`, else `127.0.0.1`. `""` (from code) advertises
   * nothing, and upstream replicas then never count this node as ephemeral-capable.
   */
  readonly advertiseHost: string
  /** `PORT`: the broker's HTTP port, the port of the advertised `http_addr`. Default 6632. */
  readonly httpPort: number
  /**
   * This process's boot incarnation, a u64 in lowercase hex advertised as `eph_epoch`: drawn once per
   * process ({@link processEpoch}); a host that has its own gives it here.
   */
  readonly ephEpoch: string
  /**
   * `QUEEN_MESH_TENANTS`: `uuid` (the default, upstream's rule: the API refuses a tenant that is not a
   * UUID, and one received is read as absent) or `any` (any string, for clusters of queen-mesh nodes
   * only; an upstream replica would read such a tenant as absent and wake every tenant's queue).
   */
  readonly tenants: TenantRule
  /**
   * `QUEEN_SYNC_SECRET`, or the first of `QUEEN_SYNC_SECRETS`: the primary key, the one this node's
   * dialers prove. Empty means open mode.
   */
  readonly secret: Redacted.Redacted<string>
  /**
   * The rest of `QUEEN_SYNC_SECRETS`: older (or newer) keys a listener still accepts, so a secret can be
   * rotated one restart at a time (docs/security.md, "Rotating the secret").
   */
  readonly acceptedSecrets: ReadonlyArray<Redacted.Redacted<string>>
  /**
   * `QUEEN_MESH_DISCOVERY=dns:<name>[:<port>]`: a DNS name resolved every `discoveryInterval` to the
   * peers' addresses (A and AAAA, or SRV for a name that starts with `_`); its port defaults to the
   * mesh port. The configured peers stay as static seeds beside it.
   */
  readonly discovery: Option.Option<DnsDiscovery>
  /** `QUEEN_MESH_DISCOVERY_INTERVAL_MS`: how often the discovery name is resolved. */
  readonly discoveryInterval: Duration.Duration
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
  /**
   * `QUEEN_MESH_IDLE_TIMEOUT_MS`: an authenticated inbound link silent this long is closed. Default: the
   * dead threshold (from code too: left out, it follows `deadThreshold`).
   */
  readonly idleTimeout: Duration.Duration
  /** `QUEEN_MESH_AUTH`: `legacy` (the spec's HELLO), `permissive` or `required` (challenge-response v2). */
  readonly auth: AuthMode
  /** `QUEEN_MESH_CHALLENGE_WAIT_MS`: how long a permissive dialer waits for a challenge. */
  readonly challengeWait: Duration.Duration
  /** `QUEEN_MESH_CLUSTER_LABEL`: bound into v2 HELLOs, so two clusters sharing a secret stay apart. */
  readonly clusterLabel: string
  /** `QUEEN_MESH_TLS`: `off`, or `psk` for TLS 1.3 links keyed from the secret. */
  readonly tls: TlsMode
}

/**
 * A DNS discovery target (`QUEEN_MESH_DISCOVERY=dns:<name>[:<port>]`).
 *
 * @since 0.1.0
 * @category models
 */
export interface DnsDiscovery {
  readonly name: string
  /** The port of the addresses an A/AAAA name resolves to (an SRV record carries its own). */
  readonly port: number
}

/**
 * Which tenant names the mesh accepts (see {@link MeshConfigShape.tenants}): `uuid`, upstream's rule, or
 * `any` string.
 *
 * @since 0.1.0
 * @category schemas
 */
export const TenantRule = Names.TenantRule

/**
 * @since 0.1.0
 * @category models
 */
export type TenantRule = Names.TenantRule

/**
 * How HELLOs are authenticated (see docs/security.md): `legacy` (the spec's HELLO), `permissive` or
 * `required` (challenge-response v2). One list for the type, the reader, the stats body and the help.
 *
 * @since 0.1.0
 * @category schemas
 */
export const AuthMode = Schema.Literals(["legacy", "permissive", "required"])

/**
 * @since 0.1.0
 * @category models
 */
export type AuthMode = typeof AuthMode.Type

/**
 * TLS on mesh links: `off`, or `psk` (TLS 1.3 keyed from the secret, docs/security.md).
 *
 * @since 0.1.0
 * @category schemas
 */
export const TlsMode = Schema.Literals(["off", "psk"])

/**
 * @since 0.1.0
 * @category models
 */
export type TlsMode = typeof TlsMode.Type

/**
 * The mesh's configuration as a service.
 *
 * @since 0.1.0
 * @category tags
 */
export class MeshConfig extends Context.Service<MeshConfig, MeshConfigShape>()("queen-mesh/MeshConfig") {}

/** `host:port` or `[v6]:port`: an address given with a port where only the address belongs. */
const hasPort = (text: string): boolean =>
  /^\[[^\]]*\]:\d+$/.test(text) || (/^[^:]*:\d+$/.test(text) && ipVersion(text) === 0)

const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/i

/**
 * Whether `host` is a hostname (dot-separated labels of letters, digits, `-` and `_`, at most 253
 * characters) or an IP literal.
 *
 * @since 0.1.0
 * @category parsers
 */
export const isValidHost = (host: string): boolean => {
  if (ipVersion(host) !== 0) return true
  if (host.length === 0 || host.length > 253) return false
  const labels = host.endsWith(".") ? host.slice(0, -1).split(".") : host.split(".")
  // A name of digits and dots only is an IPv4 address or nothing.
  if (labels.every((label) => /^\d+$/.test(label))) return false
  return labels.every((label) => LABEL.test(label))
}

/**
 * This process's boot incarnation: 64 random bits in lowercase hex without leading zeros, as upstream
 * prints its epoch. Drawn once when the module loads.
 *
 * @since 0.1.0
 * @category defaults
 */
export const processEpoch: string = randomBytes(8).readBigUInt64BE().toString(16)

/**
 * Upstream's default advertise host: the OS host name, else `HOSTNAME`, else `127.0.0.1`.
 *
 * @since 0.1.0
 * @category defaults
 */
export function defaultAdvertiseHost(hostnameVariable: string | undefined): string {
  let own = ""
  try {
    own = hostname()
  } catch {
    own = ""
  }
  for (const candidate of [own, hostnameVariable ?? ""]) {
    if (candidate !== "" && isValidHost(candidate)) return candidate
  }
  return "127.0.0.1"
}

/**
 * The `http_addr` this node advertises in its HELLO, `http://host:port` (an IPv6 literal in brackets),
 * or none when the advertise host is `""`.
 *
 * @since 0.1.0
 * @category models
 */
export const httpAddress = (
  config: Pick<MeshConfigShape, "advertiseHost" | "httpPort">
): Option.Option<string> =>
  config.advertiseHost === ""
    ? Option.none()
    : Option.some(
        `http://${config.advertiseHost.includes(":") ? `[${config.advertiseHost}]` : config.advertiseHost}:${config.httpPort}`
      )

/**
 * The spec's defaults. `serverId` is left empty here; `make` and `layer` fill it from {@link randomServerId}.
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
  advertiseHost: defaultAdvertiseHost(undefined),
  httpPort: 6632,
  ephEpoch: processEpoch,
  tenants: "uuid",
  secret: Redacted.make(""),
  acceptedSecrets: [],
  discovery: Option.none(),
  discoveryInterval: Duration.millis(5000),
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
 * Whether the TCP mesh runs: enabled, and at least one peer or a discovery name (spec "Enabling it").
 * A host may also provide a `Discovery` service or a lane, which the runtime weighs as well.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isActive = (config: MeshConfigShape): boolean =>
  config.enabled && (config.peers.length > 0 || Option.isSome(config.discovery))

// ---------------------------------------------------------------------------------------------
// pure parsers
// ---------------------------------------------------------------------------------------------

const DIGITS = /^\d+$/

/** The highest TCP port, the one bound every port check shares. */
const MAX_PORT = 65_535

/**
 * Whether `port` is a port a peer can be dialled at: an integer in `1..65535`.
 *
 * @since 0.1.0
 * @category parsers
 */
export const isPort = (port: unknown): port is number =>
  typeof port === "number" && Number.isInteger(port) && port >= 1 && port <= MAX_PORT

/**
 * A TCP port: an integer in `min..65535` (0 allowed where it means ephemeral).
 *
 * @since 0.1.0
 * @category parsers
 */
export const parsePort = (raw: string, min = 0): Result.Result<number, string> => {
  const text = raw.trim()
  if (!DIGITS.test(text)) return Result.fail(`expected a port number, got ${JSON.stringify(raw)}`)
  const port = Number(text)
  return port >= min && port <= MAX_PORT
    ? Result.succeed(port)
    : Result.fail(`port ${port} is out of range (${min}-${MAX_PORT})`)
}

/**
 * A non-negative integer number of milliseconds (or a positive one where zero makes no sense).
 *
 * @since 0.1.0
 * @category parsers
 */
export const parseMillis = (raw: string, min = 0): Result.Result<number, string> => {
  const text = raw.trim()
  if (!DIGITS.test(text)) {
    return Result.fail(`expected a whole number of milliseconds >= ${min}, got ${JSON.stringify(raw)}`)
  }
  const ms = Number(text)
  if (!Number.isSafeInteger(ms)) return Result.fail(`${text} is too large`)
  return ms >= min ? Result.succeed(ms) : Result.fail(`expected at least ${min}, got ${ms}`)
}

/**
 * A positive whole number of things, such as frames.
 *
 * @since 0.1.0
 * @category parsers
 */
export const parseCount = (raw: string): Result.Result<number, string> => {
  const text = raw.trim()
  const n = Number(text)
  return DIGITS.test(text) && Number.isSafeInteger(n) && n >= 1
    ? Result.succeed(n)
    : Result.fail(`expected a whole number >= 1, got ${JSON.stringify(raw)}`)
}

const TRUE = new Set(["true", "1", "yes", "on"])
const FALSE = new Set(["false", "0", "no", "off"])

/**
 * true/false/1/0/yes/no/on/off in any case.
 *
 * @since 0.1.0
 * @category parsers
 */
export const parseBoolean = (raw: string): Result.Result<boolean, string> => {
  const text = raw.trim().toLowerCase()
  if (TRUE.has(text)) return Result.succeed(true)
  if (FALSE.has(text)) return Result.succeed(false)
  return Result.fail(`expected true/false/1/0/yes/no/on/off, got ${JSON.stringify(raw)}`)
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
export const parsePeer = (raw: string, meshPort: number): Result.Result<Peer, string> => {
  let entry = raw.trim().replace(/^https?:\/\//i, "")
  const slash = entry.indexOf("/")
  if (slash >= 0) entry = entry.slice(0, slash)
  entry = entry.trim()
  if (entry === "") return Result.fail(`peer ${JSON.stringify(raw)} has no host`)

  let host: string
  let tail: string | undefined
  if (entry.startsWith("[")) {
    const close = entry.indexOf("]")
    if (close < 0) return Result.fail(`peer ${JSON.stringify(raw)} has an unclosed [`)
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
  if (host === "") return Result.fail(`peer ${JSON.stringify(raw)} has no host`)
  if (!isValidHost(host)) {
    return Result.fail(`peer ${JSON.stringify(raw)}: ${JSON.stringify(host)} is not a hostname or IP address`)
  }
  if (tail === undefined || !DIGITS.test(tail.trim())) {
    if (meshPort === 0) {
      return Result.fail(
        `peer ${JSON.stringify(raw)} has no port and the mesh port is 0 (ephemeral): give the peer's port`
      )
    }
    return Result.succeed({ host, port: meshPort })
  }
  return Result.map(
    Result.mapError(parsePort(tail, 1), (why) => `peer ${JSON.stringify(raw)}: ${why}`),
    (port) => ({ host, port })
  )
}

/**
 * The name a peer goes by in logs, stats and metric labels: `host:port` as configured, an IPv6
 * literal in brackets.
 *
 * @example
 * ```ts
 * import { strictEqual } from "node:assert"
 * import { MeshConfig } from "queen-mesh"
 *
 * strictEqual(MeshConfig.peerName({ host: "queen-b", port: 6633 }), "queen-b:6633")
 * strictEqual(MeshConfig.peerName({ host: "::1", port: 6633 }), "[::1]:6633")
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
 * import { deepStrictEqual, strictEqual } from "node:assert"
 * import { Result } from "effect"
 * import { MeshConfig } from "queen-mesh"
 *
 * deepStrictEqual(
 *   MeshConfig.parsePeers("queen-b, queen-c:7000", 6633),
 *   Result.succeed([
 *     { host: "queen-b", port: 6633 },
 *     { host: "queen-c", port: 7000 }
 *   ])
 * )
 * strictEqual(Result.isFailure(MeshConfig.parsePeers("queen-b:99999", 6633)), true)
 * ```
 *
 * @since 0.1.0
 * @category parsers
 */
export const parsePeers = (raw: string, meshPort: number): Result.Result<ReadonlyArray<Peer>, string> => {
  const peers: Array<Peer> = []
  for (const part of raw.split(",")) {
    if (part.trim() === "") continue
    const peer = parsePeer(part, meshPort)
    if (Result.isFailure(peer)) return Result.fail(peer.failure)
    peers.push(peer.success)
  }
  return Result.succeed(peers)
}

// ---------------------------------------------------------------------------------------------
// Config
// ---------------------------------------------------------------------------------------------

/**
 * What is wrong with a value of `variables`, as one line naming them first: effect 3's `InvalidData` at
 * that path, as the command line printed it.
 */
const problem = (variables: ReadonlyArray<string>, detail: string): string => {
  const path = variables.join(".")
  return path === "" || detail.startsWith(path) ? detail : `${path}: ${detail}`
}

/**
 * The `ConfigError` of every problem found, one line for them all (`; ` between them, each once).
 * Effect 4's `ConfigError` wraps a `SchemaError`; its issue carries the line.
 */
const invalid = (problems: ReadonlyArray<string>): Config.ConfigError =>
  new Config.ConfigError(
    new Schema.SchemaError(new SchemaIssue.InvalidValue({ message: [...new Set(problems)].join("; ") }))
  )

/**
 * Every problem among `checked`, in field order: effect 4's `Config.all` stops at the first failure,
 * effect 3's reported each malformed variable, and so does the configuration still.
 */
const problemsOf = (
  checked: Readonly<Record<string, Result.Result<unknown, string>>>
): ReadonlyArray<string> =>
  Object.values(checked).flatMap((one) => (Result.isFailure(one) ? [one.failure] : []))

/** A variable and its legacy alias as one optional string; the primary name wins. */
const variable = (
  name: string,
  alias?: string
): Config.Config<Option.Option<{ name: string; value: string }>> => {
  // A variable set to an empty (or blank) value counts as unset, as upstream reads it: the alias or
  // the default applies.
  const read = (key: string) =>
    Config.option(Config.String(key)).pipe(
      Config.map((value) =>
        Option.flatMap(value, (v) => (v.trim() === "" ? Option.none() : Option.some({ name: key, value: v })))
      )
    )
  if (alias === undefined) return read(name)
  return Config.all([read(name), read(alias)]).pipe(
    Config.map(([primary, legacy]) => Option.orElse(primary, () => legacy))
  )
}

/**
 * A variable (or its alias) parsed by `parse`, `fallback` when unset; a malformed value is its problem
 * (see {@link problemsOf}). Its description is the one in {@link bounds} or {@link variables}, where the
 * help reads it (effect 4's `Config` keeps none).
 */
const parsed = <A>(
  name: string,
  alias: string | undefined,
  fallback: A,
  parse: (raw: string) => Result.Result<A, string>
): Config.Config<Result.Result<A, string>> =>
  variable(name, alias).pipe(
    Config.map(
      Option.match({
        onNone: () => Result.succeed(fallback),
        onSome: ({ name: used, value }) =>
          Result.mapError(parse(value), (why) => problem([used], `${used}: ${why}`))
      })
    )
  )

const HOUR = 3_600_000
const DAY = 24 * HOUR

/** A numeric setting: its variable, its bounds and its unit, declared once for every way in. */
interface Bound {
  readonly variable: string
  readonly alias?: string
  readonly description: string
  readonly min: number
  readonly max: number
  readonly unit: "ms" | "port" | "count" | "bytes"
}

type NumericField =
  | "port"
  | "heartbeatInterval"
  | "deadThreshold"
  | "handshakeTimeout"
  | "cacheRefreshInterval"
  | "hotlistFlushWindow"
  | "sendQueueCapacity"
  | "maxInbound"
  | "maxUnauthenticatedPerAddress"
  | "helloMaxBytes"
  | "authFailureDelay"
  | "idleTimeout"
  | "challengeWait"
  | "httpPort"
  | "discoveryInterval"

/**
 * The numeric settings' variables and bounds: the environment's readers and {@link validate} both read
 * them from here.
 *
 * @since 0.1.0
 * @category validation
 */
export const bounds: { readonly [K in NumericField]: Bound } = {
  port: {
    variable: "QUEEN_MESH_PORT",
    alias: "QUEEN_UDP_NOTIFY_PORT",
    description: "mesh listening port, also the port of peers given without one; 0 = ephemeral",
    min: 0,
    max: MAX_PORT,
    unit: "port"
  },
  heartbeatInterval: {
    variable: "QUEEN_SYNC_HEARTBEAT_MS",
    description:
      "heartbeat period on every link (one that carried another frame since the last beat skips it)",
    min: 1,
    max: HOUR,
    unit: "ms"
  },
  deadThreshold: {
    variable: "QUEEN_SYNC_DEAD_THRESHOLD_MS",
    description: "silence after which a peer is reported dead; also the start-up window of the health",
    min: 1,
    max: DAY,
    unit: "ms"
  },
  handshakeTimeout: {
    variable: "QUEEN_MESH_HANDSHAKE_TIMEOUT_MS",
    description: "time an accepted connection has to send its HELLO",
    min: 1,
    max: 10 * 60_000,
    unit: "ms"
  },
  cacheRefreshInterval: {
    variable: "QUEEN_CACHE_REFRESH_INTERVAL_MS",
    description: "the host's reconcile period, the backstop for lost hints",
    min: 1,
    max: DAY,
    unit: "ms"
  },
  hotlistFlushWindow: {
    variable: "QUEEN_MESH_HOTLIST_FLUSH_MS",
    description: "window over which hot-list marks are coalesced into one frame",
    min: 1,
    max: 60_000,
    unit: "ms"
  },
  sendQueueCapacity: {
    variable: "QUEEN_MESH_SEND_QUEUE",
    description: "frames each peer's send queue holds before dropping",
    min: 1,
    max: 1_000_000,
    unit: "count"
  },
  maxInbound: {
    variable: "QUEEN_MESH_MAX_INBOUND",
    description: "concurrent inbound mesh connections; more are refused at once",
    min: 1,
    max: 65_536,
    unit: "count"
  },
  maxUnauthenticatedPerAddress: {
    variable: "QUEEN_MESH_MAX_UNAUTHENTICATED_PER_IP",
    description: "inbound connections one address may hold before its HELLO",
    min: 1,
    max: 65_536,
    unit: "count"
  },
  helloMaxBytes: {
    variable: "QUEEN_MESH_HELLO_MAX_BYTES",
    description: "the first frame's cap in bytes, checked from its length prefix",
    min: 256,
    max: 65_536,
    unit: "bytes"
  },
  authFailureDelay: {
    variable: "QUEEN_MESH_AUTH_FAILURE_DELAY_MS",
    description: "pause before closing a refused connection (it holds no buffer meanwhile)",
    min: 0,
    max: 60_000,
    unit: "ms"
  },
  idleTimeout: {
    variable: "QUEEN_MESH_IDLE_TIMEOUT_MS",
    description: "an authenticated inbound link silent this long is closed",
    min: 1,
    max: DAY,
    unit: "ms"
  },
  challengeWait: {
    variable: "QUEEN_MESH_CHALLENGE_WAIT_MS",
    description: "how long a permissive dialer waits for a challenge before a legacy HELLO",
    min: 1,
    max: 60_000,
    unit: "ms"
  },
  httpPort: {
    variable: "PORT",
    description:
      "the broker's HTTP port, the port of the advertised http_addr (queen-mesh node: unset, the port its own routes are bound to)",
    min: 1,
    max: MAX_PORT,
    unit: "port"
  },
  discoveryInterval: {
    variable: "QUEEN_MESH_DISCOVERY_INTERVAL_MS",
    description: "how often the discovery name is resolved; a peer missing from two rounds is dropped",
    min: 100,
    max: HOUR,
    unit: "ms"
  }
}

/**
 * An environment variable the mesh reads: its name, its legacy alias, its default as an operator would
 * type it (or a phrase), and what it does. The readers take their names from here, and the command
 * line's help and docs/configuration.md list {@link variables}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Variable {
  readonly name: string
  readonly alias?: string
  readonly default: string
  readonly description: string
}

/** The variables of the settings that are not numbers. */
const textual = {
  peers: {
    name: "QUEEN_MESH_PEERS",
    alias: "QUEEN_UDP_PEERS",
    default: "(none)",
    description:
      "comma-separated host or host:port peers; with none (and no discovery or lane) the mesh does not run"
  },
  enabled: {
    name: "QUEEN_SYNC_ENABLED",
    default: "true",
    description: "false turns the mesh off without removing the peers"
  },
  bindHost: {
    name: "QUEEN_MESH_BIND_ADDR",
    alias: "QUEEN_BIND_ADDR",
    default: "0.0.0.0",
    description:
      "address the mesh listener binds, without a port; set but empty is an error (QUEEN_MESH_BIND_HOST: deprecated)"
  },
  advertiseHost: {
    name: "QUEEN_MESH_ADVERTISE_HOST",
    default: "the host name",
    description: "host of the http_addr advertised in the HELLO (http://host:$PORT), as upstream Queen does"
  },
  tenants: {
    name: "QUEEN_MESH_TENANTS",
    default: "uuid",
    description:
      "uuid: tenants are UUIDs, as upstream Queen reads them; any: any string (queen-mesh-only clusters)"
  },
  secret: {
    name: "QUEEN_SYNC_SECRET",
    default: "(empty)",
    description: "shared HELLO secret; empty is open mode (firewall the port regardless)"
  },
  acceptedSecrets: {
    name: "QUEEN_SYNC_SECRETS",
    default: "(none)",
    description:
      "the keyring instead of QUEEN_SYNC_SECRET: the primary key first, then keys still accepted (rotation)"
  },
  discovery: {
    name: "QUEEN_MESH_DISCOVERY",
    default: "(none)",
    description:
      "dns:<name>[:<port>]: resolve the name every interval and dial every address it lists (a headless Service)"
  },
  auth: {
    name: "QUEEN_MESH_AUTH",
    default: "legacy",
    description:
      "how HELLOs are authenticated: legacy (the spec's, replayable), permissive or required (challenge-response)"
  },
  clusterLabel: {
    name: "QUEEN_MESH_CLUSTER_LABEL",
    default: "(empty)",
    description: "bound into v2 HELLOs and the lane's channel: clusters that share a secret stay apart"
  },
  tls: {
    name: "QUEEN_MESH_TLS",
    default: "off",
    description: "psk: every mesh link over TLS 1.3 keyed from the secret (needs a secret)"
  },
  serverId: {
    name: "QUEEN_SERVER_ID",
    default: "$HOSTNAME",
    description: "this node's id, announced in HELLO; without either, queen- and 8 random hex digits"
  }
} as const satisfies Record<string, Variable>

/** A numeric setting's default as an operator types it: milliseconds for a duration. */
const typed = (field: NumericField): string => {
  if (field === "idleTimeout") return "the dead threshold"
  const value = defaults[field]
  return String(Duration.isDuration(value) ? Duration.toMillis(value) : value)
}

const numericVariable = (field: NumericField): Variable => {
  const bound = bounds[field]
  return {
    name: bound.variable,
    ...(bound.alias === undefined ? {} : { alias: bound.alias }),
    default: typed(field),
    description: bound.description
  }
}

/**
 * Every environment variable the mesh's configuration reads, in the order the help lists them.
 *
 * @since 0.1.0
 * @category config
 */
export const variables: ReadonlyArray<Variable> = [
  textual.peers,
  textual.discovery,
  numericVariable("discoveryInterval"),
  numericVariable("port"),
  textual.bindHost,
  textual.advertiseHost,
  numericVariable("httpPort"),
  textual.tenants,
  textual.enabled,
  textual.secret,
  textual.acceptedSecrets,
  numericVariable("heartbeatInterval"),
  numericVariable("deadThreshold"),
  textual.serverId,
  numericVariable("handshakeTimeout"),
  numericVariable("hotlistFlushWindow"),
  numericVariable("sendQueueCapacity"),
  numericVariable("cacheRefreshInterval"),
  textual.auth,
  numericVariable("challengeWait"),
  textual.clusterLabel,
  textual.tls,
  numericVariable("maxInbound"),
  numericVariable("maxUnauthenticatedPerAddress"),
  numericVariable("helloMaxBytes"),
  numericVariable("authFailureDelay"),
  numericVariable("idleTimeout")
]

/**
 * `dns:<name>[:<port>]`, the value of `QUEEN_MESH_DISCOVERY`; a name without a port takes the mesh port.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, strictEqual } from "node:assert"
 * import { Result } from "effect"
 * import { MeshConfig } from "queen-mesh"
 *
 * deepStrictEqual(
 *   MeshConfig.parseDiscovery("dns:queen-headless.queen.svc:6633", 6633),
 *   Result.succeed({ name: "queen-headless.queen.svc", port: 6633 })
 * )
 * strictEqual(Result.isFailure(MeshConfig.parseDiscovery("consul:queen", 6633)), true)
 * ```
 *
 * @since 0.1.0
 * @category parsers
 */
export const parseDiscovery = (raw: string, meshPort: number): Result.Result<DnsDiscovery, string> => {
  const text = raw.trim()
  if (!text.toLowerCase().startsWith("dns:")) {
    return Result.fail(`expected dns:<name>[:<port>], got ${JSON.stringify(raw)}`)
  }
  const rest = text.slice(4)
  const colon = rest.lastIndexOf(":")
  const name = colon >= 0 && DIGITS.test(rest.slice(colon + 1)) ? rest.slice(0, colon) : rest
  if (name === "" || !isValidHost(name) || ipVersion(name) !== 0) {
    return Result.fail(`${JSON.stringify(name)} is not a DNS name`)
  }
  if (colon < 0 || name === rest) {
    if (meshPort === 0) {
      return Result.fail("a discovery name without a port needs a mesh port (QUEEN_MESH_PORT is 0)")
    }
    return Result.succeed({ name, port: meshPort })
  }
  return Result.map(parsePort(rest.slice(colon + 1), 1), (port) => ({ name, port }))
}

/**
 * `QUEEN_SYNC_SECRETS`: comma-separated keys, the primary first. Blank entries are refused (a stray
 * comma would otherwise turn into open mode), and so are repeats.
 *
 * @since 0.1.0
 * @category parsers
 */
export const parseSecrets = (raw: string): Result.Result<ReadonlyArray<string>, string> => {
  const keys = raw.split(",").map((key) => key.trim())
  if (keys.some((key) => key === "")) return Result.fail("an entry is empty: every key must be non-empty")
  if (new Set(keys).size !== keys.length) return Result.fail("a key is listed twice")
  return Result.succeed(keys)
}

/** A whole number in the text, its bounds left to {@link validate}: the syntax of a numeric variable. */
const digits = (raw: string): Result.Result<number, string> => {
  const text = raw.trim()
  const n = Number(text)
  return DIGITS.test(text) && Number.isSafeInteger(n)
    ? Result.succeed(n)
    : Result.fail(`expected a whole number, got ${JSON.stringify(raw)}`)
}

const numeric = <K extends NumericField>(field: K, fallback: MeshConfigShape[K]) => {
  const bound = bounds[field]
  return parsed(bound.variable, bound.alias, fallback, (raw) =>
    Result.map(digits(raw), (n) => (bound.unit === "ms" ? Duration.millis(n) : n) as MeshConfigShape[K])
  )
}

const oneOf = <const A extends string>(variable: Variable, fallback: NoInfer<A>, values: ReadonlyArray<A>) =>
  parsed(variable.name, undefined, fallback, (raw) => {
    const text = raw.trim().toLowerCase()
    const found = values.find((value) => value === text)
    return found === undefined
      ? Result.fail(`expected ${Names.alternatives(values)}, got ${JSON.stringify(raw)}`)
      : Result.succeed(found)
  })

/**
 * A variable exactly as set: an empty value is `Some("")`, not unset. Effect 4's environment provider
 * reads an empty variable as unset unless made with `preserveEmptyStrings` ({@link layerFromEnv} and the
 * command line make theirs so).
 */
const exact = (name: string) =>
  Config.option(Config.String(name)).pipe(Config.map(Option.map((value) => ({ name, value }))))

/** A variable that is unset when empty, as effect 3's `Config.nonEmptyString` read it. */
const nonEmpty = (name: string) =>
  Config.option(Config.String(name)).pipe(Config.map(Option.filter((value: string) => value !== "")))

/**
 * The bind address, read as upstream reads it: `QUEEN_MESH_BIND_ADDR`, else `QUEEN_BIND_ADDR`, else
 * `0.0.0.0`; a variable set to an empty value is an error, not a fallback. `QUEEN_MESH_BIND_HOST`, our
 * former name, still counts (after `QUEEN_MESH_BIND_ADDR`, before the broker-wide `QUEEN_BIND_ADDR`) and
 * is reported as deprecated. A value with a port is refused by {@link validate}.
 */
const bindAddress: Config.Config<
  Result.Result<{ readonly value: string; readonly deprecated: boolean }, string>
> = Config.all([
  exact(textual.bindHost.name),
  exact("QUEEN_MESH_BIND_HOST"),
  exact(textual.bindHost.alias)
]).pipe(
  Config.map((given) => {
    const used = Option.firstSomeOf(given)
    if (Option.isNone(used)) return Result.succeed({ value: defaults.bindHost, deprecated: false })
    const { name, value } = used.value
    if (value.trim() === "") {
      return Result.fail(problem([name], `${name}: set but empty; leave it unset for ${defaults.bindHost}`))
    }
    return Result.succeed({ value: value.trim(), deprecated: name === "QUEEN_MESH_BIND_HOST" })
  })
)

/**
 * The environment as read, before {@link validate}: every variable's syntax checked, its meaning not;
 * and the deprecated names it used.
 */
const readNoted: Config.Config<{
  readonly shape: MeshConfigShape
  readonly deprecated: ReadonlyArray<string>
}> = Config.all({
  // The variables whose syntax is checked, in the order their problems are reported.
  checked: Config.all({
    port: numeric("port", defaults.port),
    enabled: parsed(textual.enabled.name, undefined, defaults.enabled, parseBoolean),
    bind: bindAddress,
    httpPort: numeric("httpPort", defaults.httpPort),
    tenants: oneOf(textual.tenants, defaults.tenants, TenantRule.literals),
    discoveryInterval: numeric("discoveryInterval", defaults.discoveryInterval),
    heartbeatInterval: numeric("heartbeatInterval", defaults.heartbeatInterval),
    deadThreshold: numeric("deadThreshold", defaults.deadThreshold),
    handshakeTimeout: numeric("handshakeTimeout", defaults.handshakeTimeout),
    cacheRefreshInterval: numeric("cacheRefreshInterval", defaults.cacheRefreshInterval),
    hotlistFlushWindow: numeric("hotlistFlushWindow", defaults.hotlistFlushWindow),
    sendQueueCapacity: numeric("sendQueueCapacity", defaults.sendQueueCapacity),
    maxInbound: numeric("maxInbound", defaults.maxInbound),
    maxUnauthenticatedPerAddress: numeric(
      "maxUnauthenticatedPerAddress",
      defaults.maxUnauthenticatedPerAddress
    ),
    helloMaxBytes: numeric("helloMaxBytes", defaults.helloMaxBytes),
    authFailureDelay: numeric("authFailureDelay", defaults.authFailureDelay),
    idleTimeout: parsed(bounds.idleTimeout.variable, undefined, Option.none<Duration.Duration>(), (raw) =>
      Result.map(digits(raw), (ms) => Option.some(Duration.millis(ms)))
    ),
    auth: oneOf(textual.auth, defaults.auth, AuthMode.literals),
    challengeWait: numeric("challengeWait", defaults.challengeWait),
    tls: oneOf(textual.tls, defaults.tls, TlsMode.literals)
  }),
  rawPeers: variable(textual.peers.name, textual.peers.alias),
  advertise: variable(textual.advertiseHost.name),
  secret: Config.Redacted(textual.secret.name).pipe(Config.withDefault(defaults.secret)),
  secrets: Config.option(Config.Redacted(textual.acceptedSecrets.name)),
  rawDiscovery: variable(textual.discovery.name),
  clusterLabel: Config.String(textual.clusterLabel.name).pipe(Config.withDefault(defaults.clusterLabel)),
  serverId: nonEmpty(textual.serverId.name),
  hostname: nonEmpty("HOSTNAME")
}).pipe(
  Config.mapEffect(
    ({ checked, rawPeers, serverId, hostname, advertise, secrets, secret, rawDiscovery, clusterLabel }) =>
      Effect.fromResult(
        Result.flatMap(
          Result.mapError(Result.all(checked), () => invalid(problemsOf(checked))),
          ({ idleTimeout, bind, ...rest }) => {
            const peers = Option.match(rawPeers, {
              onNone: () => Result.succeed<ReadonlyArray<Peer>>([]),
              onSome: ({ name, value }) =>
                Result.mapError(parsePeers(value, rest.port), (why) =>
                  invalid([problem([name], `${name}: ${why}`)])
                )
            })
            const discovery = Option.match(rawDiscovery, {
              onNone: () => Result.succeed(Option.none<DnsDiscovery>()),
              onSome: ({ name, value }) =>
                Result.map(
                  Result.mapError(parseDiscovery(value, rest.port), (why) =>
                    invalid([problem([name], `${name}: ${why}`)])
                  ),
                  Option.some
                )
            })
            const keyring = keyringOf(secret, secrets)
            return Result.map(Result.all([peers, discovery, keyring]), ([peers, discovery, keys]) => ({
              shape: {
                ...rest,
                clusterLabel,
                peers,
                discovery,
                secret: keys.secret,
                acceptedSecrets: keys.acceptedSecrets,
                bindHost: bind.value,
                advertiseHost: Option.match(advertise, {
                  onNone: () => defaultAdvertiseHost(Option.getOrUndefined(hostname)),
                  onSome: ({ value }) => value.trim()
                }),
                ephEpoch: processEpoch,
                idleTimeout: Option.getOrElse(idleTimeout, () => rest.deadThreshold),
                serverId: Option.getOrElse(
                  Option.orElse(serverId, () => hostname),
                  randomServerId
                )
              },
              deprecated: bind.deprecated ? ["QUEEN_MESH_BIND_HOST (use QUEEN_MESH_BIND_ADDR)"] : []
            }))
          }
        )
      )
  )
)

/**
 * The keys from `QUEEN_SYNC_SECRET` or `QUEEN_SYNC_SECRETS`: one of them, never both (which one would
 * win is a guess an operator should not have to make).
 */
const keyringOf = (
  secret: Redacted.Redacted<string>,
  secrets: Option.Option<Redacted.Redacted<string>>
): Result.Result<
  {
    readonly secret: Redacted.Redacted<string>
    readonly acceptedSecrets: ReadonlyArray<Redacted.Redacted<string>>
  },
  Config.ConfigError
> => {
  if (Option.isNone(secrets) || Redacted.value(secrets.value).trim() === "") {
    return Result.succeed({ secret, acceptedSecrets: [] })
  }
  if (Redacted.value(secret) !== "") {
    return Result.fail(
      invalid([
        problem(
          [textual.acceptedSecrets.name],
          "QUEEN_SYNC_SECRET and QUEEN_SYNC_SECRETS are both set: give the keys in QUEEN_SYNC_SECRETS alone"
        )
      ])
    )
  }
  return Result.match(parseSecrets(Redacted.value(secrets.value)), {
    onFailure: (why) =>
      Result.fail(
        invalid([problem([textual.acceptedSecrets.name], `${textual.acceptedSecrets.name}: ${why}`)])
      ),
    onSuccess: ([primary, ...accepted]) =>
      Result.succeed({
        secret: Redacted.make(primary ?? ""),
        acceptedSecrets: accepted.map((key) => Redacted.make(key))
      })
  })
}

const read: Config.Config<MeshConfigShape> = Config.map(readNoted, ({ shape }) => shape)

/**
 * The deprecated variables the current `ConfigProvider` sets, each with its replacement, for a host
 * that reads {@link config} itself and wants to warn as {@link layerConfig} does.
 *
 * @since 0.1.0
 * @category config
 */
export const deprecated: Config.Config<ReadonlyArray<string>> = Config.mapEffect(bindAddress, (bind) =>
  Effect.fromResult(
    Result.mapBoth(bind, {
      onFailure: (line) => invalid([line]),
      onSuccess: ({ deprecated }) => (deprecated ? ["QUEEN_MESH_BIND_HOST (use QUEEN_MESH_BIND_ADDR)"] : [])
    })
  )
)

/**
 * The whole configuration as one `Config`, read from whatever `ConfigProvider` is current and
 * validated ({@link validate}): a setting that would mislead is a `ConfigError` naming its variable.
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<MeshConfigShape> = read.pipe(
  Config.mapEffect((shape) =>
    Effect.fromResult(
      Result.mapError(validate(shape), (error) => invalid([problem(error.variables, error.message)]))
    )
  )
)

// ---------------------------------------------------------------------------------------------
// validation
// ---------------------------------------------------------------------------------------------

/** Where a field comes from in the environment, for an error that names both. */
const VARIABLES: { readonly [K in keyof MeshConfigShape]: string } = {
  ...Object.fromEntries(Object.entries(textual).map(([field, variable]) => [field, variable.name])),
  ...Object.fromEntries(Object.entries(bounds).map(([field, bound]) => [field, bound.variable])),
  ephEpoch: "ephEpoch (code only)"
} as { readonly [K in keyof MeshConfigShape]: string }

const refuse = (
  fields: ReadonlyArray<keyof MeshConfigShape>,
  detail: string
): Result.Result<never, MeshConfigError> =>
  Result.fail(new MeshConfigError({ fields, variables: fields.map((field) => VARIABLES[field]), detail }))

const numberOf = (value: unknown): number | undefined => {
  if (typeof value === "number") return value
  if (Duration.isDuration(value)) return Duration.toMillis(value)
  return undefined
}

/**
 * Every rule a configuration must keep, whichever way it came in (the environment, a `ConfigProvider`,
 * or code through {@link layer}): each numeric setting within its {@link bounds}, the server id and the
 * label within what a HELLO can carry, hosts that are hosts, and the rules between settings (a
 * heartbeat below the dead threshold, an idle timeout of at least a heartbeat, a secret for `required`
 * and for TLS-PSK). The first rule broken is the error, naming the field and its variable.
 *
 * @example
 * ```ts
 * import { strictEqual } from "node:assert"
 * import { Duration, Result } from "effect"
 * import { MeshConfig } from "queen-mesh"
 *
 * const ok = MeshConfig.validate({ ...MeshConfig.defaults, serverId: "queen-a" })
 * strictEqual(Result.isSuccess(ok), true)
 * const bad = MeshConfig.validate({
 *   ...MeshConfig.defaults,
 *   serverId: "queen-a",
 *   heartbeatInterval: Duration.seconds(10)
 * })
 * strictEqual(Result.isFailure(bad) && bad.failure.fields.join(","), "heartbeatInterval,deadThreshold")
 * ```
 *
 * @since 0.1.0
 * @category validation
 */
export const validate = (config: MeshConfigShape): Result.Result<MeshConfigShape, MeshConfigError> => {
  for (const [name, bound] of Object.entries(bounds) as ReadonlyArray<[NumericField, Bound]>) {
    const value = numberOf(config[name])
    const integer = bound.unit !== "ms" || (value !== undefined && Number.isInteger(value))
    if (
      value === undefined ||
      !Number.isFinite(value) ||
      !integer ||
      value < bound.min ||
      value > bound.max
    ) {
      const unit = bound.unit === "ms" ? " ms" : bound.unit === "bytes" ? " bytes" : ""
      return refuse(
        [name],
        `expected a whole number from ${bound.min} to ${bound.max}${unit}, got ${String(value ?? config[name])}`
      )
    }
    if (bound.unit !== "ms" && !Number.isInteger(value)) {
      return refuse([name], `expected a whole number, got ${value}`)
    }
  }
  if (typeof config.enabled !== "boolean") return refuse(["enabled"], "expected true or false")
  const oneOfThese = (literals: ReadonlyArray<string>, value: unknown) =>
    typeof value === "string" && literals.includes(value)
  if (!oneOfThese(AuthMode.literals, config.auth)) {
    return refuse(
      ["auth"],
      `expected ${Names.alternatives(AuthMode.literals)}, got ${JSON.stringify(config.auth)}`
    )
  }
  if (!oneOfThese(TlsMode.literals, config.tls)) {
    return refuse(
      ["tls"],
      `expected ${Names.alternatives(TlsMode.literals)}, got ${JSON.stringify(config.tls)}`
    )
  }
  if (typeof config.serverId !== "string" || Names.serverId(config.serverId) === undefined) {
    return refuse(
      ["serverId"],
      `must be 1 to ${Names.MAX_SERVER_ID_BYTES} bytes: peers refuse a HELLO with a longer server id`
    )
  }
  if (
    typeof config.clusterLabel !== "string" ||
    !Names.fitsBytes(config.clusterLabel, Names.MAX_LABEL_BYTES)
  ) {
    return refuse(
      ["clusterLabel"],
      `must be at most ${Names.MAX_LABEL_BYTES} bytes: a longer one makes every challenge undecodable`
    )
  }
  if (typeof config.bindHost !== "string" || !isValidHost(config.bindHost)) {
    return refuse(
      ["bindHost"],
      typeof config.bindHost === "string" && hasPort(config.bindHost)
        ? `${JSON.stringify(config.bindHost)} has a port: give the address alone (the port is QUEEN_MESH_PORT)`
        : `${JSON.stringify(config.bindHost)} is not an IP address or host name`
    )
  }
  if (
    typeof config.advertiseHost !== "string" ||
    (config.advertiseHost !== "" && !isValidHost(config.advertiseHost))
  ) {
    return refuse(
      ["advertiseHost"],
      typeof config.advertiseHost === "string" && hasPort(config.advertiseHost)
        ? `${JSON.stringify(config.advertiseHost)} has a port: give the host alone (the port is PORT)`
        : `${JSON.stringify(config.advertiseHost)} is not an IP address or host name`
    )
  }
  if (typeof config.ephEpoch !== "string" || !/^[0-9a-fA-F]{1,16}$/.test(config.ephEpoch)) {
    return refuse(
      ["ephEpoch"],
      `expected a u64 as 1 to 16 hex digits, got ${JSON.stringify(config.ephEpoch)}`
    )
  }
  if (!oneOfThese(TenantRule.literals, config.tenants)) {
    return refuse(
      ["tenants"],
      `expected ${Names.alternatives(TenantRule.literals)}, got ${JSON.stringify(config.tenants)}`
    )
  }
  if (!Array.isArray(config.peers)) return refuse(["peers"], "expected a list of {host, port}")
  for (const peer of config.peers) {
    if (typeof peer?.host !== "string" || !isValidHost(peer.host)) {
      return refuse(["peers"], `${JSON.stringify(peer?.host)} is not a hostname or IP address`)
    }
    if (!isPort(peer.port)) {
      return refuse(["peers"], `peer ${peer.host}: port ${String(peer.port)} is out of range (1-${MAX_PORT})`)
    }
  }
  const heartbeat = Duration.toMillis(config.heartbeatInterval)
  const dead = Duration.toMillis(config.deadThreshold)
  if (heartbeat >= dead) {
    return refuse(
      ["heartbeatInterval", "deadThreshold"],
      `the heartbeat (${heartbeat} ms) must be below the dead threshold (${dead} ms), or idle peers flap between alive and dead`
    )
  }
  if (Duration.toMillis(config.idleTimeout) < heartbeat) {
    return refuse(
      ["idleTimeout", "heartbeatInterval"],
      `the idle timeout (${Duration.toMillis(config.idleTimeout)} ms) must be at least the heartbeat (${heartbeat} ms)`
    )
  }
  if (!Redacted.isRedacted(config.secret)) return refuse(["secret"], "expected a Redacted string")
  const secret = Redacted.value(config.secret)
  if (!Array.isArray(config.acceptedSecrets) || !config.acceptedSecrets.every(Redacted.isRedacted)) {
    return refuse(["acceptedSecrets"], "expected a list of Redacted strings")
  }
  const accepted = config.acceptedSecrets.map((key) => Redacted.value(key))
  if (accepted.length > 0 && secret === "") {
    return refuse(["secret", "acceptedSecrets"], "accepted keys need a primary key: open mode takes none")
  }
  if (accepted.some((key) => key === "" || key === secret) || new Set(accepted).size !== accepted.length) {
    return refuse(
      ["acceptedSecrets"],
      "every accepted key must be non-empty and differ from the others and the primary"
    )
  }
  if (accepted.length > 16)
    return refuse(["acceptedSecrets"], "at most 16 keys are accepted besides the primary")
  if (!Option.isOption(config.discovery)) return refuse(["discovery"], "expected an Option")
  if (Option.isSome(config.discovery)) {
    const target = config.discovery.value
    if (typeof target.name !== "string" || !isValidHost(target.name) || ipVersion(target.name) !== 0) {
      return refuse(["discovery"], `${JSON.stringify(target.name)} is not a DNS name`)
    }
    if (!isPort(target.port)) {
      return refuse(["discovery"], `port ${String(target.port)} is out of range (1-${MAX_PORT})`)
    }
  }
  if (config.auth === "required" && secret === "") {
    return refuse(["auth", "secret"], "required needs a secret: with no secret nothing can be proven")
  }
  if (config.tls === "psk" && secret === "") {
    return refuse(["tls", "secret"], "psk needs a secret: the link keys are derived from it")
  }
  return Result.succeed(config)
}

/**
 * Reads the configuration from the current `ConfigProvider`: the process environment unless the host
 * provides another (`ConfigProvider.layer`, `Effect.provideService(ConfigProvider.ConfigProvider, ...)`). An
 * unreadable value is a `ConfigError`; a value that breaks a rule is the same `MeshConfigError` code would
 * get.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig: Layer.Layer<MeshConfig, Config.ConfigError | MeshConfigError> = Layer.effect(
  MeshConfig,
  Effect.gen(function* () {
    const { shape, deprecated } = yield* readNoted
    for (const name of deprecated) {
      yield* Effect.logWarning("deprecated configuration variable").pipe(
        Effect.annotateLogs({ module: "MeshConfig", variable: name })
      )
    }
    return yield* Effect.fromResult(validate(shape))
  })
)

/**
 * Reads the configuration from the process environment, whatever `ConfigProvider` is current. A variable
 * set to an empty value is read as set (effect 4's default provider reads it as unset), so an empty
 * bind address is refused as it always was.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerFromEnv: Layer.Layer<MeshConfig, Config.ConfigError | MeshConfigError> = layerConfig.pipe(
  Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ preserveEmptyStrings: true })))
)

/**
 * A configuration given in code: the spec's defaults overridden by `options`, then validated.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: Partial<MeshConfigShape> = {}
): Effect.Effect<MeshConfigShape, MeshConfigError> =>
  Effect.suspend(() => Effect.fromResult(validate(merge(options))))

/** The defaults under `options`; the idle timeout follows the dead threshold unless given, as in the environment. */
const merge = (options: Partial<MeshConfigShape>): MeshConfigShape => ({
  ...defaults,
  serverId: randomServerId(),
  ...options,
  idleTimeout: options.idleTimeout ?? options.deadThreshold ?? defaults.idleTimeout
})

/**
 * {@link make}, throwing the `MeshConfigError` (for a test's fixed configuration).
 *
 * @since 0.1.0
 * @category constructors
 */
export const unsafeMake = (options: Partial<MeshConfigShape> = {}): MeshConfigShape =>
  Result.getOrThrowWith(validate(merge(options)), (error) => error)

/**
 * A configuration given in code (see {@link make}); fails to build with a `MeshConfigError` naming the
 * field, exactly as the environment would.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Partial<MeshConfigShape> = {}): Layer.Layer<MeshConfig, MeshConfigError> =>
  Layer.effect(MeshConfig, make(options))
