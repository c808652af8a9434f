/**
 * The body of the stats routes (spec "Observing it"), as `Mesh.stats` returns it: defined once, here,
 * as Schemas. The types derive from them, the runtime assembles the body from the membership model and
 * its counters, the HTTP routes serve it, and the `queen-mesh stats` command decodes it with a lenient
 * view of the same Schemas (it also reads upstream Queen's bodies).
 *
 * Every field upstream Queen's body has keeps upstream's meaning (`running`, `resolved`,
 * `resolved_ip`, `messages_received`, `signature_failures`, `sequence_rejections`, ...), so its
 * dashboards and scripts read ours; our extra detail is in fields of its own. The refusal reasons are
 * `MeshError.handshakeReasons`, one key each.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import * as LaneRefusals from "./internal/lane/refusals.js"
import * as Payloads from "./internal/wire/payloads.js"
import * as Membership from "./Membership.js"
import * as MeshConfig from "./MeshConfig.js"
import { type HandshakeError, handshakeReasonList, handshakeReasons } from "./MeshError.js"
import * as MeshHealth from "./MeshHealth.js"

/**
 * One configured peer as the stats show it.
 *
 * @since 0.1.0
 * @category schemas
 */
export const PeerStats = Schema.Struct({
  host: Schema.String,
  port: Schema.Number,
  /** Whether the outbound connection is established. */
  connected: Schema.Boolean,
  /** The entry names this node itself (recognised by its own HELLO): not a link. */
  self: Schema.Boolean,
  /** How the entry came: the configured list, DNS discovery or another `Discovery`. */
  found_by: Schema.Literals(["config", "dns", "discovery"]),
  /** Upstream's meaning: the same as `connected`. */
  resolved: Schema.Boolean,
  /** The established link's remote address; `null` while the link is down (upstream's meaning). */
  resolved_ip: Schema.NullOr(Schema.String),
  /** The address the last established link used, kept while it is down. */
  last_resolved_ip: Schema.NullOr(Schema.String),
  /** The link's counters, under their one names (`Membership.LinkCounters`). */
  ...Membership.LinkCounters.fields,
  /** Why the last dial or link failed, if one did. */
  last_error: Schema.NullOr(Schema.String)
})

/**
 * @since 0.1.0
 * @category models
 */
export interface PeerStats extends Schema.Schema.Type<typeof PeerStats> {}

/**
 * One server heard from, by its server id: on an inbound TCP link (the id its HELLO announced) or on the
 * lane (the id of its authenticated notifications), or both.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ServerStats = Schema.Struct({
  server_id: Schema.String,
  /** Heard within the dead threshold on a carrier it is heard on. */
  alive: Schema.Boolean,
  /** Milliseconds since the last frame from it, on whichever carrier. */
  last_seen_ms_ago: Schema.Number,
  /** The id of the key its HELLO proved (`null` in open mode, or heard on the lane only). */
  key_id: Schema.NullOr(Schema.String),
  /** Where it is heard: its inbound TCP link, the lane, or both. */
  heard_on: Schema.Array(Schema.Literals(["tcp", "lane"]))
})

/**
 * @since 0.1.0
 * @category models
 */
export interface ServerStats extends Schema.Schema.Type<typeof ServerStats> {}

const rejectionFields = Object.fromEntries(
  handshakeReasonList.map((reason) => [handshakeReasons[reason].stat, Schema.Number])
) as { readonly [K in HandshakeError.Stat]: typeof Schema.Number }

/**
 * Refused inbound connections by reason, one key per `MeshError.handshakeReasons` entry; their sum is
 * `handshake_failures`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const RejectionStats = Schema.Struct(rejectionFields)

/**
 * @since 0.1.0
 * @category models
 */
export interface RejectionStats extends Schema.Schema.Type<typeof RejectionStats> {}

/**
 * The lane's part of the body (`null` without a lane): its state and counters.
 *
 * @since 0.1.0
 * @category schemas
 */
export const LaneStats = Schema.Struct({
  kind: Schema.Literal("pg"),
  status: Schema.Literals(["starting", "up", "down"]),
  /** Why the lane is down, or last went down. */
  last_error: Schema.NullOr(Schema.String),
  channel: Schema.String,
  /** This process's boot epoch on the lane. */
  epoch: Schema.String,
  notifications_sent: Schema.Number,
  notifications_received: Schema.Number,
  bytes_sent: Schema.Number,
  bytes_received: Schema.Number,
  frames_sent: Schema.Number,
  frames_received: Schema.Number,
  /**
   * Notifications and frames refused, by reason: the envelope's (`malformed`, `unknown_key`, `bad_mac`,
   * `unauthenticated`, `own_server_id`, `old_epoch`, `replayed`, `wrong_backend`, `stale`; see
   * docs/postgres.md) and the frames' (`invalid_frame`, `handshake_frame`, `unknown_frame`,
   * `overloaded`).
   */
  refused: Schema.Struct(
    Object.fromEntries(LaneRefusals.reasons.map((reason) => [reason, Schema.Number])) as {
      readonly [R in LaneRefusals.Refusal]: typeof Schema.Number
    }
  ),
  /** Frames the lane could not send (buffer full while down, too large, stale, failed). */
  dropped: Schema.Number,
  /** Frames waiting for the connection. */
  buffered: Schema.Number,
  reconnects: Schema.Number,
  /** `pg_notification_queue_usage()` at the last check, 0 to 1; `null` before the first. */
  queue_usage: Schema.NullOr(Schema.Number),
  /** Other nodes heard on the lane within the dead threshold. */
  members_alive: Schema.Number,
  /**
   * Every other node heard on the lane (bounded), by server id: its liveness there, its boot epoch, and
   * how this node knows it (`lane`, or the configured or discovered entry whose link reaches it).
   */
  members: Schema.Array(
    Schema.Struct({
      server_id: Schema.String,
      alive: Schema.Boolean,
      last_seen_ms_ago: Schema.Number,
      epoch: Schema.String,
      found_by: Membership.FoundBy
    })
  )
})

/**
 * @since 0.1.0
 * @category models
 */
export interface LaneStats extends Schema.Schema.Type<typeof LaneStats> {}

/**
 * The node's health (see `MeshHealth`).
 *
 * @since 0.1.0
 * @category schemas
 */
export const HealthStats = MeshHealth.Health

/**
 * What discovery did (`null` without one).
 *
 * @since 0.1.0
 * @category schemas
 */
export const DiscoveryStats = Schema.Struct({
  source: Schema.String,
  rounds: Schema.Number,
  failed_rounds: Schema.Number,
  last_error: Schema.NullOr(Schema.String)
})

const ByFoundBy = Schema.Struct({ config: Schema.Number, dns: Schema.Number, discovery: Schema.Number })

/**
 * `EPH_ADMIN` verbs counted per operation.
 *
 * @since 0.1.0
 * @category schemas
 */
export const EphAdminCounts = Schema.Struct(
  Object.fromEntries(Payloads.EphOp.literals.map((op) => [op, Schema.Number])) as {
    readonly [Op in Payloads.EphOp]: typeof Schema.Number
  }
)

/**
 * @since 0.1.0
 * @category models
 */
export interface EphAdminCounts extends Schema.Schema.Type<typeof EphAdminCounts> {}

/**
 * The listener's connections.
 *
 * @since 0.1.0
 * @category schemas
 */
export const InboundStats = Schema.Struct({
  /** Inbound connections open now. */
  open: Schema.Number,
  /** Of those, the ones whose HELLO verified. */
  authenticated: Schema.Number,
  /** Inbound connections whose HELLO verified, since the start. */
  authenticated_total: Schema.Number,
  /** Connections that closed without sending a byte (TCP health probes): never handshake failures. */
  closed_silent: Schema.Number,
  /** Authenticated links closed after a silence longer than the idle timeout. */
  closed_idle: Schema.Number,
  /** Legacy HELLOs accepted in `permissive` mode (still replayable). */
  legacy_accepted: Schema.Number,
  /** Our own dials recognised and closed (the peer list names this node): not handshake failures. */
  self_dials: Schema.Number
})

/**
 * @since 0.1.0
 * @category models
 */
export interface InboundStats extends Schema.Schema.Type<typeof InboundStats> {}

/**
 * The stats body of an active mesh.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ActiveStats = Schema.Struct({
  enabled: Schema.Literal(true),
  /** Upstream's: the mesh runs; `false` once the mesh's scope has closed. */
  running: Schema.Boolean,
  server_id: Schema.String,
  transport: Schema.Literal("tcp-mesh"),
  /** The bound mesh port; `null` when the node runs on the lane alone (nothing binds). */
  port: Schema.NullOr(Schema.Number),
  version: Schema.String,
  uptime_ms: Schema.Number,
  auth: MeshConfig.AuthMode,
  tls: MeshConfig.TlsMode,
  /** The id of this node's primary key (`null` in open mode), and of the keys it still accepts. */
  key_id: Schema.NullOr(Schema.String),
  accepted_key_ids: Schema.Array(Schema.String),
  health: HealthStats,
  /** Peers configured (an entry naming this node included). */
  peer_count: Schema.Number,
  peers: Schema.Array(PeerStats),
  servers_alive: Schema.Number,
  servers_dead: Schema.Number,
  /** Every server heard from so far, alive or dead (never-heard ones are absent); bounded. */
  servers: Schema.Array(ServerStats),
  /** Frames written to peers (HELLO excluded, heartbeats included). */
  messages_sent: Schema.Number,
  /** Every frame read after a HELLO: frames_dispatched + frames_invalid + frames_unknown + frames_oversized. */
  messages_received: Schema.Number,
  /**
   * Upstream's meaning: frames dropped because a peer's send queue was full (Σ `dropped_full`). Frames
   * lost to a link that was down are in `messages_dropped_down` and `messages_discarded`.
   */
  messages_dropped: Schema.Number,
  /** Frames handed to a link that was down (Σ `dropped_down`). */
  messages_dropped_down: Schema.Number,
  /** Frames queued when their link broke, discarded then (Σ `discarded`). */
  messages_discarded: Schema.Number,
  /**
   * Upstream's: servers alive (a frame within the dead threshold) whose last HELLO made them
   * ephemeral-capable, this node excluded (see `Membership.ephemeralMembers`).
   */
  eph_members: Schema.Number,
  /** `EPH_ADMIN` verbs broadcast by this node and received from peers, per operation. */
  eph_admin: Schema.Struct({ sent: EphAdminCounts, received: EphAdminCounts }),
  /** Peer entries added and removed since the start, by how they were found. */
  members_joined: ByFoundBy,
  members_left: ByFoundBy,
  discovery: Schema.NullOr(DiscoveryStats),
  lane: Schema.NullOr(LaneStats),
  /** Refused inbound connections, every reason (see `rejections`). */
  handshake_failures: Schema.Number,
  /** Upstream's name for the same count. */
  signature_failures: Schema.Number,
  /** Upstream's; always 0 here (no sequence numbers on the wire). */
  sequence_rejections: Schema.Number,
  frames_dispatched: Schema.Number,
  /** Frames whose payload broke its Schema (counted and skipped). */
  frames_invalid: Schema.Number,
  /** Frames with a tag this version does not know (skipped). */
  frames_unknown: Schema.Number,
  /** Frames over their tag's cap, skipped without being buffered. */
  frames_oversized: Schema.Number,
  /** Batch items skipped for breaking a rule; the rest of their batch was applied. */
  items_invalid: Schema.Number,
  rejections: RejectionStats,
  inbound: InboundStats,
  maintenance_mode: Schema.Boolean,
  pop_maintenance_mode: Schema.Boolean
})

/**
 * @since 0.1.0
 * @category models
 */
export interface ActiveStats extends Schema.Schema.Type<typeof ActiveStats> {}

/**
 * The stats body when the mesh does not run: no peers configured, or sync turned off. Upstream's body
 * is exactly `{enabled, reason, maintenance_mode, pop_maintenance_mode}`; ours adds the rest.
 *
 * @since 0.1.0
 * @category schemas
 */
export const InactiveStats = Schema.Struct({
  enabled: Schema.Literal(false),
  reason: Schema.Literals(["no_peers", "disabled"]),
  server_id: Schema.String,
  transport: Schema.Literal("tcp-mesh"),
  version: Schema.String,
  uptime_ms: Schema.Number,
  /** Always `solo` (reason `no_peers` or `disabled`), as `/readyz` and `queen_mesh_health` say. */
  health: HealthStats,
  maintenance_mode: Schema.Boolean,
  pop_maintenance_mode: Schema.Boolean
})

/**
 * @since 0.1.0
 * @category models
 */
export interface InactiveStats extends Schema.Schema.Type<typeof InactiveStats> {}

/**
 * The body of both stats routes.
 *
 * @since 0.1.0
 * @category schemas
 */
export const StatsBody = Schema.Union([ActiveStats, InactiveStats])

/**
 * @example
 * ```ts
 * import { strictEqual } from "node:assert"
 * import { Effect } from "effect"
 * import { MeshTest, type MeshStats } from "queen-mesh"
 *
 * const program = Effect.gen(function* () {
 *   const network = yield* MeshTest.network
 *   const a = yield* MeshTest.node(network, { serverId: "a", peers: ["b"] })
 *   const stats: MeshStats.MeshStats = yield* a.mesh.stats
 *   // `enabled` tells an active mesh's stats from an inactive one's.
 *   if (stats.enabled) {
 *     strictEqual(stats.peer_count, 1)
 *     strictEqual(stats.peers[0]?.host, "b")
 *   }
 * })
 *
 * Effect.runPromise(Effect.scoped(program))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type MeshStats = ActiveStats | InactiveStats
