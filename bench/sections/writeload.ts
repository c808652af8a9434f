/**
 * `writeload`: what waking pops costs PostgreSQL under write load, per carrier (the TCP mesh, the lane,
 * `pg_notify` in the push's transaction, none), and the one-at-a-time hand-off at no load, the TCP mesh
 * against bare LISTEN/NOTIFY (bench/writeload.ts, bench/handoff.ts), on an embedded PostgreSQL at its
 * defaults (fsync on).
 */
import type { Driver } from "../driver.js"
import { type Database, startDatabase } from "../embeddedDatabase.js"
import * as Handoff from "../handoff.js"
import { knobs, refuse } from "../knobs.js"
import { check, fmt, info, type Row, row, type Target } from "../report.js"
import { section } from "../section.js"
import { median, ratio, round } from "../stats.js"
import { timerWakeCpuUs } from "../wakeCost.js"
import * as WriteLoad from "../writeload.js"
import { killChildren, setExecArgv } from "../writeloadProcs.js"

interface WriteLoadSectionPlan {
  readonly writeload: { readonly load: WriteLoad.LoadPlan; readonly handoff: Handoff.HandoffPlan }
}

const full: WriteLoadSectionPlan = {
  writeload: {
    load: {
      ks: [1, 8, 32, 64],
      carriers: WriteLoad.CARRIERS,
      cellMs: 8000,
      perProducer: 16,
      batch: 100,
      pollMs: 100,
      fallbackMs: 1000,
      // A consumer's claims come at most every 5 ms while commits stream: from 5 to 20 ms the commit
      // rate over no carrier's stayed level while each ms went on push-to-pop (bench/README.md).
      followUpMs: 5,
      hintsOnly: false,
      drainMs: 5000,
      // Well short of what the machine commits back to back (10,000 to 15,000 a second with no carrier).
      paced: { k: 32, rate: 4000, repeats: 3 }
    },
    handoff: { warmup: 100, rounds: 1000, block: 100 }
  }
}

const quick: WriteLoadSectionPlan = {
  writeload: {
    load: { ...full.writeload.load, cellMs: 2000, drainMs: 3000, paced: { k: 32, rate: 4000, repeats: 2 } },
    handoff: { warmup: 50, rounds: 300, block: 50 }
  }
}

/**
 * Knobs for a short development run, on top of `--quick` or the full plan: `--writeload-ks=32,64` (the
 * Ks to run), `--writeload-cell-ms=3000` (each cell's window), `--writeload-carriers=tcp,none` (a subset
 * of the carriers), `--writeload-follow-up-ms=5` (the grouped pops' follow-up interval) and
 * `--writeload-hints-only` (the tcp and lane consumers receive the hints but claim as no carrier's do),
 * `--writeload-paced=32:4000:2` (the paced cells' K, commits a second and repeats; `off`: none),
 * `--writeload-poll-ms=5` (no carrier's re-poll interval: what promptness costs without hints). The driver
 * leaves flags it does not know to the sections; results.json's `meta.plan` shows the plan as run.
 */

const withKnobs = (plan: WriteLoadSectionPlan): WriteLoadSectionPlan => {
  const ks = knobs.counts("writeload-ks", 1)
  const cellMs = knobs.number("writeload-cell-ms", { min: 1, unit: "milliseconds" })
  const followUpMs = knobs.number("writeload-follow-up-ms", { min: 0, unit: "milliseconds" })
  const pollMs = knobs.number("writeload-poll-ms", { min: 1, unit: "milliseconds" })
  const hintsOnly = knobs.flag("writeload-hints-only")
  const carriers = knobs.list("writeload-carriers", WriteLoad.CARRIERS)
  const pacedFlag = knobs.value("writeload-paced")
  const [pacedK = Number.NaN, pacedRate = Number.NaN, pacedRepeats = Number.NaN, ...rest] = (pacedFlag ?? "")
    .split(":")
    .map(Number)
  const pacedValid =
    rest.length === 0 &&
    Number.isSafeInteger(pacedK) &&
    pacedK >= 1 &&
    pacedRate > 0 &&
    Number.isSafeInteger(pacedRepeats) &&
    pacedRepeats >= 1
  if (pacedFlag !== undefined && pacedFlag !== "off" && !pacedValid) {
    refuse(`--writeload-paced=${pacedFlag}: K:rate:repeats (e.g. 32:4000:3), or off`)
  }
  const paced =
    pacedFlag === "off"
      ? { paced: undefined }
      : pacedValid
        ? { paced: { k: pacedK, rate: pacedRate, repeats: pacedRepeats } }
        : {}
  return {
    writeload: {
      ...plan.writeload,
      load: {
        ...plan.writeload.load,
        ...(ks === undefined ? {} : { ks }),
        ...(cellMs === undefined ? {} : { cellMs }),
        ...(followUpMs === undefined ? {} : { followUpMs }),
        ...(pollMs === undefined ? {} : { pollMs }),
        ...(hintsOnly ? { hintsOnly } : {}),
        ...paced,
        // In the bench's own order, whatever the flag's.
        ...(carriers === undefined
          ? {}
          : { carriers: WriteLoad.CARRIERS.filter((c) => carriers.includes(c)) })
      }
    }
  }
}

let database: Database | undefined

const run = async (driver: Driver, plan: WriteLoadSectionPlan) => {
  setExecArgv(driver.profile)
  driver.progress("writeload: starting an embedded PostgreSQL (defaults: fsync on, synchronous_commit on)")
  const db = await startDatabase({ settings: { max_connections: "200" } })
  if (typeof db === "string") return { measured: false as const, reason: db }
  database = db
  try {
    const settings = await db.query(
      "SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'wal_sync_method', 'max_connections')"
    )
    const { handoff: handoffPlan, load: loadPlan } = plan.writeload
    driver.progress(`writeload: hand-off, bare LISTEN/NOTIFY and the TCP mesh, ${handoffPlan.rounds} rounds`)
    const handoff = await Handoff.runHandoff(db, handoffPlan)
    driver.progress("writeload: what one timer wake of an idle node process costs this machine")
    const machineWakeUs = { every1ms: await timerWakeCpuUs(1, 2), every5ms: await timerWakeCpuUs(5, 2) }
    const cells = await WriteLoad.runLoad(db, loadPlan, driver.progress)
    return {
      machineWakeUs,
      measured: true as const,
      postgres: db.version,
      settings: Object.fromEntries(settings.map((s) => [String(s.name), String(s.setting)])),
      handoff,
      cells,
      comparisons: comparisons(cells),
      paced: pacedSummary(cells)
    }
  } finally {
    await db.stop()
    database = undefined
  }
}

type Result = Awaited<ReturnType<typeof run>>
type Measured = Extract<Result, { readonly measured: true }>

/**
 * Per K: the mesh's commits/s over NOTIFY's and over no carrier's, its p99 over NOTIFY's. Push-to-pop is
 * from the push's statement sent to the claim, what a producer and a consumer see between them: a
 * notifying commit waits its turn for the notify lock before its acknowledgement, so measured from the
 * acknowledgement NOTIFY's latency would leave out the very wait it causes (commit-to-claim, beside it,
 * is information).
 */
/** A cell's CPU per commit, every process of it: PostgreSQL's, the producers' and the consumers'. */
const cpuPerCommit = (cell: WriteLoad.Cell | undefined): number | undefined =>
  cell === undefined
    ? undefined
    : cell.pgCpuUsPerCommit + cell.producerCpuUsPerCommit + cell.consumerCpuUsPerCommit

const comparisons = (all: ReadonlyArray<WriteLoad.Cell>) => {
  const cells = all.filter((c) => c.pacedRate === null)
  const ks = [...new Set(cells.map((c) => c.k))]
  return ks.map((k) => {
    const of = (carrier: WriteLoad.Carrier) => cells.find((c) => c.k === k && c.carrier === carrier)
    const [tcp, lane, notify, none] = [of("tcp"), of("lane"), of("notify"), of("none")]
    return {
      k,
      tcpOverNotifyCommits: ratio(tcp?.commitsPerSec, notify?.commitsPerSec),
      tcpOverNoneCommits: ratio(tcp?.commitsPerSec, none?.commitsPerSec),
      laneOverNoneCommits: ratio(lane?.commitsPerSec, none?.commitsPerSec),
      laneOverNotifyCommits: ratio(lane?.commitsPerSec, notify?.commitsPerSec),
      tcpOverNotifyP99: ratio(tcp?.sentToPopUs.p99, notify?.sentToPopUs.p99),
      tcpOverNotifyCommitToClaimP99: ratio(tcp?.pushToPopUs.p99, notify?.pushToPopUs.p99),
      tcpOverNoneCpuPerCommit: ratio(cpuPerCommit(tcp), cpuPerCommit(none)),
      tcpMachineBusy: tcp?.machineBusyPercent
    }
  })
}

/** One carrier's paced cells: the median over the repeats of each figure. */
const pacedOf = (cells: ReadonlyArray<WriteLoad.Cell>) => {
  if (cells.length === 0) return undefined
  const mid = (f: (c: WriteLoad.Cell) => number) => round(median(cells.map(f)), 1)
  return {
    cells: cells.length,
    commitsPerSec: mid((c) => c.commitsPerSec),
    sentToPopP99Us: mid((c) => c.sentToPopUs.p99),
    pgUs: mid((c) => c.pgCpuUsPerCommit),
    producersUs: mid((c) => c.producerCpuUsPerCommit),
    consumersUs: mid((c) => c.consumerCpuUsPerCommit),
    machineBusyPercent: mid((c) => c.machineBusyPercent)
  }
}

/**
 * The paced cells: each part's CPU per commit with the TCP mesh and with no carrier at one rate the
 * machine is not saturated at, and their difference, the mesh's own CPU per commit. Beside it, the
 * ratio of commits a saturated machine would keep if that CPU came out of the commits and nothing else
 * changed: no carrier's CPU per commit, saturated at the same K, over itself plus the mesh's.
 */
const pacedSummary = (all: ReadonlyArray<WriteLoad.Cell>) => {
  const paced = all.filter((c) => c.pacedRate !== null)
  const first = paced[0]
  if (first === undefined) return null
  const tcp = pacedOf(paced.filter((c) => c.carrier === "tcp"))
  const none = pacedOf(paced.filter((c) => c.carrier === "none"))
  const mesh =
    tcp === undefined || none === undefined
      ? undefined
      : {
          pgUs: round(tcp.pgUs - none.pgUs, 1),
          producersUs: round(tcp.producersUs - none.producersUs, 1),
          consumersUs: round(tcp.consumersUs - none.consumersUs, 1),
          totalUs: round(
            tcp.pgUs + tcp.producersUs + tcp.consumersUs - none.pgUs - none.producersUs - none.consumersUs,
            1
          )
        }
  const saturatedNone = cpuPerCommit(
    all.find((c) => c.pacedRate === null && c.carrier === "none" && c.k === first.k)
  )
  return {
    k: first.k,
    rate: first.pacedRate,
    tcp,
    none,
    mesh,
    ratioIfOnlyCpu:
      mesh === undefined || saturatedNone === undefined
        ? null
        : round(saturatedNone / (saturatedNone + Math.max(0, mesh.totalUs)), 3)
  }
}

const pacedRows = (summary: ReturnType<typeof pacedSummary>): ReadonlyArray<Row> => {
  if (summary === null) return []
  const rows: Array<Row> = []
  for (const [name, p] of [
    ["TCP mesh", summary.tcp],
    ["no carrier", summary.none]
  ] as const) {
    if (p === undefined) continue
    rows.push(
      row(
        `write load paced, K=${summary.k} at ${summary.rate} commits/s, ${name}: CPU per commit (µs), PostgreSQL + producers + consumers; commits/s; machine busy (%); statement-sent-to-claim p99 (ms)`,
        `${fmt(p.pgUs)} + ${fmt(p.producersUs)} + ${fmt(p.consumersUs)} = ${fmt(p.pgUs + p.producersUs + p.consumersUs)}; ${fmt(p.commitsPerSec, 0)}; ${fmt(p.machineBusyPercent, 0)}; ${fmt(p.sentToPopP99Us / 1000, 2)}`
      )
    )
  }
  if (summary.mesh !== undefined) {
    const m = summary.mesh
    rows.push(
      row(
        `write load paced, K=${summary.k}: the TCP mesh's own CPU per commit (µs), PostgreSQL + producers + consumers`,
        `${fmt(m.pgUs)} + ${fmt(m.producersUs)} + ${fmt(m.consumersUs)} = ${fmt(m.totalUs)}`
      )
    )
  }
  return rows
}

const cellRows = (all: ReadonlyArray<WriteLoad.Cell>): ReadonlyArray<Row> =>
  all
    .filter((c) => c.pacedRate === null)
    .flatMap((c) => [
      row(
        `write load K=${c.k}, ${c.carrier}: commits/s; commit-to-claim p50 / p99 (ms); lost/dup; PG CPU per commit (µs)`,
        `${fmt(c.commitsPerSec, 0)}; ${fmt(c.pushToPopUs.p50 / 1000, 2)} / ${fmt(c.pushToPopUs.p99 / 1000, 2)}; ${c.lost + c.unknown}/${c.duplicated}; ${fmt(c.pgCpuUsPerCommit)}`
      ),
      row(
        `  K=${c.k}, ${c.carrier}: statement-sent-to-claim p50 / p99 (ms); claims (empty); producer CPU max (%)${c.laneNotifications === null ? "" : "; lane notifications (hints)"}`,
        `${fmt(c.sentToPopUs.p50 / 1000, 2)} / ${fmt(c.sentToPopUs.p99 / 1000, 2)}; ${c.claims} (${c.emptyClaims}); ${fmt(c.producerCpuPercentMax, 0)}${c.laneNotifications === null ? "" : `; ${c.laneNotifications} (${c.laneFrames})`}`
      ),
      row(
        `  K=${c.k}, ${c.carrier}: CPU per commit (µs), PostgreSQL + producers + consumers; machine busy (%)`,
        `${fmt(c.pgCpuUsPerCommit)} + ${fmt(c.producerCpuUsPerCommit)} + ${fmt(c.consumerCpuUsPerCommit)} = ${fmt(c.pgCpuUsPerCommit + c.producerCpuUsPerCommit + c.consumerCpuUsPerCommit)}; ${fmt(c.machineBusyPercent, 0)}`
      )
    ])

const handoffRows = (h: Measured["handoff"]): ReadonlyArray<Row> => {
  const rows: Array<Row> = []
  for (const [name, way] of [
    ["bare LISTEN/NOTIFY", h.bare],
    ["TCP mesh", h.mesh]
  ] as const) {
    rows.push(
      row(
        `hand-off p50 / p99, ${name} (ms; lost wakes)`,
        `${fmt(way.handoffUs.p50 / 1000, 2)} / ${fmt(way.handoffUs.p99 / 1000, 2)}; ${way.lostWakes}`,
        "-",
        name === "TCP mesh" ? fmt(h.meshOverBareP50, 2) : "-"
      )
    )
    for (const stage of way.stages) {
      rows.push(
        row(`  ${name}: ${stage.stage} (µs p50 / mean)`, `${fmt(stage.us.p50)} / ${fmt(stage.us.mean)}`)
      )
    }
  }
  return rows
}

const targets = (result: Result | undefined): ReadonlyArray<Target> => {
  const measured = result?.measured === true ? result : undefined
  const at = (k: number) => measured?.comparisons.find((c) => c.k === k)
  const cells = measured?.cells ?? []
  const out: Array<Target> = []
  for (const k of [32, 64]) {
    const c = at(k)
    out.push(
      check(
        `write load K=${k}: TCP mesh commits/s / NOTIFY's`,
        c?.tcpOverNotifyCommits,
        ">= 3",
        (v) => v >= 3
      ),
      check(
        `write load K=${k}: TCP mesh commits/s / no carrier's`,
        c?.tcpOverNoneCommits,
        ">= 0.9",
        (v) => v >= 0.9
      ),
      check(
        `write load K=${k}: TCP mesh push-to-pop p99 (statement sent to claim) / NOTIFY's`,
        c?.tcpOverNotifyP99,
        "<= 0.5",
        (v) => v <= 0.5
      )
    )
  }
  out.push(
    check(
      "hand-off p50, TCP mesh / bare LISTEN/NOTIFY",
      measured?.handoff.meshOverBareP50,
      "<= 1.1",
      (v) => v <= 1.1
    ),
    check(
      "write load: messages lost or delivered twice, every cell",
      measured === undefined ? undefined : cells.reduce((n, c) => n + c.lost + c.duplicated + c.unknown, 0),
      "= 0",
      (v) => v === 0
    )
  )
  if (measured !== undefined) {
    for (const k of [32, 64]) {
      const c = at(k)
      out.push(
        info(`write load K=${k}: TCP mesh commit-to-claim p99 / NOTIFY's`, c?.tcpOverNotifyCommitToClaimP99),
        info(`write load K=${k}: lane commits/s / no carrier's`, c?.laneOverNoneCommits),
        info(`write load K=${k}: lane commits/s / NOTIFY's`, c?.laneOverNotifyCommits),
        info(
          `write load K=${k}: CPU per commit, every process, TCP mesh / no carrier's`,
          c?.tcpOverNoneCpuPerCommit
        ),
        info(`write load K=${k}: machine CPU busy with the TCP mesh (%)`, c?.tcpMachineBusy)
      )
    }
    const paced = measured.paced
    if (paced !== null) {
      out.push(
        info(
          `write load paced, K=${paced.k} at ${paced.rate} commits/s: the TCP mesh's own CPU per commit (µs)`,
          paced.mesh?.totalUs
        ),
        info(
          `write load K=${paced.k}: commits/s over no carrier's that the paced CPU per commit allows (estimate)`,
          paced.ratioIfOnlyCpu ?? undefined
        )
      )
    }
    out.push(
      info(
        "machine: CPU of one wake of an idle node process, timer every 1 ms (µs)",
        measured.machineWakeUs.every1ms ?? undefined
      ),
      info(
        "machine: CPU of one wake of an idle node process, timer every 5 ms (µs)",
        measured.machineWakeUs.every5ms ?? undefined
      )
    )
  }
  return out
}

const note = (result: Result, plan: WriteLoadSectionPlan["writeload"]): string => {
  if (!result.measured) return `Write load skipped: ${result.reason}`
  const { load, handoff } = plan
  const settings = Object.entries(result.settings)
    .map(([k, v]) => `${k}=${v}`)
    .join(", ")
  return `Write load: bench/writeload.ts on an embedded PostgreSQL ${result.postgres} (${settings}), a database per carrier. Per cell, K producer connections (${load.perProducer} per producer process at most) each commit one INSERT per transaction back to back for ${load.cellMs} ms; two consumer processes claim up to ${load.batch} at a time (DELETE ... FOR UPDATE SKIP LOCKED ... RETURNING). Carriers: tcp = unsafeMessageAvailable after each commit over the TCP mesh, each consumer's pops waiting in grouped pops (one claim in flight; the hints that land during it fold into one follow-up begun no sooner than ${load.followUpMs} ms after it began); lane = the same on lane-only nodes; notify = pg_notify in the INSERT's statement, consumers LISTEN; none = an idle consumer re-polls every ${load.pollMs} ms. A waiting consumer re-claims after ${load.fallbackMs} ms without a wake. Push-to-pop = the claim returned (consumer) minus the commit acknowledged (producer), CLOCK_MONOTONIC, over every message (it can be slightly negative: a consumer may claim a row before its producer has read the acknowledgement). Lost / delivered twice: every message's (connection, number) checked after a drain of up to ${load.drainMs} ms. PostgreSQL's CPU = every server process's schedstat over the window, over the commits (the consumers' claims included; the producers' backends are read before they close); the producers' and consumers' CPU likewise, and the machine's busy share from /proc/stat: where every process shares the machine's cores and it is saturated, a carrier's own CPU per commit comes out of PostgreSQL's commit rate. Hand-off: bench/handoff.ts, ${handoff.rounds} one-at-a-time rounds per way after ${handoff.warmup} warm-up, the two ways in alternating blocks of ${handoff.block}; push begun (producer) to claim returned (worker), stages stamped where they happen.`
}

export const writeload = section({
  names: ["writeload"],
  plan: { full: withKnobs(full), quick: withKnobs(quick) },
  run,
  results: (result) => ({ writeload: result }),
  rows: (result) =>
    result.measured
      ? [...handoffRows(result.handoff), ...cellRows(result.cells), ...pacedRows(result.paced)]
      : [row("write load", "skipped (see notes)")],
  targets,
  notes: (result, plan) => (result === undefined ? [] : [note(result, plan.writeload)]),
  cleanup: () => {
    killChildren()
    void database?.stop()
    database = undefined
  }
})
