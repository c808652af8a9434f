/**
 * Small numeric helpers for the bench: percentiles, medians, rounding and ratios.
 */

/** The `p`-th percentile (0..100) by nearest rank, of a copy of `values`. */
export const percentile = (values: ReadonlyArray<number>, p: number): number => {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  return sorted[rank]!
}

export const median = (values: ReadonlyArray<number>): number => percentile(values, 50)

export const mean = (values: ReadonlyArray<number>): number =>
  values.length === 0 ? Number.NaN : values.reduce((a, b) => a + b, 0) / values.length

/** Rounds to `digits` significant-ish decimals, keeping JSON readable. */
export const round = (value: number, digits = 2): number => {
  if (!Number.isFinite(value)) return value
  const scale = 10 ** digits
  return Math.round(value * scale) / scale
}

/** ours / baseline, rounded; `null` when either side is missing. */
export const ratio = (ours: number | undefined, baseline: number | undefined): number | null =>
  ours === undefined || baseline === undefined || !Number.isFinite(ours) || !Number.isFinite(baseline)
    ? null
    : baseline === 0
      ? null
      : round(ours / baseline, 3)

export interface Distribution {
  readonly n: number
  readonly p50: number
  readonly p90: number
  readonly p99: number
  readonly p999: number
  readonly max: number
  readonly mean: number
}

export const distribution = (values: ReadonlyArray<number>): Distribution => ({
  n: values.length,
  p50: round(percentile(values, 50), 1),
  p90: round(percentile(values, 90), 1),
  p99: round(percentile(values, 99), 1),
  p999: round(percentile(values, 99.9), 1),
  max: round(
    values.reduce((a, b) => Math.max(a, b), Number.NEGATIVE_INFINITY),
    1
  ),
  mean: round(mean(values), 1)
})

/** Resolves on the next turn of the event loop, after pending I/O callbacks. */
export const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))
