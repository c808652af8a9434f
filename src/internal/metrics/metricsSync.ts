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
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as MeshConfig from "../../MeshConfig.js"
import { RunningLane } from "../lane/running.js"
import { Listener } from "../links/listener.js"
import { Liveness } from "../links/liveness.js"
import { Peers } from "../links/peers.js"
import { loop } from "../loop.js"
import { HealthTracker } from "../membership/healthTracker.js"
import { Dispatch } from "../mesh/dispatch.js"
import * as MetricNames from "./metricNames.js"
import { type NodeCounters, table } from "./metricTable.js"
import { TableSync } from "./tableSync.js"

/**
 * How often the background loop syncs by default. A sync reads every counter of the node (about
 * 150 µs, more when the process has been idle), so once a second was most of what an idle node
 * spent; an exporter reading every 60 s (OpenTelemetry's default) sees values at most 10 s old.
 */
export const DEFAULT_INTERVAL: Duration.Duration = Duration.seconds(10)

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
export class MetricsSync extends Context.Service<MetricsSync, MetricsSyncShape>()(
  "queen-mesh/internal/MetricsSync"
) {}

/**
 * The metrics of one node and the loop that keeps them synced, in the current scope: the metric table
 * (`metricTable.ts`) applied to a snapshot of the node's counters on every sync.
 */
export const make = (
  options: { readonly interval?: Duration.Input } = {}
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
    const lane = yield* RunningLane
    const health = yield* HealthTracker
    const metrics = new TableSync(config.serverId, table)

    const counters: Effect.Effect<NodeCounters> = Effect.all({
      links: peers.links,
      listener: listener.counts,
      servers: liveness.servers,
      health: health.health,
      membership: peers.membershipCounts,
      discovery: peers.discovery,
      lane: Option.match(lane, {
        onNone: () => Effect.succeedNone,
        onSome: (one) => Effect.asSome(one.stats)
      }),
      eph: Effect.sync(() => dispatch.ephAdmin.snapshot())
    })
    const sync = Effect.suspend(() => {
      MetricNames.flushHistograms()
      return Effect.map(counters, (now) => metrics.apply(now))
    })

    if (Option.isSome(listener.port) || Option.isSome(lane)) {
      yield* sync
      // An infinite interval: no background sync (a host whose every reader syncs first, as the CLI).
      const interval = Duration.fromInputUnsafe(options.interval ?? DEFAULT_INTERVAL)
      if (Duration.isFinite(interval)) yield* loop("MeshMetrics", sync, { sleep: interval })
    }
    return { sync }
  })

/**
 * {@link make} as a layer.
 */
export const layer = (
  options: { readonly interval?: Duration.Input } = {}
): Layer.Layer<
  MetricsSync,
  never,
  MeshConfig.MeshConfig | Peers | Listener | Liveness | Dispatch | RunningLane | HealthTracker
> => Layer.effect(MetricsSync, make(options))
