/**
 * `flood`: `messageAvailable` called as fast as a loop allows, to three peers of which one accepts and
 * never reads, ours (from a fiber and from `unsafeMessageAvailable`) and the baseline's (the children
 * are in bench/broadcast.ts): calls per second, CPU per call, and memory while the stalled peer's
 * queue drops.
 */
import { Schema } from "effect"
import { type Driver, portOf, SECRET, stopAll } from "../driver.js"
import { check, fmt, row } from "../report.js"
import { section } from "../section.js"
import { ratio, round } from "../stats.js"

/** The flooding loop yields to the event loop every this many calls (here and in `scale`). */
export const YIELD_EVERY = 64

interface FloodPlan {
  readonly flood: { readonly calls: number; readonly yieldEvery: number }
}

/** What a `flood-*` child reports. */
export const FloodResult = Schema.Struct({
  calls: Schema.Number,
  wallNs: Schema.Number,
  cpuUs: Schema.Number,
  rssStart: Schema.Number,
  rssPeak: Schema.Number,
  rssEnd: Schema.Number,
  heapStart: Schema.Number,
  heapPeak: Schema.Number,
  rssAfterGc: Schema.Number,
  heapAfterGc: Schema.Number,
  sent: Schema.Number,
  dropped: Schema.Number
})

const MiB = 1024 * 1024

const figures = (r: typeof FloodResult.Type, delivered: ReadonlyArray<number>) => ({
  calls: r.calls,
  callsPerSec: Math.round((r.calls / r.wallNs) * 1e9),
  cpuUsPerCall: round(r.cpuUs / r.calls, 3),
  rssStartMiB: round(r.rssStart / MiB, 1),
  rssPeakMiB: round(r.rssPeak / MiB, 1),
  rssEndMiB: round(r.rssEnd / MiB, 1),
  rssGrowthMiB: round((r.rssPeak - r.rssStart) / MiB, 1),
  heapGrowthMiB: round((r.heapPeak - r.heapStart) / MiB, 1),
  rssRetainedAfterGcMiB: round((r.rssAfterGc - r.rssStart) / MiB, 1),
  heapRetainedAfterGcMiB: round((r.heapAfterGc - r.heapStart) / MiB, 1),
  framesQueuedForPeers: r.calls * 3,
  framesSent: r.sent,
  framesDropped: r.dropped,
  deliveredToLivePeers: delivered
})

const floodOnce = async (driver: Driver, plan: FloodPlan["flood"], kind: "mesh" | "meshsync" | "base") => {
  const sinks = [driver.spawn("sink", { secret: SECRET }), driver.spawn("sink", { secret: SECRET })]
  const stalled = driver.spawn("stall", {})
  const all = [...sinks, stalled]
  try {
    const peers = await Promise.all(all.map(async (c) => portOf((await c.take("ready", 30_000)).data)))
    const flooder = driver.spawn(
      `flood-${kind}`,
      { peers, secret: SECRET, ...plan, sync: kind === "meshsync" },
      ["--expose-gc"]
    )
    all.push(flooder)
    const r = Schema.decodeUnknownSync(FloodResult)((await flooder.take("result", 300_000)).data)
    const delivered: Array<number> = []
    for (const sink of sinks) {
      sink.send({ kind: "count" })
      delivered.push(Schema.decodeUnknownSync(Schema.Number)((await sink.take("count", 10_000)).data))
    }
    return figures(r, delivered)
  } finally {
    await stopAll(all)
  }
}

const run = async (driver: Driver, plan: FloodPlan) => {
  driver.progress(`broadcast flood: mesh (fiber) x ${plan.flood.calls}`)
  const mesh = await floodOnce(driver, plan.flood, "mesh")
  driver.progress(`broadcast flood: mesh (unsafeMessageAvailable) x ${plan.flood.calls}`)
  const meshSync = await floodOnce(driver, plan.flood, "meshsync")
  driver.progress(`broadcast flood: baseline x ${plan.flood.calls}`)
  const baseline = await floodOnce(driver, plan.flood, "base")
  return {
    peers: "3 (2 live baseline receivers, 1 accepting and never reading)",
    yieldEvery: plan.flood.yieldEvery,
    mesh,
    meshSync,
    baseline,
    ratios: {
      callsPerSec: ratio(mesh.callsPerSec, baseline.callsPerSec),
      cpuUsPerCall: ratio(mesh.cpuUsPerCall, baseline.cpuUsPerCall),
      rssGrowth: ratio(mesh.rssGrowthMiB, baseline.rssGrowthMiB)
    },
    syncRatios: {
      callsPerSec: ratio(meshSync.callsPerSec, baseline.callsPerSec),
      cpuUsPerCall: ratio(meshSync.cpuUsPerCall, baseline.cpuUsPerCall)
    }
  }
}

type Broadcast = Awaited<ReturnType<typeof run>>

const rows = (broadcast: Broadcast) => {
  const { mesh: m, meshSync: ms, baseline: b } = broadcast
  return [
    row(
      "broadcast, fiber (calls/s, 3 peers, 1 stalled)",
      fmt(m.callsPerSec, 0),
      fmt(b.callsPerSec, 0),
      fmt(broadcast.ratios.callsPerSec, 2)
    ),
    row(
      "broadcast CPU, fiber (µs/call)",
      fmt(m.cpuUsPerCall, 3),
      fmt(b.cpuUsPerCall, 3),
      fmt(broadcast.ratios.cpuUsPerCall, 2)
    ),
    row(
      "broadcast, unsafeMessageAvailable (calls/s)",
      fmt(ms.callsPerSec, 0),
      fmt(b.callsPerSec, 0),
      fmt(broadcast.syncRatios.callsPerSec, 2)
    ),
    row(
      "broadcast CPU, unsafeMessageAvailable (µs/call)",
      fmt(ms.cpuUsPerCall, 3),
      fmt(b.cpuUsPerCall, 3),
      fmt(broadcast.syncRatios.cpuUsPerCall, 2)
    ),
    row("RSS growth over the flood (MiB)", fmt(m.rssGrowthMiB), fmt(b.rssGrowthMiB)),
    row(
      "frames dropped / sent",
      `${m.framesDropped} / ${m.framesSent}`,
      `${b.framesDropped} / ${b.framesSent}`
    )
  ]
}

const targets = (broadcast: Broadcast | undefined) => [
  check(
    "broadcast calls/s (fiber), ours / baseline",
    broadcast?.ratios.callsPerSec,
    ">= 0.9",
    (v) => v >= 0.9
  ),
  check(
    "broadcast CPU per call (fiber), ours / baseline",
    broadcast?.ratios.cpuUsPerCall,
    "<= 1.2",
    (v) => v <= 1.2
  ),
  check(
    "broadcast calls/s (unsafeMessageAvailable), ours / baseline",
    broadcast?.syncRatios.callsPerSec,
    ">= 0.9",
    (v) => v >= 0.9
  ),
  check(
    "broadcast CPU per call (unsafeMessageAvailable), ours / baseline",
    broadcast?.syncRatios.cpuUsPerCall,
    "<= 1.2",
    (v) => v <= 1.2
  ),
  check("RSS growth under the stalled-peer flood (MiB)", broadcast?.mesh.rssGrowthMiB, "< 50", (v) => v < 50)
]

export const flood = section({
  names: ["flood"],
  plan: {
    full: { flood: { calls: 1_000_000, yieldEvery: YIELD_EVERY } },
    quick: { flood: { calls: 200_000, yieldEvery: YIELD_EVERY } }
  },
  run,
  results: (broadcast) => ({ broadcast }),
  rows,
  targets,
  notes: (_, plan) => [
    `Broadcast: messageAvailable in a loop yielding to the event loop every ${plan.flood.yieldEvery} calls (in one fiber for ours; meshSync: unsafeMessageAvailable in a plain loop); three peers, one stalled so its send queue (1024 frames) fills and drops; RSS sampled every 10,000 calls, growth = peak minus the RSS after connect and a full GC.`
  ]
})
