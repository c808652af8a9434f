/**
 * The engine of the metrics sync: applies a table of metric rows to Effect's `Metric`s. Each row names
 * one metric (its name, kind, help and label names) and reads its samples (label values and a value)
 * from a snapshot of a node's counters; the engine creates each series on first sight, tagged with
 * the node's `server_id`, and brings it up to date: a counter by the increase since the last sync (it
 * never goes down; the counters it mirrors only grow), a gauge by setting it.
 *
 * The table is data, so adding a metric is one row (see `metricTable.ts`); this file does not change.
 *
 * @internal
 */
import * as Metric from "effect/Metric"
import * as MetricKey from "effect/MetricKey"

/** The label values of one sample, one per label name of its row, in the same order. */
export type LabelValues<L extends ReadonlyArray<string>> = { readonly [K in keyof L]: string }

/** One sample of a row: its label values and its value. */
export type Sample<L extends ReadonlyArray<string>> = readonly [labels: LabelValues<L>, value: number]

/** One metric: what it is called and how its samples are read from a snapshot `C`. */
export interface Row<C, L extends ReadonlyArray<string> = ReadonlyArray<string>> {
  /** Its name, from `metricNames`. */
  readonly name: string
  /** A counter only grows (a cumulative count); a gauge is set to the value read. */
  readonly kind: "counter" | "gauge"
  /** The description, Prometheus's `# HELP`. */
  readonly help: string
  /** Its label names (`server_id` comes first, added by the engine). */
  readonly labels: L
  /** Its samples now; none while what it measures does not exist (then the metric is not created). */
  readonly read: (counters: C) => Iterable<Sample<L>>
}

/** A row, its label values checked against its label names. */
export const row = <C, const L extends ReadonlyArray<string>>(spec: Row<C, L>): Row<C> => spec

/** The sample of a row without labels. */
export const only = (value: number): ReadonlyArray<Sample<readonly []>> => [[[], value]]

const EMPTY: ReadonlyArray<never> = []

/** A counter series and the value it was last brought to. */
interface CounterSeries {
  readonly metric: Metric.Metric.Counter<number>
  last: number
}

/** A table applied to one node's metrics. */
export class TableSync<C> {
  private readonly counters = new Map<string, CounterSeries>()
  private readonly gauges = new Map<string, Metric.Metric.Gauge<number>>()

  constructor(
    private readonly serverId: string,
    private readonly table: ReadonlyArray<Row<C>>
  ) {}

  /** Brings every metric of the table up to date with `counters`. */
  apply(counters: C): void {
    for (const metric of this.table) {
      for (const [labels, value] of metric.read(counters)) {
        if (metric.kind === "counter") this.count(metric, labels, value)
        else this.set(metric, labels, value)
      }
    }
  }

  private count(metric: Row<C>, labels: ReadonlyArray<string>, value: number): void {
    const id = seriesId(metric.name, labels)
    let series = this.counters.get(id)
    if (series === undefined) {
      const key = MetricKey.counter(metric.name, { description: metric.help, incremental: true })
      series = { metric: Metric.fromMetricKey(this.tagged(key, metric, labels)), last: 0 }
      series.metric.unsafeUpdate(0, EMPTY)
      this.counters.set(id, series)
    }
    if (value > series.last) {
      series.metric.unsafeUpdate(value - series.last, EMPTY)
      series.last = value
    }
  }

  private set(metric: Row<C>, labels: ReadonlyArray<string>, value: number): void {
    const id = seriesId(metric.name, labels)
    let gauge = this.gauges.get(id)
    if (gauge === undefined) {
      const key = MetricKey.gauge(metric.name, { description: metric.help })
      gauge = Metric.fromMetricKey(this.tagged(key, metric, labels))
      this.gauges.set(id, gauge)
    }
    gauge.unsafeUpdate(value, EMPTY)
  }

  /** `key` tagged with the node's `server_id`, then the row's labels. */
  private tagged<K extends MetricKey.MetricKey.Untyped>(
    key: K,
    metric: Row<C>,
    labels: ReadonlyArray<string>
  ): K {
    let out = MetricKey.tagged(key, "server_id", this.serverId) as K
    for (let i = 0; i < labels.length; i++) out = MetricKey.tagged(out, metric.labels[i]!, labels[i]!) as K
    return out
  }
}

const seriesId = (name: string, labels: ReadonlyArray<string>): string =>
  `${name}\u0000${JSON.stringify(labels)}`
