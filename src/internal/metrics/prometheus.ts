/**
 * Renders Effect's metric registry (`Metric.snapshot` / `Metric.unsafeSnapshot()`) as the Prometheus
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
 *   `@effect/opentelemetry` gives the same attribute). A `key` tag of the metric itself gives way to it.
 *
 * Tags become labels sorted by name; a tag repeated with several values keeps the last. Characters
 * Prometheus does not allow in a metric or label name become `_`. The output stays a valid exposition
 * when the registry holds keys that collide: where two metrics of different kinds share a name, the
 * first in the snapshot decides the family's type and the others are left out; where two keys render to
 * the same series (the same name and tags but another description, other histogram boundaries, another
 * `incremental` flag, or tags added in another order), the first is kept. Either is a bug in whoever
 * made the second key: make each metric one constant.
 *
 * @internal
 */
import type * as MetricPair from "effect/MetricPair"
import * as MetricState from "effect/MetricState"
import * as Option from "effect/Option"

/** The `Content-Type` of a {@link render}ed body (text exposition format 0.0.4). */
export const contentType = "text/plain; version=0.0.4; charset=utf-8"

/**
 * Whether a metric name belongs to Effect's own runtime metrics (`effect_fiber_started`,
 * `effect_fiber_active`, `effect_fiber_successes`, `effect_fiber_failures`, `effect_fiber_lifetimes`),
 * which the default runtime records while `RuntimeFlags.RuntimeMetrics` is on.
 */
export const isRuntimeMetric = (name: string): boolean => name.startsWith("effect_fiber_")

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
 * {@link withoutRuntimeMetrics} to leave out `effect_fiber_*`. `# HELP` is the first description found
 * under a name, and is left out when there is none.
 */
export const render = (
  pairs: ReadonlyArray<MetricPair.MetricPair.Untyped>,
  options?: { readonly include?: (name: string) => boolean }
): string => {
  const include = options?.include
  const families = new Map<string, Family>()
  for (const { metricKey, metricState } of pairs) {
    if (include !== undefined && !include(metricKey.name)) continue
    const name = metricName(metricKey.name)
    const kind = kindOf(metricState)
    if (kind === undefined) continue
    let family = families.get(name)
    if (family === undefined) {
      family = { kind, help: "", series: [], keys: new Set() }
      families.set(name, family)
    } else if (family.kind !== kind) {
      continue
    }
    if (family.help === "" && Option.isSome(metricKey.description)) family.help = metricKey.description.value
    const labels = tagLabels(metricKey.tags)
    const key = renderLabels(labels)
    if (family.keys.has(key)) continue
    family.keys.add(key)
    family.series.push({ key, lines: samples(name, labels, metricState) })
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

const kindOf = (state: MetricPair.MetricPair.Untyped["metricState"]): Kind | undefined => {
  if (MetricState.isCounterState(state) || MetricState.isFrequencyState(state)) return "counter"
  if (MetricState.isGaugeState(state)) return "gauge"
  if (MetricState.isHistogramState(state)) return "histogram"
  if (MetricState.isSummaryState(state)) return "summary"
  return undefined
}

const samples = (
  name: string,
  labels: Labels,
  state: MetricPair.MetricPair.Untyped["metricState"]
): ReadonlyArray<string> => {
  if (MetricState.isCounterState(state)) return [sample(name, labels, formatValue(state.count))]
  if (MetricState.isGaugeState(state)) return [sample(name, labels, formatValue(state.value))]
  if (MetricState.isFrequencyState(state)) {
    const lines: Array<string> = []
    const words = Array.from(state.occurrences.keys()).sort()
    for (const word of words) {
      lines.push(sample(name, withLabel(labels, "key", word), formatValue(state.occurrences.get(word) ?? 0)))
    }
    return lines
  }
  if (MetricState.isHistogramState(state)) {
    const lines: Array<string> = []
    let sawInf = false
    for (const [boundary, cumulative] of state.buckets) {
      if (boundary === Number.POSITIVE_INFINITY) sawInf = true
      lines.push(
        sample(`${name}_bucket`, withLabel(labels, "le", formatValue(boundary)), formatValue(cumulative))
      )
    }
    // Effect's boundaries always end in +Inf; a hand-made state might not, and the format requires it.
    if (!sawInf)
      lines.push(sample(`${name}_bucket`, withLabel(labels, "le", "+Inf"), formatValue(state.count)))
    lines.push(sample(`${name}_sum`, labels, formatValue(state.sum)))
    lines.push(sample(`${name}_count`, labels, formatValue(state.count)))
    return lines
  }
  if (MetricState.isSummaryState(state)) {
    const lines: Array<string> = []
    for (const [quantile, value] of state.quantiles) {
      const rendered = Option.isSome(value) ? formatValue(value.value) : "NaN"
      lines.push(sample(name, withLabel(labels, "quantile", formatValue(quantile)), rendered))
    }
    lines.push(sample(`${name}_sum`, labels, formatValue(state.sum)))
    lines.push(sample(`${name}_count`, labels, formatValue(state.count)))
    return lines
  }
  return []
}

const sample = (name: string, labels: Labels, value: string): string =>
  `${name}${renderLabels(labels)} ${value}`

/** The metric's tags as sorted labels, one per name (the last value wins). */
const tagLabels = (tags: ReadonlyArray<{ readonly key: string; readonly value: string }>): Labels => {
  const byName = new Map<string, string>()
  for (const tag of tags) byName.set(labelName(tag.key), tag.value)
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
