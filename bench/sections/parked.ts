/**
 * `parked`: pops parked on `LocalWaker` at 1k, 10k and 100k (the child is bench/parked.ts): park and
 * wake time per pop, the reaper's CPU per pop as they all time out, and heap per parked pop.
 */
import { Schema } from "effect"
import type { Driver } from "../driver.js"
import { check, fmt, row } from "../report.js"
import { section } from "../section.js"
import { ratio } from "../stats.js"

interface ParkedPlan {
  readonly parked: { readonly sizes: ReadonlyArray<number> }
}

const ParkedRow = Schema.Struct({
  size: Schema.Number,
  parkNsPerPop: Schema.Number,
  wakeNsPerPop: Schema.Number,
  timeoutCpuNsPerPop: Schema.Number,
  bytesPerParkedPop: Schema.Number
})

const run = async (driver: Driver, plan: ParkedPlan) => {
  driver.progress(`parked pops: ${plan.parked.sizes.join(", ")}`)
  const child = driver.spawn("parked", { sizes: plan.parked.sizes }, ["--expose-gc"])
  try {
    const rows = Schema.decodeUnknownSync(Schema.Array(ParkedRow))((await child.take("result", 600_000)).data)
    const first = rows[0]!
    const last = rows[rows.length - 1]!
    return {
      rows,
      growth: {
        timeoutCpu: ratio(last.timeoutCpuNsPerPop, first.timeoutCpuNsPerPop),
        park: ratio(last.parkNsPerPop, first.parkNsPerPop),
        wake: ratio(last.wakeNsPerPop, first.wakeNsPerPop)
      }
    }
  } finally {
    await child.stop()
  }
}

type Parked = Awaited<ReturnType<typeof run>>

export const parked = section({
  names: ["parked"],
  plan: {
    full: { parked: { sizes: [1_000, 10_000, 100_000] } },
    quick: { parked: { sizes: [1_000, 10_000, 100_000] } }
  },
  run,
  results: (result) => ({ parked: result }),
  rows: (result) =>
    result.rows.map((r) =>
      row(
        `parked ${r.size}: park / wake / timeout CPU (ns/pop), heap (B/pop)`,
        `${fmt(r.parkNsPerPop, 0)} / ${fmt(r.wakeNsPerPop, 0)} / ${fmt(r.timeoutCpuNsPerPop, 0)}, ${fmt(r.bytesPerParkedPop, 0)}`
      )
    ),
  targets: (result: Parked | undefined) => [
    check("parked pops: CPU per pop at 100k / at 1k", result?.growth.timeoutCpu, "<= 2", (v) => v <= 2)
  ],
  notes: () => [
    "Parked pops: bench/parked.ts (park, wake, and the reaper's CPU as N pops time out, per pop; heap per parked pop after a GC)."
  ]
})
