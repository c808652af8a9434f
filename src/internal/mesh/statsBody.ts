/**
 * The stats body of an active mesh (spec "Observing it"), assembled from the membership model and the
 * runtime's counters: its Schemas are `MeshStats`'s, and nothing here decides a field's meaning.
 * Upstream's fields keep upstream's (`servers_alive` counts a server heard on an inbound link or on the
 * lane; `messages_dropped` is the queue-full drops), ours add detail.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as SubscriptionRef from "effect/SubscriptionRef"
import type * as MaintenanceFlags from "../../MaintenanceFlags.js"
import * as Membership from "../../Membership.js"
import type * as MeshConfig from "../../MeshConfig.js"
import { type HandshakeError, handshakeReasonList, handshakeReasons } from "../../MeshError.js"
import type * as MeshHealth from "../../MeshHealth.js"
import type {
  ActiveStats,
  EphAdminCounts,
  LaneStats,
  MeshStats,
  PeerStats,
  ServerStats
} from "../../MeshStats.js"
import type * as Keyring from "../keyring.js"
import type { LaneShape } from "../lane/running.js"
import type { ListenerShape } from "../links/listener.js"
import type { Counters } from "../links/listenerState.js"
import { NO_COUNTERS } from "../links/peerLink.js"
import type { PeersShape } from "../links/peers.js"
import type { DispatchShape } from "./dispatch.js"

/**
 * Everything an active body is made of: this node, its members, its counters.
 */
export interface Parts {
  readonly serverId: string
  readonly port: number | null
  readonly running: boolean
  readonly version: string
  readonly uptimeMs: number
  readonly auth: ActiveStats["auth"]
  readonly tls: ActiveStats["tls"]
  readonly members: ReadonlyArray<Membership.Member>
  readonly counters: Counters
  readonly ephAdmin: { readonly sent: EphAdminCounts; readonly received: EphAdminCounts }
  readonly keyId: string | null
  readonly acceptedKeyIds: ReadonlyArray<string>
  readonly health: ActiveStats["health"]
  readonly membersJoined: ActiveStats["members_joined"]
  readonly membersLeft: ActiveStats["members_left"]
  readonly discovery: ActiveStats["discovery"]
  /** The lane's part; its members' `found_by` is taken from `members`. */
  readonly lane: LaneStats | null
  readonly maintenance: boolean
  readonly popMaintenance: boolean
}

const peerOf = (member: Membership.Member, address: Membership.Address): PeerStats => {
  const link = Option.getOrUndefined(member.link)
  const connected = link?.connected === true
  return {
    host: address.host,
    port: address.port,
    connected,
    self: member.self,
    found_by: member.foundBy === "dns" || member.foundBy === "discovery" ? member.foundBy : "config",
    resolved: connected,
    resolved_ip: link === undefined ? null : Option.getOrNull(link.resolvedIp),
    last_resolved_ip: link === undefined ? null : Option.getOrNull(link.lastResolvedIp),
    ...(link?.counters ?? NO_COUNTERS),
    last_error: link === undefined ? null : Option.getOrNull(link.lastError)
  }
}

/** A member heard from on a carrier, as a server: upstream's inbound liveness, the lane's counted in. */
const serverOf = (member: Membership.Member): ServerStats | undefined => {
  if (Option.isNone(member.serverId)) return undefined
  const heard = Option.getOrUndefined(member.heard)
  const onLane = Option.getOrUndefined(member.lane)
  if (heard === undefined && onLane === undefined) return undefined
  const heardOn: Array<"tcp" | "lane"> = []
  if (heard !== undefined) heardOn.push("tcp")
  if (onLane !== undefined) heardOn.push("lane")
  return {
    server_id: member.serverId.value,
    alive: heard?.alive === true || onLane?.alive === true,
    last_seen_ms_ago: Math.min(heard?.lastSeenMsAgo ?? Infinity, onLane?.lastSeenMsAgo ?? Infinity),
    key_id: heard === undefined ? null : Option.getOrNull(heard.keyId),
    heard_on: heardOn
  }
}

/** The lane's members, each with how the membership knows it. */
const laneWithFoundBy = (
  lane: LaneStats | null,
  members: ReadonlyArray<Membership.Member>
): LaneStats | null => {
  if (lane === null) return null
  const foundBy = new Map<string, Membership.FoundBy>()
  for (const member of members) {
    if (Option.isSome(member.serverId) && Option.isSome(member.lane))
      foundBy.set(member.serverId.value, member.foundBy)
  }
  return {
    ...lane,
    members: lane.members.map((m) => ({ ...m, found_by: foundBy.get(m.server_id) ?? m.found_by }))
  }
}

/**
 * The body of an active mesh, from its parts.
 */
export const make = (parts: Parts): ActiveStats => {
  const peers: Array<PeerStats> = []
  const servers: Array<ServerStats> = []
  let sent = 0
  let droppedFull = 0
  let droppedDown = 0
  let discarded = 0
  for (const member of parts.members) {
    if (Option.isSome(member.address)) peers.push(peerOf(member, member.address.value))
    if (Option.isSome(member.link)) {
      const counters = member.link.value.counters
      sent += counters.written
      droppedFull += counters.dropped_full
      droppedDown += counters.dropped_down
      discarded += counters.discarded
    }
    const server = serverOf(member)
    if (server !== undefined) servers.push(server)
  }
  servers.sort((a, b) => (a.server_id < b.server_id ? -1 : a.server_id > b.server_id ? 1 : 0))
  const alive = servers.filter((server) => server.alive).length
  const counters = parts.counters
  let failures = 0
  const rejections = {} as Record<HandshakeError.Stat, number>
  for (const reason of handshakeReasonList) {
    failures += counters.rejections[reason]
    rejections[handshakeReasons[reason].stat] = counters.rejections[reason]
  }
  return {
    enabled: true,
    running: parts.running,
    server_id: parts.serverId,
    transport: "tcp-mesh",
    port: parts.port,
    version: parts.version,
    uptime_ms: parts.uptimeMs,
    auth: parts.auth,
    tls: parts.tls,
    key_id: parts.keyId,
    accepted_key_ids: [...parts.acceptedKeyIds],
    health: parts.health,
    peer_count: peers.length,
    peers,
    servers_alive: alive,
    servers_dead: servers.length - alive,
    servers,
    messages_sent: sent,
    messages_received: counters.framesRead,
    messages_dropped: droppedFull,
    messages_dropped_down: droppedDown,
    messages_discarded: discarded,
    eph_members: Membership.ephemeralMembers(parts.members).length,
    eph_admin: parts.ephAdmin,
    members_joined: parts.membersJoined,
    members_left: parts.membersLeft,
    discovery: parts.discovery,
    lane: laneWithFoundBy(parts.lane, parts.members),
    handshake_failures: failures,
    signature_failures: failures,
    sequence_rejections: 0,
    frames_dispatched: counters.framesDispatched,
    frames_invalid: counters.framesInvalid,
    frames_unknown: counters.framesUnknown,
    frames_oversized: counters.framesOversized,
    items_invalid: counters.itemsInvalid,
    rejections,
    inbound: counters.inbound,
    maintenance_mode: parts.maintenance,
    pop_maintenance_mode: parts.popMaintenance
  }
}

/** What the stats body is read from, in a running mesh. */
export interface Sources {
  readonly config: MeshConfig.MeshConfigShape
  readonly active: boolean
  readonly lifecycle: { readonly closed: boolean }
  readonly startedAt: number
  readonly version: string
  readonly keys: Keyring.Auth
  readonly flags: MaintenanceFlags.MaintenanceFlagsShape
  readonly listener: ListenerShape
  readonly peers: PeersShape
  readonly dispatch: DispatchShape
  readonly lane: LaneShape | undefined
  readonly members: Effect.Effect<ReadonlyArray<Membership.Member>>
  readonly health: Effect.Effect<MeshHealth.Health>
}

/** The body now: the inactive one while the mesh does not run, else every part read and assembled. */
export const gather = (sources: Sources): Effect.Effect<MeshStats> =>
  Effect.gen(function* () {
    const { config, keys, lane } = sources
    const maintenance = yield* SubscriptionRef.get(sources.flags.maintenance)
    const popMaintenance = yield* SubscriptionRef.get(sources.flags.popMaintenance)
    const uptimeMs = (yield* Clock.currentTimeMillis) - sources.startedAt
    if (!sources.active) {
      return {
        enabled: false,
        reason: config.enabled ? "no_peers" : "disabled",
        server_id: config.serverId,
        transport: "tcp-mesh",
        version: sources.version,
        uptime_ms: uptimeMs,
        health: yield* sources.health,
        maintenance_mode: maintenance,
        pop_maintenance_mode: popMaintenance
      } as const
    }
    const membership = yield* sources.peers.membershipCounts
    const discovery = yield* sources.peers.discovery
    return make({
      serverId: config.serverId,
      port: Option.getOrNull(sources.listener.port),
      running: !sources.lifecycle.closed,
      version: sources.version,
      uptimeMs,
      auth: config.auth,
      tls: config.tls,
      members: yield* sources.members,
      counters: yield* sources.listener.counts,
      ephAdmin: sources.dispatch.ephAdmin.snapshot(),
      keyId: keys === "open" ? null : keys.primary.id,
      acceptedKeyIds: keys === "open" ? [] : keys.accepted.map((key) => key.id),
      health: yield* sources.health,
      membersJoined: membership.joined,
      membersLeft: membership.left,
      discovery: Option.match(discovery, {
        onNone: () => null,
        onSome: (d) => ({
          source: d.source,
          rounds: d.rounds,
          failed_rounds: d.failedRounds,
          last_error: Option.getOrNull(d.lastError)
        })
      }),
      lane: lane === undefined ? null : yield* lane.stats,
      maintenance,
      popMaintenance
    })
  })
