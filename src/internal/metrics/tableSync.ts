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
import { registry } from "./metricNames.js"

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

/** A counter series and the value it was last brought to. */
interface CounterSeries {
  readonly metric: Metric.Counter<number>
  last: number
}

/** A table applied to one node's metrics. */
export class TableSync<C> {
  private readonly counters = new Map<string, CounterSeries>()
  private readonly gauges = new Map<string, Metric.Gauge<number>>()

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
      const counter = Metric.counter(metric.name, {
        description: metric.help,
        incremental: true,
        attributes: this.attributes(metric, labels)
      })
      series = { metric: counter, last: 0 }
      counter.updateUnsafe(0, registry)
      this.counters.set(id, series)
    }
    if (value > series.last) {
      series.metric.updateUnsafe(value - series.last, registry)
      series.last = value
    }
  }

  private set(metric: Row<C>, labels: ReadonlyArray<string>, value: number): void {
    const id = seriesId(metric.name, labels)
    let gauge = this.gauges.get(id)
    if (gauge === undefined) {
      gauge = Metric.gauge(metric.name, {
        description: metric.help,
        attributes: this.attributes(metric, labels)
      })
      this.gauges.set(id, gauge)
    }
    gauge.updateUnsafe(value, registry)
  }

  /** The series' attributes: the node's `server_id`, then the row's labels. */
  private attributes(metric: Row<C>, labels: ReadonlyArray<string>): Record<string, string> {
    const out: Record<string, string> = { server_id: this.serverId }
    for (let i = 0; i < labels.length; i++) out[metric.labels[i]!] = labels[i]!
    return out
  }
}

const seriesId = (name: string, labels: ReadonlyArray<string>): string =>
  `${name}\u0000${JSON.stringify(labels)}`
