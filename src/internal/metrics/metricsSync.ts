/**
 * Keeps one node's Effect `Metric`s in step with its counters. The hot paths count in plain fields (a
 * metric update per frame would cost the receive path its speed); `sync` brings the counters and
 * gauges up to date from them, exactly: on every `/metrics` scrape (through `Mesh.syncMetrics`), and
 * every `interval` from a background loop for exporters that read the registry themselves
 * (OpenTelemetry). Counter values therefore equal the stats body's at a scrape.
 *
 * @internal
 */

import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as MetricKey from "effect/MetricKey"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as MeshConfig from "../../MeshConfig.js"
import { handshakeReasonList, handshakeReasons } from "../../MeshError.js"
import * as MeshHealth from "../../MeshHealth.js"
import { RunningLane } from "../lane/running.js"
import { Listener } from "../links/listener.js"
import { Liveness } from "../links/liveness.js"
import { Peers } from "../links/peers.js"
import { loop } from "../loop.js"
import { HealthTracker } from "../membership/healthTracker.js"
import { Dispatch } from "../mesh/dispatch.js"
import { ops } from "../mesh/ephAdminAccount.js"
import * as Frames from "../wire/frames.js"
import * as MetricNames from "./metricNames.js"

const names = MetricNames.names

/**
 * A node's Effect metrics, kept in sync with its counters.
 */
export interface MetricsSyncShape {
  /** Brings every metric of this node up to date with its counters. */
  readonly sync: Effect.Effect<void>
}

/**
 * The metrics of a running mesh.
 */
export class MetricsSync extends Context.Tag("queen-mesh/internal/MetricsSync")<
  MetricsSync,
  MetricsSyncShape
>() {}

const EMPTY: ReadonlyArray<never> = []

type Tags = ReadonlyArray<readonly [string, string]>

const keyed = <K extends MetricKey.MetricKey.Untyped>(key: K, tags: Tags): K => {
  let out = key
  for (const [name, value] of tags) out = MetricKey.tagged(out, name, value) as K
  return out
}

/**
 * The metrics of one node and the loop that keeps them synced, in the current scope.
 */
export const make = (
  options: { readonly interval?: Duration.DurationInput } = {}
): Effect.Effect<
  MetricsSyncShape,
  never,
  Scope.Scope | MeshConfig.MeshConfig | Peers | Listener | Liveness | Dispatch | RunningLane | HealthTracker
> =>
  Effect.gen(function* () {
    const config = yield* MeshConfig.MeshConfig
    const peers = yield* Peers
    const listener = yield* Listener
    const liveness = yield* Liveness
    const dispatch = yield* Dispatch
    const lane = Option.getOrUndefined(yield* RunningLane)
    const health = yield* HealthTracker
    const server = config.serverId
    const counters = new Map<string, { metric: Metric.Metric.Counter<number>; last: number }>()
    const gauges = new Map<string, Metric.Metric.Gauge<number>>()

    const count = (name: string, description: string, tags: Tags, value: number) => {
      const id = `${name}\u0000${JSON.stringify(tags)}`
      let entry = counters.get(id)
      if (entry === undefined) {
        const key = keyed(MetricKey.counter(name, { description, incremental: true }), [
          ["server_id", server],
          ...tags
        ])
        entry = { metric: Metric.fromMetricKey(key), last: 0 }
        entry.metric.unsafeUpdate(0, EMPTY)
        counters.set(id, entry)
      }
      if (value > entry.last) {
        entry.metric.unsafeUpdate(value - entry.last, EMPTY)
        entry.last = value
      }
    }
    const gauge = (name: string, description: string, tags: Tags, value: number) => {
      const id = `${name}\u0000${JSON.stringify(tags)}`
      let metric = gauges.get(id)
      if (metric === undefined) {
        metric = Metric.fromMetricKey(
          keyed(MetricKey.gauge(name, { description }), [["server_id", server], ...tags])
        )
        gauges.set(id, metric)
      }
      metric.unsafeUpdate(value, EMPTY)
    }
    const sync = Effect.gen(function* () {
      MetricNames.flushHistograms()
      const links = yield* peers.links
      const counts = yield* listener.counts
      const servers = yield* liveness.servers
      let alive = 0
      let ephMembers = 0
      for (const one of servers) {
        if (Option.isSome(one.keyId)) {
          gauge(
            names.peerKey,
            "the key each server's last HELLO proved (1 per server and key id)",
            [
              ["peer", one.serverId],
              ["key_id", one.keyId.value]
            ],
            1
          )
        }
        if (!one.alive) continue
        alive++
        if (one.ephemeralCapable) ephMembers++
      }
      const dead = servers.length - alive
      let outboundUp = 0
      for (const link of links) {
        const peer: Tags = [["peer", link.name]]
        for (const [tag, frames] of link.writtenByTag) {
          count(names.framesSent, "frames written to a peer", [...peer, ["tag", Frames.nameOf(tag)]], frames)
        }
        for (const [tag, frames] of link.droppedByTag) {
          count(
            names.framesDropped,
            "frames handed to a peer's link that it never got",
            [...peer, ["tag", Frames.nameOf(tag)]],
            frames
          )
        }
        for (const series of MetricNames.linkSeries) {
          const tags: Tags = series.label === undefined ? peer : [...peer, series.label]
          count(series.name, series.help, tags, link.counters[series.counter])
        }
        gauge(names.queueDepth, "frames waiting in a peer's send queue", peer, link.counters.queued)
        if (link.connected) outboundUp++
      }
      for (const [peer, byTag] of counts.readByPeer) {
        for (const [tag, frames] of byTag) {
          count(
            names.framesReceived,
            "frames read after a HELLO",
            [
              ["peer", peer],
              ["tag", Frames.nameOf(tag)]
            ],
            frames
          )
        }
      }
      count(
        names.framesRejected,
        "frames read and skipped, by reason",
        [["reason", "invalid"]],
        counts.framesInvalid
      )
      count(
        names.framesRejected,
        "frames read and skipped, by reason",
        [["reason", "unknown"]],
        counts.framesUnknown
      )
      count(
        names.framesRejected,
        "frames read and skipped, by reason",
        [["reason", "oversized"]],
        counts.framesOversized
      )
      count(names.itemsInvalid, "batch items skipped for breaking a rule", [], counts.itemsInvalid)
      let failures = 0
      for (const reason of handshakeReasonList) {
        const n = counts.rejections[reason]
        failures += n
        // The reason under its one name, the stats body's `rejections` key.
        const label: Tags = [["reason", handshakeReasons[reason].stat]]
        count(names.rejections, "refused inbound connections by reason", label, n)
      }
      count(names.handshakeFailures, "refused inbound connections", [], failures)
      const open = (direction: string, authenticated: string, value: number) =>
        gauge(
          names.connectionsOpen,
          "open mesh connections",
          [
            ["direction", direction],
            ["authenticated", authenticated]
          ],
          value
        )
      open("inbound", "true", counts.inbound.authenticated)
      open("inbound", "false", Math.max(0, counts.inbound.open - counts.inbound.authenticated))
      open("outbound", "true", outboundUp)
      gauge(names.peersAlive, "peers heard within the dead threshold", [], alive)
      gauge(names.peersDead, "peers silent past the dead threshold", [], dead)
      gauge(names.ephMembers, "peers alive and ephemeral-capable (upstream's eph_members)", [], ephMembers)
      const now = yield* health.health
      for (const status of MeshHealth.Status.literals) {
        gauge(
          names.health,
          "the node's health: 1 for its status now",
          [["status", status]],
          now.status === status ? 1 : 0
        )
      }
      const membership = yield* peers.membershipCounts
      for (const foundBy of ["config", "dns", "discovery"] as const) {
        count(
          names.membersJoined,
          "peer entries added, by how they were found",
          [["found_by", foundBy]],
          membership.joined[foundBy]
        )
        count(
          names.membersLeft,
          "peer entries removed, by how they were found",
          [["found_by", foundBy]],
          membership.left[foundBy]
        )
      }
      const discovery = yield* peers.discovery
      if (Option.isSome(discovery)) {
        count(
          names.discoveryRounds,
          "discovery rounds, by outcome",
          [["outcome", "ok"]],
          discovery.value.rounds - discovery.value.failedRounds
        )
        count(
          names.discoveryRounds,
          "discovery rounds, by outcome",
          [["outcome", "failed"]],
          discovery.value.failedRounds
        )
      }
      if (lane !== undefined) {
        const laneStats = yield* lane.stats
        const up = laneStats.status === "up" ? 1 : 0
        gauge(names.laneUp, "1 while the lane carries frames", [], up)
        count(
          names.laneNotifications,
          "lane notifications, by direction",
          [["direction", "sent"]],
          laneStats.notifications_sent
        )
        count(
          names.laneNotifications,
          "lane notifications, by direction",
          [["direction", "received"]],
          laneStats.notifications_received
        )
        count(
          names.laneBytes,
          "lane payload bytes, by direction",
          [["direction", "sent"]],
          laneStats.bytes_sent
        )
        count(
          names.laneBytes,
          "lane payload bytes, by direction",
          [["direction", "received"]],
          laneStats.bytes_received
        )
        for (const [reason, n] of Object.entries(laneStats.refused)) {
          count(names.laneRefused, "lane notifications refused, by reason", [["reason", reason]], n)
        }
        count(names.laneDropped, "frames the lane could not send", [], laneStats.dropped)
        count(names.laneReconnects, "lane connections re-established", [], laneStats.reconnects)
        if (laneStats.queue_usage !== null) {
          gauge(
            names.laneQueueUsage,
            "pg_notification_queue_usage() at the last check",
            [],
            laneStats.queue_usage
          )
        }
      }
      const ephCounts = dispatch.ephAdmin.snapshot()
      for (const op of ops) {
        const tags = (direction: string): Tags => [
          ["direction", direction],
          ["op", op]
        ]
        count(names.ephAdmin, "EPH_ADMIN verbs by direction and operation", tags("sent"), ephCounts.sent[op])
        count(
          names.ephAdmin,
          "EPH_ADMIN verbs by direction and operation",
          tags("received"),
          ephCounts.received[op]
        )
      }
    })

    if (Option.isSome(listener.port) || lane !== undefined) {
      yield* sync
      yield* loop("MeshMetrics", sync, { sleep: options.interval ?? Duration.seconds(1) })
    }
    return { sync }
  })

/**
 * {@link make} as a layer.
 */
export const layer = (
  options: { readonly interval?: Duration.DurationInput } = {}
): Layer.Layer<
  MetricsSync,
  never,
  MeshConfig.MeshConfig | Peers | Listener | Liveness | Dispatch | RunningLane | HealthTracker
> => Layer.scoped(MetricsSync, make(options))
