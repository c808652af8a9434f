/**
 * `npm run bench [-- --quick]`: every benchmark of the mesh next to the hand-written baseline
 * (`bench/baseline.ts`), in one process tree. Prints a table and writes `bench/results.json` with every
 * figure, the ratios (ours divided by the baseline's), the targets, and the machine.
 *
 * Flags: `--quick` (smaller counts, about three minutes), `--only=<sections>` (a subset of
 * codec, throughput, wake, pg, lane, flood, cli, cluster, scale, parked, idle, tls, fair, broker, written to
 * `.bench-dist/results.only.json` instead), `--cpu-prof=<role>,...` (run those child roles under
 * `node --cpu-prof`, profiles in `bench/profiles/`; the CLI nodes are `cli-mesh-a`, `cli-mesh-b`,
 * `cli-mesh-recv` and their `cli-base-*` twins, the lane's `lane-flood-a`, `lane-lane-b`, ...), `--upstream=<path>|off` (upstream's Rust mesh
 * behind its harness, run in the CLI rounds as a third kind; else `QUEEN_MESH_BENCH_UPSTREAM`, else
 * `/tmp/upstream-mesh-harness/target/release/upstream-mesh-node` if it exists; skipped, saying why,
 * where none is found).
 */
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { Schema } from "effect"
import * as Broker from "./broker.js"
import { type CliKind, cliReceive, cliReceiveQuiet, cliWake } from "./cli.js"
import { type ClusterPlan, type ClusterResult, runCluster } from "./cluster.js"
import { Child } from "./ipc.js"
import * as Lane from "./lane.js"
import { type PgServer, startPostgres } from "./postgres.js"
import { type Distribution, distribution, median, ratio, round, sleep } from "./stats.js"

// ---------------------------------------------------------------------------------------------
// options
// ---------------------------------------------------------------------------------------------

const args = process.argv.slice(2)
const quick = args.includes("--quick")
const listArg = (name: string): ReadonlyArray<string> | undefined => {
  const arg = args.find((a) => a.startsWith(`--${name}=`))
  return arg === undefined
    ? undefined
    : arg
        .slice(name.length + 3)
        .split(",")
        .filter((s) => s !== "")
}
const only = listArg("only")
const profiled = new Set(listArg("cpu-prof") ?? [])
const enabled = (section: string) => only === undefined || only.includes(section)

/** Where upstream's harness was built by `/work/shared/upstream-mesh/build.sh` (commit 2719e64). */
const UPSTREAM_DEFAULT = "/tmp/upstream-mesh-harness/target/release/upstream-mesh-node"

type Upstream = { readonly binary: string } | { readonly skipped: string }

/** `--upstream=<path>|off`, else `QUEEN_MESH_BENCH_UPSTREAM`, else the default build if it exists. */
const findUpstream = (): Upstream => {
  const flag = args.find((a) => a.startsWith("--upstream="))?.slice("--upstream=".length)
  const env = process.env.QUEEN_MESH_BENCH_UPSTREAM
  const [given, from] =
    flag !== undefined
      ? [flag, "--upstream"]
      : env !== undefined && env !== ""
        ? [env, "QUEEN_MESH_BENCH_UPSTREAM"]
        : []
  if (given === "off" || given === "none") return { skipped: `turned off by ${from}=${given}` }
  const binary = given ?? UPSTREAM_DEFAULT
  try {
    Fs.accessSync(binary, Fs.constants.X_OK)
    return { binary: Path.resolve(binary) }
  } catch {
    return {
      skipped:
        given === undefined
          ? `upstream's harness is not built (no ${UPSTREAM_DEFAULT}; build it with /work/shared/upstream-mesh/build.sh, or pass --upstream=<path>)`
          : `${from}=${given} is not an executable file`
    }
  }
}

const SECRET = "bench-s3cr3t"
const plan = quick
  ? {
      codec: { sampleMs: 40, samples: 3 },
      throughput: { frames: 300_000, rounds: 1 },
      wake: { warmup: 200, measured: 2_000, block: 500 },
      off: { total: 20, pollMs: 100 },
      flood: { calls: 200_000, yieldEvery: 64 },
      cliWake: { warmup: 100, measured: 1_000, block: 250 },
      cliRecv: { frames: 100_000, rounds: 1 },
      scale: { peers: [1, 3, 8, 32], calls: 20_000 },
      parked: { sizes: [1_000, 10_000, 100_000] },
      idle: { durationMs: 20_000 },
      tls: { rounds: 300 },
      fair: { durationMs: 4_000, everyMs: 50 },
      lane: Lane.quickPlan,
      cluster: {
        sizes: [3, 8],
        warmupLinesPerNode: 2_000,
        warmupPushesPerNode: 20,
        rounds: 300,
        idleMs: 6_000
      } satisfies ClusterPlan
    }
  : {
      codec: { sampleMs: 150, samples: 5 },
      throughput: { frames: 1_000_000, rounds: 7 },
      wake: { warmup: 500, measured: 10_000, block: 100 },
      off: { total: 100, pollMs: 100 },
      flood: { calls: 1_000_000, yieldEvery: 64 },
      cliWake: { warmup: 300, measured: 4_000, block: 500 },
      cliRecv: { frames: 300_000, rounds: 3 },
      scale: { peers: [1, 3, 8, 32], calls: 100_000 },
      parked: { sizes: [1_000, 10_000, 100_000] },
      idle: { durationMs: 60_000 },
      tls: { rounds: 1_000 },
      fair: { durationMs: 10_000, everyMs: 50 },
      lane: Lane.fullPlan,
      cluster: {
        sizes: [3, 8, 16],
        warmupLinesPerNode: 3_000,
        warmupPushesPerNode: 30,
        rounds: 600,
        idleMs: 20_000
      } satisfies ClusterPlan
    }

const here = Path.dirname(fileURLToPath(import.meta.url))
const benchDir = Path.resolve(here, "../../bench")
const profileDir = Path.join(benchDir, "profiles")

// ---------------------------------------------------------------------------------------------
// process plumbing
// ---------------------------------------------------------------------------------------------

const children = new Set<Child>()
let profiles = 0
/** `--cpu-prof` with a file named after the role, e.g. `bench/profiles/wake-mesh-b.3.cpuprofile`. */
const profileFlags = (role: string): ReadonlyArray<string> => [
  "--cpu-prof",
  "--cpu-prof-dir",
  profileDir,
  "--cpu-prof-name",
  `${role}.${++profiles}.cpuprofile`
]
let pgServer: PgServer | undefined

const spawn = (role: string, params: object, execArgv: ReadonlyArray<string> = []): Child => {
  const extra = profiled.has(role) ? profileFlags(role) : []
  const child = new Child(role, params, [...execArgv, ...extra])
  children.add(child)
  child.process.once("exit", () => children.delete(child))
  return child
}

const stopAll = async (list: ReadonlyArray<Child>) => {
  await Promise.all(list.map((c) => c.stop()))
}

const cleanup = () => {
  for (const child of children) child.process.kill("SIGKILL")
  for (const node of cliNodes) node.process.kill("SIGKILL")
  pgServer?.stop()
  pgServer = undefined
  Lane.killLaneChildren()
  Lane.stopLaneDatabase()
  Broker.killBrokerChildren()
}
process.on("exit", cleanup)
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    cleanup()
    process.exit(130)
  })
}

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = Net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

const PortData = Schema.Struct({ port: Schema.Number })
const Numbers = Schema.Array(Schema.Number)
const portOf = (data: unknown) => Schema.decodeUnknownSync(PortData)(data).port

const progress = (text: string) => process.stderr.write(`  ${text}\n`)

// ---------------------------------------------------------------------------------------------
// codec
// ---------------------------------------------------------------------------------------------

const Pair = Schema.Struct({ ours: Schema.Number, baseline: Schema.Number })
const CodecCase = Schema.Struct({
  name: Schema.String,
  items: Schema.Number,
  frameBytes: Schema.Number,
  encodeNs: Pair,
  decodeNs: Pair
})

const runCodec = async () => {
  progress("codec")
  const child = spawn("codec", plan.codec)
  const message = await child.take("result", 300_000)
  await child.stop()
  const cases = Schema.decodeUnknownSync(Schema.Array(CodecCase))(message.data)
  return cases.map((c) => ({
    ...c,
    encodeRatio: ratio(c.encodeNs.ours, c.encodeNs.baseline),
    decodeRatio: ratio(c.decodeNs.ours, c.decodeNs.baseline),
    perItemNs: {
      encode: {
        ours: round(c.encodeNs.ours / c.items, 1),
        baseline: round(c.encodeNs.baseline / c.items, 1)
      },
      decode: { ours: round(c.decodeNs.ours / c.items, 1), baseline: round(c.decodeNs.baseline / c.items, 1) }
    }
  }))
}

// ---------------------------------------------------------------------------------------------
// receive throughput
// ---------------------------------------------------------------------------------------------

const ReceiveResult = Schema.Struct({
  frames: Schema.Number,
  wallNs: Schema.Number,
  cpuUserUs: Schema.Number,
  cpuSystemUs: Schema.Number,
  invalid: Schema.Number
})

const receiveOnce = async (kind: "mesh" | "base") => {
  const frames = plan.throughput.frames
  const receiver = spawn(`recv-${kind}`, { frames, secret: SECRET, dummyPeerPort: await freePort() })
  const port = portOf((await receiver.take("ready", 30_000)).data)
  const sender = spawn("send", { port, frames, secret: SECRET, framesPerWrite: 512 })
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

const runThroughput = async () => {
  const mesh: Array<Awaited<ReturnType<typeof receiveOnce>>> = []
  const baseline: Array<Awaited<ReturnType<typeof receiveOnce>>> = []
  for (let round = 0; round < plan.throughput.rounds; round++) {
    progress(`throughput round ${round + 1}/${plan.throughput.rounds}: mesh`)
    mesh.push(await receiveOnce("mesh"))
    progress(`throughput round ${round + 1}/${plan.throughput.rounds}: baseline`)
    baseline.push(await receiveOnce("base"))
  }
  const summary = (runs: typeof mesh) => ({
    framesPerSec: median(runs.map((r) => r.framesPerSec)),
    cpuUsPerFrame: median(runs.map((r) => r.cpuUsPerFrame)),
    runs
  })
  const ours = summary(mesh)
  const base = summary(baseline)
  return {
    frames: plan.throughput.frames,
    framesPerWrite: 512,
    mesh: ours,
    baseline: base,
    ratios: {
      framesPerSec: ratio(ours.framesPerSec, base.framesPerSec),
      cpuUsPerFrame: ratio(ours.cpuUsPerFrame, base.cpuUsPerFrame)
    }
  }
}

// ---------------------------------------------------------------------------------------------
// wake latency
// ---------------------------------------------------------------------------------------------

type WakeVariant = "mesh" | "meshsync" | "base" | "pg"

/**
 * Sequential push-to-wake series between pairs of processes, one pair per variant. The variants take
 * turns in blocks of rounds (every variant's block 1, then every variant's block 2, ...), so that a
 * drift in whatever else the machine is doing weighs on all of them alike, while inside a block each
 * round follows the same variant's previous one, as in a plain sequential run. The first round of each
 * block and the warm-up rounds are dropped. One-way latencies in µs.
 */
const wakeSeries = async (
  variants: ReadonlyArray<WakeVariant>,
  pgPort = 0
): Promise<Map<WakeVariant, Distribution>> => {
  const { warmup, measured, block } = plan.wake
  const blocks = Math.ceil(measured / block)
  // Each later block re-warms with one dropped round.
  const total = warmup + measured + blocks
  const pairs: Array<{ variant: WakeVariant; a: Child; b: Child; next: number; kept: Array<number> }> = []
  try {
    for (const variant of variants) {
      const portA = await freePort()
      const portB = await freePort()
      const common = { secret: SECRET, total, pgPort }
      const b = spawn(`wake-${variant}-b`, { ...common, port: portB, peerPort: portA })
      const a = spawn(`wake-${variant}-a`, { ...common, port: portA, peerPort: portB })
      pairs.push({ variant, a, b, next: 0, kept: [] })
    }
    await Promise.all(pairs.flatMap(({ a, b }) => [a.take("ready", 30_000), b.take("ready", 30_000)]))
    const boundaries = [warmup + block + 1]
    while (boundaries[boundaries.length - 1]! < total) boundaries.push(boundaries.at(-1)! + block + 1)
    for (const end of boundaries) {
      for (const pair of pairs) {
        const first = pair.next
        for (; pair.next < Math.min(end, total); pair.next++) {
          await pair.b.take("parked", 30_000)
          pair.a.send({ kind: "push", i: pair.next })
          // Keep every round past the warm-up but the first of a block.
          if (pair.next >= warmup && pair.next !== first) pair.kept.push(pair.next)
        }
      }
    }
    const out = new Map<WakeVariant, Distribution>()
    for (const { variant, a, b, kept } of pairs) {
      const sent = Schema.decodeUnknownSync(Numbers)((await a.take("times", 30_000)).data)
      const woken = Schema.decodeUnknownSync(Numbers)((await b.take("times", 90_000)).data)
      const latencies: Array<number> = []
      for (const i of kept.slice(0, measured)) {
        const us = (woken[i]! - sent[i]!) / 1000
        if (!(us > 0)) throw new Error(`${variant}: wake ${i} came before its push (${us} µs)`)
        latencies.push(us)
      }
      out.set(variant, distribution(latencies))
    }
    return out
  } finally {
    await stopAll(pairs.flatMap(({ a, b }) => [a, b]))
  }
}

/** The mesh turned off: the push is found by B's own re-poll every `pollMs`. */
const fallbackSeries = async (): Promise<Distribution & { pollMs: number }> => {
  const { total, pollMs } = plan.off
  const common = { secret: SECRET, total, pollMs }
  const b = spawn("wake-off-b", { ...common, port: await freePort(), peerPort: 0 })
  const a = spawn("wake-off-a", { ...common, port: await freePort(), peerPort: 0 })
  try {
    await Promise.all([a.take("ready", 30_000), b.take("ready", 30_000)])
    for (let i = 0; i < total; i++) {
      // A push lands at a random phase of B's re-poll timer.
      await sleep(Math.random() * pollMs)
      a.send({ kind: "push", i })
      const pushed = await a.take("pushed", 30_000)
      b.send({ kind: "committed", i, data: pushed.data })
      await b.take("seen", 30_000)
    }
    const latencies = Schema.decodeUnknownSync(Numbers)((await b.take("latencies", 30_000)).data)
    return { ...distribution(latencies.map((ns) => ns / 1000)), pollMs }
  } finally {
    await stopAll([a, b])
  }
}

type PgOutcome =
  | { readonly measured: true; readonly version: string; readonly latencyUs: Distribution }
  | { readonly measured: false; readonly reason: string }

/** A local PostgreSQL, when one can be started; the reason otherwise. */
const startPg = async (): Promise<PgServer | string> => {
  progress("postgres: starting a local server")
  try {
    await import("pg")
  } catch {
    return "the pg client is not installed (npm install)"
  }
  const started = startPostgres(await freePort())
  if (!started.ok) return started.reason
  pgServer = started.server
  return started.server
}

const runWake = async (withMesh: boolean, withPg: boolean) => {
  const pg = withPg ? await startPg() : undefined
  const variants: Array<WakeVariant> = withMesh ? ["mesh", "meshsync", "base"] : []
  if (pg !== undefined && typeof pg !== "string") variants.push("pg")
  let series = new Map<WakeVariant, Distribution>()
  let pgFailure: string | undefined
  const n = plan.wake.warmup + plan.wake.measured
  try {
    if (variants.length > 0) {
      progress(`wake latency: ${variants.join(", ")} x ${n}, in alternating blocks of ${plan.wake.block}`)
      series = await wakeSeries(variants, pg !== undefined && typeof pg !== "string" ? pg.port : 0)
    }
  } catch (error) {
    // Only a PostgreSQL failure is survivable: retry without it.
    if (!variants.includes("pg")) throw error
    pgFailure = `failed: ${error instanceof Error ? error.message : String(error)}`
    const rest = variants.filter((v) => v !== "pg")
    if (rest.length > 0) series = await wakeSeries(rest)
  } finally {
    if (pg !== undefined && typeof pg !== "string") pg.stop()
    pgServer = undefined
  }
  let postgres: PgOutcome | undefined
  if (withPg) {
    const latencyUs = series.get("pg")
    postgres =
      typeof pg === "string"
        ? { measured: false, reason: pg }
        : latencyUs === undefined || pg === undefined
          ? { measured: false, reason: pgFailure ?? "not run" }
          : { measured: true, version: pg.version, latencyUs }
  }
  if (!withMesh) return { postgres }
  const mesh = series.get("mesh")!
  const meshSync = series.get("meshsync")!
  const baseline = series.get("base")!
  progress(`wake latency: mesh off, re-poll every ${plan.off.pollMs} ms x ${plan.off.total}`)
  const meshOff = await fallbackSeries()
  return {
    postgres,
    latency: {
      warmup: plan.wake.warmup,
      pusher: {
        mesh: "one long-lived fiber: Effect.async on the IPC inbox, stamp, yield* mesh.messageAvailable",
        meshSync: "the IPC callback: stamp, mesh.unsafeMessageAvailable"
      },
      mesh,
      meshSync,
      baseline,
      meshOff,
      ratios: {
        p50: ratio(mesh.p50, baseline.p50),
        p99: ratio(mesh.p99, baseline.p99),
        p999: ratio(mesh.p999, baseline.p999)
      },
      syncRatios: {
        p50: ratio(meshSync.p50, baseline.p50),
        p99: ratio(meshSync.p99, baseline.p99),
        p999: ratio(meshSync.p999, baseline.p999)
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// broadcast cost and memory
// ---------------------------------------------------------------------------------------------

const FloodResult = Schema.Struct({
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

const floodOnce = async (kind: "mesh" | "meshsync" | "base") => {
  const sinks = [spawn("sink", { secret: SECRET }), spawn("sink", { secret: SECRET })]
  const stalled = spawn("stall", {})
  const all = [...sinks, stalled]
  try {
    const peers = await Promise.all(all.map(async (c) => portOf((await c.take("ready", 30_000)).data)))
    const flooder = spawn(
      `flood-${kind}`,
      { peers, secret: SECRET, ...plan.flood, sync: kind === "meshsync" },
      ["--expose-gc"]
    )
    all.push(flooder)
    const r = Schema.decodeUnknownSync(FloodResult)((await flooder.take("result", 300_000)).data)
    const delivered: Array<number> = []
    for (const sink of sinks) {
      sink.send({ kind: "count" })
      delivered.push(Schema.decodeUnknownSync(Schema.Number)((await sink.take("count", 10_000)).data))
    }
    return {
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
    }
  } finally {
    await stopAll(all)
  }
}

const runFlood = async () => {
  progress(`broadcast flood: mesh (fiber) x ${plan.flood.calls}`)
  const mesh = await floodOnce("mesh")
  progress(`broadcast flood: mesh (unsafeMessageAvailable) x ${plan.flood.calls}`)
  const meshSync = await floodOnce("meshsync")
  progress(`broadcast flood: baseline x ${plan.flood.calls}`)
  const baseline = await floodOnce("base")
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

// ---------------------------------------------------------------------------------------------
// the CLI path
// ---------------------------------------------------------------------------------------------

const cliNodes = new Set<{ readonly process: { kill: (signal: NodeJS.Signals) => boolean } }>()

const cliOptions = {
  secret: SECRET,
  freePort,
  execArgv: (role: string) => (profiled.has(role) ? profileFlags(role) : []),
  onStart: (node: { readonly process: { kill: (signal: NodeJS.Signals) => boolean } }) => {
    cliNodes.add(node)
  }
}

type CliReceiveRun = Awaited<ReturnType<typeof cliReceive>>

const runCli = async (upstream: Upstream) => {
  const { warmup, measured, block } = plan.cliWake
  const kinds: Array<CliKind> = ["mesh", "base"]
  const options = "binary" in upstream ? { ...cliOptions, upstream: upstream.binary } : cliOptions
  if ("binary" in upstream) kinds.push("upstream")
  progress(
    `CLI wake latency: ${kinds.map((k) => cliKindName[k]).join(", ")} x ${warmup + measured}, blocks of ${block}`
  )
  const wake = await cliWake(options, plan.cliWake, kinds)
  const runs: Record<CliKind, Array<CliReceiveRun>> = { mesh: [], base: [], upstream: [] }
  const startSender = async (port: number) => {
    const sender = spawn("send", { port, frames: plan.cliRecv.frames, secret: SECRET, framesPerWrite: 512 })
    return () => sender.stop()
  }
  for (let round = 0; round < plan.cliRecv.rounds; round++) {
    for (const kind of kinds) {
      progress(`CLI receive round ${round + 1}/${plan.cliRecv.rounds}: ${kind} x ${plan.cliRecv.frames}`)
      runs[kind].push(await cliReceive(options, kind, plan.cliRecv.frames, startSender))
    }
  }
  // Wake lines off: what a frame costs the CLI when nothing is printed, counted by the stats route.
  const quiet: Record<"mesh" | "base", Array<Awaited<ReturnType<typeof cliReceiveQuiet>>>> = {
    mesh: [],
    base: []
  }
  for (let round = 0; round < plan.cliRecv.rounds; round++) {
    for (const kind of ["mesh", "base"] as const) {
      progress(
        `CLI receive, quiet, round ${round + 1}/${plan.cliRecv.rounds}: ${kind} x ${plan.cliRecv.frames}`
      )
      quiet[kind].push(await cliReceiveQuiet(options, kind, plan.cliRecv.frames, startSender))
    }
  }
  const quietSummary = (list: ReadonlyArray<Awaited<ReturnType<typeof cliReceiveQuiet>>>) => ({
    framesPerSec: median(list.map((r) => r.framesPerSec)),
    cpuUsPerFrame: median(list.map((r) => r.cpuUsPerFrame)),
    runs: list
  })
  const quietMesh = quietSummary(quiet.mesh)
  const quietBase = quietSummary(quiet.base)
  const summary = (list: ReadonlyArray<CliReceiveRun>) => ({
    linesPerSec: median(list.map((r) => r.linesPerSec)),
    cpuUsPerLine: median(list.map((r) => r.cpuUsPerLine)),
    runs: list
  })
  const wakeMesh = wake.mesh!
  const wakeBase = wake.base!
  const wakeUp = wake.upstream
  const recvMesh = summary(runs.mesh)
  const recvBase = summary(runs.base)
  const recvUp = runs.upstream.length > 0 ? summary(runs.upstream) : undefined
  /** `who` divided by upstream's, for each CLI figure. */
  const overUpstream = (w: Distribution, r: ReturnType<typeof summary>) =>
    wakeUp === undefined || recvUp === undefined
      ? null
      : {
          wakeP50: ratio(w.p50, wakeUp.p50),
          wakeP99: ratio(w.p99, wakeUp.p99),
          linesPerSec: ratio(r.linesPerSec, recvUp.linesPerSec),
          cpuUsPerLine: ratio(r.cpuUsPerLine, recvUp.cpuUsPerLine)
        }
  return {
    wake: {
      mesh: wakeMesh,
      baseline: wakeBase,
      upstream: wakeUp ?? null,
      ratios: { p50: ratio(wakeMesh.p50, wakeBase.p50), p99: ratio(wakeMesh.p99, wakeBase.p99) }
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
    upstream:
      "binary" in upstream
        ? {
            status: "measured" as const,
            binary: upstream.binary,
            what: "upstream Queen's server/src/mesh.rs (commit 2719e64 where built by build.sh) behind /work/shared/upstream-mesh's stdin/stdout harness: one write and flush per wake line, a tokio multi-thread runtime",
            ratios: {
              oursOverUpstream: overUpstream(wakeMesh, recvMesh),
              baselineOverUpstream: overUpstream(wakeBase, recvBase)
            }
          }
        : { status: "skipped" as const, reason: upstream.skipped }
  }
}

const cliKindName: Record<CliKind, string> = {
  mesh: "queen-mesh node",
  base: "the CLI baseline",
  upstream: "upstream's Rust mesh"
}

// ---------------------------------------------------------------------------------------------
// a full mesh of N processes
// ---------------------------------------------------------------------------------------------

const runClusterSection = (upstream: Upstream) => {
  return runCluster(
    { cli: "binary" in upstream ? { ...cliOptions, upstream: upstream.binary } : cliOptions, progress },
    plan.cluster,
    "skipped" in upstream ? upstream.skipped : undefined
  )
}

// ---------------------------------------------------------------------------------------------
// costs as work grows
// ---------------------------------------------------------------------------------------------

/** Broadcast cost per call against the number of peers, all live, in one sink process. */
const runScale = async () => {
  const rows = []
  for (const n of plan.scale.peers) {
    const row: Record<string, number> = { peers: n }
    for (const kind of ["mesh", "base"] as const) {
      progress(`broadcast scaling: ${kind}, ${n} peer(s) x ${plan.scale.calls}`)
      const sinks = spawn("sinks", { secret: SECRET, count: n })
      const all = [sinks]
      try {
        const ports = Schema.decodeUnknownSync(Schema.Struct({ ports: Numbers }))(
          (await sinks.take("ready", 30_000)).data
        ).ports
        const flooder = spawn(`flood-${kind}`, {
          peers: ports,
          secret: SECRET,
          calls: plan.scale.calls,
          yieldEvery: plan.flood.yieldEvery,
          sync: false
        })
        all.push(flooder)
        const r = Schema.decodeUnknownSync(FloodResult)((await flooder.take("result", 300_000)).data)
        row[`${kind}CpuUsPerCall`] = round(r.cpuUs / r.calls, 3)
        row[`${kind}CallsPerSec`] = Math.round((r.calls / r.wallNs) * 1e9)
        row[`${kind}Dropped`] = r.dropped
      } finally {
        await stopAll(all)
      }
    }
    row.meshCpuUsPerCallPerPeer = round(row.meshCpuUsPerCall! / n, 3)
    row.baseCpuUsPerCallPerPeer = round(row.baseCpuUsPerCall! / n, 3)
    row.cpuRatio = ratio(row.meshCpuUsPerCall, row.baseCpuUsPerCall) ?? Number.NaN
    rows.push(row)
  }
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

const ParkedRow = Schema.Struct({
  size: Schema.Number,
  parkNsPerPop: Schema.Number,
  wakeNsPerPop: Schema.Number,
  timeoutCpuNsPerPop: Schema.Number,
  bytesPerParkedPop: Schema.Number
})

const runParked = async () => {
  progress(`parked pops: ${plan.parked.sizes.join(", ")}`)
  const child = spawn("parked", { sizes: plan.parked.sizes }, ["--expose-gc"])
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

/** An idle node with three peers, heartbeats only; ours and the baseline side by side. */
const runIdle = async () => {
  progress(`idle: a node with 3 peers for ${plan.idle.durationMs / 1000} s, ours and the baseline at once`)
  const one = async (kind: "mesh" | "base") => {
    const port = await freePort()
    const peers = spawn("idle-peers", { secret: SECRET, count: 3, peerPort: port })
    const all = [peers]
    try {
      const ports = Schema.decodeUnknownSync(Schema.Struct({ ports: Numbers }))(
        (await peers.take("ready", 30_000)).data
      ).ports
      const node = spawn(
        `idle-${kind}`,
        { port, peers: ports, secret: SECRET, durationMs: plan.idle.durationMs },
        ["--expose-gc"]
      )
      all.push(node)
      const r = Schema.decodeUnknownSync(IdleResult)(
        (await node.take("result", plan.idle.durationMs + 60_000)).data
      )
      return {
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
      }
    } finally {
      await stopAll(all)
    }
  }
  const [mesh, baseline] = await Promise.all([one("mesh"), one("base")])
  return { peers: 3, mesh, baseline, ratios: { cpu: ratio(mesh.cpuMsPerMinute, baseline.cpuMsPerMinute) } }
}

const TlsFigures = Schema.Struct({
  tcp: Schema.Struct({ connectP50Us: Schema.Number, connectP99Us: Schema.Number }),
  tls: Schema.Struct({ connectP50Us: Schema.Number, connectP99Us: Schema.Number }),
  wakeTcp: Schema.Struct({ p50Us: Schema.Number, p99Us: Schema.Number }),
  wakeTls: Schema.Struct({ p50Us: Schema.Number, p99Us: Schema.Number })
})

const runTls = async () => {
  progress(`TLS-PSK against plain TCP x ${plan.tls.rounds}`)
  const child = spawn("tls", { rounds: plan.tls.rounds })
  try {
    const r = Schema.decodeUnknownSync(TlsFigures)((await child.take("result", 300_000)).data)
    return {
      rounds: plan.tls.rounds,
      ...r,
      ratios: {
        connectP50: ratio(r.tls.connectP50Us, r.tcp.connectP50Us),
        wakeP50: ratio(r.wakeTls.p50Us, r.wakeTcp.p50Us),
        wakeP99: ratio(r.wakeTls.p99Us, r.wakeTcp.p99Us)
      }
    }
  } finally {
    await child.stop()
  }
}

const DistributionSchema = Schema.Struct({
  n: Schema.Number,
  p50: Schema.Number,
  p90: Schema.Number,
  p99: Schema.Number,
  p999: Schema.Number,
  max: Schema.Number,
  mean: Schema.Number
})
const FairReport = Schema.Struct({
  wakeUs: DistributionSchema,
  floodItems: Schema.Number,
  framesReceived: Schema.Number,
  framesInvalid: Schema.Number,
  itemsInvalid: Schema.Number
})
const Written = Schema.Struct({ written: Schema.Number, reconnects: Schema.Number })

/** A good peer's wakes while a hostile peer floods 16 MiB batches: none, valid, last item invalid. */
const runFair = async () => {
  const out: Record<string, unknown> = {}
  let hostileFrame: unknown
  for (const variant of ["none", "valid", "invalid"] as const) {
    progress(
      `fairness: good peer every ${plan.fair.everyMs} ms, flood ${variant}, ${plan.fair.durationMs / 1000} s`
    )
    const recv = spawn("fair-recv", { secret: SECRET, dummyPeerPort: await freePort() })
    const all = [recv]
    try {
      const port = portOf((await recv.take("ready", 30_000)).data)
      let hostile: Child | undefined
      if (variant !== "none") {
        hostile = spawn("fair-hostile", { port, secret: SECRET, invalid: variant === "invalid" })
        all.push(hostile)
        hostileFrame = (await hostile.take("ready", 60_000)).data
        await sleep(1_000)
      }
      const good = spawn("fair-good", { port, secret: SECRET, ...plan.fair })
      all.push(good)
      await good.take("done", plan.fair.durationMs + 60_000)
      recv.send({ kind: "report" })
      const report = Schema.decodeUnknownSync(FairReport)((await recv.take("report", 60_000)).data)
      let written: typeof Written.Type | undefined
      if (hostile !== undefined) {
        hostile.send({ kind: "report" })
        written = Schema.decodeUnknownSync(Written)((await hostile.take("written", 30_000)).data)
      }
      out[variant] = {
        ...report,
        hostileFramesWritten: written?.written ?? 0,
        reconnects: written?.reconnects ?? 0
      }
    } finally {
      await stopAll(all)
    }
  }
  return { everyMs: plan.fair.everyMs, durationMs: plan.fair.durationMs, hostileFrame, ...out } as {
    everyMs: number
    durationMs: number
    hostileFrame: unknown
    none: typeof FairReport.Type
    valid: typeof FairReport.Type
    invalid: typeof FairReport.Type
  }
}

// ---------------------------------------------------------------------------------------------
// report
// ---------------------------------------------------------------------------------------------

interface Target {
  readonly target: string
  readonly value: number | null
  readonly limit: string
  readonly met: boolean | null
}

const check = (
  target: string,
  value: number | null | undefined,
  limit: string,
  ok: (v: number) => boolean
) => ({
  target,
  value: value ?? null,
  limit,
  met: value === null || value === undefined ? null : ok(value)
})

/** The discovery join, for the cluster note. */
const discoveryNote = (d: ClusterResult["discoveryFirstWake"]): string =>
  d.status === "measured"
    ? `Discovery join: ${d.existingNodes} queen-mesh node processes on 127.0.0.2-${1 + d.existingNodes}, one mesh port, each with QUEEN_MESH_DISCOVERY=dns:${d.name} and QUEEN_MESH_DISCOVERY_INTERVAL_MS=${d.intervalMs}, the name resolving to every node through a hosts file bind-mounted over /etc/hosts in a private mount namespace per node (multi on), and no static peers; once they were a full mesh (${d.existingFormationMs} ms from spawn), ${d.joins} joins one after the other, each after a random pause of up to one interval (so the joins fall anywhere in the others' rounds): the new address appended to the file in place, the new node spawned on it, and from its listening line a push (message_available on one existing node's stdin, rotating) every ${d.pushEveryMs} ms until the new node printed its first wake line; then it was stopped and its line removed. Spawn to first wake p50 ${d.spawnToFirstWakeMs.p50} ms (min ${d.spawnToFirstWakeMs.min}, max ${d.spawnToFirstWakeMs.max}), of which spawn to listening p50 ${d.spawnToListeningMs.p50} ms; listening to first wake p50 ${d.listeningToFirstWakeMs.p50} ms (min ${d.listeningToFirstWakeMs.min}, max ${d.listeningToFirstWakeMs.max}); with ${d.joins} samples p99 is the max. The record goes in before the process, so a sender whose discovery round falls while the new node is still starting finds the address early and has its dial refused, and the wait after listening is then its reconnect back-off (250 ms doubling) rather than the next round: in ${d.perJoin.filter((j) => j.senderLastError !== null).length} of ${d.joins} joins the sender had a failed dial to the new node (senderLastError in perJoin, which has each join's figures).`
    : `Discovery join (a new member found by discovery, to its first wake): ${d.status} (${d.reason}).`

/** What the largest cluster means for a machine of `cores` cores, for the notes. */
const clusterCrowding = (sizes: ReadonlyArray<number>, cores: number): string => {
  const most = Math.max(...sizes)
  return most > cores
    ? `: at ${most} nodes ${round(most / cores, 1)} node processes share each core, so latency tails and CPU per wake include the scheduler's queueing and the nodes evicting each other from the caches`
    : ""
}

/** A figure shown with the targets for information: no limit, never met or missed. */
const info = (target: string, value: number | null | undefined): Target => ({
  target,
  value: value ?? null,
  limit: "(information)",
  met: null
})

const fmt = (value: number | null | undefined, digits = 1): string => {
  if (value === null || value === undefined || !Number.isFinite(value)) return "-"
  if (Math.abs(value) >= 100_000) return Math.round(value).toLocaleString("en-US")
  return value.toFixed(digits)
}

const table = (rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? "").length)))
  const line = (r: ReadonlyArray<string>) => `| ${r.map((cell, c) => cell.padEnd(widths[c]!)).join(" | ")} |`
  const rule = `| ${widths.map((w) => "-".repeat(w)).join(" | ")} |`
  return [line(rows[0]!), rule, ...rows.slice(1).map(line)].join("\n")
}

/** The commit measured, and whether `src/` had uncommitted changes. */
const gitState = (): { commit: string; srcDirty: boolean } | null => {
  try {
    const git = (...a: Array<string>) =>
      execFileSync("git", a, { cwd: benchDir, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim()
    return { commit: git("rev-parse", "HEAD"), srcDirty: git("status", "--porcelain", "--", "../src") !== "" }
  } catch {
    return null
  }
}

const main = async () => {
  const started = Date.now()
  const upstream = findUpstream()
  const cpus = Os.cpus()
  const meta = {
    date: new Date().toISOString(),
    node: process.version,
    v8: process.versions.v8,
    platform: `${Os.type()} ${Os.release()} ${Os.arch()}`,
    cpu: cpus[0]?.model ?? "unknown",
    cores: cpus.length,
    memoryGiB: round(Os.totalmem() / 1024 ** 3, 1),
    loadAverageAtStart: Os.loadavg().map((l) => round(l, 2)),
    git: gitState(),
    quick,
    plan,
    upstream
  }
  process.stderr.write(
    `queen-mesh bench${quick ? " (quick)" : ""}: ${meta.node} on ${meta.cpu} x ${meta.cores}\n`
  )
  if ("skipped" in upstream && (enabled("cli") || enabled("cluster"))) {
    progress(`upstream Rust rows (cli, cluster) skipped: ${upstream.skipped}`)
  }

  const codec = enabled("codec") ? await runCodec() : undefined
  const throughput = enabled("throughput") ? await runThroughput() : undefined
  const wakeRun = enabled("wake") || enabled("pg") ? await runWake(enabled("wake"), enabled("pg")) : undefined
  const wake = wakeRun?.latency
  const postgres = wakeRun?.postgres
  const broadcast = enabled("flood") ? await runFlood() : undefined
  const cli = enabled("cli") ? await runCli(upstream) : undefined
  const cluster = enabled("cluster") ? await runClusterSection(upstream) : undefined
  const scale = enabled("scale") ? await runScale() : undefined
  const parked = enabled("parked") ? await runParked() : undefined
  const lane = enabled("lane")
    ? await Lane.runLane(plan.lane, progress, (role) =>
        profiled.has(`lane-${role}`) ? profileFlags(`lane-${role}`) : []
      )
    : undefined
  const tls = enabled("tls") ? await runTls() : undefined
  const fairness = enabled("fair") ? await runFair() : undefined
  const idle = enabled("idle") ? await runIdle() : undefined
  const brokerPlan = quick ? Broker.quickPlan : Broker.fullPlan
  const broker = enabled("broker")
    ? await Broker.runBroker(brokerPlan, progress, (role) => (profiled.has(role) ? profileFlags(role) : []))
    : undefined

  const batch100 = codec?.find((c) => c.name === "batch100")
  const batch100k = codec?.find((c) => c.name === "batch100k")
  // ns per item of the batches, worst over the larger sizes against the 100-item batch.
  const flatness = (side: "encode" | "decode", who: "ours" | "baseline" = "ours") => {
    if (codec === undefined || batch100 === undefined) return undefined
    const base = batch100.perItemNs[side][who]
    return round(Math.max(...codec.filter((c) => c.items > 100).map((c) => c.perItemNs[side][who] / base)), 3)
  }
  const codecFlatness =
    codec === undefined
      ? undefined
      : {
          what: "ns per item, worst of the 10k, 100k and 16 MiB batches over the 100-item batch's",
          encode: { ours: flatness("encode"), baseline: flatness("encode", "baseline") },
          decode: { ours: flatness("decode"), baseline: flatness("decode", "baseline") }
        }
  const pgP50 = postgres?.measured === true ? postgres.latencyUs.p50 : undefined
  const targets: Array<Target> = [
    check("receive throughput, ours / baseline", throughput?.ratios.framesPerSec, ">= 0.8", (v) => v >= 0.8),
    check(
      "receive CPU per frame, ours / baseline",
      throughput?.ratios.cpuUsPerFrame,
      "<= 1.25",
      (v) => v <= 1.25
    ),
    check("wake p50, fiber pusher, ours / baseline", wake?.ratios.p50, "<= 1.1", (v) => v <= 1.1),
    check("wake p99, fiber pusher, ours / baseline", wake?.ratios.p99, "<= 1.5", (v) => v <= 1.5),
    check(
      "wake p50, unsafeMessageAvailable, ours / baseline",
      wake?.syncRatios.p50,
      "<= 1.1",
      (v) => v <= 1.1
    ),
    check(
      "wake p99, unsafeMessageAvailable, ours / baseline",
      wake?.syncRatios.p99,
      "<= 1.5",
      (v) => v <= 1.5
    ),
    check(
      "mesh wake p50 (fiber) / PostgreSQL NOTIFY p50",
      pgP50 === undefined || wake === undefined ? undefined : ratio(wake.mesh.p50, pgP50),
      "<= 0.67",
      (v) => v <= 0.67
    ),
    check("CLI wake p50, ours / baseline", cli?.wake.ratios.p50, "<= 1.1", (v) => v <= 1.1),
    check("CLI wake p99, ours / baseline", cli?.wake.ratios.p99, "<= 1.5", (v) => v <= 1.5),
    check("CLI receive lines/s, ours / baseline", cli?.receive.ratios.linesPerSec, ">= 1.0", (v) => v >= 1.0),
    check(
      "CLI receive frames/s with --quiet, ours / baseline",
      cli?.receiveQuiet.ratios.framesPerSec,
      ">= 1.0",
      (v) => v >= 1.0
    ),
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
    check(
      "RSS growth under the stalled-peer flood (MiB)",
      broadcast?.mesh.rssGrowthMiB,
      "< 50",
      (v) => v < 50
    ),
    check(
      "broadcast CPU per call, 32 peers vs 1, over linear",
      scale?.growth.meshVsLinear,
      "<= 1",
      (v) => v <= 1
    ),
    check("parked pops: CPU per pop at 100k / at 1k", parked?.growth.timeoutCpu, "<= 2", (v) => v <= 2),
    check("decode 100-item batch, ours / baseline", batch100?.decodeRatio, "<= 2", (v) => v <= 2),
    check("encode ns per item, worst batch / 100-item batch", flatness("encode"), "<= 2", (v) => v <= 2),
    check("decode ns per item, worst batch / 100-item batch", flatness("decode"), "<= 2", (v) => v <= 2),
    check(
      "decode of the 100k-item batch (ms)",
      batch100k === undefined ? undefined : round(batch100k.decodeNs.ours / 1e6, 1),
      "< 100",
      (v) => v < 100
    ),
    check("idle node heap growth over the window (MiB)", idle?.mesh.heapGrowthMiB, "< 1", (v) => v < 1),
    check(
      "good peer wake p99 under the valid 16 MiB flood (ms)",
      fairness === undefined ? undefined : round(fairness.valid.wakeUs.p99 / 1000, 1),
      "< 250",
      (v) => v < 250
    ),
    check(
      "good peer wake p99 under the invalid-item flood (ms)",
      fairness === undefined ? undefined : round(fairness.invalid.wakeUs.p99 / 1000, 1),
      "< 250",
      (v) => v < 250
    )
  ]
  const laneMeasured = lane?.measured === true ? lane : undefined
  targets.push(
    check(
      "lane wake p50 / bare pg_notify round trip p50",
      laneMeasured?.wake.ratios.laneOverBareP50,
      "<= 1.2",
      (v) => v <= 1.2
    ),
    check("wakes lost on the lane while connected", laneMeasured?.lostWhileConnected, "= 0", (v) => v === 0)
  )
  if (lane !== undefined) {
    targets.push(
      info("lane wake p50 / TCP mesh wake p50", laneMeasured?.wake.ratios.laneOverTcpP50),
      info("lane wake p50 under write load / bare under load", laneMeasured?.loaded.ratios.laneOverBareP50)
    )
  }
  if (broker !== undefined) targets.push(...Broker.targets(broker))
  const vsUpstream = cli?.upstream.status === "measured" ? cli.upstream.ratios.oursOverUpstream : undefined
  if (cli !== undefined) {
    targets.push(
      info("CLI wake p50, ours / upstream Rust", vsUpstream?.wakeP50),
      info("CLI wake p99, ours / upstream Rust", vsUpstream?.wakeP99),
      info("CLI receive lines/s, ours / upstream Rust", vsUpstream?.linesPerSec)
    )
  }

  const notes = [
    "Ratios are ours divided by the baseline's (bench/baseline.ts: the same wire hand-written on node:net).",
    "Codec: median ns per call over timed samples in one process; decode is framing plus validation (Schema for ours, JSON.parse plus hand checks for the baseline); both encoders produce identical bytes. Sizes 1, 100, 10k, 100k items and a batch filling the 16 MiB cap; flatness compares ns per item with the 100-item batch's.",
    `Throughput: one peer sends ${plan.throughput.frames.toLocaleString("en-US")} MESSAGE_AVAILABLE frames (HELLO with HMAC first) over loopback TCP, 512 frames per write, honouring back-pressure; the receiver process measures wall time and process.cpuUsage() from its first wake to its last; median of ${plan.throughput.rounds} alternating round(s).`,
    `Wake latency: separate processes for A (push) and B (parked pop); A stamps before calling push, B stamps as the pop resumes, both with process.hrtime (CLOCK_MONOTONIC, one clock for every process on Linux), so each figure is one way and contains no IPC; a driver process only sequences the rounds, back to back. Mesh A is one long-lived fiber awaiting the driver's push through Effect.async and calling yield* mesh.messageAvailable; meshSync A calls mesh.unsafeMessageAvailable from the IPC callback. B parks a fiber on LocalWaker.awaitWake. Variants take turns in blocks of ${plan.wake.block} rounds; warm-up rounds and the first round of each block are dropped.`,
    `Mesh off: the same LocalWaker pop, re-polling every ${plan.off.pollMs} ms (a stand-in for the pop's backoff); a push at a random phase is found at the next re-poll, so p50 is about half the interval and grows with POP_WAIT_MAX_INTERVAL_MS.`,
    "PostgreSQL: a local throw-away server (fsync off, loopback TCP), pg client; NOTIFY issued in autocommit by A, the notification event stamped in B's LISTENing client. No other load: the most favourable case for NOTIFY.",
    `Broadcast: messageAvailable in a loop yielding to the event loop every ${plan.flood.yieldEvery} calls (in one fiber for ours; meshSync: unsafeMessageAvailable in a plain loop); three peers, one stalled so its send queue (1024 frames) fills and drops; RSS sampled every 10,000 calls, growth = peak minus the RSS after connect and a full GC.`,
    `CLI: queen-mesh node (src/cli.ts compiled with the bench) and bench/cliBaseline.ts, driven through pipes by the driver process: wake = a message_available line written to A's stdin until B's wake line is read from its stdout (both stamps in the driver), ${plan.cliWake.measured} rounds after ${plan.cliWake.warmup} warm-up, the two in alternating blocks; receive = ${plan.cliRecv.frames.toLocaleString("en-US")} frames from the throughput sender, wake lines/s read by the driver from the first to the last, CPU of the node from /proc (10 ms ticks); median of ${plan.cliRecv.rounds} round(s).`,
    `Scaling: ${plan.scale.calls.toLocaleString("en-US")} messageAvailable calls (fiber, yielding every ${plan.flood.yieldEvery}) with 1, 3, 8 and 32 live peers (baseline receivers in one sink process); CPU per call in the flooding process. Parked pops: bench/parked.ts (park, wake, and the reaper's CPU as N pops time out, per pop; heap per parked pop after a GC). Idle: a node and 3 baseline peers that dial it back, heartbeats only, CPU and memory of the node's process over ${plan.idle.durationMs / 1000} s, ours and the baseline at the same time. TLS: bench/tls.ts in one process over loopback.`,
    `Fairness: a mesh node receiving, from one authenticated peer, MESSAGE_AVAILABLE_BATCH frames just under 16 MiB back to back (valid, or with the last item invalid), and from another one MESSAGE_AVAILABLE every ${plan.fair.everyMs} ms carrying its send time; the good peer's one-way wake latency over ${plan.fair.durationMs / 1000} s, after 1 s of flood.`
  ]
  if (postgres?.measured === false) notes.push(`PostgreSQL skipped: ${postgres.reason}`)
  if (lane !== undefined) {
    notes.push(
      lane.measured
        ? `Lane: bench/lane.ts on an embedded PostgreSQL ${lane.postgres} (${lane.settings}). Wake = A's push (mesh.unsafeMessageAvailable; for TCP the same call over the TCP mesh) to B's parked LocalWaker pop, separate processes, CLOCK_MONOTONIC stamps, variants in alternating blocks of ${plan.lane.wake.block}, ${plan.lane.wake.measured} measured after ${plan.lane.wake.warmup} warm-up; bare = SELECT pg_notify($1, $2) of a ${"bench.".length + 230}-byte payload on A's client to B's LISTENing client, stamped in its notification handler. Flood = ${plan.lane.flood.hints.toLocaleString("en-US")} distinct hints pushed back to back, yielding every ${plan.lane.flood.yieldEvery} and pausing while half the lane's send buffer is full; one at a time = ${plan.lane.flood.trickle} hints 2 ms apart, each its own notification; database CPU = every PostgreSQL process's schedstat over the flood (net: minus the idle rate measured for 1 s before). Load = ${plan.lane.load.clients} connections running BEGIN; INSERT; UPDATE; COMMIT back to back while ${plan.lane.load.measured} lane and bare wakes are measured. A wake not applied within 5 s is lost.`
        : `Lane skipped: ${lane.reason}`
    )
  }
  if (cli !== undefined) {
    notes.push(
      cli.upstream.status === "measured"
        ? `CLI, upstream Rust: upstream Queen's mesh.rs behind the harness of /work/shared/upstream-mesh (${cli.upstream.binary}), started as upstream-mesh-node <id> <port> 127.0.0.1:<peer> <secret> 1000 5000 and dialled on 127.0.0.1 only (it binds 0.0.0.0); wake = "ma orders <partition> <tenant>" on A's stdin (the same frame on the wire as the other two: every kind pushes one UUID tenant, the only kind upstream reads as a tenant), in the same alternating blocks; readiness by its stats command (outbound connected, the peer's HELLO heard), as it prints no peer_up. Its harness writes and flushes stdout once per wake line and never drops one (a slow reader back-pressures the mesh), where ours coalesces per event-loop turn and drops past 4 MiB. CPU from /proc covers every thread of its tokio runtime.`
        : `CLI, upstream Rust: skipped (${cli.upstream.reason}).`
    )
  }
  if (broker !== undefined) notes.push(Broker.note(broker, brokerPlan))
  if (cluster !== undefined) {
    notes.push(
      `Cluster: ${cluster.sizes.join(", ")} queen-mesh node processes (one process per node, every node listing every other on 127.0.0.1, HMAC secret, 1 s heartbeats) on ${cluster.cores} cores shared with the driver${clusterCrowding(cluster.sizes, cluster.cores)}. Formation = spawn to every node reporting N-1 connected outbound links and N-1 authenticated inbound ones (stats route, polled every 100 ms), split into start-up (spawn to the last listening line) and linking (from there). Wake = a message_available line on one node's stdin to the wake line on each other node's stdout (both stamps in the driver, which reads N pipes, so a later receiver also waits for the driver to read the earlier ones); the sender rotates each push; warm-up: ${plan.cluster.warmupLinesPerNode} lines into every node in bursts of 64 (each node prints N-1 times as many), then ${plan.cluster.warmupPushesPerNode} one-at-a-time pushes per node; then ${plan.cluster.rounds} measured (a cold node's CPU per wake is twice or more a warm one's). CPU = time on CPU of every thread of every node (/proc/<pid>/task/*/schedstat, ns) over the measured pushes divided by the wake lines delivered (senders' share included); "net" subtracts the idle rate measured just before over as long a window. Idle = ${plan.cluster.idleMs / 1000} s with heartbeats only; RSS from /proc/<pid>/status at its end. ${discoveryNote(cluster.discoveryFirstWake)} ${cluster.upstream.status === "measured" ? "Upstream Rust cluster: the same with upstream-mesh-node processes (dialled on 127.0.0.1 only), for reference; its inbound count is the peers heard (servers_alive), as it counts no sockets, and its readiness comes from its stats command on stdin." : `Upstream Rust cluster: skipped (${cluster.upstream.reason}).`}`
    )
  }

  const results = {
    meta: {
      ...meta,
      loadAverageAtEnd: Os.loadavg().map((l) => round(l, 2)),
      durationSec: round((Date.now() - started) / 1000, 1)
    },
    codec,
    codecFlatness,
    throughput,
    wake: wake === undefined ? undefined : { ...wake, postgres },
    broadcast,
    cli,
    cluster,
    scale,
    parked,
    idle,
    tls,
    fairness,
    lane,
    broker,
    targets,
    notes
  }

  // The table.
  const rows: Array<Array<string>> = [["benchmark", "queen-mesh", "baseline", "ratio"]]
  for (const c of codec ?? []) {
    rows.push([
      `encode ${c.name} (ns/frame; ns/item)`,
      `${fmt(c.encodeNs.ours)}; ${fmt(c.perItemNs.encode.ours)}`,
      `${fmt(c.encodeNs.baseline)}; ${fmt(c.perItemNs.encode.baseline)}`,
      fmt(c.encodeRatio, 2)
    ])
    rows.push([
      `decode ${c.name} (ns/frame; ns/item)`,
      `${fmt(c.decodeNs.ours)}; ${fmt(c.perItemNs.decode.ours)}`,
      `${fmt(c.decodeNs.baseline)}; ${fmt(c.perItemNs.decode.baseline)}`,
      fmt(c.decodeRatio, 2)
    ])
  }
  if (throughput !== undefined) {
    const t = throughput
    rows.push([
      "receive (frames/s)",
      fmt(t.mesh.framesPerSec, 0),
      fmt(t.baseline.framesPerSec, 0),
      fmt(t.ratios.framesPerSec, 2)
    ])
    rows.push([
      "receive CPU (µs/frame)",
      fmt(t.mesh.cpuUsPerFrame, 3),
      fmt(t.baseline.cpuUsPerFrame, 3),
      fmt(t.ratios.cpuUsPerFrame, 2)
    ])
  }
  if (wake !== undefined) {
    for (const p of ["p50", "p99", "p999"] as const) {
      rows.push([
        `wake ${p}, fiber pusher (µs)`,
        fmt(wake.mesh[p]),
        fmt(wake.baseline[p]),
        fmt(wake.ratios[p], 2)
      ])
    }
    for (const p of ["p50", "p99", "p999"] as const) {
      rows.push([
        `wake ${p}, unsafeMessageAvailable (µs)`,
        fmt(wake.meshSync[p]),
        fmt(wake.baseline[p]),
        fmt(wake.syncRatios[p], 2)
      ])
    }
    rows.push([
      `wake p50 / p99, mesh off (µs)`,
      `${fmt(wake.meshOff.p50, 0)} / ${fmt(wake.meshOff.p99, 0)}`,
      "-",
      "-"
    ])
  }
  if (postgres !== undefined) {
    rows.push(
      postgres.measured
        ? [
            "PostgreSQL NOTIFY p50 / p99 / p99.9 (µs)",
            `${fmt(postgres.latencyUs.p50)} / ${fmt(postgres.latencyUs.p99)} / ${fmt(postgres.latencyUs.p999)}`,
            "-",
            "-"
          ]
        : ["PostgreSQL NOTIFY", "skipped", "-", "-"]
    )
  }
  if (broadcast !== undefined) {
    const m = broadcast.mesh
    const ms = broadcast.meshSync
    const b = broadcast.baseline
    rows.push([
      "broadcast, fiber (calls/s, 3 peers, 1 stalled)",
      fmt(m.callsPerSec, 0),
      fmt(b.callsPerSec, 0),
      fmt(broadcast.ratios.callsPerSec, 2)
    ])
    rows.push([
      "broadcast CPU, fiber (µs/call)",
      fmt(m.cpuUsPerCall, 3),
      fmt(b.cpuUsPerCall, 3),
      fmt(broadcast.ratios.cpuUsPerCall, 2)
    ])
    rows.push([
      "broadcast, unsafeMessageAvailable (calls/s)",
      fmt(ms.callsPerSec, 0),
      fmt(b.callsPerSec, 0),
      fmt(broadcast.syncRatios.callsPerSec, 2)
    ])
    rows.push([
      "broadcast CPU, unsafeMessageAvailable (µs/call)",
      fmt(ms.cpuUsPerCall, 3),
      fmt(b.cpuUsPerCall, 3),
      fmt(broadcast.syncRatios.cpuUsPerCall, 2)
    ])
    rows.push(["RSS growth over the flood (MiB)", fmt(m.rssGrowthMiB), fmt(b.rssGrowthMiB), "-"])
    rows.push([
      "frames dropped / sent",
      `${m.framesDropped} / ${m.framesSent}`,
      `${b.framesDropped} / ${b.framesSent}`,
      "-"
    ])
  }
  if (cli !== undefined) {
    rows.push([
      "CLI wake p50 (µs)",
      fmt(cli.wake.mesh.p50),
      fmt(cli.wake.baseline.p50),
      fmt(cli.wake.ratios.p50, 2)
    ])
    rows.push([
      "CLI wake p99 (µs)",
      fmt(cli.wake.mesh.p99),
      fmt(cli.wake.baseline.p99),
      fmt(cli.wake.ratios.p99, 2)
    ])
    rows.push([
      "CLI receive (wake lines/s)",
      fmt(cli.receive.mesh.linesPerSec, 0),
      fmt(cli.receive.baseline.linesPerSec, 0),
      fmt(cli.receive.ratios.linesPerSec, 2)
    ])
    rows.push([
      "CLI receive CPU (µs/line)",
      fmt(cli.receive.mesh.cpuUsPerLine, 3),
      fmt(cli.receive.baseline.cpuUsPerLine, 3),
      fmt(cli.receive.ratios.cpuUsPerLine, 2)
    ])
    rows.push([
      "CLI receive, --quiet (frames/s)",
      fmt(cli.receiveQuiet.mesh.framesPerSec, 0),
      fmt(cli.receiveQuiet.baseline.framesPerSec, 0),
      fmt(cli.receiveQuiet.ratios.framesPerSec, 2)
    ])
    rows.push([
      "CLI receive CPU, --quiet (µs/frame)",
      fmt(cli.receiveQuiet.mesh.cpuUsPerFrame, 3),
      fmt(cli.receiveQuiet.baseline.cpuUsPerFrame, 3),
      fmt(cli.receiveQuiet.ratios.cpuUsPerFrame, 2)
    ])
    const upWake = cli.wake.upstream
    const upRecv = cli.receive.upstream
    if (cli.upstream.status === "measured" && upWake !== null && upRecv !== null) {
      const { oursOverUpstream: ours, baselineOverUpstream: base } = cli.upstream.ratios
      const figures = [
        [
          "CLI wake p50",
          "(µs)",
          cli.wake.mesh.p50,
          cli.wake.baseline.p50,
          upWake.p50,
          ours?.wakeP50,
          base?.wakeP50,
          1
        ],
        [
          "CLI wake p99",
          "(µs)",
          cli.wake.mesh.p99,
          cli.wake.baseline.p99,
          upWake.p99,
          ours?.wakeP99,
          base?.wakeP99,
          1
        ],
        [
          "CLI receive",
          "(lines/s)",
          cli.receive.mesh.linesPerSec,
          cli.receive.baseline.linesPerSec,
          upRecv.linesPerSec,
          ours?.linesPerSec,
          base?.linesPerSec,
          0
        ],
        [
          "CLI receive CPU",
          "(µs/line)",
          cli.receive.mesh.cpuUsPerLine,
          cli.receive.baseline.cpuUsPerLine,
          upRecv.cpuUsPerLine,
          ours?.cpuUsPerLine,
          base?.cpuUsPerLine,
          3
        ]
      ] as const
      for (const [what, unit, mesh, baseline, up, oursRatio, baseRatio, digits] of figures) {
        rows.push([
          `${what}, ours vs upstream Rust ${unit}`,
          fmt(mesh, digits),
          fmt(up, digits),
          fmt(oursRatio, 2)
        ])
        rows.push([
          `${what}, baseline vs upstream Rust ${unit}`,
          fmt(baseline, digits),
          fmt(up, digits),
          fmt(baseRatio, 2)
        ])
      }
    } else if (cli.upstream.status === "skipped") {
      rows.push(["CLI, upstream Rust rows", "skipped (see notes)", "-", "-"])
    }
  }
  const upstreamCluster = cluster?.upstream.status === "measured" ? cluster.upstream.rows : []
  for (const r of [...(cluster?.rows ?? []), ...upstreamCluster]) {
    const label = `${r.kind === "upstream" ? "upstream Rust cluster" : "cluster"} of ${r.nodes}`
    rows.push([
      `${label}: wake p50 / p99, each receiver (µs)`,
      `${fmt(r.wake.perReceiverUs.p50)} / ${fmt(r.wake.perReceiverUs.p99)}`,
      "-",
      "-"
    ])
    rows.push([
      `${label}: wake p50 / p99, until all ${r.nodes - 1} woke (µs)`,
      `${fmt(r.wake.untilAllWokeUs.p50)} / ${fmt(r.wake.untilAllWokeUs.p99)}`,
      "-",
      "-"
    ])
    rows.push([
      `${label}: CPU per wake per node, gross / net of idle (µs)`,
      `${fmt(r.cpu.usPerWakePerNode)} / ${fmt(r.cpu.usPerWakePerNodeNetOfIdle)}`,
      "-",
      "-"
    ])
    rows.push([
      `${label}: links per node out / in (min-max); start-up + linking (ms)`,
      `${r.connections.outboundPerNode.min}-${r.connections.outboundPerNode.max} / ${r.connections.inboundAuthenticatedPerNode.min}-${r.connections.inboundAuthenticatedPerNode.max}; ${fmt(r.startupMs, 0)} + ${fmt(r.linkingMs, 0)}`,
      "-",
      "-"
    ])
    rows.push([
      `${label}: idle CPU per node, mean (max) (ms/min)`,
      `${fmt(r.idle.cpuMsPerMinutePerNode.mean)} (${fmt(r.idle.cpuMsPerMinutePerNode.max)})`,
      "-",
      "-"
    ])
    rows.push([
      `${label}: RSS per node, mean (max) (MiB)`,
      `${fmt(r.idle.rssMiBPerNode.mean)} (${fmt(r.idle.rssMiBPerNode.max)})`,
      "-",
      "-"
    ])
  }
  if (cluster?.upstream.status === "skipped")
    rows.push(["upstream Rust cluster rows", "skipped (see notes)", "-", "-"])
  if (cluster !== undefined) {
    const d = cluster.discoveryFirstWake
    if (d.status === "measured") {
      const few = (f: { n: number; min: number; p50: number; max: number }) =>
        `${fmt(f.p50, 0)} (${fmt(f.min, 0)}-${fmt(f.max, 0)})`
      rows.push([
        `discovery join (${d.existingNodes} nodes, ${d.intervalMs} ms interval): spawn to first wake, p50 (min-max) of ${d.joins} (ms)`,
        few(d.spawnToFirstWakeMs),
        "-",
        "-"
      ])
      rows.push([
        `discovery join: listening to first wake, p50 (min-max) of ${d.joins} (ms)`,
        few(d.listeningToFirstWakeMs),
        "-",
        "-"
      ])
    } else {
      rows.push(["discovery join: a new member to its first wake", `${d.status} (see notes)`, "-", "-"])
    }
  }
  for (const r of scale?.rows ?? []) {
    rows.push([
      `broadcast CPU, ${r.peers} live peer(s) (µs/call)`,
      fmt(r.meshCpuUsPerCall, 3),
      fmt(r.baseCpuUsPerCall, 3),
      fmt(r.cpuRatio, 2)
    ])
  }
  for (const r of parked?.rows ?? []) {
    rows.push([
      `parked ${r.size}: park / wake / timeout CPU (ns/pop), heap (B/pop)`,
      `${fmt(r.parkNsPerPop, 0)} / ${fmt(r.wakeNsPerPop, 0)} / ${fmt(r.timeoutCpuNsPerPop, 0)}, ${fmt(r.bytesPerParkedPop, 0)}`,
      "-",
      "-"
    ])
  }
  if (idle !== undefined) {
    rows.push([
      "idle, 3 peers: CPU (ms/min)",
      fmt(idle.mesh.cpuMsPerMinute),
      fmt(idle.baseline.cpuMsPerMinute),
      fmt(idle.ratios.cpu, 2)
    ])
    rows.push([
      "idle: RSS start / end (MiB)",
      `${fmt(idle.mesh.rssStartMiB)} / ${fmt(idle.mesh.rssEndMiB)}`,
      `${fmt(idle.baseline.rssStartMiB)} / ${fmt(idle.baseline.rssEndMiB)}`,
      "-"
    ])
    rows.push([
      "idle: heap start / end (MiB)",
      `${fmt(idle.mesh.heapStartMiB, 2)} / ${fmt(idle.mesh.heapEndMiB, 2)}`,
      `${fmt(idle.baseline.heapStartMiB, 2)} / ${fmt(idle.baseline.heapEndMiB, 2)}`,
      "-"
    ])
  }
  if (tls !== undefined) {
    rows.push([
      "connect p50 / p99, TLS-PSK vs TCP (µs)",
      `${fmt(tls.tls.connectP50Us)} / ${fmt(tls.tls.connectP99Us)}`,
      `${fmt(tls.tcp.connectP50Us)} / ${fmt(tls.tcp.connectP99Us)}`,
      fmt(tls.ratios.connectP50, 2)
    ])
    rows.push([
      "frame latency p50 / p99, TLS-PSK vs TCP (µs)",
      `${fmt(tls.wakeTls.p50Us)} / ${fmt(tls.wakeTls.p99Us)}`,
      `${fmt(tls.wakeTcp.p50Us)} / ${fmt(tls.wakeTcp.p99Us)}`,
      fmt(tls.ratios.wakeP50, 2)
    ])
  }
  if (fairness !== undefined) {
    for (const v of ["none", "valid", "invalid"] as const) {
      const f = fairness[v]
      rows.push([
        `good peer wake under flood "${v}": p50 / p99 / max (µs)`,
        `${fmt(f.wakeUs.p50)} / ${fmt(f.wakeUs.p99)} / ${fmt(f.wakeUs.max)}`,
        "-",
        "-"
      ])
    }
  }
  if (lane !== undefined) {
    if (lane.measured) {
      const w = lane.wake
      for (const [name, v] of [
        ["lane", w.lane],
        ["TCP mesh", w.tcp],
        ["bare pg_notify", w.bare]
      ] as const) {
        rows.push([
          `wake p50 / p99, ${name} (µs; lost)`,
          `${fmt(v.latencyUs.p50)} / ${fmt(v.latencyUs.p99)}; ${v.lost}`,
          "-",
          name === "lane" ? fmt(w.ratios.laneOverBareP50, 2) : "-"
        ])
      }
      const f = lane.flood
      rows.push([
        "lane hints/s, coalesced (hints per notification)",
        `${fmt(f.hintsPerSec, 0)} (${fmt(f.hintsPerNotification)})`,
        "-",
        "-"
      ])
      rows.push([
        "lane: database CPU per hint, gross / net of idle (µs)",
        `${fmt(f.dbCpuUsPerHint, 3)} / ${fmt(f.dbCpuUsPerHintNetOfIdle, 3)}`,
        "-",
        "-"
      ])
      rows.push([
        "lane: sender CPU per hint (µs); hints lost",
        `${fmt(f.senderCpuUsPerHint, 3)}; ${f.lost}`,
        "-",
        "-"
      ])
      rows.push([
        "lane, one hint per notification: database / sender CPU per hint, net of idle (µs)",
        `${fmt(f.oneAtATime.dbCpuUsPerHintNetOfIdle)} / ${fmt(f.oneAtATime.senderCpuUsPerHintNetOfIdle)}`,
        "-",
        "-"
      ])
      const l = lane.loaded
      rows.push([
        `wake p50 / p99 under ${l.clients} writers (${fmt(l.transactionsPerSec, 0)} tx/s), lane (µs)`,
        `${fmt(l.lane.latencyUs.p50)} / ${fmt(l.lane.latencyUs.p99)}`,
        "-",
        fmt(l.ratios.laneOverBareP50, 2)
      ])
      rows.push([
        `wake p50 / p99 under ${l.clients} writers, bare pg_notify (µs)`,
        `${fmt(l.bare.latencyUs.p50)} / ${fmt(l.bare.latencyUs.p99)}`,
        "-",
        "-"
      ])
    } else rows.push(["PostgreSQL lane", "skipped (see notes)", "-", "-"])
  }
  if (broker !== undefined) rows.push(...Broker.rows(broker).map((row) => [...row]))
  const targetRows: Array<Array<string>> = [["target", "value", "limit", "met"]]
  for (const t of targets) {
    const met = t.limit === "(information)" ? "-" : t.met === null ? "n/a" : t.met ? "yes" : "NO"
    targetRows.push([t.target, fmt(t.value, 3), t.limit, met])
  }
  const text = `${table(rows)}\n\n${table(targetRows)}\n`
  process.stdout.write(`\n${text}`)

  const outFile =
    only === undefined ? Path.join(benchDir, "results.json") : Path.resolve(here, "../results.only.json")
  Fs.writeFileSync(outFile, `${JSON.stringify({ ...results, table: text.split("\n") }, null, 2)}\n`)
  process.stderr.write(`\nwrote ${Path.relative(process.cwd(), outFile)} in ${results.meta.durationSec} s\n`)
}

main().then(
  () => {
    cleanup()
    process.exit(0)
  },
  (error: unknown) => {
    process.stderr.write(
      `bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`
    )
    cleanup()
    process.exit(1)
  }
)
