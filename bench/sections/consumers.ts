/**
 * `consumers`: what one message costs PostgreSQL as the consumers waiting for it grow (1 to 1,000 per
 * replica) on the reference broker with grouped pops, per carrier and way of pushing (bench/consumers.ts),
 * a saturated run, one wake against 10,000 waiting pops in the library alone (bench/groupedWake.ts), and
 * the chart of claims and PostgreSQL CPU per message against the figures before grouped pops
 * (bench/consumersChart.ts).
 */
import { Schema } from "effect"
import * as Consumers from "../consumers.js"
import { writeChart } from "../consumersChart.js"
import type { Driver } from "../driver.js"
import type { GroupedWakeResult } from "../groupedWake.js"
import { knobs } from "../knobs.js"
import { check, fmt, info, type Row, row, type Target } from "../report.js"
import { section } from "../section.js"
import { ratio } from "../stats.js"

interface ConsumersSectionPlan {
  readonly consumers: Consumers.ConsumersPlan
}

/**
 * Knobs for a short development run, on top of `--quick` or the full plan: `--consumers-carriers=tcp,lane`,
 * `--consumers-counts=1,100`, `--consumers-pushing=one`, `--consumers-saturated=off`,
 * `--consumers-rounds=N` (bench/knobs.ts refuses a bad value). results.json's `meta.plan` shows the
 * plan as run.
 */
const withKnobs = (plan: Consumers.ConsumersPlan): Consumers.ConsumersPlan => {
  const carriers = knobs.list("consumers-carriers", Consumers.CARRIER_NAMES)
  const counts = knobs.counts("consumers-counts", 1)
  const pushing = knobs.list("consumers-pushing", ["one", "spread"] as const)
  const saturated = knobs.list("consumers-saturated", ["on", "off"] as const)
  const rounds = knobs.number("consumers-rounds", { min: 1, whole: true, unit: "rounds" })
  return {
    ...plan,
    ...(carriers === undefined ? {} : { carriers }),
    ...(counts === undefined ? {} : { consumers: counts }),
    ...(pushing === undefined ? {} : { pushing }),
    ...(saturated?.includes("off") ? { saturated: { ...plan.saturated, durationMs: 0 } } : {}),
    ...(rounds === undefined ? {} : { rounds })
  }
}

const Cost = Schema.Struct({
  parked: Schema.Number,
  rounds: Schema.Number,
  resumed: Schema.Number,
  wallUs: Schema.Struct({ p50: Schema.Number, p90: Schema.Number }),
  cpuUs: Schema.Struct({ p50: Schema.Number, p90: Schema.Number })
})
const GroupedWake = Schema.Struct({
  grouped: Schema.Struct({ one: Cost, many: Cost }),
  ungrouped: Schema.Struct({ one: Cost, many: Cost })
})

interface Result {
  readonly broker: Consumers.ConsumersRun
  readonly library: GroupedWakeResult
  readonly chart: string | null
  readonly targets: ReturnType<typeof figures>
}

/** The figures the targets read: the TCP mesh, pushes on A. */
const figures = (run: Consumers.ConsumersRun, library: GroupedWakeResult) => {
  const cells = run.measured ? run.cells : []
  const at = (p: number) => Consumers.cellOf(cells, "tcp", "one", p)
  const [p1, p100, p1000] = [at(1), at(100), at(1_000)]
  const of = (carrier: Consumers.CarrierName, p: number) => Consumers.cellOf(cells, carrier, "one", p)
  const backlog = run.measured ? run.saturated?.backlog : undefined
  const serial = run.measured ? run.saturated?.serial : undefined
  return {
    claimsP1: p1?.claimsPerMessage,
    claimsP100OverP1: ratio(p100?.claimsPerMessage, p1?.claimsPerMessage) ?? undefined,
    claimsP1000OverP1: ratio(p1000?.claimsPerMessage, p1?.claimsPerMessage) ?? undefined,
    postgresCpuP100OverP1: ratio(p100?.postgresCpuMsPerMessage, p1?.postgresCpuMsPerMessage) ?? undefined,
    p99P100OverP1: ratio(p100?.latencyMs.p99, p1?.latencyMs.p99) ?? undefined,
    saturatedOfCapacity: backlog?.ofCapacity,
    serialOfCapacity: serial?.ofCapacity,
    lostAndTwice: run.measured ? run.lost + run.duplicated : undefined,
    claimsP100NowOverBefore:
      ratio(p100?.claimsPerMessage, Consumers.before.tcpOne.find((b) => b.consumers === 100)?.claims) ??
      undefined,
    laneClaimsP100OverP1:
      ratio(of("lane", 100)?.claimsPerMessage, of("lane", 1)?.claimsPerMessage) ?? undefined,
    repollClaimsP100OverP1:
      ratio(of("repoll", 100)?.claimsPerMessage, of("repoll", 1)?.claimsPerMessage) ?? undefined,
    groupedWakeCpu10kOver1: ratio(library.grouped.many.cpuUs.p50, library.grouped.one.cpuUs.p50) ?? undefined
  }
}

const run = async (driver: Driver, sectionPlan: ConsumersSectionPlan): Promise<Result> => {
  const plan = sectionPlan.consumers
  driver.progress(`consumers: one wake against ${plan.library.parked.toLocaleString("en-US")} waiting pops`)
  const child = driver.spawn("grouped-wake", plan.library, ["--expose-gc"])
  let library: GroupedWakeResult
  try {
    library = Schema.decodeUnknownSync(GroupedWake)((await child.take("result", 300_000)).data)
  } finally {
    await child.stop()
  }
  const broker = await Consumers.runConsumers(plan, driver.progress, driver.profile)
  const chart = broker.measured ? writeChart(broker.cells, plan.chart, new Date().toISOString()) : null
  return { broker, library, chart, targets: figures(broker, library) }
}

const CARRIER_LABEL: Record<Consumers.CarrierName, string> = {
  tcp: "TCP mesh",
  lane: "PostgreSQL lane",
  repoll: "re-poll 100 ms"
}

const cellRows = (cells: ReadonlyArray<Consumers.Cell>): ReadonlyArray<Row> =>
  cells.map((c) => {
    const was =
      c.carrier === "tcp" && c.pushing === "one"
        ? Consumers.before.tcpOne.find((b) => b.consumers === c.consumers)
        : undefined
    const spread =
      c.pushing === "spread"
        ? `; per consumer ${fmt(c.perConsumer.min, 0)} / ${fmt(c.perConsumer.median, 0)} / ${fmt(c.perConsumer.max, 0)}`
        : ""
    return row(
      `consumers ${CARRIER_LABEL[c.carrier]}, pushes on ${c.pushing === "one" ? "A" : "A, B, C"}, P = ${c.consumers.toLocaleString("en-US")}: claims / transactions / PostgreSQL CPU (ms) per message; p50 / p99 (ms)${c.pushing === "spread" ? "; messages per consumer min / median / max" : ""}; other work (cores)`,
      `${fmt(c.claimsPerMessage, 2)} / ${fmt(c.transactionsPerMessage, 2)} / ${fmt(c.postgresCpuMsPerMessage, 2)}; ${fmt(c.latencyMs.p50)} / ${fmt(c.latencyMs.p99)}${spread}; ${fmt(c.otherCores, 2)}`,
      was === undefined
        ? "-"
        : `${fmt(was.claims)} / - / ${fmt(was.postgresCpuMs, 1)}; ${fmt(was.p50Ms)} / ${fmt(was.p99Ms)}`,
      was === undefined ? "-" : fmt(ratio(c.claimsPerMessage, was.claims), 3)
    )
  })

const saturatedRows = (run: Consumers.ConsumersRun): ReadonlyArray<Row> => {
  if (!run.measured || run.saturated === null) return []
  const { backlog, rate, serial } = run.saturated
  const perReplica = (values: ReadonlyArray<number>, digits: number) =>
    values.map((v) => fmt(v, digits)).join(" / ")
  return [
    row(
      `consumers saturated, ${backlog.consumers} per replica at ${backlog.workMs} ms a message, each popping its next as it starts on one, ${backlog.asked} kept waiting on A: taken/s of capacity; busy A / B / C; a consumer's wait for a message p50 / p99 (ms)`,
      `${fmt(backlog.takenPerSec, 0)} of ${fmt(backlog.capacityPerSec, 0)} (${fmt(backlog.ofCapacity, 2)}); ${perReplica(backlog.busyByReplica, 2)}; ${fmt(backlog.waitedMs.p50)} / ${fmt(backlog.waitedMs.p99)}`
    ),
    row(
      `consumers saturated, cores busy: replicas A / B / C, PostgreSQL, driver; other work`,
      `${perReplica(backlog.cores.replicas, 2)}, ${fmt(backlog.cores.postgres, 2)}, ${fmt(backlog.cores.driver, 2)}; ${fmt(backlog.cores.others, 2)}`
    ),
    row(
      `consumers saturated, the same with each pop after the work (a pop's round trip per message): taken/s of capacity; busy A / B / C; pop round trip p50 / p99 (ms); cores replicas, PostgreSQL, driver; other work`,
      `${fmt(serial.takenPerSec, 0)} of ${fmt(serial.capacityPerSec, 0)} (${fmt(serial.ofCapacity, 2)}); ${perReplica(serial.busyByReplica, 2)}; ${fmt(serial.waitedMs.p50)} / ${fmt(serial.waitedMs.p99)}; ${perReplica(serial.cores.replicas, 2)}, ${fmt(serial.cores.postgres, 2)}, ${fmt(serial.cores.driver, 2)}; ${fmt(serial.cores.others, 2)}`
    ),
    row(
      `consumers, pushes on A at ${fmt(rate.asked, 0)}/s (${fmt(rate.asked / (rate.consumers * (1000 / rate.workMs)), 1)}x one replica's consumers' capacity): taken A / B / C; taken/s of pushed/s`,
      `${perReplica(rate.takenByReplica, 0)}; ${fmt(rate.takenPerSec, 0)} of ${fmt(rate.pushedPerSec, 0)}`
    )
  ]
}

const libraryRows = (library: GroupedWakeResult): ReadonlyArray<Row> => {
  const cost = (c: GroupedWakeResult["grouped"]["one"]) => `${fmt(c.wallUs.p50)} / ${fmt(c.cpuUs.p50)}`
  const { grouped, ungrouped } = library
  return [
    row(
      `grouped pops: one wake handing one row to one pop, ${grouped.many.parked.toLocaleString("en-US")} waiting vs 1: wall / CPU p50 (µs)`,
      cost(grouped.many),
      cost(grouped.one),
      fmt(ratio(grouped.many.cpuUs.p50, grouped.one.cpuUs.p50), 2)
    ),
    row(
      `awaitWake: one wake resuming every parked pop, ${ungrouped.many.parked.toLocaleString("en-US")} parked vs 1: wall / CPU p50 (µs)`,
      cost(ungrouped.many),
      cost(ungrouped.one),
      fmt(ratio(ungrouped.many.cpuUs.p50, ungrouped.one.cpuUs.p50), 1)
    )
  ]
}

const rows = (result: Result): ReadonlyArray<Row> => {
  const { broker } = result
  if (!broker.measured) return [row("consumers", `skipped: ${broker.reason}`), ...libraryRows(result.library)]
  return [
    ...cellRows(broker.cells),
    ...saturatedRows(broker),
    ...libraryRows(result.library),
    row("consumers messages lost / delivered twice", `${broker.lost} / ${broker.duplicated}`)
  ]
}

const targets = (result: Result | undefined): ReadonlyArray<Target> => {
  const t = result?.targets
  return [
    check(
      "consumers: claims per message at P = 1 (TCP mesh, pushes on A)",
      t?.claimsP1,
      "<= 2.5",
      (v) => v <= 2.5
    ),
    check("consumers: claims per message, P = 100 / P = 1", t?.claimsP100OverP1, "<= 1.25", (v) => v <= 1.25),
    check(
      "consumers: claims per message, P = 1,000 / P = 1",
      t?.claimsP1000OverP1,
      "<= 1.5",
      (v) => v <= 1.5
    ),
    check(
      "consumers: PostgreSQL CPU per message, P = 100 / P = 1",
      t?.postgresCpuP100OverP1,
      "<= 1.5",
      (v) => v <= 1.5
    ),
    check("consumers: push-to-pop p99, P = 100 / P = 1", t?.p99P100OverP1, "<= 2", (v) => v <= 2),
    check("consumers: saturated throughput / capacity", t?.saturatedOfCapacity, ">= 0.9", (v) => v >= 0.9),
    check("consumers: messages lost + delivered twice", t?.lostAndTwice, "= 0", (v) => v === 0),
    info("consumers: saturated throughput / capacity, each pop after the work", t?.serialOfCapacity),
    info("consumers: claims per message at P = 100, now / before grouped pops", t?.claimsP100NowOverBefore),
    info("consumers: claims per message P = 100 / P = 1, lane", t?.laneClaimsP100OverP1),
    info("consumers: claims per message P = 100 / P = 1, re-poll 100 ms", t?.repollClaimsP100OverP1),
    info("grouped pops: CPU of one wake, 10,000 waiting / 1", t?.groupedWakeCpu10kOver1)
  ]
}

const notes = (result: Result | undefined, plan: ConsumersSectionPlan): ReadonlyArray<string> => {
  const p = plan.consumers
  const s = p.saturated
  const lines = [
    `Consumers: bench/consumers.ts, the reference broker of examples/broker/ (dist/ of this commit), a cluster of three replica processes per carrier, all up at once over one embedded PostgreSQL (fsync off), each on a database of its own (${p.carriers.map((c) => CARRIER_LABEL[c]).join(", ")}; the lane's notifications on a database apart; lease sweep every 10 min). A cell: P consumers per replica (${p.consumers.join(", ")}), each long-polling one queue (pop batch=1&wait=${p.waitMs}, ack, pop again) on a keep-alive connection of its own; once all are parked, ${p.messages} messages pushed one at a time ${p.everyMs} ms apart on A, or round robin on A, B, C; the window ends when every message is received and acked and every consumer parked again. ${p.rounds} round(s) of every cell (P ascending, then descending), the carriers and ways of pushing taking turns at each P; a cell's figures are over its rounds (counts added up, latencies pooled). Other work = the machine's busy time (/proc/stat) less this section's processes' (every replica, PostgreSQL, the driver), in cores over the window: a round is tried again (at most ${p.attempts} tries, within ${p.budgetMs / 1000} s of cells) while it is above ${p.disturbedCores}, and the least disturbed try is kept (each cell's tries and load average in results.json); the saturated runs likewise. Per message over the window: claims (the replicas' broker_claims_total), PostgreSQL CPU (every server process's schedstat); transactions = pg_stat_database.xact_commit of the queues' database between quiet points (the pool's connections ended with pg_terminate_backend, which publishes their counts at once) less the settings reads that re-open the pool and the claims outside the window; push-to-pop from the push request sent to the pop answer carrying the message. A warm-up cell (${p.warmup.consumers} per replica, ${p.warmup.messages} messages) runs first on each cluster and is not reported.`,
    `Consumers saturated: TCP cluster, ${s.consumers} consumers per replica each spending ${s.workMs} ms per message before its ack (capacity ${3 * s.consumers * (1000 / s.workMs)} msg/s); pushes on A in one request every 10 ms, keeping ${s.backlog} messages waiting, or at ${s.overOneReplica}x one replica's consumers' capacity; each consumer pops its next message as it starts on one (its pop's round trip runs during the work), acks in the background; the backlog run again with consumers that pop only after their work (serial: a pop's round trip per message, waited = that round trip); a ${s.durationMs / 1000} s run, its first ${s.warmMs / 1000} s left out of the window; busy = messages taken x ${s.workMs} ms over the consumers' time. Grouped wake: bench/groupedWake.ts in a child process, no PostgreSQL: ${p.library.parked} fibers waiting in grouped pops on one queue (in-memory claim), one row and one wake through the waker's synchronous entry point, timed until the pop it went to resumed, ${p.library.rounds} rounds; the same with one pop; and awaitWake with ${p.library.parked} parked (one wake resumes them all, ${p.library.ungroupedRounds} rounds) and with one.`
  ]
  if (result?.chart !== null && result?.chart !== undefined) lines.push(`Consumers chart: ${result.chart}.`)
  return lines
}

export const consumers = section<ConsumersSectionPlan, Result>({
  names: ["consumers"],
  plan: {
    full: { consumers: withKnobs(Consumers.fullPlan) },
    quick: { consumers: withKnobs(Consumers.quickPlan) }
  },
  run,
  results: (result) => ({ consumers: result }),
  rows,
  targets,
  notes,
  cleanup: Consumers.killConsumersChildren
})
