/**
 * `cli`: the `queen-mesh node` command line next to the CLI baseline (bench/cliBaseline.ts), and
 * upstream's Rust mesh behind its harness where it is built, all driven through their pipes
 * (bench/cli.ts): a wake from a line on A's stdin to the line on B's stdout, and lines per second out
 * of a receiving node, with wake lines on and with `--quiet`.
 */
import * as Path from "node:path"
import { type CliKind, cliReceive, cliReceiveQuiet, cliWake } from "../cli.js"
import { type Driver, SECRET } from "../driver.js"
import { check, fmt, info, type Row, row } from "../report.js"
import { section } from "../section.js"
import { type Distribution, median, ratio } from "../stats.js"
import { tailRows } from "../tail.js"

interface CliPlan {
  readonly cliWake: { readonly warmup: number; readonly measured: number; readonly block: number }
  readonly cliRecv: { readonly frames: number; readonly rounds: number }
}

const kindName: Record<CliKind, string> = {
  mesh: "queen-mesh node",
  base: "the CLI baseline",
  upstream: "upstream's Rust mesh"
}

type ReceiveRun = Awaited<ReturnType<typeof cliReceive>>
type QuietRun = Awaited<ReturnType<typeof cliReceiveQuiet>>

/** The throughput sender, streaming `frames` into `port`; resolves to its stop. */
const sender = (driver: Driver, frames: number) => async (port: number) => {
  const child = driver.spawn("send", { port, frames, secret: SECRET, framesPerWrite: 512 })
  return () => child.stop()
}

/** `rounds` rounds of `receive` for each kind in turn. */
const inRounds = async <K extends CliKind, R>(
  driver: Driver,
  what: string,
  plan: CliPlan["cliRecv"],
  kinds: ReadonlyArray<K>,
  receive: (kind: K) => Promise<R>
): Promise<Map<K, Array<R>>> => {
  const runs = new Map<K, Array<R>>(kinds.map((kind) => [kind, []]))
  for (let round = 0; round < plan.rounds; round++) {
    for (const kind of kinds) {
      driver.progress(`${what} round ${round + 1}/${plan.rounds}: ${kind} x ${plan.frames}`)
      runs.get(kind)!.push(await receive(kind))
    }
  }
  return runs
}

const receiveSummary = (list: ReadonlyArray<ReceiveRun>) => ({
  linesPerSec: median(list.map((r) => r.linesPerSec)),
  cpuUsPerLine: median(list.map((r) => r.cpuUsPerLine)),
  runs: list
})

const quietSummary = (list: ReadonlyArray<QuietRun>) => ({
  framesPerSec: median(list.map((r) => r.framesPerSec)),
  cpuUsPerFrame: median(list.map((r) => r.cpuUsPerFrame)),
  runs: list
})

type ReceiveSummary = ReturnType<typeof receiveSummary>

/** Each CLI figure of `wake` and `receive` divided by upstream's; null where upstream was not run. */
const overUpstream = (
  wake: Distribution,
  receive: ReceiveSummary,
  upWake: Distribution | undefined,
  upReceive: ReceiveSummary | undefined
) =>
  upWake === undefined || upReceive === undefined
    ? null
    : {
        wakeP50: ratio(wake.p50, upWake.p50),
        wakeP99: ratio(wake.p99, upWake.p99),
        linesPerSec: ratio(receive.linesPerSec, upReceive.linesPerSec),
        cpuUsPerLine: ratio(receive.cpuUsPerLine, upReceive.cpuUsPerLine)
      }

const measure = async (driver: Driver, plan: CliPlan) => {
  const { warmup, measured, block } = plan.cliWake
  const kinds: Array<CliKind> = "binary" in driver.upstream ? ["mesh", "base", "upstream"] : ["mesh", "base"]
  driver.progress(
    `CLI wake latency: ${kinds.map((k) => kindName[k]).join(", ")} x ${warmup + measured}, blocks of ${block}`
  )
  const { wake, tail } = await cliWake(driver.cli, plan.cliWake, kinds)
  // The same series with the nodes' own timers all but off (a heartbeat every 10 minutes): what the
  // heartbeats and the liveness checks add to the tail.
  driver.progress(`CLI wake latency, heartbeats off: ours and the baseline x ${warmup + measured}`)
  const timersOff = await cliWake(driver.cli, plan.cliWake, ["mesh", "base"], { env: HEARTBEATS_OFF })
  const startSender = sender(driver, plan.cliRecv.frames)
  const receive = await inRounds(driver, "CLI receive", plan.cliRecv, kinds, (kind) =>
    cliReceive(driver.cli, kind, plan.cliRecv.frames, startSender)
  )
  // Wake lines off: what a frame costs the CLI when nothing is printed, counted by the stats route.
  const quiet = await inRounds(
    driver,
    "CLI receive, quiet,",
    plan.cliRecv,
    ["mesh", "base"] as const,
    (kind) => cliReceiveQuiet(driver.cli, kind, plan.cliRecv.frames, startSender)
  )
  return { wake, tail, timersOff: timersOff.wake, receive, quiet }
}

/** A heartbeat every 10 minutes, and a dead threshold past it, for ours and the baseline alike. */
const HEARTBEATS_OFF = { QUEEN_SYNC_HEARTBEAT_MS: "600000", QUEEN_SYNC_DEAD_THRESHOLD_MS: "1800000" }

const upstreamPart = (
  driver: Driver,
  ours: ReturnType<typeof overUpstream>,
  base: ReturnType<typeof overUpstream>
) =>
  "binary" in driver.upstream
    ? {
        status: "measured" as const,
        binary: Path.basename(driver.upstream.binary),
        what: "upstream Queen's server/src/mesh.rs (commit 2719e64 where built by build.sh) behind the stdin/stdout harness of ../shared/upstream-mesh: one write and flush per wake line, a tokio multi-thread runtime",
        ratios: { oursOverUpstream: ours, baselineOverUpstream: base }
      }
    : { status: "skipped" as const, reason: driver.upstream.skipped }

const run = async (driver: Driver, plan: CliPlan) => {
  const { wake, tail, timersOff, receive, quiet } = await measure(driver, plan)
  const wakeMesh = wake.mesh!
  const wakeBase = wake.base!
  const recvMesh = receiveSummary(receive.get("mesh")!)
  const recvBase = receiveSummary(receive.get("base")!)
  const upstreamRuns = receive.get("upstream") ?? []
  const recvUp = upstreamRuns.length > 0 ? receiveSummary(upstreamRuns) : undefined
  const quietMesh = quietSummary(quiet.get("mesh")!)
  const quietBase = quietSummary(quiet.get("base")!)
  return {
    wake: {
      mesh: wakeMesh,
      baseline: wakeBase,
      upstream: wake.upstream ?? null,
      ratios: { p50: ratio(wakeMesh.p50, wakeBase.p50), p99: ratio(wakeMesh.p99, wakeBase.p99) },
      tail: {
        what: "each wake next to the garbage collections of both nodes (bench/tail.ts): of the slowest 1% (at or above p99), how many overlapped a collection on the sender or the receiver; the p99 of the wakes that overlapped none; each node's collections over the series. heartbeatsOff: the same series with a heartbeat every 10 minutes, so the nodes' own timers are out of it",
        mesh: tail.mesh ?? null,
        baseline: tail.base ?? null,
        heartbeatsOff: { mesh: timersOff.mesh ?? null, baseline: timersOff.base ?? null }
      }
    },
    receive: {
      frames: plan.cliRecv.frames,
      mesh: recvMesh,
      baseline: recvBase,
      upstream: recvUp ?? null,
      ratios: {
        linesPerSec: ratio(recvMesh.linesPerSec, recvBase.linesPerSec),
        cpuUsPerLine: ratio(recvMesh.cpuUsPerLine, recvBase.cpuUsPerLine)
      }
    },
    receiveQuiet: {
      what: "wake lines off (queen-mesh node --quiet; the baseline counting instead of printing), frames counted by polling each node's stats route every 50 ms (the growth between polls, so the granularity cancels); median of the rounds",
      frames: plan.cliRecv.frames,
      mesh: quietMesh,
      baseline: quietBase,
      ratios: {
        framesPerSec: ratio(quietMesh.framesPerSec, quietBase.framesPerSec),
        cpuUsPerFrame: ratio(quietMesh.cpuUsPerFrame, quietBase.cpuUsPerFrame)
      }
    },
    upstream: upstreamPart(
      driver,
      overUpstream(wakeMesh, recvMesh, wake.upstream, recvUp),
      overUpstream(wakeBase, recvBase, wake.upstream, recvUp)
    )
  }
}

type Cli = Awaited<ReturnType<typeof run>>

const ownRows = (cli: Cli): ReadonlyArray<Row> => {
  const { wake, receive, receiveQuiet: quiet } = cli
  return [
    row("CLI wake p50 (µs)", fmt(wake.mesh.p50), fmt(wake.baseline.p50), fmt(wake.ratios.p50, 2)),
    row("CLI wake p99 (µs)", fmt(wake.mesh.p99), fmt(wake.baseline.p99), fmt(wake.ratios.p99, 2)),
    ...tailRows("CLI wake", wake.tail.mesh, wake.tail.baseline),
    row(
      "CLI wake p99, heartbeats off (µs)",
      fmt(wake.tail.heartbeatsOff.mesh?.p99),
      fmt(wake.tail.heartbeatsOff.baseline?.p99),
      fmt(ratio(wake.tail.heartbeatsOff.mesh?.p99, wake.tail.heartbeatsOff.baseline?.p99), 2)
    ),
    row(
      "CLI receive (wake lines/s)",
      fmt(receive.mesh.linesPerSec, 0),
      fmt(receive.baseline.linesPerSec, 0),
      fmt(receive.ratios.linesPerSec, 2)
    ),
    row(
      "CLI receive CPU (µs/line)",
      fmt(receive.mesh.cpuUsPerLine, 3),
      fmt(receive.baseline.cpuUsPerLine, 3),
      fmt(receive.ratios.cpuUsPerLine, 2)
    ),
    row(
      "CLI receive, --quiet (frames/s)",
      fmt(quiet.mesh.framesPerSec, 0),
      fmt(quiet.baseline.framesPerSec, 0),
      fmt(quiet.ratios.framesPerSec, 2)
    ),
    row(
      "CLI receive CPU, --quiet (µs/frame)",
      fmt(quiet.mesh.cpuUsPerFrame, 3),
      fmt(quiet.baseline.cpuUsPerFrame, 3),
      fmt(quiet.ratios.cpuUsPerFrame, 2)
    )
  ]
}

/** Ours and the baseline, each next to upstream's figure. */
const upstreamRows = (cli: Cli): ReadonlyArray<Row> => {
  const upWake = cli.wake.upstream
  const upRecv = cli.receive.upstream
  if (cli.upstream.status === "skipped") return [row("CLI, upstream Rust rows", "skipped (see notes)")]
  if (upWake === null || upRecv === null) return []
  const { oursOverUpstream: ours, baselineOverUpstream: base } = cli.upstream.ratios
  const { wake, receive } = cli
  const figures = [
    ["CLI wake p50", "(µs)", wake.mesh.p50, wake.baseline.p50, upWake.p50, ours?.wakeP50, base?.wakeP50, 1],
    ["CLI wake p99", "(µs)", wake.mesh.p99, wake.baseline.p99, upWake.p99, ours?.wakeP99, base?.wakeP99, 1],
    [
      "CLI receive",
      "(lines/s)",
      receive.mesh.linesPerSec,
      receive.baseline.linesPerSec,
      upRecv.linesPerSec,
      ours?.linesPerSec,
      base?.linesPerSec,
      0
    ],
    [
      "CLI receive CPU",
      "(µs/line)",
      receive.mesh.cpuUsPerLine,
      receive.baseline.cpuUsPerLine,
      upRecv.cpuUsPerLine,
      ours?.cpuUsPerLine,
      base?.cpuUsPerLine,
      3
    ]
  ] as const
  return figures.flatMap(([what, unit, mesh, baseline, up, oursRatio, baseRatio, digits]) => [
    row(`${what}, ours vs upstream Rust ${unit}`, fmt(mesh, digits), fmt(up, digits), fmt(oursRatio, 2)),
    row(
      `${what}, baseline vs upstream Rust ${unit}`,
      fmt(baseline, digits),
      fmt(up, digits),
      fmt(baseRatio, 2)
    )
  ])
}

const targets = (cli: Cli | undefined) => {
  const vsUpstream = cli?.upstream.status === "measured" ? cli.upstream.ratios.oursOverUpstream : undefined
  return [
    check("CLI wake p50, ours / baseline", cli?.wake.ratios.p50, "<= 1.1", (v) => v <= 1.1),
    check("CLI wake p99, ours / baseline", cli?.wake.ratios.p99, "<= 1.5", (v) => v <= 1.5),
    check("CLI receive lines/s, ours / baseline", cli?.receive.ratios.linesPerSec, ">= 1.0", (v) => v >= 1.0),
    check(
      "CLI receive frames/s with --quiet, ours / baseline",
      cli?.receiveQuiet.ratios.framesPerSec,
      ">= 1.0",
      (v) => v >= 1.0
    ),
    ...(cli === undefined
      ? []
      : [
          info("CLI wake p50, ours / upstream Rust", vsUpstream?.wakeP50),
          info("CLI wake p99, ours / upstream Rust", vsUpstream?.wakeP99),
          info("CLI receive lines/s, ours / upstream Rust", vsUpstream?.linesPerSec)
        ])
  ]
}

const upstreamNote = (upstream: Cli["upstream"]): string =>
  upstream.status === "measured"
    ? `CLI, upstream Rust: upstream Queen's mesh.rs behind the harness of ../shared/upstream-mesh (${Path.basename(upstream.binary)}), started as upstream-mesh-node <id> <port> 127.0.0.1:<peer> <secret> 1000 5000 and dialled on 127.0.0.1 only (it binds 0.0.0.0); wake = "ma orders <partition> <tenant>" on A's stdin (the same frame on the wire as the other two: every kind pushes one UUID tenant, the only kind upstream reads as a tenant), in the same alternating blocks; readiness by its stats command (outbound connected, the peer's HELLO heard), as it prints no peer_up. Its harness writes and flushes stdout once per wake line and never drops one (a slow reader back-pressures the mesh), where ours coalesces per event-loop turn and drops past 4 MiB. CPU from /proc covers every thread of its tokio runtime.`
    : `CLI, upstream Rust: skipped (${upstream.reason}).`

export const cli = section({
  names: ["cli"],
  plan: {
    full: { cliWake: { warmup: 300, measured: 4_000, block: 500 }, cliRecv: { frames: 300_000, rounds: 3 } },
    quick: { cliWake: { warmup: 100, measured: 1_000, block: 250 }, cliRecv: { frames: 100_000, rounds: 1 } }
  },
  run,
  results: (result) => ({ cli: result }),
  rows: (result) => [...ownRows(result), ...upstreamRows(result)],
  targets,
  notes: (result, plan) => [
    `CLI: queen-mesh node (src/cli.ts compiled with the bench) and bench/cliBaseline.ts, driven through pipes by the driver process: wake = a message_available line written to A's stdin until B's wake line is read from its stdout (both stamps in the driver), ${plan.cliWake.measured} rounds after ${plan.cliWake.warmup} warm-up, the two in alternating blocks; receive = ${plan.cliRecv.frames.toLocaleString("en-US")} frames from the throughput sender, wake lines/s read by the driver from the first to the last, CPU of the node from /proc (10 ms ticks); median of ${plan.cliRecv.rounds} round(s).`,
    ...(result === undefined ? [] : [upstreamNote(result.upstream)])
  ]
})
