/**
 * `throughput`: one authenticated peer streams `MESSAGE_AVAILABLE` frames into a receiver process,
 * ours and the baseline's in alternating rounds (the children are in bench/throughput.ts); frames per
 * second and CPU per frame, medians of the rounds.
 */
import { Schema } from "effect"
import { type Driver, freePort, portOf, SECRET, stopAll } from "../driver.js"
import { check, fmt, row } from "../report.js"
import { section } from "../section.js"
import { median, ratio, round } from "../stats.js"

interface ThroughputPlan {
  readonly throughput: { readonly frames: number; readonly rounds: number }
}

const FRAMES_PER_WRITE = 512

const ReceiveResult = Schema.Struct({
  frames: Schema.Number,
  wallNs: Schema.Number,
  cpuUserUs: Schema.Number,
  cpuSystemUs: Schema.Number,
  invalid: Schema.Number
})

const receiveOnce = async (driver: Driver, frames: number, kind: "mesh" | "base") => {
  const receiver = driver.spawn(`recv-${kind}`, { frames, secret: SECRET, dummyPeerPort: await freePort() })
  const port = portOf((await receiver.take("ready", 30_000)).data)
  const sender = driver.spawn("send", { port, frames, secret: SECRET, framesPerWrite: FRAMES_PER_WRITE })
  const raw = await receiver.take("result", 300_000)
  await stopAll([receiver, sender])
  const r = Schema.decodeUnknownSync(ReceiveResult)(raw.data)
  if (r.invalid !== 0) throw new Error(`${kind} receiver counted ${r.invalid} invalid frames`)
  const cpuUs = r.cpuUserUs + r.cpuSystemUs
  return {
    framesPerSec: Math.round((r.frames / r.wallNs) * 1e9),
    cpuUsPerFrame: round(cpuUs / r.frames, 3),
    wallMs: round(r.wallNs / 1e6, 1),
    cpuUserMs: round(r.cpuUserUs / 1000, 1),
    cpuSystemMs: round(r.cpuSystemUs / 1000, 1)
  }
}

type ReceiveRun = Awaited<ReturnType<typeof receiveOnce>>

const summary = (runs: ReadonlyArray<ReceiveRun>) => ({
  framesPerSec: median(runs.map((r) => r.framesPerSec)),
  cpuUsPerFrame: median(runs.map((r) => r.cpuUsPerFrame)),
  runs
})

const run = async (driver: Driver, plan: ThroughputPlan) => {
  const { frames, rounds } = plan.throughput
  const mesh: Array<ReceiveRun> = []
  const baseline: Array<ReceiveRun> = []
  for (let round = 0; round < rounds; round++) {
    driver.progress(`throughput round ${round + 1}/${rounds}: mesh`)
    mesh.push(await receiveOnce(driver, frames, "mesh"))
    driver.progress(`throughput round ${round + 1}/${rounds}: baseline`)
    baseline.push(await receiveOnce(driver, frames, "base"))
  }
  const ours = summary(mesh)
  const base = summary(baseline)
  return {
    frames,
    framesPerWrite: FRAMES_PER_WRITE,
    mesh: ours,
    baseline: base,
    ratios: {
      framesPerSec: ratio(ours.framesPerSec, base.framesPerSec),
      cpuUsPerFrame: ratio(ours.cpuUsPerFrame, base.cpuUsPerFrame)
    }
  }
}

type Throughput = Awaited<ReturnType<typeof run>>

export const throughput = section({
  names: ["throughput"],
  plan: {
    full: { throughput: { frames: 1_000_000, rounds: 7 } },
    quick: { throughput: { frames: 300_000, rounds: 1 } }
  },
  run,
  results: (t) => ({ throughput: t }),
  rows: (t) => [
    row(
      "receive (frames/s)",
      fmt(t.mesh.framesPerSec, 0),
      fmt(t.baseline.framesPerSec, 0),
      fmt(t.ratios.framesPerSec, 2)
    ),
    row(
      "receive CPU (µs/frame)",
      fmt(t.mesh.cpuUsPerFrame, 3),
      fmt(t.baseline.cpuUsPerFrame, 3),
      fmt(t.ratios.cpuUsPerFrame, 2)
    )
  ],
  targets: (t: Throughput | undefined) => [
    check("receive throughput, ours / baseline", t?.ratios.framesPerSec, ">= 0.8", (v) => v >= 0.8),
    check("receive CPU per frame, ours / baseline", t?.ratios.cpuUsPerFrame, "<= 1.25", (v) => v <= 1.25)
  ],
  notes: (_, plan) => [
    `Throughput: one peer sends ${plan.throughput.frames.toLocaleString("en-US")} MESSAGE_AVAILABLE frames (HELLO with HMAC first) over loopback TCP, 512 frames per write, honouring back-pressure; the receiver process measures wall time and process.cpuUsage() from its first wake to its last; median of ${plan.throughput.rounds} alternating round(s).`
  ]
})
