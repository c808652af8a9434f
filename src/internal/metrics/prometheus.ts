/**
 * Renders Effect's metric registry (`Metric.snapshot` / `Metric.snapshotUnsafe(context)`) as the Prometheus
 * text exposition format 0.0.4, for a host's `/metrics` route.
 *
 * Internal because the format is a wire encoding, not a concept of the mesh: the public surface is the
 * metrics themselves (Effect's global registry) and whatever route a host mounts. Effect ships no
 * Prometheus encoder and `@effect/opentelemetry` would pull the OpenTelemetry SDK into every host, so
 * this is a small hand-written encoder with no dependency beyond `effect`.
 *
 * Mapping (one `# HELP` / `# TYPE` block per metric name, however many tag sets it has):
 * - counter → `counter`, named as given (ours already end in `_total`). An Effect counter created
 *   without `incremental: true` accepts decrements, which Prometheus reads as a reset: create ours
 *   incremental.
 * - gauge → `gauge`.
 * - histogram → `histogram`: cumulative `<name>_bucket{le="…"}` ending in `le="+Inf"`, `<name>_sum`,
 *   `<name>_count`.
 * - summary → `summary`: `<name>{quantile="…"}` (NaN while a quantile has no observation), `<name>_sum`,
 *   `<name>_count`.
 * - frequency → `counter`: one sample per occurrence key, that key in a `key` label (the name
 *   `@effect/opentelemetry` gives the same attribute). A `key` attribute of the metric itself gives way
 *   to it.
 *
 * Attributes become labels sorted by name. Characters Prometheus does not allow in a metric or label
 * name become `_` (where two attribute names become the same label, the last in name order is kept).
 * The output stays a valid exposition when the registry holds series that collide: where two metrics of
 * different kinds share a name, the first in the snapshot decides the family's type and the others are
 * left out; where two series render to the same one (the same name and attributes but another
 * description), the first is kept. Either is a bug in whoever made the second metric: make each metric
 * one constant. (Effect 4's registry keys a series by kind, name, description and attributes, so
 * histogram boundaries and a counter's `incremental` flag are the first registration's.)
 *
 * @internal
 */
import type * as Metric from "effect/Metric"

/** The `Content-Type` of a {@link render}ed body (text exposition format 0.0.4). */
export const contentType = "text/plain; version=0.0.4; charset=utf-8"

/**
 * Whether a metric name belongs to Effect's own runtime metrics (`child_fibers_active`,
 * `child_fibers_started`, `child_fiber_successes`, `child_fiber_failures`), which the runtime records
 * while `Metric.enableRuntimeMetrics` (or its layer) is on. Effect 3 named them `effect_fiber_*`.
 */
export const isRuntimeMetric = (name: string): boolean => name.startsWith("child_fiber")

/** An `include` predicate that leaves out Effect's runtime metrics (see {@link isRuntimeMetric}). */
export const withoutRuntimeMetrics = (name: string): boolean => !isRuntimeMetric(name)

type Kind = "counter" | "gauge" | "histogram" | "summary"

interface Family {
  readonly kind: Kind
  help: string
  /** Sample lines per series, keyed by the series' rendered labels so the output is stable. */
  readonly series: Array<{ readonly key: string; readonly lines: ReadonlyArray<string> }>
  readonly keys: Set<string>
}

type Labels = ReadonlyArray<readonly [string, string]>

/**
 * Renders metric pairs as a Prometheus 0.0.4 text body. Families are sorted by name and series by
 * labels, so one registry state always renders to the same text.
 *
 * `include` is asked with each pair's Effect name (before any `_` substitution); pass
 * {@link withoutRuntimeMetrics} to leave out `child_fiber*`. `# HELP` is the first description found
 * under a name, and is left out when there is none.
 */
export const render = (
  snapshots: ReadonlyArray<Metric.Metric.Snapshot>,
  options?: { readonly include?: (name: string) => boolean }
): string => {
  const include = options?.include
  const families = new Map<string, Family>()
  for (const snapshot of snapshots) {
    if (include !== undefined && !include(snapshot.id)) continue
    const name = metricName(snapshot.id)
    const kind = kindOf[snapshot.type]
    let family = families.get(name)
    if (family === undefined) {
      family = { kind, help: "", series: [], keys: new Set() }
      families.set(name, family)
    } else if (family.kind !== kind) {
      continue
    }
    if (family.help === "" && snapshot.description !== undefined) family.help = snapshot.description
    const labels = attributeLabels(snapshot.attributes ?? {})
    const key = renderLabels(labels)
    if (family.keys.has(key)) continue
    family.keys.add(key)
    family.series.push({ key, lines: samples(name, labels, snapshot) })
  }

  const out: Array<string> = []
  for (const name of Array.from(families.keys()).sort()) {
    const family = families.get(name)!
    if (family.help !== "") out.push(`# HELP ${name} ${escapeHelp(family.help)}`)
    out.push(`# TYPE ${name} ${family.kind}`)
    family.series.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
    for (const series of family.series) for (const line of series.lines) out.push(line)
  }
  return out.length === 0 ? "" : `${out.join("\n")}\n`
}

const kindOf: Record<Metric.Metric.Type, Kind> = {
  Counter: "counter",
  Frequency: "counter",
  Gauge: "gauge",
  Histogram: "histogram",
  Summary: "summary"
}

const samples = (name: string, labels: Labels, snapshot: Metric.Metric.Snapshot): ReadonlyArray<string> => {
  switch (snapshot.type) {
    case "Counter":
      return [sample(name, labels, formatValue(snapshot.state.count))]
    case "Gauge":
      return [sample(name, labels, formatValue(snapshot.state.value))]
    case "Frequency": {
      const { occurrences } = snapshot.state
      const lines: Array<string> = []
      for (const word of Array.from(occurrences.keys()).sort()) {
        lines.push(sample(name, withLabel(labels, "key", word), formatValue(occurrences.get(word) ?? 0)))
      }
      return lines
    }
    case "Histogram": {
      const state = snapshot.state
      const lines: Array<string> = []
      let sawInf = false
      for (const [boundary, cumulative] of state.buckets) {
        if (boundary === Number.POSITIVE_INFINITY) sawInf = true
        lines.push(
          sample(`${name}_bucket`, withLabel(labels, "le", formatValue(boundary)), formatValue(cumulative))
        )
      }
      // `Metric.boundariesFromIterable` ends in +Inf; boundaries given otherwise might not, and the
      // format requires it.
      if (!sawInf)
        lines.push(sample(`${name}_bucket`, withLabel(labels, "le", "+Inf"), formatValue(state.count)))
      lines.push(sample(`${name}_sum`, labels, formatValue(state.sum)))
      lines.push(sample(`${name}_count`, labels, formatValue(state.count)))
      return lines
    }
    case "Summary": {
      const state = snapshot.state
      const lines: Array<string> = []
      for (const [quantile, value] of state.quantiles) {
        const rendered = value === undefined ? "NaN" : formatValue(value)
        lines.push(sample(name, withLabel(labels, "quantile", formatValue(quantile)), rendered))
      }
      lines.push(sample(`${name}_sum`, labels, formatValue(state.sum)))
      lines.push(sample(`${name}_count`, labels, formatValue(state.count)))
      return lines
    }
  }
}

const sample = (name: string, labels: Labels, value: string): string =>
  `${name}${renderLabels(labels)} ${value}`

/** The metric's attributes as sorted labels, one per label name (the last attribute in name order wins). */
const attributeLabels = (attributes: Metric.Metric.AttributeSet): Labels => {
  const byName = new Map<string, string>()
  for (const key of Object.keys(attributes).sort()) byName.set(labelName(key), attributes[key]!)
  return sortLabels(Array.from(byName))
}

/** `labels` with `name` set to `value`, replacing a tag of that name, still sorted. */
const withLabel = (labels: Labels, name: string, value: string): Labels =>
  sortLabels([...labels.filter(([key]) => key !== name), [name, value]])

const sortLabels = (labels: Array<readonly [string, string]>): Labels =>
  labels.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))

const renderLabels = (labels: Labels): string =>
  labels.length === 0
    ? ""
    : `{${labels.map(([key, value]) => `${key}="${escapeLabelValue(value)}"`).join(",")}}`

/** Format 0.0.4: a metric name matches `[a-zA-Z_:][a-zA-Z0-9_:]*`. */
const metricName = (name: string): string => {
  const replaced = name.replace(/[^a-zA-Z0-9_:]/g, "_")
  return /^[0-9]/.test(replaced) || replaced === "" ? `_${replaced}` : replaced
}

/** Format 0.0.4: a label name matches `[a-zA-Z_][a-zA-Z0-9_]*`. */
const labelName = (name: string): string => {
  const replaced = name.replace(/[^a-zA-Z0-9_]/g, "_")
  return /^[0-9]/.test(replaced) || replaced === "" ? `_${replaced}` : replaced
}

/** Format 0.0.4: in HELP, backslash and line feed are escaped. */
const escapeHelp = (text: string): string => text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")

/** Format 0.0.4: in a label value, backslash, double quote and line feed are escaped. */
const escapeLabelValue = (text: string): string =>
  text.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")

/** Format 0.0.4: a value is a Go float (`NaN`, `+Inf`, `-Inf` spelled so); a bigint is its digits. */
export const formatValue = (value: number | bigint): string => {
  if (typeof value === "bigint") return value.toString()
  if (Number.isNaN(value)) return "NaN"
  if (value === Number.POSITIVE_INFINITY) return "+Inf"
  if (value === Number.NEGATIVE_INFINITY) return "-Inf"
  return String(value)
}
