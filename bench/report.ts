/**
 * What the bench's report is made of: the rows of the printed table, the targets with their limits,
 * number formatting, and the machine and commit measured (`meta` in bench/results.json).
 */
import { execFileSync } from "node:child_process"
import * as Os from "node:os"
import { round } from "./stats.js"

/** One line of the table: what is measured, queen-mesh's figure, the baseline's, the ratio. */
export type Row = readonly [benchmark: string, ours: string, baseline: string, ratio: string]

/** A row with no baseline (and so no ratio) unless given. */
export const row = (benchmark: string, ours: string, baseline = "-", ratio = "-"): Row => [
  benchmark,
  ours,
  baseline,
  ratio
]

export interface Target {
  readonly target: string
  readonly value: number | null
  readonly limit: string
  readonly met: boolean | null
}

/** A target: `value` against `limit`, `met` null where the figure was not measured. */
export const check = (
  target: string,
  value: number | null | undefined,
  limit: string,
  ok: (v: number) => boolean
): Target => ({
  target,
  value: value ?? null,
  limit,
  met: value === null || value === undefined ? null : ok(value)
})

/** A figure shown with the targets for information: no limit, never met or missed. */
export const info = (target: string, value: number | null | undefined): Target => ({
  target,
  value: value ?? null,
  limit: "(information)",
  met: null
})

export const fmt = (value: number | null | undefined, digits = 1): string => {
  if (value === null || value === undefined || !Number.isFinite(value)) return "-"
  if (Math.abs(value) >= 100_000) return Math.round(value).toLocaleString("en-US")
  return value.toFixed(digits)
}

/** A Markdown table, the first row its header. */
export const table = (rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? "").length)))
  const line = (r: ReadonlyArray<string>) => `| ${r.map((cell, c) => cell.padEnd(widths[c]!)).join(" | ")} |`
  const rule = `| ${widths.map((w) => "-".repeat(w)).join(" | ")} |`
  return [line(rows[0]!), rule, ...rows.slice(1).map(line)].join("\n")
}

/** The targets as a table of their own. */
export const targetTable = (targets: ReadonlyArray<Target>): string => {
  const rows: Array<ReadonlyArray<string>> = [["target", "value", "limit", "met"]]
  for (const t of targets) {
    const met = t.limit === "(information)" ? "-" : t.met === null ? "n/a" : t.met ? "yes" : "NO"
    rows.push([t.target, fmt(t.value, 3), t.limit, met])
  }
  return table(rows)
}

/** The commit measured, and whether `src/` had uncommitted changes. */
const gitState = (benchDir: string): { commit: string; srcDirty: boolean } | null => {
  try {
    const git = (...a: Array<string>) =>
      execFileSync("git", a, { cwd: benchDir, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim()
    return { commit: git("rev-parse", "HEAD"), srcDirty: git("status", "--porcelain", "--", "../src") !== "" }
  } catch {
    return null
  }
}

/** The machine and the commit, at the start of a run. */
export const machine = (benchDir: string) => {
  const cpus = Os.cpus()
  return {
    date: new Date().toISOString(),
    node: process.version,
    v8: process.versions.v8,
    platform: `${Os.type()} ${Os.release()} ${Os.arch()}`,
    cpu: cpus[0]?.model ?? "unknown",
    cores: cpus.length,
    memoryGiB: round(Os.totalmem() / 1024 ** 3, 1),
    loadAverageAtStart: Os.loadavg().map((l) => round(l, 2)),
    git: gitState(benchDir)
  }
}
