/**
 * `scale`: broadcast CPU per call against the number of live peers (1, 3, 8, 32, all in one sink
 * process), ours and the baseline's, and how far from linear it grows.
 */
import { Schema } from "effect"
import { type Driver, Numbers, SECRET, stopAll } from "../driver.js"
import { check, fmt, row } from "../report.js"
import { section } from "../section.js"
import { ratio, round } from "../stats.js"
import { FloodResult, YIELD_EVERY } from "./flood.js"

interface ScalePlan {
  readonly scale: { readonly peers: ReadonlyArray<number>; readonly calls: number }
}

const Ports = Schema.Struct({ ports: Numbers })

/** One kind flooding `peers` live peers. */
const floodSinks = async (driver: Driver, kind: "mesh" | "base", peers: number, calls: number) => {
  const sinks = driver.spawn("sinks", { secret: SECRET, count: peers })
  const all = [sinks]
  try {
    const ports = Schema.decodeUnknownSync(Ports)((await sinks.take("ready", 30_000)).data).ports
    const flooder = driver.spawn(`flood-${kind}`, {
      peers: ports,
      secret: SECRET,
      calls,
      yieldEvery: YIELD_EVERY,
      sync: false
    })
    all.push(flooder)
    return Schema.decodeUnknownSync(FloodResult)((await flooder.take("result", 300_000)).data)
  } finally {
    await stopAll(all)
  }
}

const scaleRow = async (driver: Driver, plan: ScalePlan["scale"], n: number) => {
  const figures: Record<string, number> = { peers: n }
  for (const kind of ["mesh", "base"] as const) {
    driver.progress(`broadcast scaling: ${kind}, ${n} peer(s) x ${plan.calls}`)
    const r = await floodSinks(driver, kind, n, plan.calls)
    figures[`${kind}CpuUsPerCall`] = round(r.cpuUs / r.calls, 3)
    figures[`${kind}CallsPerSec`] = Math.round((r.calls / r.wallNs) * 1e9)
    figures[`${kind}Dropped`] = r.dropped
  }
  figures.meshCpuUsPerCallPerPeer = round(figures.meshCpuUsPerCall! / n, 3)
  figures.baseCpuUsPerCallPerPeer = round(figures.baseCpuUsPerCall! / n, 3)
  figures.cpuRatio = ratio(figures.meshCpuUsPerCall, figures.baseCpuUsPerCall) ?? Number.NaN
  return figures
}

const run = async (driver: Driver, plan: ScalePlan) => {
  const rows = []
  for (const n of plan.scale.peers) rows.push(await scaleRow(driver, plan.scale, n))
  const first = rows[0]!
  const last = rows[rows.length - 1]!
  return {
    calls: plan.scale.calls,
    rows,
    growth: {
      // Cost of a call at the most peers over the fewest, against the ratio of peer counts: <= 1 is
      // linear or better.
      meshVsLinear: round(last.meshCpuUsPerCall! / first.meshCpuUsPerCall! / (last.peers! / first.peers!), 3),
      baseVsLinear: round(last.baseCpuUsPerCall! / first.baseCpuUsPerCall! / (last.peers! / first.peers!), 3),
      // What each added peer costs a call, from the fewest peers to the most (µs).
      meshMarginalUsPerPeer: round(
        (last.meshCpuUsPerCall! - first.meshCpuUsPerCall!) / (last.peers! - first.peers!),
        3
      ),
      baseMarginalUsPerPeer: round(
        (last.baseCpuUsPerCall! - first.baseCpuUsPerCall!) / (last.peers! - first.peers!),
        3
      )
    }
  }
}

type Scale = Awaited<ReturnType<typeof run>>

export const scale = section({
  names: ["scale"],
  plan: {
    full: { scale: { peers: [1, 3, 8, 32], calls: 100_000 } },
    quick: { scale: { peers: [1, 3, 8, 32], calls: 20_000 } }
  },
  run,
  results: (result) => ({ scale: result }),
  rows: (result) =>
    result.rows.map((r) =>
      row(
        `broadcast CPU, ${r.peers} live peer(s) (µs/call)`,
        fmt(r.meshCpuUsPerCall, 3),
        fmt(r.baseCpuUsPerCall, 3),
        fmt(r.cpuRatio, 2)
      )
    ),
  targets: (result: Scale | undefined) => [
    check(
      "broadcast CPU per call, 32 peers vs 1, over linear",
      result?.growth.meshVsLinear,
      "<= 1",
      (v) => v <= 1
    )
  ],
  notes: (_, plan) => [
    `Scaling: ${plan.scale.calls.toLocaleString("en-US")} messageAvailable calls (fiber, yielding every ${YIELD_EVERY}) with 1, 3, 8 and 32 live peers (baseline receivers in one sink process); CPU per call in the flooding process.`
  ]
})
