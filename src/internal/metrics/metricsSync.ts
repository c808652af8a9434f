/**
 * Keeps one node's Effect `Metric`s in step with its counters. The hot paths count in plain fields (a
 * metric update per frame would cost the receive path its speed); `sync` brings the counters and
 * gauges up to date from them, exactly: on every `/metrics` scrape (through `Mesh.syncMetrics`), and
 * every `interval` from a background loop for exporters that read the registry themselves
 * (OpenTelemetry). Counter values therefore equal the stats body's at a scrape.
 *
 * @internal
 */
import { Context, Duration, Effect, Layer, Option, type Scope, SubscriptionRef } from "effect"
import * as MeshConfig from "../../MeshConfig.js"
import { Lane } from "../lane/carrier.js"
import { Listener } from "../links/listener.js"
import { Liveness } from "../links/liveness.js"
import { Peers } from "../links/peers.js"
import { loop } from "../loop.js"
import { HealthRef } from "../membership/healthRef.js"
import { Topology } from "../membership/topology.js"
import { EphCounts } from "../mesh/ephCounts.js"
import * as MetricNames from "./metricNames.js"
import { type NodeCounters, table } from "./metricTable.js"
import { TableSync } from "./tableSync.js"

/**
 * A node's Effect metrics, kept in sync with its counters.
 */
export interface MeshMetricsShape {
  /** Brings every metric of this node up to date with its counters. */
  readonly sync: Effect.Effect<void>
}

/**
 * The metrics of a running mesh.
 */
export class MeshMetrics extends Context.Tag("queen-mesh/internal/MeshMetrics")<
  MeshMetrics,
  MeshMetricsShape
>() {}

/**
 * The metrics of one node and the loop that keeps them synced, in the current scope: the metric table
 * (`metricTable.ts`) applied to a snapshot of the node's counters on every sync.
 */
export const make = (
  options: { readonly interval?: Duration.DurationInput } = {}
): Effect.Effect<
  MeshMetricsShape,
  never,
  Scope.Scope | MeshConfig.MeshConfig | Peers | Listener | Liveness | EphCounts | Lane | Topology | HealthRef
> =>
  Effect.gen(function* () {
    const config = yield* MeshConfig.MeshConfig
    const peers = yield* Peers
    const listener = yield* Listener
    const liveness = yield* Liveness
    const eph = yield* EphCounts
    const lane = yield* Lane
    const topology = yield* Topology
    const health = yield* HealthRef
    const metrics = new TableSync(config.serverId, table)

    const counters: Effect.Effect<NodeCounters> = Effect.all({
      links: peers.links,
      listener: listener.counts,
      servers: liveness.servers,
      health: SubscriptionRef.get(health),
      membership: peers.membershipCounts,
      discovery: peers.discovery,
      lane: Option.match(lane, {
        onNone: () => Effect.succeedNone,
        onSome: (one) => Effect.asSome(one.stats)
      }),
      eph: Effect.succeed(eph)
    })
    const sync = Effect.suspend(() => {
      MetricNames.flushHistograms()
      return Effect.map(counters, (now) => metrics.apply(now))
    })

    if (topology.tcp || Option.isSome(lane)) {
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
  MeshMetrics,
  never,
  MeshConfig.MeshConfig | Peers | Listener | Liveness | EphCounts | Lane | Topology | HealthRef
> => Layer.scoped(MeshMetrics, make(options))
