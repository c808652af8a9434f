/**
 * `idle`: a node with three peers that dial it back, heartbeats only, ours and the baseline's side by
 * side at the same time (the children are in bench/idle.ts): CPU, RSS and heap over the window.
 */
import { Schema } from "effect"
import { type Driver, freePort, Numbers, SECRET, stopAll } from "../driver.js"
import { check, fmt, row } from "../report.js"
import { section } from "../section.js"
import { ratio, round } from "../stats.js"

interface IdlePlan {
  readonly idle: { readonly durationMs: number }
}

const PEERS = 3
const MiB = 1024 * 1024

const Ports = Schema.Struct({ ports: Numbers })
const IdleResult = Schema.Struct({
  durationMs: Schema.Number,
  cpuUs: Schema.Number,
  rssStart: Schema.Number,
  rssEnd: Schema.Number,
  rssMax: Schema.Number,
  heapStart: Schema.Number,
  heapEnd: Schema.Number,
  heapMax: Schema.Number,
  framesSent: Schema.Number
})

const figures = (r: typeof IdleResult.Type) => ({
  seconds: round(r.durationMs / 1000, 1),
  cpuMsPerMinute: round((r.cpuUs / 1000 / r.durationMs) * 60_000, 1),
  cpuPercent: round((r.cpuUs / 1000 / r.durationMs) * 100, 3),
  rssStartMiB: round(r.rssStart / MiB, 1),
  rssEndMiB: round(r.rssEnd / MiB, 1),
  rssMaxMiB: round(r.rssMax / MiB, 1),
  heapStartMiB: round(r.heapStart / MiB, 2),
  heapEndMiB: round(r.heapEnd / MiB, 2),
  heapGrowthMiB: round((r.heapEnd - r.heapStart) / MiB, 2),
  framesSent: r.framesSent
})

const idleOnce = async (driver: Driver, durationMs: number, kind: "mesh" | "base") => {
  const port = await freePort()
  const peers = driver.spawn("idle-peers", { secret: SECRET, count: PEERS, peerPort: port })
  const all = [peers]
  try {
    const ports = Schema.decodeUnknownSync(Ports)((await peers.take("ready", 30_000)).data).ports
    const node = driver.spawn(`idle-${kind}`, { port, peers: ports, secret: SECRET, durationMs }, [
      "--expose-gc"
    ])
    all.push(node)
    return figures(
      Schema.decodeUnknownSync(IdleResult)((await node.take("result", durationMs + 60_000)).data)
    )
  } finally {
    await stopAll(all)
  }
}

const run = async (driver: Driver, plan: IdlePlan) => {
  const { durationMs } = plan.idle
  driver.progress(`idle: a node with 3 peers for ${durationMs / 1000} s, ours and the baseline at once`)
  const [mesh, baseline] = await Promise.all([
    idleOnce(driver, durationMs, "mesh"),
    idleOnce(driver, durationMs, "base")
  ])
  return {
    peers: PEERS,
    mesh,
    baseline,
    ratios: { cpu: ratio(mesh.cpuMsPerMinute, baseline.cpuMsPerMinute) }
  }
}

type Idle = Awaited<ReturnType<typeof run>>

const rows = ({ mesh, baseline, ratios }: Idle) => [
  row(
    "idle, 3 peers: CPU (ms/min)",
    fmt(mesh.cpuMsPerMinute),
    fmt(baseline.cpuMsPerMinute),
    fmt(ratios.cpu, 2)
  ),
  row(
    "idle: RSS start / end (MiB)",
    `${fmt(mesh.rssStartMiB)} / ${fmt(mesh.rssEndMiB)}`,
    `${fmt(baseline.rssStartMiB)} / ${fmt(baseline.rssEndMiB)}`
  ),
  row(
    "idle: heap start / end (MiB)",
    `${fmt(mesh.heapStartMiB, 2)} / ${fmt(mesh.heapEndMiB, 2)}`,
    `${fmt(baseline.heapStartMiB, 2)} / ${fmt(baseline.heapEndMiB, 2)}`
  )
]

export const idle = section({
  names: ["idle"],
  plan: { full: { idle: { durationMs: 60_000 } }, quick: { idle: { durationMs: 20_000 } } },
  run,
  results: (result) => ({ idle: result }),
  rows,
  targets: (result: Idle | undefined) => [
    check("idle node heap growth over the window (MiB)", result?.mesh.heapGrowthMiB, "< 1", (v) => v < 1)
  ],
  notes: (_, plan) => [
    `Idle: a node and 3 baseline peers that dial it back, heartbeats only, CPU and memory of the node's process over ${plan.idle.durationMs / 1000} s, ours and the baseline at the same time.`
  ]
})
