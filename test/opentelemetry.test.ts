/**
 * The recipe of docs/opentelemetry.md, run against in-memory OpenTelemetry exporters: Effect metrics
 * reach an OpenTelemetry `MetricReader` through `@effect/opentelemetry`'s producer, and Effect spans an
 * OpenTelemetry span processor. Nothing waits on a timer: the reader's and the span processor's
 * `forceFlush` collect and export on the spot, inside the program.
 *
 * These packages are devDependencies only; queen-mesh itself depends on none of them.
 *
 * `@effect/opentelemetry` 4's `NodeSdk` (and its barrel, through `OtelLogger`) needs
 * `@opentelemetry/sdk-trace-node` and `@opentelemetry/api-logs`, which are not installed here: the
 * first test composes what `NodeSdk.layer` builds (`Resource`, `OtelTracer` over a tracer provider,
 * `OtelMetrics`) from the modules themselves, with sdk-trace-base's provider for Node's.
 */
import * as Metrics from "@effect/opentelemetry/OtelMetrics"
import * as OtelTracer from "@effect/opentelemetry/OtelTracer"
import * as Resource from "@effect/opentelemetry/Resource"
import { assert, describe, it } from "@effect/vitest"
import {
  AggregationTemporality,
  DataPointType,
  InMemoryMetricExporter,
  MetricReader,
  PeriodicExportingMetricReader
} from "@opentelemetry/sdk-metrics"
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type SpanProcessor
} from "@opentelemetry/sdk-trace-base"
import { Context, Effect, Layer, Metric } from "effect"

/** The process's metric registry (Effect's default), as the hot paths update it outside any fiber. */
const registry = Context.empty()

/** A pull reader: nothing is exported until someone calls `collect()`, as a scrape endpoint would. */
class PullReader extends MetricReader {
  protected override onForceFlush(): Promise<void> {
    return Promise.resolve()
  }
  protected override onShutdown(): Promise<void> {
    return Promise.resolve()
  }
}

/**
 * What `NodeSdk.layer({ resource, metricReader, spanProcessor })` builds: the resource, a tracer over a
 * provider with the span processor, and the metric producer on the reader.
 */
const sdkLayer = (options: {
  readonly serviceName: string
  readonly metricReader: MetricReader
  readonly spanProcessor: SpanProcessor
}) =>
  Layer.mergeAll(
    Layer.provide(
      OtelTracer.layer,
      Layer.effect(
        OtelTracer.OtelTracerProvider,
        Effect.gen(function* () {
          const resource = yield* Resource.Resource
          return yield* Effect.acquireRelease(
            Effect.sync(() => new BasicTracerProvider({ resource, spanProcessors: [options.spanProcessor] })),
            (provider) => Effect.promise(() => provider.forceFlush().finally(() => provider.shutdown()))
          )
        })
      )
    ),
    Metrics.layer(() => options.metricReader)
  ).pipe(Layer.provideMerge(Resource.layer({ serviceName: options.serviceName })))

describe("OpenTelemetry recipe (docs/opentelemetry.md)", () => {
  it.live("exports a tagged Effect counter and a span through NodeSdk.layer", () =>
    Effect.gen(function* () {
      const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
      // A long interval: the test exports by forceFlush, never by the timer.
      const metricReader = new PeriodicExportingMetricReader({
        exporter: metricExporter,
        exportIntervalMillis: 3_600_000
      })
      const spanExporter = new InMemorySpanExporter()
      const spanProcessor = new SimpleSpanProcessor(spanExporter)

      const frames = Metric.counter("otel_frames_sent_total", {
        description: "Frames sent.",
        incremental: true
      })
      // The hot-path form: a counter made with its attributes once, updated without an effect.
      const dials = Metric.counter("otel_dials_total", { incremental: true, attributes: { server_id: "a" } })

      const program = Effect.gen(function* () {
        yield* Metric.update(Metric.withAttributes(frames, { server_id: "a" }), 3)
        yield* Metric.update(Metric.withAttributes(frames, { server_id: "b" }), 1)
        dials.updateUnsafe(1, registry)
        dials.updateUnsafe(1, registry)
        yield* Effect.void.pipe(Effect.withSpan("mesh.dial", { attributes: { peer: "b" } }))
        // Read the exporters before the layer's finalizer shuts them down (which empties them).
        yield* Effect.promise(() => Promise.all([metricReader.forceFlush(), spanProcessor.forceFlush()]))
        return { exports: metricExporter.getMetrics(), spans: spanExporter.getFinishedSpans() }
      })

      const { exports, spans } = yield* program.pipe(
        Effect.provide(sdkLayer({ serviceName: "queen-mesh-test", metricReader, spanProcessor }))
      )

      // Metrics: the last export holds the cumulative state at forceFlush.
      const last = exports.at(-1)
      if (last === undefined) return assert.fail("no metrics exported")
      assert.strictEqual(last.resource.attributes["service.name"], "queen-mesh-test")
      const metrics = last.scopeMetrics.flatMap((scope) => scope.metrics)
      const sent = metrics.find((metric) => metric.descriptor.name === "otel_frames_sent_total")
      if (sent === undefined) return assert.fail("otel_frames_sent_total not exported")
      assert.strictEqual(sent.dataPointType, DataPointType.SUM)
      assert.strictEqual(sent.descriptor.description, "Frames sent.")
      const points = sent.dataPoints
        .map((point) => ({ attributes: point.attributes, value: point.value }))
        .sort((a, b) => String(a.attributes.server_id).localeCompare(String(b.attributes.server_id)))
      assert.deepStrictEqual(points, [
        { attributes: { server_id: "a" }, value: 3 },
        { attributes: { server_id: "b" }, value: 1 }
      ])
      const dialed = metrics.find((metric) => metric.descriptor.name === "otel_dials_total")
      assert.deepStrictEqual(
        dialed?.dataPoints.map((point) => ({ attributes: point.attributes, value: point.value })),
        [{ attributes: { server_id: "a" }, value: 2 }]
      )

      // Spans: exported when the span ended.
      const dial = spans.find((span) => span.name === "mesh.dial")
      if (dial === undefined) return assert.fail(`mesh.dial not exported: ${spans.map((s) => s.name)}`)
      assert.strictEqual(dial.attributes.peer, "b")
      assert.strictEqual(dial.resource.attributes["service.name"], "queen-mesh-test")
    })
  )

  it.live("serves metrics to a pull reader with Metrics.layer alone (no tracer SDK)", () =>
    Effect.gen(function* () {
      const reader = new PullReader()
      const peers = Metric.gauge("otel_pull_peers")
      const collected = yield* Effect.gen(function* () {
        yield* Metric.update(Metric.withAttributes(peers, { server_id: "a" }), 2)
        return yield* Effect.promise(() => reader.collect())
      }).pipe(
        Effect.provide(Metrics.layer(() => reader)),
        Effect.provide(Resource.layer({ serviceName: "queen-mesh-test" }))
      )
      assert.deepStrictEqual(collected.errors, [])
      const gauge = collected.resourceMetrics.scopeMetrics
        .flatMap((scope) => scope.metrics)
        .find((metric) => metric.descriptor.name === "otel_pull_peers")
      assert.strictEqual(gauge?.dataPointType, DataPointType.GAUGE)
      assert.deepStrictEqual(
        gauge?.dataPoints.map((point) => ({ attributes: point.attributes, value: point.value })),
        [{ attributes: { server_id: "a" }, value: 2 }]
      )
    })
  )
})
