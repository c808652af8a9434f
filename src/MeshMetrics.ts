/**
 * The mesh's Effect `Metric`s: frames sent, received and dropped per peer and per tag (received by
 * the sender's server id, at most 64 senders apart), drops by cause,
 * refusals by reason, connections open, peers alive and dead, queue depth, reconnects, and histograms of
 * the receive-to-apply time and of the frames per coalesced write. Every series is tagged with the
 * node's `server_id` (the registry is process-global, so nodes sharing a process stay apart) and,
 * where it has one, the `peer`.
 *
 * The hot paths count in plain fields (a metric update per frame would cost the receive path its
 * speed); each node brings its metrics up to date from them on every `/metrics` scrape
 * (`Mesh.syncMetrics`) and every 10 seconds in the background, for exporters that read the registry
 * themselves (OpenTelemetry). Counter values therefore equal the stats body's at a scrape. The two
 * histograms are observed where they happen, once the event loop's turn ends.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as MetricNames from "./internal/metrics/metricNames.js"
import * as Prometheus from "./internal/metrics/prometheus.js"

/**
 * The names of the mesh's metrics.
 *
 * @since 0.1.0
 * @category names
 */
export const names = MetricNames.names

/**
 * The Prometheus text format's content type (0.0.4).
 *
 * @since 0.1.0
 * @category prometheus
 */
export const contentType = Prometheus.contentType

/**
 * Every metric in the process's registry as Prometheus text (format 0.0.4), Effect's own
 * runtime metrics (`child_fiber*`, recorded only while `Metric.enableRuntimeMetrics` is on) left out
 * unless `runtime` is set.
 *
 * @example
 * ```ts
 * import { ok } from "node:assert"
 * import { Effect } from "effect"
 * import { MeshMetrics, MeshTest } from "queen-mesh"
 *
 * const program = Effect.gen(function* () {
 *   const network = yield* MeshTest.network
 *   const a = yield* MeshTest.node(network, { serverId: "metrics-a", peers: ["metrics-b"] })
 *   yield* a.mesh.syncMetrics
 *   const text = yield* MeshMetrics.renderPrometheus()
 *   ok(text.includes(MeshMetrics.names.peersAlive))
 * })
 *
 * Effect.runPromise(Effect.scoped(program))
 * ```
 *
 * @since 0.1.0
 * @category prometheus
 */
export const renderPrometheus = (options: { readonly runtime?: boolean } = {}): Effect.Effect<string> =>
  Effect.sync(() =>
    Prometheus.render(
      Metric.snapshotUnsafe(MetricNames.registry),
      options.runtime === true ? {} : { include: Prometheus.withoutRuntimeMetrics }
    )
  )

/**
 * The state of one of this process's series, for tests and probes: the metric `name` with exactly
 * these attributes, if it exists (effect 4's `Metric.CounterState`, `GaugeState`, ...).
 *
 * @since 0.1.0
 * @category prometheus
 */
export const seriesValue = (name: string, tags: Readonly<Record<string, string>>): Option.Option<unknown> => {
  const wanted = Object.keys(tags)
  for (const snapshot of Metric.snapshotUnsafe(MetricNames.registry)) {
    if (snapshot.id !== name) continue
    const given = snapshot.attributes ?? {}
    if (Object.keys(given).length !== wanted.length) continue
    if (wanted.every((key) => given[key] === tags[key])) return Option.some(snapshot.state)
  }
  return Option.none()
}
