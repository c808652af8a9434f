/**
 * `wake` and `pg`: the one-way latency of a push on node A to a pop parked on node B, ours (pushed from
 * a fiber and from `unsafeMessageAvailable`), the baseline's and PostgreSQL `NOTIFY`'s, the variants
 * taking turns in blocks (the children are in bench/latency.ts); and the pop with the mesh off,
 * found by its own re-poll. `--only=pg` runs the PostgreSQL variant alone.
 */
import * as Fs from "node:fs"
import { Schema } from "effect"
import { type Driver, freePort, Numbers, SECRET, stopAll } from "../driver.js"
import type { Child } from "../ipc.js"
import { type PgServer, startPostgres } from "../postgres.js"
import { check, fmt, type Row, row } from "../report.js"
import { section } from "../section.js"
import { type Distribution, distribution, ratio, sleep } from "../stats.js"
import * as Tail from "../tail.js"

interface WakePlan {
  readonly wake: { readonly warmup: number; readonly measured: number; readonly block: number }
  readonly off: { readonly total: number; readonly pollMs: number }
}

type WakeVariant = "mesh" | "meshsync" | "base" | "pg"

interface Pair {
  readonly variant: WakeVariant
  readonly a: Child
  readonly b: Child
  next: number
  readonly kept: Array<number>
}

const spawnPairs = async (
  driver: Driver,
  variants: ReadonlyArray<WakeVariant>,
  total: number,
  pgPort: number,
  pairs: Array<Pair>,
  probe: ReadonlyArray<string>
): Promise<void> => {
  for (const variant of variants) {
    const portA = await freePort()
    const portB = await freePort()
    const common = { secret: SECRET, total, pgPort }
    const execArgv = variant === "pg" ? [] : probe
    const b = driver.spawn(`wake-${variant}-b`, { ...common, port: portB, peerPort: portA }, execArgv)
    const a = driver.spawn(`wake-${variant}-a`, { ...common, port: portA, peerPort: portB }, execArgv)
    pairs.push({ variant, a, b, next: 0, kept: [] })
  }
  await Promise.all(pairs.flatMap(({ a, b }) => [a.take("ready", 30_000), b.take("ready", 30_000)]))
}

/** Every pair's block 1, then every pair's block 2, ...; keeps the rounds past the warm-up but the first of a block. */
const pushInBlocks = async (pairs: ReadonlyArray<Pair>, plan: WakePlan["wake"], total: number) => {
  const boundaries = [plan.warmup + plan.block + 1]
  while (boundaries[boundaries.length - 1]! < total) boundaries.push(boundaries.at(-1)! + plan.block + 1)
  for (const end of boundaries) {
    for (const pair of pairs) {
      const first = pair.next
      for (; pair.next < Math.min(end, total); pair.next++) {
        await pair.b.take("parked", 30_000)
        pair.a.send({ kind: "push", i: pair.next })
        if (pair.next >= plan.warmup && pair.next !== first) pair.kept.push(pair.next)
      }
    }
  }
}

/** B's wake stamps minus A's push stamps, in µs, for the rounds kept; and the stamps themselves. */
const latenciesOf = async (
  pair: Pair,
  measured: number
): Promise<{ readonly latencyUs: Distribution; readonly stamped: ReadonlyArray<Tail.Stamped> }> => {
  const sent = Schema.decodeUnknownSync(Numbers)((await pair.a.take("times", 30_000)).data)
  const woken = Schema.decodeUnknownSync(Numbers)((await pair.b.take("times", 90_000)).data)
  const latencies: Array<number> = []
  const stamped: Array<Tail.Stamped> = []
  for (const i of pair.kept.slice(0, measured)) {
    const us = (woken[i]! - sent[i]!) / 1000
    if (!(us > 0)) throw new Error(`${pair.variant}: wake ${i} came before its push (${us} µs)`)
    latencies.push(us)
    stamped.push({ sentNs: sent[i]!, wokeNs: woken[i]! })
  }
  return { latencyUs: distribution(latencies), stamped }
}

type Series = {
  readonly series: Map<WakeVariant, Distribution>
  /** Where each variant's tail came from (bench/tail.ts); null where a probe did not answer. */
  readonly tails: Map<WakeVariant, Tail.Attribution | null>
}

/**
 * Sequential push-to-wake series between pairs of processes, one pair per variant. The variants take
 * turns in blocks of rounds (every variant's block 1, then every variant's block 2, ...), so that a
 * drift in whatever else the machine is doing weighs on all of them alike, while inside a block each
 * round follows the same variant's previous one, as in a plain sequential run. The first round of each
 * block and the warm-up rounds are dropped. One-way latencies in µs.
 */
const wakeSeries = async (
  driver: Driver,
  plan: WakePlan["wake"],
  variants: ReadonlyArray<WakeVariant>,
  pgPort = 0
): Promise<Series> => {
  // Each later block re-warms with one dropped round.
  const total = plan.warmup + plan.measured + Math.ceil(plan.measured / plan.block)
  const pairs: Array<Pair> = []
  // The children inherit the probe's directory; only those started with its --import record.
  const tail = Tail.probe()
  const before = process.env.QUEEN_BENCH_TAIL_DIR
  process.env.QUEEN_BENCH_TAIL_DIR = tail.dir
  try {
    await spawnPairs(driver, variants, total, pgPort, pairs, tail.execArgv)
    await pushInBlocks(pairs, plan, total)
    const series = new Map<WakeVariant, Distribution>()
    const tails = new Map<WakeVariant, Tail.Attribution | null>()
    for (const pair of pairs) {
      const { latencyUs, stamped } = await latenciesOf(pair, plan.measured)
      series.set(pair.variant, latencyUs)
      if (pair.variant === "pg") continue
      const [a, b] = await Promise.all([
        Tail.collect(tail.dir, pair.a.process.pid),
        Tail.collect(tail.dir, pair.b.process.pid)
      ])
      tails.set(
        pair.variant,
        a === undefined || b === undefined ? null : Tail.attribute(stamped, { pusher: a.gcs, parked: b.gcs })
      )
    }
    return { series, tails }
  } finally {
    if (before === undefined) delete process.env.QUEEN_BENCH_TAIL_DIR
    else process.env.QUEEN_BENCH_TAIL_DIR = before
    await stopAll(pairs.flatMap(({ a, b }) => [a, b]))
    Fs.rmSync(tail.dir, { recursive: true, force: true })
  }
}

/** The mesh turned off: the push is found by B's own re-poll every `pollMs`. */
const fallbackSeries = async (
  driver: Driver,
  plan: WakePlan["off"]
): Promise<Distribution & { pollMs: number }> => {
  const { total, pollMs } = plan
  const common = { secret: SECRET, total, pollMs }
  const b = driver.spawn("wake-off-b", { ...common, port: await freePort(), peerPort: 0 })
  const a = driver.spawn("wake-off-a", { ...common, port: await freePort(), peerPort: 0 })
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

/** The PostgreSQL server of a run, stopped by the driver's exit handler if the run did not. */
let pgServer: PgServer | undefined

/** A local PostgreSQL, when one can be started; the reason otherwise. */
const startPg = async (driver: Driver): Promise<PgServer | string> => {
  driver.progress("postgres: starting a local server")
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

/** The series of `variants`, PostgreSQL's if `pg` is a server; only PostgreSQL may fail, and then the rest run again. */
const seriesWithPg = async (
  driver: Driver,
  plan: WakePlan["wake"],
  variants: ReadonlyArray<WakeVariant>,
  pg: PgServer | undefined
): Promise<Series & { pgFailure?: string }> => {
  if (variants.length === 0) return { series: new Map(), tails: new Map() }
  try {
    driver.progress(
      `wake latency: ${variants.join(", ")} x ${plan.warmup + plan.measured}, in alternating blocks of ${plan.block}`
    )
    return await wakeSeries(driver, plan, variants, pg?.port ?? 0)
  } catch (error) {
    if (!variants.includes("pg")) throw error
    const pgFailure = `failed: ${error instanceof Error ? error.message : String(error)}`
    const rest = variants.filter((v) => v !== "pg")
    const again =
      rest.length > 0 ? await wakeSeries(driver, plan, rest) : { series: new Map(), tails: new Map() }
    return { ...again, pgFailure }
  } finally {
    pg?.stop()
    pgServer = undefined
  }
}

const pgOutcome = (
  pg: PgServer | string | undefined,
  latencyUs: Distribution | undefined,
  failure?: string
): PgOutcome =>
  typeof pg === "string"
    ? { measured: false, reason: pg }
    : latencyUs === undefined || pg === undefined
      ? { measured: false, reason: failure ?? "not run" }
      : { measured: true, version: pg.version, latencyUs }

const latency = ({ series, tails }: Series, plan: WakePlan, meshOff: Distribution & { pollMs: number }) => {
  const mesh = series.get("mesh")!
  const meshSync = series.get("meshsync")!
  const baseline = series.get("base")!
  const over = (ours: Distribution) => ({
    p50: ratio(ours.p50, baseline.p50),
    p99: ratio(ours.p99, baseline.p99),
    p999: ratio(ours.p999, baseline.p999)
  })
  return {
    warmup: plan.wake.warmup,
    pusher: {
      mesh: "one long-lived fiber: Effect.async on the IPC inbox, stamp, yield* mesh.messageAvailable",
      meshSync: "the IPC callback: stamp, mesh.unsafeMessageAvailable"
    },
    mesh,
    meshSync,
    baseline,
    meshOff,
    ratios: over(mesh),
    syncRatios: over(meshSync),
    tail: {
      what: "each wake next to the garbage collections of the pushing and the parked process (bench/tail.ts): of the slowest 1% (at or above p99), how many overlapped a collection; the p99 of the wakes that overlapped none; each process's collections over the series",
      mesh: tails.get("mesh") ?? null,
      meshSync: tails.get("meshsync") ?? null,
      baseline: tails.get("base") ?? null
    }
  }
}

const run = async (driver: Driver, plan: WakePlan) => {
  const withMesh = driver.selected("wake")
  const withPg = driver.selected("pg")
  const pg = withPg ? await startPg(driver) : undefined
  const server = typeof pg === "string" ? undefined : pg
  const variants: Array<WakeVariant> = withMesh ? ["mesh", "meshsync", "base"] : []
  if (server !== undefined) variants.push("pg")
  const measured = await seriesWithPg(driver, plan.wake, variants, server)
  const { series, pgFailure } = measured
  const postgres = withPg ? pgOutcome(pg, series.get("pg"), pgFailure) : undefined
  if (!withMesh) return { postgres }
  driver.progress(`wake latency: mesh off, re-poll every ${plan.off.pollMs} ms x ${plan.off.total}`)
  return { postgres, latency: latency(measured, plan, await fallbackSeries(driver, plan.off)) }
}

type Wake = Awaited<ReturnType<typeof run>>

const latencyRows = (wake: NonNullable<Wake["latency"]>): ReadonlyArray<Row> => [
  ...(["p50", "p99", "p999"] as const).map((p) =>
    row(`wake ${p}, fiber pusher (µs)`, fmt(wake.mesh[p]), fmt(wake.baseline[p]), fmt(wake.ratios[p], 2))
  ),
  ...Tail.tailRows("wake, fiber pusher", wake.tail.mesh, wake.tail.baseline),
  ...(["p50", "p99", "p999"] as const).map((p) =>
    row(
      `wake ${p}, unsafeMessageAvailable (µs)`,
      fmt(wake.meshSync[p]),
      fmt(wake.baseline[p]),
      fmt(wake.syncRatios[p], 2)
    )
  ),
  row(`wake p50 / p99, mesh off (µs)`, `${fmt(wake.meshOff.p50, 0)} / ${fmt(wake.meshOff.p99, 0)}`)
]

const postgresRow = (postgres: PgOutcome): Row =>
  postgres.measured
    ? row(
        "PostgreSQL NOTIFY p50 / p99 / p99.9 (µs)",
        `${fmt(postgres.latencyUs.p50)} / ${fmt(postgres.latencyUs.p99)} / ${fmt(postgres.latencyUs.p999)}`
      )
    : row("PostgreSQL NOTIFY", "skipped")

const targets = (result: Wake | undefined) => {
  const wake = result?.latency
  const pgP50 = result?.postgres?.measured === true ? result.postgres.latencyUs.p50 : undefined
  return [
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
    )
  ]
}

const notes = (result: Wake | undefined, plan: WakePlan) => [
  `Wake latency: separate processes for A (push) and B (parked pop); A stamps before calling push, B stamps as the pop resumes, both with process.hrtime (CLOCK_MONOTONIC, one clock for every process on Linux), so each figure is one way and contains no IPC; a driver process only sequences the rounds, back to back. Mesh A is one long-lived fiber awaiting the driver's push through Effect.async and calling yield* mesh.messageAvailable; meshSync A calls mesh.unsafeMessageAvailable from the IPC callback. B parks a fiber on LocalWaker.awaitWake. Variants take turns in blocks of ${plan.wake.block} rounds; warm-up rounds and the first round of each block are dropped.`,
  `Mesh off: the same LocalWaker pop, re-polling every ${plan.off.pollMs} ms (a stand-in for the pop's backoff); a push at a random phase is found at the next re-poll, so p50 is about half the interval and grows with POP_WAIT_MAX_INTERVAL_MS.`,
  "PostgreSQL: a local throw-away server (fsync off, loopback TCP), pg client; NOTIFY issued in autocommit by A, the notification event stamped in B's LISTENing client. No other load: the most favourable case for NOTIFY.",
  ...(result?.postgres?.measured === false ? [`PostgreSQL skipped: ${result.postgres.reason}`] : [])
]

export const wake = section({
  names: ["wake", "pg"],
  plan: {
    full: { wake: { warmup: 500, measured: 10_000, block: 100 }, off: { total: 100, pollMs: 100 } },
    quick: { wake: { warmup: 200, measured: 2_000, block: 500 }, off: { total: 20, pollMs: 100 } }
  },
  run,
  // Without `wake`, PostgreSQL's figure is in the table and the notes only.
  results: (result) => ({
    wake: result.latency === undefined ? undefined : { ...result.latency, postgres: result.postgres }
  }),
  rows: (result) => [
    ...(result.latency === undefined ? [] : latencyRows(result.latency)),
    ...(result.postgres === undefined ? [] : [postgresRow(result.postgres)])
  ],
  targets,
  notes,
  cleanup: () => {
    pgServer?.stop()
    pgServer = undefined
  }
})
