/**
 * The cluster page: one page, served by every node among its HTTP routes, that shows the whole cluster
 * from wherever it is opened. The node gathers what the page draws itself, so the browser talks to one
 * origin: its own stats, members and metrics, and its peers' stats bodies, fetched server-side from
 * the `http_addr` each peer announced in its HELLO (upstream's HELLO v2 field). The page's files are
 * plain HTML, CSS and script (`src/view/` in the package, served as they are: no build step, nothing
 * from another origin), and its live event list is `Mesh.events` as server-sent events.
 *
 * What the node fetches is fixed: the stats path of an address a peer announced, at most once per
 * second however many pages poll, bounded in time and size, decoded through `MeshStats.StatsBody`, its
 * server id checked; no redirect is followed and nothing a browser sends (a query, a header) reaches a
 * request. The page so shows what the stats and metrics routes already show, and no more
 * (docs/security.md, "The cluster page").
 *
 * `build` is the whole derivation, a pure function from what the node knows to the `View` the page
 * draws: nodes with their state and health, the links between them in both directions with their
 * state (`linked`, `dialling`, `down`, `refused`, `self`, `unknown`) and per-link counters, the lane
 * with its members, and this node's wake counters and receive-to-apply histogram.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as HttpRouter from "effect/http/HttpRouter"
import * as HttpServerRequest from "effect/http/HttpServerRequest"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import type * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as EventStream from "./internal/eventStream.js"
import * as MetricNames from "./internal/metrics/metricNames.js"
import * as ViewAssets from "./internal/view/assets.js"
import * as ViewHistory from "./internal/view/history.js"
import * as ViewPaths from "./internal/view/paths.js"
import * as PeerBook from "./internal/view/peerBook.js"
import { SingleFlight } from "./internal/view/singleFlight.js"
import * as StatsFetch from "./internal/view/statsFetch.js"
import type * as Membership from "./Membership.js"
import { Mesh, type MeshShape } from "./Mesh.js"
import type { MeshEvent } from "./MeshEvent.js"
import * as MeshMetrics from "./MeshMetrics.js"
import * as MeshStats from "./MeshStats.js"

// ---------------------------------------------------------------------------------------------
// paths and options
// ---------------------------------------------------------------------------------------------

/**
 * The page's paths. The page refers to its files and its data relatively, so the routes work under
 * any prefix a host mounts them at; `/cluster` (no slash) answers with a redirect to `cluster/`.
 *
 * @since 0.1.0
 * @category constants
 */
export const paths: {
  readonly page: "/cluster/"
  readonly script: "/cluster/cluster.js"
  readonly style: "/cluster/cluster.css"
  readonly view: "/cluster/view.json"
  readonly events: "/cluster/events"
} = ViewPaths.paths

/**
 * How the page fetches its peers' stats and serves its event streams.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The path fetched at each peer's announced address: the stats route's. */
  readonly statsPath: string
  /** Time for one peer's whole answer. Default 1 second. */
  readonly fetchTimeout?: Duration.Input
  /** Bodies longer than this are refused. Default 1 MiB. */
  readonly maxBodyBytes?: number
  /** How long fetched stats are reused, however many pages poll. Default 1 second. */
  readonly refreshInterval?: Duration.Input
  /** Peers fetched at most per refresh (by server id); the others show `skipped`. Default 64. */
  readonly maxPeers?: number
  /** Event streams open at once; one more is answered 503. Default 8. */
  readonly maxStreams?: number
  /** An event stream ends after this long (the page reconnects). Default 60 seconds. */
  readonly streamLifetime?: Duration.Input
}

/**
 * @since 0.1.0
 * @category defaults
 */
export const defaults = {
  fetchTimeout: StatsFetch.defaults.timeout,
  maxBodyBytes: StatsFetch.defaults.maxBytes,
  refreshInterval: Duration.seconds(1),
  maxPeers: 64,
  maxStreams: 8,
  streamLifetime: Duration.seconds(60)
} as const

// ---------------------------------------------------------------------------------------------
// the view
// ---------------------------------------------------------------------------------------------

/**
 * How a node's stats came to the page: `self` (the node serving the page), `ok` (fetched and
 * decoded), `no_address` (its HELLO announced no `http_addr`, as an upstream replica of an older
 * revision or one whose address is off), `skipped` (over `maxPeers`), or why the fetch failed.
 *
 * @since 0.1.0
 * @category schemas
 */
export const FetchStatus = Schema.Literals([
  "self",
  "ok",
  "no_address",
  "skipped",
  ...StatsFetch.FetchFailure.literals
])

/**
 * @since 0.1.0
 * @category models
 */
export type FetchStatus = typeof FetchStatus.Type

/**
 * A node as the page shows it: `up` (its stats read, or heard alive where there is nothing to read),
 * `no_answer` (heard alive, but its stats route does not answer), `down` (no stats, and silent past
 * the dead threshold or neither its stats route nor its mesh port answers this node), `unknown`
 * (nothing heard of it yet).
 *
 * @since 0.1.0
 * @category schemas
 */
export const NodeState = Schema.Literals(["up", "no_answer", "down", "unknown"])

/**
 * One direction of a link: `linked` (the dialer's connection is up and the receiver hears it),
 * `dialling` (not up yet, no failure yet), `down` (failed, or silent), `refused` (the receiver refuses
 * the dialer's handshake), `self` (an entry naming the node itself), `unknown`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const LinkState = Schema.Literals(["linked", "dialling", "down", "refused", "self", "unknown"])

/**
 * @since 0.1.0
 * @category models
 */
export type LinkState = typeof LinkState.Type

/**
 * What the page shows of a node's own stats body.
 *
 * @since 0.1.0
 * @category schemas
 */
export const NodeStats = Schema.Struct({
  enabled: Schema.Boolean,
  /** Why the mesh does not run (`no_peers`, `disabled`), `null` when it does. */
  reason: Schema.NullOr(Schema.String),
  health: Schema.NullOr(MeshStats.HealthStats),
  version: Schema.String,
  uptime_ms: Schema.Number,
  auth: Schema.NullOr(Schema.String),
  tls: Schema.NullOr(Schema.String),
  port: Schema.NullOr(Schema.Number),
  messages_sent: Schema.Number,
  messages_received: Schema.Number,
  messages_dropped: Schema.Number,
  messages_dropped_down: Schema.Number,
  messages_discarded: Schema.Number,
  handshake_failures: Schema.Number,
  /** The refusal reasons with a count above zero. */
  rejections: Schema.Record(Schema.String, Schema.Number),
  servers_alive: Schema.Number,
  servers_dead: Schema.Number,
  maintenance_mode: Schema.Boolean,
  pop_maintenance_mode: Schema.Boolean,
  lane: Schema.NullOr(MeshStats.LaneStats)
})

/**
 * @since 0.1.0
 * @category models
 */
export interface NodeStats extends Schema.Schema.Type<typeof NodeStats> {}

/**
 * One node of the cluster.
 *
 * @since 0.1.0
 * @category schemas
 */
export const NodeView = Schema.Struct({
  /** Its server id, or `host:port` for a peer entry whose server is not known. */
  id: Schema.String,
  server_id: Schema.NullOr(Schema.String),
  /** The peer-list address it is dialled at, where known. */
  address: Schema.NullOr(Schema.String),
  /** The node serving the page. */
  self: Schema.Boolean,
  state: NodeState,
  fetch: Schema.Struct({
    status: FetchStatus,
    detail: Schema.NullOr(Schema.String),
    ms: Schema.NullOr(Schema.Number)
  }),
  /** Its inbound liveness, as the node serving the page hears it (or, failing that, another node). */
  heard: Schema.NullOr(
    Schema.Struct({ alive: Schema.Boolean, last_seen_ms_ago: Schema.Number, by: Schema.String })
  ),
  stats: Schema.NullOr(NodeStats)
})

/**
 * @since 0.1.0
 * @category models
 */
export interface NodeView extends Schema.Schema.Type<typeof NodeView> {}

/**
 * One direction of a link between two nodes, from the dialer's stats (its send queue) and the
 * receiver's (its inbound liveness), whichever the page has.
 *
 * @since 0.1.0
 * @category schemas
 */
export const LinkView = Schema.Struct({
  from: Schema.String,
  to: Schema.String,
  state: LinkState,
  reason: Schema.NullOr(Schema.String),
  /** Whose stats it is known from. */
  seen_by: Schema.Literals(["dialer", "receiver", "both"]),
  /** Whether the receiver hears the dialer within the dead threshold, where its stats say. */
  heard: Schema.NullOr(Schema.Boolean),
  queued: Schema.NullOr(Schema.Number),
  written: Schema.NullOr(Schema.Number),
  dropped_full: Schema.NullOr(Schema.Number),
  dropped_down: Schema.NullOr(Schema.Number),
  discarded: Schema.NullOr(Schema.Number),
  reconnects: Schema.NullOr(Schema.Number),
  /** Wake frames on this link, counted by the node serving the page (links to or from it only). */
  wakes: Schema.NullOr(Schema.Number)
})

/**
 * @since 0.1.0
 * @category models
 */
export interface LinkView extends Schema.Schema.Type<typeof LinkView> {}

/**
 * A histogram of the node's metrics: finite upper bounds, and a count per bucket (one more than the
 * bounds: the last counts what is above them).
 *
 * @since 0.1.0
 * @category schemas
 */
export const Histogram = Schema.Struct({
  bounds: Schema.Array(Schema.Number),
  counts: Schema.Array(Schema.Number),
  count: Schema.Number,
  sum: Schema.Number
})

/**
 * @since 0.1.0
 * @category models
 */
export interface Histogram extends Schema.Schema.Type<typeof Histogram> {}

/**
 * What the node serving the page counts in its metrics: wake frames received and sent (the page turns
 * them into rates), and the receive-to-apply time of what it received.
 *
 * @since 0.1.0
 * @category schemas
 */
export const LocalView = Schema.Struct({
  wakes_received: Schema.Number,
  wakes_sent: Schema.Number,
  /** `queen_mesh_receive_apply_seconds`: from a chunk read to its frames applied, in seconds. */
  apply_seconds: Schema.NullOr(Histogram)
})

/**
 * @since 0.1.0
 * @category models
 */
export interface LocalView extends Schema.Schema.Type<typeof LocalView> {}

/**
 * The body of `view.json`: the cluster as the node serving the page sees it.
 *
 * @since 0.1.0
 * @category schemas
 */
export const View = Schema.Struct({
  self: Schema.String,
  /** Milliseconds since the epoch, on the node serving the page. */
  generated_at: Schema.Number,
  nodes: Schema.Array(NodeView),
  links: Schema.Array(LinkView),
  local: LocalView
})

/**
 * @since 0.1.0
 * @category models
 */
export interface View extends Schema.Schema.Type<typeof View> {}

// ---------------------------------------------------------------------------------------------
// building it
// ---------------------------------------------------------------------------------------------

/**
 * A peer's stats as the node fetched them (or why it could not).
 *
 * @since 0.1.0
 * @category models
 */
export interface Remote {
  readonly serverId: string
  /** The `http_addr` its last HELLO announced. */
  readonly httpAddr: string | null
  readonly stats: Result.Result<
    MeshStats.MeshStats,
    { readonly status: Exclude<FetchStatus, "self" | "ok">; readonly detail: string | null }
  >
  /** How long the fetch took, when one was made. */
  readonly ms: number | null
}

/**
 * This node's metrics, as the page shows them: wake frames by peer (sent by peer address, received by
 * sender id) and the receive-to-apply histogram.
 *
 * @since 0.1.0
 * @category models
 */
export interface LocalMetrics {
  readonly wakesSent: ReadonlyMap<string, number>
  readonly wakesReceived: ReadonlyMap<string, number>
  readonly applySeconds: Histogram | null
}

/**
 * Everything the view is built from.
 *
 * @since 0.1.0
 * @category models
 */
export interface Sources {
  /** The stats of the node serving the page. */
  readonly self: MeshStats.MeshStats
  /** Its members (`Mesh.members`). */
  readonly members: ReadonlyArray<Membership.Member>
  readonly remotes: ReadonlyArray<Remote>
  /**
   * Peer-list addresses (`host:port`) known to name a server id: learnt since the node heard each peer
   * (`learnPeers`), and from earlier views (`learn`).
   */
  readonly addresses: ReadonlyMap<string, string>
  readonly local: LocalMetrics
  readonly now: number
  /**
   * This machine's own host names and addresses: a peer entry naming one of them at this node's mesh
   * port names this node.
   */
  readonly hosts?: ReadonlyArray<string>
}

/** Nodes a view shows at most (a cluster has a handful; a hostile peer's body may name thousands). */
const MAX_NODES = 256

const WAKE_TAGS: ReadonlySet<string> = new Set(["MESSAGE_AVAILABLE", "MESSAGE_AVAILABLE_BATCH"])

const addressName = PeerBook.addressName

const bodies = (sources: Pick<Sources, "self" | "remotes">): ReadonlyArray<MeshStats.MeshStats> => [
  sources.self,
  ...sources.remotes.flatMap((remote) => (Result.isSuccess(remote.stats) ? [remote.stats.success] : []))
]

/**
 * The peer-list addresses this round tells the server id of: members the node joined to their server
 * (a v2 challenge names the node dialled), entries a node recognised as itself, each fetched node's
 * mesh port at the host of its `http_addr`, and this node's mesh port at this machine's own names.
 * Kept across views, with what the node learnt of each peer as soon as it heard it (`learnPeers`), so
 * that a node that stops answering is still drawn at its address, by its name.
 *
 * @since 0.1.0
 * @category building
 */
export const learn = (
  sources: Pick<Sources, "self" | "members" | "remotes" | "hosts">
): ReadonlyArray<readonly [address: string, serverId: string]> => {
  const out: Array<readonly [string, string]> = []
  const self = sources.self
  if (self.enabled && self.port !== null)
    for (const host of sources.hosts ?? []) out.push([addressName(host, self.port), self.server_id])
  out.push(...PeerBook.fromMembers(sources.members))
  out.push(...PeerBook.fromBody(self, null))
  for (const remote of sources.remotes)
    if (Result.isSuccess(remote.stats)) out.push(...PeerBook.fromBody(remote.stats.success, remote.httpAddr))
  return out
}

/** What a link direction is made of before its state is decided. */
interface LinkParts {
  readonly from: string
  readonly to: string
  dialer: MeshStats.PeerStats | undefined
  receiver: MeshStats.ServerStats | undefined
}

const refusalOf = (stats: MeshStats.MeshStats | undefined): string | null => {
  if (stats === undefined || !stats.enabled || stats.handshake_failures === 0) return null
  const reasons = Object.entries(stats.rejections)
    .filter(([, n]) => n > 0)
    .map(([reason, n]) => `${reason} ${n}`)
  return `${stats.server_id} refuses handshakes (${reasons.join(", ")})`
}

/**
 * The view: every node the sources name, every link direction they tell of, each with its state.
 *
 * @since 0.1.0
 * @category building
 */
export const build = (sources: Sources): View => {
  const selfId = sources.self.server_id
  const addresses = new Map(sources.addresses)
  for (const [address, serverId] of learn(sources)) addresses.set(address, serverId)

  // Every server id the sources name, for entries whose host is the server's own name.
  const serverIds = new Set<string>([selfId, ...addresses.values()])
  for (const remote of sources.remotes) serverIds.add(remote.serverId)
  for (const member of sources.members)
    if (Option.isSome(member.serverId)) serverIds.add(member.serverId.value)
  const stats = new Map<string, MeshStats.MeshStats>()
  for (const body of bodies(sources)) {
    stats.set(body.server_id, body)
    serverIds.add(body.server_id)
    if (body.enabled) for (const server of body.servers) serverIds.add(server.server_id)
  }
  const resolve = (host: string, port: number): string => {
    const name = addressName(host, port)
    const known = addresses.get(name)
    if (known !== undefined) return known
    if (serverIds.has(host)) return host
    const label = host.split(".")[0] ?? host
    if (!/^\d+$/.test(label) && serverIds.has(label)) return label
    return name
  }

  // Nodes, at most MAX_NODES: peers' bodies are peers' to fill, the view stays small whatever they say.
  const nodes = new Map<string, NodeView & { -readonly [K in keyof NodeView]: NodeView[K] }>()
  const node = (id: string) => {
    let found = nodes.get(id)
    if (found === undefined) {
      if (nodes.size >= MAX_NODES) return undefined
      found = {
        id,
        server_id: serverIds.has(id) ? id : null,
        address: null,
        self: id === selfId,
        state: "unknown",
        fetch: { status: id === selfId ? "self" : "no_address", detail: null, ms: null },
        heard: null,
        stats: null
      }
      nodes.set(id, found)
    }
    return found
  }
  const self = node(selfId)!
  self.stats = nodeStats(sources.self)
  for (const remote of sources.remotes) {
    const entry = node(remote.serverId)
    if (entry === undefined) continue
    entry.fetch = Result.match(remote.stats, {
      onFailure: (failure) => ({
        status: failure.status,
        detail: failure.detail,
        ms: remote.ms
      }),
      onSuccess: () => ({ status: "ok" as const, detail: null, ms: remote.ms })
    })
    if (Result.isSuccess(remote.stats)) entry.stats = nodeStats(remote.stats.success)
  }
  // Liveness: as this node hears each server, else as the first node with stats that does.
  for (const member of sources.members) {
    if (member.self || Option.isNone(member.serverId) || Option.isNone(member.heard)) continue
    if (member.serverId.value === selfId) continue
    const heard = member.heard.value
    const entry = node(member.serverId.value)
    if (entry !== undefined)
      entry.heard = { alive: heard.alive, last_seen_ms_ago: heard.lastSeenMsAgo, by: selfId }
  }
  for (const body of bodies(sources)) {
    if (!body.enabled) continue
    for (const server of body.servers) {
      if (server.server_id === body.server_id) continue
      const entry = node(server.server_id)
      if (entry !== undefined && entry.heard === null && !entry.self)
        entry.heard = { alive: server.alive, last_seen_ms_ago: server.last_seen_ms_ago, by: body.server_id }
    }
  }

  // Link directions: from each dialer's peer list, and each receiver's servers heard.
  const links = new Map<string, LinkParts>()
  const link = (from: string, to: string) => {
    const key = `${from}\u0000${to}`
    let found = links.get(key)
    if (found === undefined) {
      found = { from, to, dialer: undefined, receiver: undefined }
      links.set(key, found)
    }
    return found
  }
  for (const body of bodies(sources)) {
    if (!body.enabled) continue
    for (const peer of body.peers) {
      const to = peer.self ? body.server_id : resolve(peer.host, peer.port)
      const target = node(to)
      if (target === undefined) continue
      if (target.address === null && !peer.self) target.address = addressName(peer.host, peer.port)
      link(body.server_id, to).dialer = peer
    }
    for (const server of body.servers) {
      if (server.server_id === body.server_id || !nodes.has(server.server_id)) continue
      link(server.server_id, body.server_id).receiver = server
    }
  }

  const out: Array<LinkView> = []
  for (const parts of links.values()) out.push(linkView(parts, stats, sources.local, selfId))

  // Node states, once links are known.
  for (const entry of nodes.values()) entry.state = nodeState(entry, out, selfId)
  // A down node's links known from their receiver alone (its own stats unread) are down too: the
  // receiver's last frame from it may be younger than the dead threshold, but nothing more will come.
  for (const [i, link] of out.entries()) {
    if (link.seen_by !== "receiver" || link.state !== "linked") continue
    if (nodes.get(link.from)?.state !== "down") continue
    out[i] = { ...link, state: "down", reason: `${link.from} is down` }
  }

  // This node first, then the servers by id, then peer entries known only by their address.
  const rank = (entry: NodeView) => (entry.self ? 0 : entry.server_id !== null ? 1 : 2)
  const sortedNodes = [...nodes.values()].sort((a, b) =>
    rank(a) !== rank(b) ? rank(a) - rank(b) : a.id < b.id ? -1 : a.id > b.id ? 1 : 0
  )
  out.sort((a, b) => (a.from === b.from ? (a.to < b.to ? -1 : 1) : a.from < b.from ? -1 : 1))
  let wakesReceived = 0
  let wakesSent = 0
  for (const n of sources.local.wakesReceived.values()) wakesReceived += n
  for (const n of sources.local.wakesSent.values()) wakesSent += n
  return {
    self: selfId,
    generated_at: sources.now,
    nodes: sortedNodes,
    links: out,
    local: { wakes_received: wakesReceived, wakes_sent: wakesSent, apply_seconds: sources.local.applySeconds }
  }
}

const nodeStats = (stats: MeshStats.MeshStats): NodeStats => {
  if (!stats.enabled) {
    return {
      enabled: false,
      reason: stats.reason,
      health: null,
      version: stats.version,
      uptime_ms: stats.uptime_ms,
      auth: null,
      tls: null,
      port: null,
      messages_sent: 0,
      messages_received: 0,
      messages_dropped: 0,
      messages_dropped_down: 0,
      messages_discarded: 0,
      handshake_failures: 0,
      rejections: {},
      servers_alive: 0,
      servers_dead: 0,
      maintenance_mode: stats.maintenance_mode,
      pop_maintenance_mode: stats.pop_maintenance_mode,
      lane: null
    }
  }
  return {
    enabled: true,
    reason: null,
    health: stats.health,
    version: stats.version,
    uptime_ms: stats.uptime_ms,
    auth: stats.auth,
    tls: stats.tls,
    port: stats.port,
    messages_sent: stats.messages_sent,
    messages_received: stats.messages_received,
    messages_dropped: stats.messages_dropped,
    messages_dropped_down: stats.messages_dropped_down,
    messages_discarded: stats.messages_discarded,
    handshake_failures: stats.handshake_failures,
    rejections: Object.fromEntries(Object.entries(stats.rejections).filter(([, n]) => n > 0)),
    servers_alive: stats.servers_alive,
    servers_dead: stats.servers_dead,
    maintenance_mode: stats.maintenance_mode,
    pop_maintenance_mode: stats.pop_maintenance_mode,
    lane: stats.lane
  }
}

/** What the dialer's view of a link says when its connection is not up. */
const failedState = (error: string): LinkState =>
  error === "no challenge" || error.startsWith("invalid challenge") ? "refused" : "down"

const linkView = (
  parts: LinkParts,
  stats: ReadonlyMap<string, MeshStats.MeshStats>,
  local: LocalMetrics,
  selfId: string
): LinkView => {
  const { from, to, dialer, receiver } = parts
  const receiverStats = stats.get(to)
  const dialerStats = stats.get(from)
  const silent = (ms: number) => `${to} hears nothing from ${from} for ${ms} ms`
  let state: LinkState = "unknown"
  let reason: string | null = null
  if (dialer?.self) {
    state = "self"
    reason = "the peer list names this node itself"
  } else if (dialer !== undefined) {
    const refusal = refusalOf(receiverStats)
    if (dialer.connected) {
      if (receiver !== undefined && !receiver.alive) {
        state = "down"
        reason = silent(receiver.last_seen_ms_ago)
      } else if (receiver === undefined && receiverStats?.enabled === true) {
        // Connected, yet the receiver has never accepted a HELLO from the dialer.
        state = refusal !== null ? "refused" : "dialling"
        reason = refusal ?? `connected; ${to} has not heard ${from}'s HELLO yet`
      } else if (receiverStats === undefined && dialerHearsDead(dialerStats, to)) {
        state = "down"
        reason = `connected, but ${to} is silent`
      } else {
        state = "linked"
      }
    } else if (dialer.last_error !== null) {
      const closedByRefusal =
        dialer.last_error === "closed by peer" && refusal !== null && receiver?.alive !== true
      state = closedByRefusal ? "refused" : failedState(dialer.last_error)
      reason =
        state === "refused" && refusal !== null ? `${dialer.last_error}: ${refusal}` : dialer.last_error
    } else {
      state = "dialling"
    }
  } else if (receiver !== undefined) {
    state = receiver.alive ? "linked" : "down"
    reason = receiver.alive ? null : silent(receiver.last_seen_ms_ago)
  }
  const count = (get: (peer: MeshStats.PeerStats) => number) => (dialer === undefined ? null : get(dialer))
  const wakes =
    from === selfId && dialer !== undefined
      ? (local.wakesSent.get(addressName(dialer.host, dialer.port)) ?? 0)
      : to === selfId
        ? (local.wakesReceived.get(from) ?? 0)
        : null
  return {
    from,
    to,
    state,
    reason,
    seen_by:
      dialer !== undefined && receiver !== undefined ? "both" : dialer !== undefined ? "dialer" : "receiver",
    heard: receiver === undefined ? null : receiver.alive,
    queued: count((peer) => peer.queued),
    written: count((peer) => peer.written),
    dropped_full: count((peer) => peer.dropped_full),
    dropped_down: count((peer) => peer.dropped_down),
    discarded: count((peer) => peer.discarded),
    reconnects: count((peer) => peer.reconnects),
    wakes: state === "self" ? null : wakes
  }
}

const dialerHearsDead = (dialerStats: MeshStats.MeshStats | undefined, to: string): boolean =>
  dialerStats?.enabled === true &&
  dialerStats.servers.some((server) => server.server_id === to && !server.alive)

const nodeState = (entry: NodeView, links: ReadonlyArray<LinkView>, selfId: string): NodeView["state"] => {
  if (entry.self || entry.fetch.status === "ok") return "up"
  const nothingToRead =
    entry.fetch.status === "no_address" ||
    entry.fetch.status === "not_stats" ||
    entry.fetch.status === "bad_address" ||
    entry.fetch.status === "skipped"
  // Both of this node's own ways to it fail (its stats unreachable, and the link this node dials to it
  // down): down now, not only once it has been silent for the dead threshold (a killed process).
  const unreachable = entry.fetch.status === "unreachable" || entry.fetch.status === "timeout"
  const dialled = links.find((link) => link.from === selfId && link.to === entry.id)
  if (unreachable && (dialled?.state === "down" || dialled?.state === "refused")) return "down"
  if (entry.heard !== null) {
    if (!entry.heard.alive) return "down"
    return nothingToRead ? "up" : "no_answer"
  }
  // Known only as a peer entry: its state is the link to it.
  const into = links.filter((link) => link.to === entry.id && link.state !== "self")
  if (into.some((link) => link.state === "linked")) return "up"
  if (into.some((link) => link.state === "down" || link.state === "refused")) return "down"
  return "unknown"
}

// ---------------------------------------------------------------------------------------------
// this node's metrics
// ---------------------------------------------------------------------------------------------

/**
 * The page's part of this process's metrics for the node `serverId`: wake frames by peer and the
 * receive-to-apply histogram. Call `Mesh.syncMetrics` first for counters as of now.
 *
 * @since 0.1.0
 * @category building
 */
export const localMetrics = (serverId: string): Effect.Effect<LocalMetrics> =>
  Effect.sync(() => {
    const wakesSent = new Map<string, number>()
    const wakesReceived = new Map<string, number>()
    let applySeconds: Histogram | null = null
    for (const snapshot of Metric.snapshotUnsafe(MetricNames.registry)) {
      const name = snapshot.id
      if (name !== MeshMetrics.names.framesSent && name !== MeshMetrics.names.framesReceived) {
        if (name !== MeshMetrics.names.applySeconds) continue
      }
      const tags = snapshot.attributes ?? {}
      if (tags.server_id !== serverId) continue
      if (name === MeshMetrics.names.applySeconds) {
        if (snapshot.type === "Histogram") applySeconds = histogramOf(snapshot.state)
        continue
      }
      const peer = tags.peer
      const tag = tags.tag
      if (peer === undefined || tag === undefined || !WAKE_TAGS.has(tag)) continue
      if (snapshot.type !== "Counter") continue
      const into = name === MeshMetrics.names.framesSent ? wakesSent : wakesReceived
      into.set(peer, (into.get(peer) ?? 0) + Number(snapshot.state.count))
    }
    return { wakesSent, wakesReceived, applySeconds }
  })

const histogramOf = (state: Metric.HistogramState): Histogram => {
  const bounds: Array<number> = []
  const counts: Array<number> = []
  let below = 0
  for (const [bound, cumulative] of state.buckets) {
    if (bound === Number.POSITIVE_INFINITY) break
    bounds.push(bound)
    counts.push(cumulative - below)
    below = cumulative
  }
  counts.push(state.count - below)
  return { bounds, counts, count: state.count, sum: state.sum }
}

// ---------------------------------------------------------------------------------------------
// events
// ---------------------------------------------------------------------------------------------

/**
 * The kinds of event the page lists: peers and links coming and going, health changes, members
 * joining and leaving, refusals, the lane, maintenance flips. Wakes and hints are left out: the page
 * shows their rate. The last 64 are kept from the start (`learnPeers`), and an event stream begins
 * with them, so a page opened after a fault lists it.
 *
 * @since 0.1.0
 * @category events
 */
export const eventTags: readonly [
  "PeerUp",
  "PeerDown",
  "LinkUp",
  "LinkDown",
  "HealthChanged",
  "MemberJoined",
  "MemberLeft",
  "HandshakeFailed",
  "InvalidFrame",
  "LaneStatus",
  "SelfRecognized",
  "Maintenance",
  "PopMaintenance"
] = ViewHistory.tags

/**
 * One line of the page's event list.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ViewEvent = Schema.Struct({
  at: Schema.Number,
  tag: Schema.Literals(eventTags),
  subject: Schema.String,
  detail: Schema.String,
  tone: Schema.Literals(["good", "bad", "info"])
})

/**
 * @since 0.1.0
 * @category models
 */
export interface ViewEvent extends Schema.Schema.Type<typeof ViewEvent> {}

/**
 * One message of the event stream: the events since the last one, and how many were left out
 * (more than 64 between two messages).
 *
 * @since 0.1.0
 * @category schemas
 */
export const EventBatch = Schema.Struct({
  events: Schema.Array(ViewEvent),
  dropped: Schema.Number
})

/** Strings from peers are cut to this length: a message stays small whatever a peer says. */
const MAX_TEXT = 200

const cut = (text: string): string => (text.length > MAX_TEXT ? `${text.slice(0, MAX_TEXT)}…` : text)

/** How good each health is, for the colour of a change: `starting` as good as `degraded`. */
const HEALTH_RANK = { isolated: 0, starting: 1, degraded: 1, solo: 2, clustered: 2 } as const

/**
 * The list's line for an event, `undefined` for a kind it does not show.
 *
 * @since 0.1.0
 * @category events
 */
export const eventOf = (event: MeshEvent, selfId: string, at: number): ViewEvent | undefined => {
  const line = (subject: string, detail: string, tone: ViewEvent["tone"]): Omit<ViewEvent, "tag"> => ({
    at,
    subject: cut(subject),
    detail: cut(detail),
    tone
  })
  switch (event._tag) {
    case "PeerUp":
      return { tag: event._tag, ...line(event.serverId, "heard: alive", "good") }
    case "PeerDown":
      return { tag: event._tag, ...line(event.serverId, "silent past the dead threshold: dead", "bad") }
    case "LinkUp":
      return {
        tag: event._tag,
        ...line(event.peer, event.remote === null ? "link up" : `link up (${event.remote})`, "good")
      }
    case "LinkDown":
      return { tag: event._tag, ...line(event.peer, `link down: ${event.reason}`, "bad") }
    case "HealthChanged":
      return {
        tag: event._tag,
        ...line(
          selfId,
          `health ${event.from} → ${event.to}`,
          HEALTH_RANK[event.to] >= HEALTH_RANK[event.from] ? "good" : "bad"
        )
      }
    case "MemberJoined":
      return { tag: event._tag, ...line(event.peer, `joined (${event.foundBy})`, "info") }
    case "MemberLeft":
      return { tag: event._tag, ...line(event.peer, `left (${event.foundBy}): ${event.reason}`, "info") }
    case "HandshakeFailed":
      return { tag: event._tag, ...line(event.remote, `handshake refused: ${event.reason}`, "bad") }
    case "InvalidFrame":
      return {
        tag: event._tag,
        ...line(event.from, `invalid frame (tag ${event.tag}): ${event.detail}`, "bad")
      }
    case "LaneStatus":
      return {
        tag: event._tag,
        ...line(
          "lane",
          event.detail === null ? event.status : `${event.status}: ${event.detail}`,
          event.status === "up" ? "good" : event.status === "down" ? "bad" : "info"
        )
      }
    case "SelfRecognized":
      return { tag: event._tag, ...line(event.peer, "the peer list names this node itself", "info") }
    case "Maintenance":
      return { tag: event._tag, ...line(event.from, `maintenance ${event.enabled ? "on" : "off"}`, "info") }
    case "PopMaintenance":
      return {
        tag: event._tag,
        ...line(event.from, `pop maintenance ${event.enabled ? "on" : "off"}`, "info")
      }
    default:
      return undefined
  }
}

// ---------------------------------------------------------------------------------------------
// per-node state of the routes
// ---------------------------------------------------------------------------------------------

/**
 * What the routes keep for one mesh: the shared fetch and open event streams. The addresses learned
 * are the mesh's `PeerBook`, which `learnPeers` keeps from the start whether or not a page is opened.
 */
class ViewState {
  readonly flight: SingleFlight<ReadonlyArray<Remote>>
  readonly places: EventStream.Places

  constructor(settings: Settings) {
    const refresh = Duration.toMillis(settings.refreshInterval)
    // Stats begun more than a refresh and a fetch ago are never shown: the next view waits instead.
    this.flight = new SingleFlight(refresh, refresh + Duration.toMillis(settings.fetchTimeout))
    this.places = new EventStream.Places(settings.maxStreams)
  }
}

interface Settings {
  readonly statsPath: string
  readonly fetchTimeout: Duration.Duration
  readonly maxBodyBytes: number
  readonly refreshInterval: Duration.Duration
  readonly maxPeers: number
  readonly maxStreams: number
  readonly streamLifetime: Duration.Duration
}

const settingsOf = (options: Options): Settings => ({
  statsPath: options.statsPath,
  fetchTimeout: Duration.fromInputUnsafe(options.fetchTimeout ?? defaults.fetchTimeout),
  maxBodyBytes: options.maxBodyBytes ?? defaults.maxBodyBytes,
  refreshInterval: Duration.fromInputUnsafe(options.refreshInterval ?? defaults.refreshInterval),
  maxPeers: options.maxPeers ?? defaults.maxPeers,
  maxStreams: options.maxStreams ?? defaults.maxStreams,
  streamLifetime: Duration.fromInputUnsafe(options.streamLifetime ?? defaults.streamLifetime)
})

/**
 * The peers to fetch: every server this node heard a HELLO from, with the address it announced.
 *
 * @since 0.1.0
 * @category building
 */
export const targets = (
  members: ReadonlyArray<Membership.Member>,
  selfId: string
): ReadonlyArray<{ readonly serverId: string; readonly httpAddr: string | null }> => {
  const out = new Map<string, string | null>()
  for (const member of members) {
    if (member.self || Option.isNone(member.serverId) || Option.isNone(member.heard)) continue
    if (member.serverId.value === selfId) continue
    out.set(member.serverId.value, Option.getOrNull(member.heard.value.httpAddr))
  }
  return [...out]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([serverId, httpAddr]) => ({ serverId, httpAddr }))
}

const fetchRemotes = (
  list: ReturnType<typeof targets>,
  settings: Settings
): Effect.Effect<ReadonlyArray<Remote>> =>
  Effect.forEach(
    list,
    (target, index): Effect.Effect<Remote> => {
      if (target.httpAddr === null)
        return Effect.succeed({
          ...target,
          stats: Result.fail({ status: "no_address", detail: "its HELLO announced no http_addr" }),
          ms: null
        })
      if (index >= settings.maxPeers)
        return Effect.succeed({
          ...target,
          stats: Result.fail({ status: "skipped", detail: `more than ${settings.maxPeers} peers` }),
          ms: null
        })
      const httpAddr = target.httpAddr
      return Effect.gen(function* () {
        const start = yield* Clock.currentTimeMillis
        const result = yield* Effect.result(
          StatsFetch.fetchStats(target.serverId, httpAddr, {
            path: settings.statsPath,
            timeout: settings.fetchTimeout,
            maxBytes: settings.maxBodyBytes
          })
        )
        const ms = (yield* Clock.currentTimeMillis) - start
        return {
          ...target,
          stats: Result.mapError(result, (error) => ({ status: error.reason, detail: error.detail })),
          ms
        }
      })
    },
    { concurrency: 16 }
  )

// ---------------------------------------------------------------------------------------------
// routes
// ---------------------------------------------------------------------------------------------

/**
 * The page's own files, as they ship in the package: `cluster.html`, `cluster.css`, `cluster.js`.
 *
 * @since 0.1.0
 * @category constants
 */
export const assetDirectory: URL = ViewAssets.directory

/** Scripts, styles and requests from this origin only: the page fetches nothing from elsewhere. */
const PAGE_HEADERS = {
  "cache-control": "no-store",
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer"
} as const

const json = (body: unknown, status = 200) =>
  HttpServerResponse.jsonUnsafe(body, { status, headers: { "cache-control": "no-store" } })

const assetHandler = (name: ViewAssets.Name) =>
  Effect.sync(() => {
    const asset = ViewAssets.assetOf(name)
    return asset === null
      ? json({ error: "cluster_page_missing", file: ViewAssets.files[name][0] }, 500)
      : HttpServerResponse.uint8Array(asset.body, { contentType: asset.contentType, headers: PAGE_HEADERS })
  })

/**
 * The page, at `cluster/`: the router matches `/cluster` too, which is answered with a redirect, since
 * the page names its files relatively.
 */
const pageHandler = Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
  const path = new URL(request.url, "http://localhost").pathname
  return path.endsWith("/")
    ? assetHandler("page")
    : Effect.succeed(
        HttpServerResponse.empty({
          status: 308,
          headers: { location: "cluster/", "cache-control": "no-store" }
        })
      )
})

/** One `ViewState` per mesh, made on the first request: a router value is shared by every mesh. */
const states = new WeakMap<MeshShape, ViewState>()

const stateOf = (mesh: MeshShape, settings: Settings): ViewState => {
  let state = states.get(mesh)
  if (state === undefined) {
    state = new ViewState(settings)
    states.set(mesh, state)
  }
  return state
}

/**
 * The view as `view.json` serves it, for the mesh in context: its stats and members, its peers' stats
 * (fetched at most once per refresh interval, however many ask), and its metrics.
 *
 * @since 0.1.0
 * @category building
 */
export const view = (options: Options): Effect.Effect<View, never, Mesh> => {
  const settings = settingsOf(options)
  return viewWith(settings)
}

const viewWith = (settings: Settings): Effect.Effect<View, never, Mesh> =>
  Effect.gen(function* () {
    const mesh = yield* Mesh
    const state = stateOf(mesh, settings)
    const book = PeerBook.bookOf(mesh)
    const remotes = yield* state.flight.get(
      Effect.flatMap(mesh.members, (members) => fetchRemotes(targets(members, mesh.serverId), settings))
    )
    // Members and stats as of now, after the fetch: liveness is the mesh's, never older than the view.
    const members = yield* mesh.members
    const self = yield* mesh.stats
    yield* mesh.syncMetrics
    const local = yield* localMetrics(mesh.serverId)
    const now = yield* Clock.currentTimeMillis
    const hosts = PeerBook.ownHosts()
    book.remember(learn({ self, members, remotes, hosts }))
    return build({ self, members, remotes, addresses: book.addresses, local, now, hosts })
  })

/**
 * Keeps, from now until the scope closes, what the page needs to name its peers, whether or not it is
 * ever opened: as soon as the mesh in context hears a server announcing an `http_addr`, the node asks
 * its stats once (the page's own bounded request: see `Options`) and records which peer-list address
 * is that server, so a page first opened after the server died still draws it by its name, at its
 * address. Asked again when the server announces another address or boot epoch (seen at the next
 * membership change, or within 30 s); retried while it is alive and does not answer. An idle node does
 * nothing for it: the members are read on membership changes and retries only. `HttpRoutes.serve`, `HttpRoutes.layer` and `queen-mesh node` run it; a
 * host that mounts `HttpRoutes.router` into its own server runs it in the mesh's scope (without it,
 * the page learns each address only while it is open).
 *
 * @since 0.1.0
 * @category building
 */
export const learnPeers = (
  options: Pick<Options, "statsPath" | "fetchTimeout" | "maxBodyBytes">
): Effect.Effect<void, never, Mesh | Scope.Scope> => PeerBook.learnPeers(options)

const eventsHandler = (settings: Settings) =>
  Effect.map(Mesh, (mesh) => {
    const state = stateOf(mesh, settings)
    if (state.places.full) return json({ error: "too_many_streams", max: settings.maxStreams }, 503)
    const stream = EventStream.eventStream(mesh, {
      tags: eventTags,
      recent: ViewHistory.historyOf(mesh).recent(),
      format: (event, at) => eventOf(event, mesh.serverId, at),
      places: state.places,
      lifetime: settings.streamLifetime
    })
    return HttpServerResponse.stream(stream, {
      contentType: "text/event-stream",
      headers: { "cache-control": "no-store", "x-accel-buffering": "no" }
    })
  })

/**
 * The page's routes: the page (`/cluster/`, and `/cluster` redirecting to it), its two files, the view
 * (`view.json`) and the event stream (`events`), for a host to add to its own `HttpRouter`;
 * {@link makeRouter} is the same as a layer. `HttpRoutes.makeRoutes` mounts them with the stats
 * routes, so a host that serves those serves the page.
 *
 * @since 0.1.0
 * @category routers
 */
export const makeRoutes = (options: Options): ReadonlyArray<HttpRouter.Route<never, Mesh>> => {
  const settings = settingsOf(options)
  return [
    HttpRouter.route("GET", paths.page, pageHandler),
    HttpRouter.route("GET", paths.style, assetHandler("style")),
    HttpRouter.route("GET", paths.script, assetHandler("script")),
    HttpRouter.route(
      "GET",
      paths.view,
      Effect.map(viewWith(settings), (body) => json(body))
    ),
    HttpRouter.route("GET", paths.events, eventsHandler(settings))
  ]
}

/**
 * The page's routes (see {@link makeRoutes}) as a layer of effect's `HttpRouter`.
 *
 * @since 0.1.0
 * @category routers
 */
export const makeRouter = (
  options: Options
): Layer.Layer<never, never, HttpRouter.HttpRouter | HttpRouter.Request<"Requires", Mesh>> =>
  HttpRouter.addAll(makeRoutes(options))
