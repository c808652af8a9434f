/**
 * Where a wake's tail comes from, measured: the garbage collections of the nodes a wake crossed, each
 * stamped on the clock the wakes are stamped with, put next to every wake. A wake whose window (sent to
 * woken) overlaps a collection on any node it crossed is counted as one the collector was part of; the
 * rest of the tail is the event loop and the machine (timers of the nodes, the scheduler of the OS,
 * the driver itself), told apart by the run with heartbeats off (bench/sections/cli.ts). In-process
 * runs record with {@link recorder}; child processes load bench/tailProbe.ts with {@link probe}.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { type PerformanceEntry, PerformanceObserver, performance } from "node:perf_hooks"
import { fileURLToPath, pathToFileURL } from "node:url"
import { Schema } from "effect"
import { fmt, type Row, row } from "./report.js"
import { percentile, ratio, round, sleep } from "./stats.js"

/** One collection: start (ns, `process.hrtime`'s clock), duration (ns), V8's kind (1 minor, 4 major...). */
export type Gc = readonly [startNs: number, durationNs: number, kind: number]

/** One wake: sent and woken on `process.hrtime`'s clock (ns). */
export interface Stamped {
  readonly sentNs: number
  readonly wokeNs: number
}

const here = Path.dirname(fileURLToPath(import.meta.url))

/** The probe's arguments and environment for a child node, writing into a fresh directory. */
export const probe = (): {
  readonly dir: string
  readonly execArgv: ReadonlyArray<string>
  readonly env: Record<string, string>
} => {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "queen-mesh-tail-"))
  return {
    dir,
    execArgv: ["--import", pathToFileURL(Path.resolve(here, "tailProbe.js")).href],
    env: { QUEEN_BENCH_TAIL_DIR: dir }
  }
}

const ProbeFile = Schema.fromJsonString(
  Schema.Struct({
    pid: Schema.Number,
    gcs: Schema.Array(Schema.Tuple([Schema.Number, Schema.Number, Schema.Number])),
    elu: Schema.Struct({ idleMs: Schema.Number, activeMs: Schema.Number, utilization: Schema.Number })
  })
)
const decodeProbeFile = Schema.decodeUnknownSync(ProbeFile)

export type ProbeReport = Schema.Schema.Type<typeof ProbeFile>

/** Asks the probed process `pid` for its record (SIGUSR2) and reads it; `undefined` if none came. */
export const collect = async (dir: string, pid: number | undefined): Promise<ProbeReport | undefined> => {
  if (pid === undefined) return undefined
  const file = Path.join(dir, `${pid}.json`)
  Fs.rmSync(file, { force: true })
  try {
    process.kill(pid, "SIGUSR2")
  } catch {
    return undefined
  }
  for (let waited = 0; waited < 5_000; waited += 20) {
    if (Fs.existsSync(file)) return decodeProbeFile(Fs.readFileSync(file, "utf8"))
    await sleep(20)
  }
  return undefined
}

const toGc = (entry: PerformanceEntry, offsetNs: number): Gc => {
  const detail: unknown = Reflect.get(entry, "detail")
  const kind =
    typeof detail === "object" && detail !== null && "kind" in detail && typeof detail.kind === "number"
      ? detail.kind
      : 0
  return [offsetNs + entry.startTime * 1e6, entry.duration * 1e6, kind]
}

/** The collections of this process from now until `stop`. */
export const recorder = (): { readonly stop: () => Array<Gc> } => {
  const offsetNs = Number(process.hrtime.bigint()) - performance.now() * 1e6
  const gcs: Array<Gc> = []
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) gcs.push(toGc(entry, offsetNs))
  })
  observer.observe({ entryTypes: ["gc"] })
  return {
    stop: () => {
      // Entries are delivered after the turn they were made in; take what is buffered too.
      for (const entry of observer.takeRecords()) gcs.push(toGc(entry, offsetNs))
      observer.disconnect()
      return gcs
    }
  }
}

/** The collections of a node that fell inside `[fromNs, toNs]`: count, total and longest (ms). */
const gcSummary = (gcs: ReadonlyArray<Gc>, fromNs: number, toNs: number) => {
  const inside = gcs.filter(([start, duration]) => start + duration >= fromNs && start <= toNs)
  return {
    count: inside.length,
    minor: inside.filter(([, , kind]) => kind === 1).length,
    totalMs: round(inside.reduce((sum, [, duration]) => sum + duration, 0) / 1e6, 2),
    longestMs: round(inside.reduce((most, [, duration]) => Math.max(most, duration), 0) / 1e6, 3)
  }
}

/**
 * The wakes of one series next to the collections of the nodes they crossed (`nodes`, by name): how
 * many of the slowest 1% (at or above p99) overlapped a collection, the p99 of the wakes that
 * overlapped none, and each node's collections over the series.
 */
export const attribute = (
  samples: ReadonlyArray<Stamped>,
  nodes: Readonly<Record<string, ReadonlyArray<Gc>>>
) => {
  if (samples.length === 0) return null
  const all = Object.values(nodes)
    .flat()
    .map(([start, duration]) => [start, start + duration] as const)
    .sort((a, b) => a[0] - b[0])
  const overlaps = (s: Stamped): boolean => {
    // Collections are few: a scan from the first that could end after the wake was sent.
    let lo = 0
    let hi = all.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (all[mid]![0] < s.sentNs - 1e9) lo = mid + 1
      else hi = mid
    }
    for (let i = lo; i < all.length && all[i]![0] <= s.wokeNs; i++) if (all[i]![1] >= s.sentNs) return true
    return false
  }
  const us = samples.map((s) => (s.wokeNs - s.sentNs) / 1000)
  const p99 = percentile(us, 99)
  const flagged = samples.map(overlaps)
  const slow = us.flatMap((u, i) => (u >= p99 ? [i] : []))
  const clean = us.filter((_, i) => !flagged[i])
  const fromNs = Math.min(...samples.map((s) => s.sentNs))
  const toNs = Math.max(...samples.map((s) => s.wokeNs))
  return {
    wakes: samples.length,
    p99Us: round(p99, 1),
    wakesOverlappingGc: flagged.filter(Boolean).length,
    slowest: slow.length,
    slowestOverlappingGc: slow.filter((i) => flagged[i]).length,
    slowestShareGc: round(slow.filter((i) => flagged[i]).length / slow.length, 3),
    p99WithoutGcUs: round(percentile(clean, 99), 1),
    gcByNode: Object.fromEntries(
      Object.entries(nodes).map(([name, gcs]) => [name, gcSummary(gcs, fromNs, toNs)])
    )
  }
}

export type Attribution = NonNullable<ReturnType<typeof attribute>>

const share = (a: Attribution | null | undefined): string =>
  a === null || a === undefined ? "-" : `${a.slowestOverlappingGc}/${a.slowest}`

const collections = (a: Attribution | null | undefined): string => {
  if (a === null || a === undefined) return "-"
  return Object.values(a.gcByNode)
    .map((g) => `${g.count} (${fmt(g.longestMs, 2)} ms)`)
    .join(" + ")
}

/** The tail's rows of a report: ours next to the baseline. */
export const tailRows = (
  what: string,
  ours: Attribution | null | undefined,
  baseline: Attribution | null | undefined
): ReadonlyArray<Row> => [
  row(`${what}: slowest 1% overlapping a GC`, share(ours), share(baseline)),
  row(
    `${what} p99 of the wakes overlapping no GC (µs)`,
    fmt(ours?.p99WithoutGcUs),
    fmt(baseline?.p99WithoutGcUs),
    fmt(ratio(ours?.p99WithoutGcUs, baseline?.p99WithoutGcUs), 2)
  ),
  row(`${what}: GCs per node over the series (longest)`, collections(ours), collections(baseline))
]
