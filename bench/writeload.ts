/**
 * Write load at the library level (`npm run bench -- --only=writeload`): what each way of waking a pop
 * costs PostgreSQL while producers commit as fast as it lets them.
 *
 * An embedded PostgreSQL at its defaults (fsync on, synchronous_commit on; bench/embeddedDatabase.ts).
 * Per carrier, a database of its own, two consumer processes and producer processes of at most
 * `perProducer` connections each (so no one Node process drives all 64). Per cell (a carrier and K),
 * K producer connections each commit one message per transaction (an autocommit `INSERT`) back to back
 * for `cellMs`; each connection numbers its messages and stamps each on `CLOCK_MONOTONIC` as its commit
 * is acknowledged. The consumers claim in batches (`DELETE ... WHERE id IN (SELECT ... FOR UPDATE SKIP
 * LOCKED LIMIT batch) RETURNING`), stamp each message as its claim returns, and wait as the carrier
 * lets them:
 *
 * - `tcp`: the producer's mesh node calls `unsafeMessageAvailable` after each commit (the mesh coalesces
 *   a tick's frames into one socket write); the consumers are mesh nodes whose pops wait in grouped pops
 *   (`LocalWaker.grouped`): one claim in flight per consumer, the hints that land while it runs folded
 *   into one follow-up claim begun no sooner than `followUpMs` after it began; a consumer with no claim
 *   in flight claims at once on a hint;
 * - `lane`: the same calls on lane-only nodes (src/Postgres.ts): the lane coalesces a tick's hints into
 *   its own `NOTIFY` on its own connection, outside the producers' transactions;
 * - `notify`: `pg_notify` in the push's statement (`WITH m AS (INSERT ...) SELECT pg_notify(...)`), in
 *   its transaction, as job queues do; the consumers `LISTEN` on a connection of their own and claim
 *   as long as claims find messages;
 * - `none`: no hint; a consumer claims as long as claims find messages, then re-polls every `pollMs`.
 *
 * A consumer waiting on a carrier re-claims after `fallbackMs` without a wake, so a lost hint shows as
 * latency, never as a lost message. Per cell: commits per second, commit-to-claim p50/p99 over every
 * message, lost / delivered twice / unknown (bench/deliveries.ts), PostgreSQL's CPU per commit (every
 * server process's schedstat over the window, over the commits), and each process's CPU.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import { Duration, Effect, Metric, Option, Schema } from "effect"
import { flushHistograms } from "../src/internal/metrics/metricNames.js"
import * as LocalWaker from "../src/LocalWaker.js"
import * as Mesh from "../src/Mesh.js"
import { type Claimed, type Committed, spread, tally } from "./deliveries.js"
import { freePort } from "./driver.js"
import { cpuDeltaNs, type Database } from "./embeddedDatabase.js"
import type { Child } from "./ipc.js"
import { fromParent, nowNs, toParent } from "./ipc.js"
import { laneRuntime, untilLaneHears } from "./lane.js"
import { linksUp, localNode, until } from "./nodes.js"
import { type Distribution, distribution, percentile, round, sleep } from "./stats.js"
import { type PgClient, pgClient, startChild, stopAll } from "./writeloadProcs.js"

// ---------------------------------------------------------------------------------------------
// plan
// ---------------------------------------------------------------------------------------------

export type Carrier = "tcp" | "lane" | "notify" | "none"

export interface LoadPlan {
  readonly ks: ReadonlyArray<number>
  readonly carriers: ReadonlyArray<Carrier>
  /** Each cell's window: producers commit back to back this long. */
  readonly cellMs: number
  /** Connections per producer process at most. */
  readonly perProducer: number
  /** Messages a claim takes at most. */
  readonly batch: number
  /** `none`: an idle consumer's re-poll interval. */
  readonly pollMs: number
  /** A consumer parked on a carrier re-claims after this long without a wake. */
  readonly fallbackMs: number
  /**
   * `tcp`, `lane`: the grouped pops' `followUpInterval`, the least time from a claim's start to the
   * follow-up owed to the wakes that landed while it ran.
   */
  readonly followUpMs: number
  /**
   * `tcp`, `lane`: the consumers receive the hints (their nodes apply them to a `LocalWaker` nothing
   * waits on) but claim as the `none` consumers do, re-polling: what the hints alone cost, apart from
   * the prompt claims they make.
   */
  readonly hintsOnly: boolean
  /** After the window, how long the consumers get to claim what is left before it counts as lost. */
  readonly drainMs: number
  /**
   * Paced cells, after the saturated ones: `k` connections committing `rate` commits a second in all
   * (each connection on its own schedule), `repeats` times for each of `tcp` and `none` taking turns.
   * At one rate, short of what the machine can take, the CPU per commit of each process is what the
   * carrier costs, not what a saturated machine's scheduling makes of it. `undefined`: none.
   */
  readonly paced?: { readonly k: number; readonly rate: number; readonly repeats: number } | undefined
}

export const CARRIERS: ReadonlyArray<Carrier> = ["tcp", "lane", "notify", "none"]

const SECRET = "bench-writeload-s3cr3t"
const LANE_CHANNEL = "queen_mesh_bench_wl"
const NOTIFY_CHANNEL = "bench_wl_jobs"
const LONG_WAIT_MS = 120_000
const ITEM = { queue: "wl", partition: "p-0" } as const
const TARGET: LocalWaker.WaitTarget = { queue: "wl", tenant: Option.none() }
/** A message's body: about what a small job carries. */
const PAYLOAD = `{"job":"bench","data":"${"x".repeat(64)}"}`

export const TABLE_DDL = `CREATE TABLE IF NOT EXISTS wl_messages (
  id bigserial PRIMARY KEY,
  source int NOT NULL,
  seq int NOT NULL,
  payload text NOT NULL
)`

const INSERT = "INSERT INTO wl_messages (source, seq, payload) VALUES ($1, $2, $3)"
const INSERT_NOTIFY = `WITH m AS (INSERT INTO wl_messages (source, seq, payload) VALUES ($1, $2, $3) RETURNING id) SELECT pg_notify('${NOTIFY_CHANNEL}', '') FROM m`
const CLAIM =
  "DELETE FROM wl_messages WHERE id IN (SELECT id FROM wl_messages ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED) RETURNING source, seq"
/** Rows claimed for grouped pops that went away, back in the table (never in these runs: no pop leaves). */
const GIVE_BACK =
  "INSERT INTO wl_messages (source, seq, payload) SELECT s, q, $3 FROM unnest($1::int[], $2::int[]) AS t(s, q)"

// ---------------------------------------------------------------------------------------------
// driver
// ---------------------------------------------------------------------------------------------

const Done = Schema.Struct({
  committed: Schema.Array(
    Schema.Struct({
      source: Schema.Number,
      stamps: Schema.Array(Schema.Number),
      begun: Schema.Array(Schema.Number)
    })
  ),
  lane: Schema.NullOr(Schema.Struct({ notifications: Schema.Number, frames: Schema.Number })),
  errors: Schema.Number,
  wallNs: Schema.Number,
  cpuUs: Schema.Number,
  writeCalls: Schema.Number
})
const Arm = Schema.Struct({ connections: Schema.Number, cell: Schema.Number })
/** A cell's start: its window, and each connection's commits a second (0: back to back). */
const Go = Schema.Struct({ windowMs: Schema.Number, perConnectionRate: Schema.Number })
const ClaimedReport = Schema.Struct({
  source: Schema.Array(Schema.Number),
  seq: Schema.Array(Schema.Number),
  atNs: Schema.Array(Schema.Number),
  claims: Schema.Number,
  emptyClaims: Schema.Number,
  cpuUs: Schema.Number,
  wakeups: Schema.Number,
  meshReads: Schema.Number
})

export interface Cell {
  readonly carrier: Carrier
  readonly k: number
  /** A paced cell's commits a second in all (`LoadPlan.paced`); `null`: back to back. */
  readonly pacedRate: number | null
  readonly producerProcesses: number
  readonly commits: number
  readonly commitsPerSec: number
  /** The commit acknowledged (producer) to the claim returned (consumer). */
  readonly pushToPopUs: Distribution & { readonly min: number }
  /** The statement sent to the claim returned: what a client waits, and never negative. */
  readonly sentToPopUs: Distribution
  /** The lane's notifications sent by the producers over the window, and the hints they carried. */
  readonly laneNotifications: number | null
  readonly laneFrames: number | null
  readonly lost: number
  readonly duplicated: number
  readonly unknown: number
  readonly producerErrors: number
  /** PostgreSQL's time on CPU over the window, over the commits. */
  readonly pgCpuUsPerCommit: number
  /** PostgreSQL's processes on CPU over the window, in cores. */
  readonly pgCpuCores: number
  /** The busiest producer process, in % of one core over its window. */
  readonly producerCpuPercentMax: number
  readonly consumerCpuPercent: ReadonlyArray<number>
  /**
   * Every producer's and every consumer's time on CPU over the window, over the commits: with
   * PostgreSQL's, where a commit's CPU goes on this machine (the carrier's own share included).
   */
  readonly producerCpuUsPerCommit: number
  readonly consumerCpuUsPerCommit: number
  /** The whole machine's CPU busy over the window (all cores, /proc/stat), in %: 100 is saturated. */
  readonly machineBusyPercent: number
  /**
   * The machine's CPU over the window not spent by this cell's PostgreSQL, producers or consumers, in
   * cores (the driver's share included): other work on the machine, which makes a cell's rate unfit to
   * compare when it is more than a few hundredths.
   */
  readonly otherCores: number
  /** The whole machine's context switches over the window (/proc/stat), over the commits. */
  readonly switchesPerCommit: number
  /**
   * Each consumer process's voluntary context switches per second over the window, from its reset to
   * its report: how often it went to sleep and was woken (a read, a timer).
   */
  readonly consumerWakeupsPerSec: ReadonlyArray<number>
  /**
   * The mesh's socket reads in the consumers (chunks handed to the receive path), over the commits:
   * every commit's hint reaches both consumers, so 2 would be a read per hint. `null` without the mesh.
   */
  readonly consumerMeshReadsPerCommit: number | null
  /**
   * The producers' write system calls over the window (/proc/self/io), less one per commit (its
   * statement), over the commits: with the mesh, about its socket writes per commit.
   */
  readonly producerExtraWritesPerCommit: number
  /** Claims made, and those that found nothing (woken or polled for no message). */
  readonly claims: number
  readonly emptyClaims: number
  readonly windowMs: number
}

/** One carrier's processes and its database, started once and reused for every K. */
interface CarrierSet {
  readonly carrier: Carrier
  readonly admin: PgClient
  readonly producers: ReadonlyArray<Child>
  readonly consumers: ReadonlyArray<Child>
}

const startSet = async (db: Database, carrier: Carrier, plan: LoadPlan, sets: Array<CarrierSet>) => {
  const url = await db.urlFor(`wl_${carrier}`)
  const admin = await pgClient(url)
  await admin.query(TABLE_DDL)
  const maxK = Math.max(...plan.ks, plan.paced?.k ?? 0)
  const producerCount = Math.ceil(maxK / plan.perProducer)
  const ports = await Promise.all(Array.from({ length: producerCount + 2 }, () => freePort()))
  const producerPorts = ports.slice(0, producerCount)
  const consumerPorts = ports.slice(producerCount)
  const common = {
    carrier,
    url,
    secret: SECRET,
    nodes: producerCount + 2,
    batch: plan.batch,
    pollMs: plan.pollMs,
    fallbackMs: plan.fallbackMs,
    followUpMs: plan.followUpMs,
    hintsOnly: plan.hintsOnly
  }
  const consumers = consumerPorts.map((port, i) =>
    startChild("consumer", { ...common, index: i, port, peers: producerPorts })
  )
  const producers = producerPorts.map((port, i) =>
    startChild("producer", { ...common, index: i, port, peers: consumerPorts })
  )
  // Registered before waiting, so a failed start still stops them.
  sets.push({ carrier, admin, producers, consumers })
  await Promise.all([...consumers, ...producers].map((c) => c.take("ready", 60_000)))
}

/** Each set in each of `turns` turns, one after another, the sets' order rotated by one every turn. */
const inTurns = async (
  sets: ReadonlyArray<CarrierSet>,
  turns: number,
  each: (set: CarrierSet, turn: number) => Promise<void>
): Promise<void> => {
  for (let turn = 0; turn < turns; turn++) {
    for (let j = 0; j < sets.length; j++) await each(sets[(turn + j) % sets.length]!, turn)
  }
}

/**
 * Every carrier's cells. All carriers' processes run for the whole section, and at each K the carriers
 * take turns, the first of each K a different one, so a machine whose load drifts over the minutes
 * weighs on every carrier alike. Returned by carrier, then K.
 */
export const runLoad = async (
  db: Database,
  plan: LoadPlan,
  progress: (text: string) => void
): Promise<ReadonlyArray<Cell>> => {
  const sets: Array<CarrierSet> = []
  try {
    for (const carrier of plan.carriers) {
      progress(`writeload: starting the ${carrier} carrier's producers and consumers`)
      await startSet(db, carrier, plan, sets)
    }
    const cells: Array<Cell> = []
    await inTurns(sets, plan.ks.length, async (set, turn) => {
      const k = plan.ks[turn]!
      progress(`writeload: K = ${k}, ${set.carrier}, ${plan.cellMs} ms`)
      cells.push(await runCell(db, set.admin, set.carrier, k, null, plan, set.producers, set.consumers))
    })
    const paced = plan.paced
    if (paced !== undefined) {
      const pacedSets = sets.filter((set) => set.carrier === "tcp" || set.carrier === "none")
      await inTurns(pacedSets, paced.repeats, async (set) => {
        progress(
          `writeload: paced, K = ${paced.k} at ${paced.rate} commits/s, ${set.carrier}, ${plan.cellMs} ms`
        )
        cells.push(
          await runCell(db, set.admin, set.carrier, paced.k, paced.rate, plan, set.producers, set.consumers)
        )
      })
    }
    const order = (c: Cell) => (c.pacedRate === null ? 0 : 1e9) + plan.carriers.indexOf(c.carrier) * 1e6 + c.k
    return cells.sort((a, b) => order(a) - order(b))
  } finally {
    await stopAll(sets.flatMap((set) => [...set.producers, ...set.consumers]))
    await Promise.all(sets.map((set) => set.admin.end().catch(() => undefined)))
  }
}

/**
 * The machine's CPU ticks since boot, all cores: busy and idle (idle and iowait), and its context
 * switches, from /proc/stat.
 */
const machineTicks = (): { readonly busy: number; readonly idle: number; readonly switches: number } => {
  try {
    const lines = Fs.readFileSync("/proc/stat", "utf8").split("\n")
    const fields = lines[0]!.trim().split(/\s+/).slice(1).map(Number)
    const idle = (fields[3] ?? 0) + (fields[4] ?? 0)
    const ctxt = lines.find((line) => line.startsWith("ctxt "))
    return {
      busy: fields.reduce((a, b) => a + b, 0) - idle,
      idle,
      switches: ctxt === undefined ? Number.NaN : Number(ctxt.slice(5))
    }
  } catch {
    return { busy: Number.NaN, idle: Number.NaN, switches: Number.NaN }
  }
}

const machineBusy = (
  before: ReturnType<typeof machineTicks>,
  after: ReturnType<typeof machineTicks>
): number => {
  const busy = after.busy - before.busy
  const idle = after.idle - before.idle
  return (busy * 100) / Math.max(1, busy + idle)
}

/** A `name: value` field of one of this process's `/proc/self` files, as a number (NaN where unreadable). */
const procField = (file: string, name: string): number => {
  try {
    const line = Fs.readFileSync(`/proc/self/${file}`, "utf8")
      .split("\n")
      .find((l) => l.startsWith(`${name}:`))
    return line === undefined ? Number.NaN : Number(line.split(/\s+/)[1])
  } catch {
    return Number.NaN
  }
}

/** This process's write system calls so far (/proc/self/io `syscw`). */
const writeCalls = (): number => procField("io", "syscw")

/** Chunks the mesh's receive path has read in this process: its receive-to-apply histogram's count. */
const meshReads = (): number => {
  flushHistograms()
  let chunks = 0
  for (const metric of Effect.runSync(Metric.snapshot)) {
    if (metric.id === "queen_mesh_receive_apply_seconds" && metric.type === "Histogram") {
      chunks += metric.state.count
    }
  }
  return chunks
}

/** This process's voluntary context switches so far (its waits for I/O or a timer that ended). */
const voluntarySwitches = (): number => procField("status", "voluntary_ctxt_switches")

/** Numbers the cells: a message's source names its cell, so a late claim of an earlier one stays apart. */
let cellsRun = 0

const runCell = async (
  db: Database,
  admin: PgClient,
  carrier: Carrier,
  k: number,
  pacedRate: number | null,
  plan: LoadPlan,
  producers: ReadonlyArray<Child>,
  consumers: ReadonlyArray<Child>
): Promise<Cell> => {
  const cellNumber = ++cellsRun
  const connections = spread(k, producers.length, plan.perProducer)
  const active = producers.filter((_, i) => connections[i]! > 0)
  await admin.query("TRUNCATE wl_messages")
  await admin.query("VACUUM ANALYZE wl_messages")
  producers.forEach((p, i) => {
    p.send({ kind: "arm", data: { connections: connections[i], cell: cellNumber } })
  })
  await Promise.all(producers.map((p) => p.take("armed", 60_000)))
  for (const c of consumers) c.send({ kind: "reset" })
  await Promise.all(consumers.map((c) => c.take("reset", 60_000)))
  await sleep(300)
  const cpuBefore = db.cpuByPid()
  const start = nowNs()
  const perConnectionRate = pacedRate === null ? 0 : pacedRate / k
  for (const p of active) p.send({ kind: "go", data: { windowMs: plan.cellMs, perConnectionRate } })
  const machineBefore = machineTicks()
  const done = await Promise.all(
    active.map(async (p) => Schema.decodeUnknownSync(Done)((await p.take("done", LONG_WAIT_MS)).data))
  )
  const windowNs = nowNs() - start
  const pgNs = cpuDeltaNs(cpuBefore, db.cpuByPid())
  for (const p of active) p.send({ kind: "close" })
  const machineAfter = machineTicks()
  const machine = machineBusy(machineBefore, machineAfter)
  // What is left is the consumers' to claim, within `drainMs`.
  const drainUntil = Date.now() + plan.drainMs
  for (;;) {
    const left = Number((await admin.query("SELECT count(*) AS n FROM wl_messages")).rows[0]?.n ?? 0)
    if (left === 0 || Date.now() > drainUntil) break
    await sleep(20)
  }
  for (const c of consumers) c.send({ kind: "report" })
  const claimed = await Promise.all(
    consumers.map(async (c) =>
      Schema.decodeUnknownSync(ClaimedReport)((await c.take("claimed", LONG_WAIT_MS)).data)
    )
  )
  const committed: Array<Committed> = done.flatMap((d) => d.committed)
  const claims: Array<Claimed> = claimed
  const result = tally(committed, claims)
  const commits = result.committed
  const maxWallNs = Math.max(...done.map((d) => d.wallNs))
  return {
    carrier,
    k,
    pacedRate,
    producerProcesses: active.length,
    commits,
    commitsPerSec: Math.round((commits / maxWallNs) * 1e9),
    pushToPopUs: { ...distribution(result.latenciesUs), min: round(percentile(result.latenciesUs, 0), 1) },
    sentToPopUs: distribution(result.fromBegunUs),
    laneNotifications: carrier === "lane" ? done.reduce((n, d) => n + (d.lane?.notifications ?? 0), 0) : null,
    laneFrames: carrier === "lane" ? done.reduce((n, d) => n + (d.lane?.frames ?? 0), 0) : null,
    lost: result.lost,
    duplicated: result.duplicated,
    unknown: result.unknown,
    producerErrors: done.reduce((n, d) => n + d.errors, 0),
    pgCpuUsPerCommit: round(pgNs / 1000 / Math.max(1, commits), 1),
    pgCpuCores: round(pgNs / windowNs, 2),
    producerCpuPercentMax: round(Math.max(...done.map((d) => (d.cpuUs * 1000 * 100) / d.wallNs)), 1),
    producerCpuUsPerCommit: round(done.reduce((n, d) => n + d.cpuUs, 0) / Math.max(1, commits), 1),
    consumerCpuUsPerCommit: round(claimed.reduce((n, c) => n + c.cpuUs, 0) / Math.max(1, commits), 1),
    machineBusyPercent: round(machine, 1),
    otherCores: round(
      ((machineAfter.busy - machineBefore.busy) /
        Math.max(1, machineAfter.busy - machineBefore.busy + machineAfter.idle - machineBefore.idle)) *
        Os.availableParallelism() -
        pgNs / windowNs -
        (done.reduce((n, d) => n + d.cpuUs, 0) + claimed.reduce((n, c) => n + c.cpuUs, 0)) /
          (windowNs / 1000),
      2
    ),
    switchesPerCommit: round((machineAfter.switches - machineBefore.switches) / Math.max(1, commits), 2),
    consumerWakeupsPerSec: claimed.map((c) => Math.round((c.wakeups * 1e9) / windowNs)),
    consumerMeshReadsPerCommit:
      carrier === "tcp"
        ? round(claimed.reduce((n, c) => n + c.meshReads, 0) / Math.max(1, commits), 2)
        : null,
    producerExtraWritesPerCommit: round(
      (done.reduce((n, d) => n + d.writeCalls, 0) - commits) / Math.max(1, commits),
      2
    ),
    consumerCpuPercent: claimed.map((c) => round((c.cpuUs * 1000 * 100) / windowNs, 1)),
    claims: claimed.reduce((n, c) => n + c.claims, 0),
    emptyClaims: claimed.reduce((n, c) => n + c.emptyClaims, 0),
    windowMs: round(windowNs / 1e6, 0)
  }
}

// ---------------------------------------------------------------------------------------------
// children
// ---------------------------------------------------------------------------------------------

export interface RoleParams {
  readonly carrier: Carrier
  readonly url: string
  readonly secret: string
  readonly index: number
  readonly port: number
  readonly peers: ReadonlyArray<number>
  /** Every process of the carrier: the producers and the two consumers. */
  readonly nodes: number
  readonly batch: number
  readonly pollMs: number
  readonly fallbackMs: number
  readonly followUpMs: number
  readonly hintsOnly: boolean
}

/** The node a carrier needs in a process (`tcp`, `lane`), ready: its links up or the others heard. */
const meshNode = async (params: RoleParams, serverId: string) => {
  if (params.carrier === "tcp") {
    const runtime = localNode({ serverId, port: params.port, peers: params.peers, secret: params.secret })
    await until(runtime, linksUp, 30_000, `${serverId}'s links`)
    return runtime
  }
  if (params.carrier === "lane") {
    const runtime = laneRuntime(serverId, params.url, params.secret, LANE_CHANNEL)
    await untilLaneHears(runtime, params.nodes - 1, serverId)
    return runtime
  }
  return undefined
}

/** What this node's lane has sent so far, `null` without a lane. */
const laneSent = Effect.map(
  Effect.flatMap(Mesh.Mesh, (mesh) => mesh.stats),
  (stats) =>
    stats.enabled && stats.lane !== null
      ? { notifications: stats.lane.notifications_sent, frames: stats.lane.frames_sent }
      : null
)

/**
 * A producer process: on `arm`, opens its connections; on `go`, each commits back to back for the
 * window, stamping every acknowledged commit and, with the mesh or the lane, hinting after it; then
 * closes them.
 */
export const producer = async (params: RoleParams): Promise<void> => {
  const serverId = `wl-producer-${params.index}`
  const runtime = await meshNode(params, serverId)
  const mesh = runtime === undefined ? undefined : await runtime.runPromise(Effect.service(Mesh.Mesh))
  const inbox = fromParent()
  const clients: Array<PgClient> = []
  const statement = params.carrier === "notify" ? INSERT_NOTIFY : INSERT
  toParent({ kind: "ready" })
  for (;;) {
    const arm = Schema.decodeUnknownSync(Arm)((await inbox.take("arm", LONG_WAIT_MS * 10)).data)
    const count = arm.connections
    while (clients.length < count) clients.push(await pgClient(params.url))
    toParent({ kind: "armed" })
    if (count === 0) continue
    const go = Schema.decodeUnknownSync(Go)((await inbox.take("go", LONG_WAIT_MS * 10)).data)
    const windowMs = go.windowMs
    // Paced: each connection's n-th commit is due n intervals after the start, and waits until then.
    const intervalNs = go.perConnectionRate > 0 ? 1e9 / go.perConnectionRate : 0
    const laneBefore = runtime === undefined ? null : await runtime.runPromise(laneSent)
    const cpu = process.cpuUsage()
    const writesBefore = writeCalls()
    const start = nowNs()
    const end = start + windowMs * 1e6
    let errors = 0
    const committed = await Promise.all(
      clients.slice(0, count).map(async (client, c) => {
        const source = arm.cell * 100_000 + params.index * 1000 + c
        const stamps: Array<number> = []
        const begun: Array<number> = []
        // This process's connections staggered over one interval, so they do not all commit at once.
        let due = start + (intervalNs * c) / count
        while (nowNs() < end) {
          if (intervalNs > 0) {
            const early = due - nowNs()
            due += intervalNs
            if (early > 0) await sleep(early / 1e6)
            if (nowNs() >= end) break
          }
          const at = nowNs()
          try {
            await client.query(statement, [source, stamps.length, PAYLOAD])
          } catch {
            errors++
            continue
          }
          stamps.push(nowNs())
          begun.push(at)
          mesh?.unsafeMessageAvailable(ITEM)
        }
        return { source, stamps, begun }
      })
    )
    const wallNs = nowNs() - start
    const used = process.cpuUsage(cpu)
    const writes = writeCalls() - writesBefore
    const laneAfter = runtime === undefined ? null : await runtime.runPromise(laneSent)
    const lane =
      laneBefore === null || laneAfter === null
        ? null
        : {
            notifications: laneAfter.notifications - laneBefore.notifications,
            frames: laneAfter.frames - laneBefore.frames
          }
    toParent({
      kind: "done",
      data: { committed, errors, wallNs, cpuUs: used.user + used.system, lane, writeCalls: writes }
    })
    // Held until the driver has read PostgreSQL's CPU: a backend gone takes its CPU out of the count.
    await inbox.take("close", LONG_WAIT_MS * 10)
    // Closed after each cell: every carrier's producers stay up for the whole section, and their
    // connections at K = 64 together would pass max_connections.
    await Promise.all(clients.splice(0).map((client) => client.end().catch(() => undefined)))
  }
}

/** A claimed message, stamped as its claim returned. */
interface Stamped {
  readonly source: number
  readonly seq: number
  readonly atNs: number
}

/**
 * What a consumer has claimed since the driver last reset it: every message with its claim's stamp,
 * the claims and those that found nothing, and its CPU. A report waits until no claim is in flight
 * and every row claimed is recorded (a grouped pop's rows reach it a moment after its claim returns).
 */
class ConsumerTally {
  private source: Array<number> = []
  private seq: Array<number> = []
  private atNs: Array<number> = []
  private claims = 0
  private emptyClaims = 0
  private cpu = process.cpuUsage()
  private wakeups = voluntarySwitches()
  private reads = meshReads()
  /** Claims in flight, and rows claimed but not yet recorded or given back. */
  private claiming = 0
  private inHand = 0
  private reporting = false

  reset(): void {
    this.source = []
    this.seq = []
    this.atNs = []
    this.claims = 0
    this.emptyClaims = 0
    this.cpu = process.cpuUsage()
    this.wakeups = voluntarySwitches()
    this.reads = meshReads()
  }

  claimStarted(): void {
    this.claiming++
  }

  claimEnded(rows: number): void {
    this.claiming--
    this.claims++
    if (rows === 0) this.emptyClaims++
    this.inHand += rows
    this.settle()
  }

  record(rows: ReadonlyArray<Stamped>): void {
    for (const row of rows) {
      this.source.push(row.source)
      this.seq.push(row.seq)
      this.atNs.push(row.atNs)
    }
    this.inHand -= rows.length
    this.settle()
  }

  /** Rows given back to the table: claimed again later, and recorded then. */
  givenBack(rows: number): void {
    this.inHand -= rows
    this.settle()
  }

  /** Reports (and forgets) what it has, once nothing is in flight. */
  report(): void {
    this.reporting = true
    this.settle()
  }

  private settle(): void {
    if (!this.reporting || this.claiming > 0 || this.inHand > 0) return
    this.reporting = false
    const used = process.cpuUsage(this.cpu)
    const { source, seq, atNs, claims, emptyClaims } = this
    toParent({
      kind: "claimed",
      data: {
        source,
        seq,
        atNs,
        claims,
        emptyClaims,
        cpuUs: used.user + used.system,
        wakeups: voluntarySwitches() - this.wakeups,
        meshReads: meshReads() - this.reads
      }
    })
    this.source = []
    this.seq = []
    this.atNs = []
  }
}

/**
 * A consumer process. `tcp` and `lane`: pops waiting in grouped pops (`LocalWaker.grouped`), whose
 * claim is the CLAIM statement for the group's limit: wakes that land while a claim runs fold into one
 * follow-up claim. `notify` and `none`: one claim loop that claims as long as claims find messages,
 * then waits on its `LISTEN` connection or a re-poll timer. Reports (and forgets) its claims on
 * `report`, once its claim in flight is in.
 */
export const consumer = async (params: RoleParams): Promise<void> => {
  const serverId = `wl-consumer-${params.index}`
  const runtime = await meshNode(params, serverId)
  const client = await pgClient(params.url)
  const inbox = fromParent()
  const tally = new ConsumerTally()
  const claim = async (limit: number): Promise<ReadonlyArray<Stamped>> => {
    tally.claimStarted()
    const { rows } = await client.query<{ source: number; seq: number }>(CLAIM, [limit])
    const atNs = nowNs()
    tally.claimEnded(rows.length)
    return rows.map((row) => ({ source: row.source, seq: row.seq, atNs }))
  }
  inbox.handle("reset", () => {
    tally.reset()
    toParent({ kind: "reset" })
  })
  inbox.handle("report", () => tally.report())
  if (runtime !== undefined && !params.hintsOnly) {
    const giveBack = async (rows: ReadonlyArray<Stamped>) => {
      await client.query(GIVE_BACK, [rows.map((row) => row.source), rows.map((row) => row.seq), PAYLOAD])
      tally.givenBack(rows.length)
    }
    toParent({ kind: "ready" })
    await runtime.runPromise(groupedPops(params, claim, giveBack, (rows) => tally.record(rows)))
    return
  }
  const idle: IdleWait =
    params.carrier === "notify"
      ? await listenFor(params)
      : { clear: () => {}, wait: () => sleep(params.pollMs) }
  toParent({ kind: "ready" })
  for (;;) {
    idle.clear()
    const rows = await claim(params.batch)
    tally.record(rows)
    if (rows.length === 0) await idle.wait()
  }
}

/**
 * How many grouped pops a consumer keeps waiting, each for a whole batch. With two, one still waits
 * while the other's rows are recorded, so its group always has a pop waiting: the wakes that land
 * during a claim fold into the group's follow-up claim, and a pop coming back folds into it too,
 * rather than claiming anew on its arrival. `maxClaim` = batch keeps each claim to a batch, as the
 * other carriers' claims are.
 */
const GROUPED_POPS = 2

/** `tcp`, `lane`: the consumer's grouped pops, each popping back to back; runs until the process ends. */
const groupedPops = (
  params: RoleParams,
  claim: (limit: number) => Promise<ReadonlyArray<Stamped>>,
  giveBack: (rows: ReadonlyArray<Stamped>) => Promise<void>,
  record: (rows: ReadonlyArray<Stamped>) => void
) =>
  Effect.scoped(
    Effect.gen(function* () {
      const waker = yield* LocalWaker.LocalWaker
      const pops = yield* waker.grouped<Stamped, never>({
        claim: ({ limit }) => Effect.promise(() => claim(limit)),
        release: (_key, rows) => Effect.promise(() => giveBack(rows)),
        // A group with pops waiting re-claims after this long without a wake: a lost hint shows as latency.
        repoll: Duration.millis(params.fallbackMs),
        maxClaim: params.batch,
        followUpInterval: Duration.millis(params.followUpMs)
      })
      const popBackToBack = Effect.forever(
        Effect.flatMap(pops.pop(TARGET, { batch: params.batch, maxWait: LONG_WAIT_MS }), (result) =>
          Effect.sync(() => record(result.rows))
        )
      )
      yield* Effect.all(
        Array.from({ length: GROUPED_POPS }, () => popBackToBack),
        { concurrency: "unbounded", discard: true }
      )
    })
  )

/** How a claim loop waits after a claim that found nothing; `clear` as a claim starts. */
interface IdleWait {
  readonly clear: () => void
  readonly wait: () => Promise<void>
}

/**
 * `notify`: a `LISTEN` connection of the consumer's own. The wait resolves on a notification (at once
 * if one came since the last claim started: that claim may have missed its row), else after
 * `fallbackMs`.
 */
const listenFor = async (params: RoleParams): Promise<IdleWait> => {
  const listener = await pgClient(params.url)
  let notified = false
  let resume: (() => void) | undefined
  listener.on("notification", () => {
    notified = true
    const r = resume
    resume = undefined
    r?.()
  })
  await listener.query(`LISTEN ${NOTIFY_CHANNEL}`)
  const wait = (): Promise<void> =>
    notified
      ? Promise.resolve()
      : new Promise<void>((resolve) => {
          const timer = setTimeout(() => {
            resume = undefined
            resolve()
          }, params.fallbackMs)
          resume = () => {
            clearTimeout(timer)
            resolve()
          }
        })
  return {
    clear: () => {
      notified = false
    },
    wait
  }
}
