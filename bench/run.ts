/**
 * `npm run bench [-- --quick]`: every benchmark of the mesh next to the hand-written baseline
 * (`bench/baseline.ts`), in one process tree. Prints a table and writes `bench/results.json` with every
 * figure, the ratios (ours divided by the baseline's), the targets, and the machine.
 *
 * Flags: `--quick` (smaller counts, under a minute), `--only=codec,throughput,wake,pg,flood` (a subset,
 * written to `.bench-dist/results.only.json` instead), `--cpu-prof=<role>,...` (run those child roles
 * under `node --cpu-prof`, profiles in `bench/profiles/`).
 */
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { Schema } from "effect"
import { Child } from "./ipc.js"
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

const SECRET = "bench-s3cr3t"
const plan = quick
  ? {
      codec: { sampleMs: 40, samples: 3 },
      throughput: { frames: 300_000, rounds: 1 },
      wake: { warmup: 200, measured: 2_000, block: 500 },
      off: { total: 20, pollMs: 100 },
      flood: { calls: 200_000, yieldEvery: 64 }
    }
  : {
      codec: { sampleMs: 150, samples: 5 },
      throughput: { frames: 1_000_000, rounds: 5 },
      wake: { warmup: 500, measured: 10_000, block: 1_000 },
      off: { total: 100, pollMs: 100 },
      flood: { calls: 1_000_000, yieldEvery: 64 }
    }

const here = Path.dirname(fileURLToPath(import.meta.url))
const benchDir = Path.resolve(here, "../../bench")
const profileDir = Path.join(benchDir, "profiles")

// ---------------------------------------------------------------------------------------------
// process plumbing
// ---------------------------------------------------------------------------------------------

const children = new Set<Child>()
let pgServer: PgServer | undefined

const spawn = (role: string, params: object, execArgv: ReadonlyArray<string> = []): Child => {
  const extra = profiled.has(role) ? ["--cpu-prof", "--cpu-prof-dir", profileDir] : []
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
  pgServer?.stop()
  pgServer = undefined
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

type WakeVariant = "mesh" | "base" | "pg"

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
  const variants: Array<WakeVariant> = withMesh ? ["mesh", "base"] : []
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
  const baseline = series.get("base")!
  progress(`wake latency: mesh off, re-poll every ${plan.off.pollMs} ms x ${plan.off.total}`)
  const meshOff = await fallbackSeries()
  return {
    postgres,
    latency: {
      warmup: plan.wake.warmup,
      mesh,
      baseline,
      meshOff,
      ratios: {
        p50: ratio(mesh.p50, baseline.p50),
        p99: ratio(mesh.p99, baseline.p99),
        p999: ratio(mesh.p999, baseline.p999)
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

const floodOnce = async (kind: "mesh" | "base") => {
  const sinks = [spawn("sink", { secret: SECRET }), spawn("sink", { secret: SECRET })]
  const stalled = spawn("stall", {})
  const all = [...sinks, stalled]
  try {
    const peers = await Promise.all(all.map(async (c) => portOf((await c.take("ready", 30_000)).data)))
    const flooder = spawn(`flood-${kind}`, { peers, secret: SECRET, ...plan.flood }, ["--expose-gc"])
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
  progress(`broadcast flood: mesh x ${plan.flood.calls}`)
  const mesh = await floodOnce("mesh")
  progress(`broadcast flood: baseline x ${plan.flood.calls}`)
  const baseline = await floodOnce("base")
  return {
    peers: "3 (2 live baseline receivers, 1 accepting and never reading)",
    yieldEvery: plan.flood.yieldEvery,
    mesh,
    baseline,
    ratios: {
      callsPerSec: ratio(mesh.callsPerSec, baseline.callsPerSec),
      rssGrowth: ratio(mesh.rssGrowthMiB, baseline.rssGrowthMiB)
    }
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
    const git = (...a: Array<string>) => execFileSync("git", a, { cwd: benchDir, encoding: "utf8" }).trim()
    return { commit: git("rev-parse", "HEAD"), srcDirty: git("status", "--porcelain", "--", "../src") !== "" }
  } catch {
    return null
  }
}

const main = async () => {
  const started = Date.now()
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
    plan
  }
  process.stderr.write(
    `queen-mesh bench${quick ? " (quick)" : ""}: ${meta.node} on ${meta.cpu} x ${meta.cores}\n`
  )

  const codec = enabled("codec") ? await runCodec() : undefined
  const throughput = enabled("throughput") ? await runThroughput() : undefined
  const wakeRun = enabled("wake") || enabled("pg") ? await runWake(enabled("wake"), enabled("pg")) : undefined
  const wake = wakeRun?.latency
  const postgres = wakeRun?.postgres
  const broadcast = enabled("flood") ? await runFlood() : undefined

  const batch100 = codec?.find((c) => c.name === "batch100")
  const pgP50 = postgres?.measured === true ? postgres.latencyUs.p50 : undefined
  const targets: Array<Target> = [
    check("receive throughput, ours / baseline", throughput?.ratios.framesPerSec, ">= 0.8", (v) => v >= 0.8),
    check(
      "receive CPU per frame, ours / baseline",
      throughput?.ratios.cpuUsPerFrame,
      "<= 1.25",
      (v) => v <= 1.25
    ),
    check("wake latency p50, ours / baseline", wake?.ratios.p50, "<= 1.2", (v) => v <= 1.2),
    check("wake latency p99, ours / baseline", wake?.ratios.p99, "<= 1.5", (v) => v <= 1.5),
    check("decode 100-item batch, ours / baseline", batch100?.decodeRatio, "<= 2", (v) => v <= 2),
    check(
      "RSS growth under the stalled-peer flood (MiB)",
      broadcast?.mesh.rssGrowthMiB,
      "< 50",
      (v) => v < 50
    ),
    check(
      "mesh wake p50 / PostgreSQL NOTIFY p50",
      pgP50 === undefined || wake === undefined ? undefined : ratio(wake.mesh.p50, pgP50),
      "< 1",
      (v) => v < 1
    )
  ]

  const notes = [
    "Ratios are ours divided by the baseline's (bench/baseline.ts: the same wire hand-written on node:net).",
    "Codec: median ns per call over timed samples in one process; decode is framing plus validation (Schema for ours, JSON.parse plus hand checks for the baseline); both encoders produce identical bytes.",
    `Throughput: one peer sends ${plan.throughput.frames.toLocaleString("en-US")} MESSAGE_AVAILABLE frames (HELLO with HMAC first) over loopback TCP, 512 frames per write, honouring back-pressure; the receiver process measures wall time and process.cpuUsage() from its first wake to its last; median of ${plan.throughput.rounds} alternating round(s).`,
    `Wake latency: separate processes for A (push) and B (parked pop); A stamps before calling push, B stamps as the pop resumes, both with process.hrtime (CLOCK_MONOTONIC, one clock for every process on Linux), so each figure is one way and contains no IPC; a driver process only sequences the rounds, back to back. Variants (mesh, baseline, PostgreSQL) take turns in blocks of ${plan.wake.block} rounds; warm-up rounds and the first round of each block are dropped.`,
    `Mesh off: the same LocalWaker pop, re-polling every ${plan.off.pollMs} ms (a stand-in for the pop's backoff); a push at a random phase is found at the next re-poll, so p50 is about half the interval and grows with POP_WAIT_MAX_INTERVAL_MS.`,
    "PostgreSQL: a local throw-away server (fsync off, loopback TCP), pg client; NOTIFY issued in autocommit by A, the notification event stamped in B's LISTENing client. No other load: the most favourable case for NOTIFY.",
    `Broadcast: messageAvailable in a loop yielding to the event loop every ${plan.flood.yieldEvery} calls; three peers, one stalled so its send queue (1024 frames) fills and drops; RSS sampled every 10,000 calls, growth = peak minus the RSS after connect and a full GC.`
  ]
  if (postgres?.measured === false) notes.push(`PostgreSQL skipped: ${postgres.reason}`)

  const results = {
    meta: {
      ...meta,
      loadAverageAtEnd: Os.loadavg().map((l) => round(l, 2)),
      durationSec: round((Date.now() - started) / 1000, 1)
    },
    codec,
    throughput,
    wake: wake === undefined ? undefined : { ...wake, postgres },
    broadcast,
    targets,
    notes
  }

  // The table.
  const rows: Array<Array<string>> = [["benchmark", "queen-mesh", "baseline", "ratio"]]
  for (const c of codec ?? []) {
    rows.push([
      `encode ${c.name} (ns/frame)`,
      fmt(c.encodeNs.ours),
      fmt(c.encodeNs.baseline),
      fmt(c.encodeRatio, 2)
    ])
    rows.push([
      `decode ${c.name} (ns/frame)`,
      fmt(c.decodeNs.ours),
      fmt(c.decodeNs.baseline),
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
      rows.push([`wake ${p} (µs)`, fmt(wake.mesh[p]), fmt(wake.baseline[p]), fmt(wake.ratios[p], 2)])
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
    const b = broadcast.baseline
    rows.push([
      "broadcast (calls/s, 3 peers, 1 stalled)",
      fmt(m.callsPerSec, 0),
      fmt(b.callsPerSec, 0),
      fmt(broadcast.ratios.callsPerSec, 2)
    ])
    rows.push([
      "broadcast CPU (µs/call)",
      fmt(m.cpuUsPerCall, 3),
      fmt(b.cpuUsPerCall, 3),
      fmt(ratio(m.cpuUsPerCall, b.cpuUsPerCall), 2)
    ])
    rows.push(["RSS growth over the flood (MiB)", fmt(m.rssGrowthMiB), fmt(b.rssGrowthMiB), "-"])
    rows.push([
      "frames dropped / sent",
      `${m.framesDropped} / ${m.framesSent}`,
      `${b.framesDropped} / ${b.framesSent}`,
      "-"
    ])
  }
  const targetRows: Array<Array<string>> = [["target", "value", "limit", "met"]]
  for (const t of targets) {
    targetRows.push([t.target, fmt(t.value, 3), t.limit, t.met === null ? "n/a" : t.met ? "yes" : "NO"])
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
