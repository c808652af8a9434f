/**
 * Loaded into a measured node with `--import` (bench/tail.ts adds it): records the process's garbage
 * collections, each with its start on the machine's monotonic clock (the clock the driver stamps wakes
 * with, `process.hrtime`), its duration and its kind, and the event loop's utilisation; on SIGUSR2 it
 * writes them as JSON to `$QUEEN_BENCH_TAIL_DIR/<pid>.json`. It adds no timer and no work until a
 * collection happens, so the node measured is the node that runs.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { PerformanceObserver, performance } from "node:perf_hooks"

/** Collections kept at most: a wake series has a few hundred. */
const MAX_ENTRIES = 200_000

const dir = process.env.QUEEN_BENCH_TAIL_DIR
if (dir !== undefined && dir !== "") {
  // performance.now() and hrtime share one clock in Node; the difference maps a GC entry onto hrtime.
  const offsetNs = Number(process.hrtime.bigint()) - performance.now() * 1e6
  const gcs: Array<readonly [number, number, number]> = []
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      if (gcs.length >= MAX_ENTRIES) return
      const detail: unknown = Reflect.get(entry, "detail")
      const kind =
        typeof detail === "object" && detail !== null && "kind" in detail && typeof detail.kind === "number"
          ? detail.kind
          : 0
      gcs.push([offsetNs + entry.startTime * 1e6, entry.duration * 1e6, kind])
    }
  }).observe({ entryTypes: ["gc"] })
  const start = performance.eventLoopUtilization()
  process.on("SIGUSR2", () => {
    const elu = performance.eventLoopUtilization(start)
    const out = {
      pid: process.pid,
      gcs,
      elu: { idleMs: elu.idle, activeMs: elu.active, utilization: elu.utilization }
    }
    Fs.writeFileSync(Path.join(dir, `${process.pid}.json.tmp`), JSON.stringify(out))
    Fs.renameSync(Path.join(dir, `${process.pid}.json.tmp`), Path.join(dir, `${process.pid}.json`))
  })
}
