/**
 * The mesh's metrics as a table of what maps to what: one row per metric, with its name (from
 * `metricNames`), its kind, its help text, its labels and how its samples are read from a snapshot of
 * the node's counters ({@link NodeCounters}). `tableSync.ts` applies it on every sync; adding a metric
 * is adding a row. docs/metrics.md lists them for users.
 *
 * @internal
 */
import type * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Lane from "../../Lane.js"
import type * as Membership from "../../Membership.js"
import { handshakeReasonList, handshakeReasons } from "../../MeshError.js"
import * as MeshHealth from "../../MeshHealth.js"
import type { ListenerShape } from "../links/listener.js"
import type { LivenessShape } from "../links/liveness.js"
import type { PeersShape } from "../links/peers.js"
import { type EphAdminAccount, ops } from "../mesh/ephAdminAccount.js"
import * as Frames from "../wire/frames.js"
import { names } from "./metricNames.js"
import { only, type Row, row } from "./tableSync.js"

/** What one sync reads of the node, once, for every row. */
export interface NodeCounters {
  /** Every peer's outbound link. */
  readonly links: Effect.Success<PeersShape["links"]>
  /** The listener's counts: frames read, skipped, refused; connections open. */
  readonly listener: Effect.Success<ListenerShape["counts"]>
  /** Every server the liveness map holds. */
  readonly servers: Effect.Success<LivenessShape["servers"]>
  readonly health: MeshHealth.Health
  readonly membership: Effect.Success<PeersShape["membershipCounts"]>
  readonly discovery: Effect.Success<PeersShape["discovery"]>
  /** The PostgreSQL lane's stats, when the node has a lane. */
  readonly lane: Option.Option<LaneStats>
  /** `EPH_ADMIN` verbs sent and received, per operation. */
  readonly eph: ReturnType<EphAdminAccount["snapshot"]>
}

type LaneStats = Effect.Success<Lane.Running["stats"]>

/** How peer entries were found, as the membership metrics count them. */
const FOUND_BY = ["config", "dns", "discovery"] as const

/** `[label values, value]` for each of a record's keys. */
const byKey = <K extends string>(keys: ReadonlyArray<K>, values: Readonly<Record<K, number>>) =>
  keys.map((key) => [[key], values[key]] as const)

/**
 * Per-link counters as one metric's series: a sample per link and counter, labelled with the peer and
 * the counter's one name (as the stats body and the CLI have it), so `peers[].dropped_full` is
 * `queen_mesh_drops_total{cause="dropped_full"}`.
 */
const linkCounters = (counters: ReadonlyArray<keyof Membership.LinkCounters>) =>
  function* (c: NodeCounters): Iterable<readonly [readonly [string, string], number]> {
    for (const link of c.links)
      for (const counter of counters) yield [[link.name, counter], link.counters[counter]]
  }

/** The one sample of a label-less lane row: none without a lane, or while `value` reads `null`. */
const laneOnly = (c: NodeCounters, value: (lane: LaneStats) => number | null) => {
  if (Option.isNone(c.lane)) return []
  const read = value(c.lane.value)
  return read === null ? [] : only(read)
}

/** The mesh's metrics. */
export const table: ReadonlyArray<Row<NodeCounters>> = [
  row({
    name: names.peerKey,
    kind: "gauge",
    help: "the key each server's last HELLO proved (1 per server and key id)",
    labels: ["peer", "key_id"],
    read: function* (c) {
      for (const server of c.servers) {
        if (Option.isSome(server.keyId)) yield [[server.serverId, server.keyId.value], 1]
      }
    }
  }),
  row({
    name: names.framesSent,
    kind: "counter",
    help: "frames written to a peer",
    labels: ["peer", "tag"],
    read: function* (c) {
      for (const link of c.links)
        for (const [tag, frames] of link.writtenByTag) yield [[link.name, Frames.nameOf(tag)], frames]
    }
  }),
  row({
    name: names.framesDropped,
    kind: "counter",
    help: "frames handed to a peer's link that it never got",
    labels: ["peer", "tag"],
    read: function* (c) {
      for (const link of c.links)
        for (const [tag, frames] of link.droppedByTag) yield [[link.name, Frames.nameOf(tag)], frames]
    }
  }),
  row({
    name: names.drops,
    kind: "counter",
    help: "dropped frames by cause",
    labels: ["peer", "cause"],
    read: linkCounters(["dropped_full", "dropped_down", "discarded"])
  }),
  row({
    name: names.reconnects,
    kind: "counter",
    help: "links that were up and went down",
    labels: ["peer"],
    read: (c) => c.links.map((link) => [[link.name], link.counters.reconnects] as const)
  }),
  row({
    name: names.livenessCloses,
    kind: "counter",
    help: "links closed by the outbound liveness check, by reason",
    labels: ["peer", "reason"],
    read: linkCounters(["silent_closes", "stalled_closes"])
  }),
  row({
    name: names.queueDepth,
    kind: "gauge",
    help: "frames waiting in a peer's send queue",
    labels: ["peer"],
    read: (c) => c.links.map((link) => [[link.name], link.counters.queued] as const)
  }),
  row({
    name: names.framesReceived,
    kind: "counter",
    help: "frames read after a HELLO",
    labels: ["peer", "tag"],
    read: function* (c) {
      for (const [peer, byTag] of c.listener.readByPeer)
        for (const [tag, frames] of byTag) yield [[peer, Frames.nameOf(tag)], frames]
    }
  }),
  row({
    name: names.framesRejected,
    kind: "counter",
    help: "frames read and skipped, by reason",
    labels: ["reason"],
    read: (c) => [
      [["invalid"], c.listener.framesInvalid],
      [["unknown"], c.listener.framesUnknown],
      [["oversized"], c.listener.framesOversized]
    ]
  }),
  row({
    name: names.itemsInvalid,
    kind: "counter",
    help: "batch items skipped for breaking a rule",
    labels: [],
    read: (c) => only(c.listener.itemsInvalid)
  }),
  row({
    name: names.rejections,
    kind: "counter",
    help: "refused inbound connections by reason",
    labels: ["reason"],
    // Each reason under its one name, the stats body's `rejections` key.
    read: (c) =>
      handshakeReasonList.map(
        (reason) => [[handshakeReasons[reason].stat], c.listener.rejections[reason]] as const
      )
  }),
  row({
    name: names.handshakeFailures,
    kind: "counter",
    help: "refused inbound connections",
    labels: [],
    read: (c) => only(handshakeReasonList.reduce((sum, reason) => sum + c.listener.rejections[reason], 0))
  }),
  row({
    name: names.connectionsOpen,
    kind: "gauge",
    help: "open mesh connections",
    labels: ["direction", "authenticated"],
    read: (c) => [
      [["inbound", "true"], c.listener.inbound.authenticated],
      [["inbound", "false"], Math.max(0, c.listener.inbound.open - c.listener.inbound.authenticated)],
      [["outbound", "true"], c.links.filter((link) => link.connected).length]
    ]
  }),
  row({
    name: names.peersAlive,
    kind: "gauge",
    help: "peers heard within the dead threshold",
    labels: [],
    read: (c) => only(c.servers.filter((server) => server.alive).length)
  }),
  row({
    name: names.peersDead,
    kind: "gauge",
    help: "peers silent past the dead threshold",
    labels: [],
    read: (c) => only(c.servers.filter((server) => !server.alive).length)
  }),
  row({
    name: names.ephMembers,
    kind: "gauge",
    help: "peers alive and ephemeral-capable (upstream's eph_members)",
    labels: [],
    read: (c) => only(c.servers.filter((server) => server.alive && server.ephemeralCapable).length)
  }),
  row({
    name: names.health,
    kind: "gauge",
    help: "the node's health: 1 for its status now",
    labels: ["status"],
    read: (c) =>
      MeshHealth.Status.literals.map((status) => [[status], c.health.status === status ? 1 : 0] as const)
  }),
  row({
    name: names.membersJoined,
    kind: "counter",
    help: "peer entries added, by how they were found",
    labels: ["found_by"],
    read: (c) => byKey(FOUND_BY, c.membership.joined)
  }),
  row({
    name: names.membersLeft,
    kind: "counter",
    help: "peer entries removed, by how they were found",
    labels: ["found_by"],
    read: (c) => byKey(FOUND_BY, c.membership.left)
  }),
  row({
    name: names.discoveryRounds,
    kind: "counter",
    help: "discovery rounds, by outcome",
    labels: ["outcome"],
    read: function* (c) {
      if (Option.isNone(c.discovery)) return
      const { rounds, failedRounds } = c.discovery.value
      yield [["ok"], rounds - failedRounds]
      yield [["failed"], failedRounds]
    }
  }),
  row({
    name: names.laneUp,
    kind: "gauge",
    help: "1 while the lane carries frames",
    labels: [],
    read: (c) => laneOnly(c, (lane) => (lane.status === "up" ? 1 : 0))
  }),
  row({
    name: names.laneNotifications,
    kind: "counter",
    help: "lane notifications, by direction",
    labels: ["direction"],
    read: function* (c) {
      if (Option.isNone(c.lane)) return
      yield [["sent"], c.lane.value.notifications_sent]
      yield [["received"], c.lane.value.notifications_received]
    }
  }),
  row({
    name: names.laneBytes,
    kind: "counter",
    help: "lane payload bytes, by direction",
    labels: ["direction"],
    read: function* (c) {
      if (Option.isNone(c.lane)) return
      yield [["sent"], c.lane.value.bytes_sent]
      yield [["received"], c.lane.value.bytes_received]
    }
  }),
  row({
    name: names.laneRefused,
    kind: "counter",
    help: "lane notifications refused, by reason",
    labels: ["reason"],
    read: function* (c) {
      if (Option.isNone(c.lane)) return
      for (const [reason, n] of Object.entries(c.lane.value.refused)) yield [[reason], n]
    }
  }),
  row({
    name: names.laneDropped,
    kind: "counter",
    help: "frames the lane could not send",
    labels: [],
    read: (c) => laneOnly(c, (lane) => lane.dropped)
  }),
  row({
    name: names.laneReconnects,
    kind: "counter",
    help: "lane connections re-established",
    labels: [],
    read: (c) => laneOnly(c, (lane) => lane.reconnects)
  }),
  row({
    name: names.laneQueueUsage,
    kind: "gauge",
    help: "pg_notification_queue_usage() at the last check",
    labels: [],
    read: (c) => laneOnly(c, (lane) => lane.queue_usage)
  }),
  row({
    name: names.ephAdmin,
    kind: "counter",
    help: "EPH_ADMIN verbs by direction and operation",
    labels: ["direction", "op"],
    read: function* (c) {
      for (const op of ops) {
        yield [["sent", op], c.eph.sent[op]]
        yield [["received", op], c.eph.received[op]]
      }
    }
  })
]
