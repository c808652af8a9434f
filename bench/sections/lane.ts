/**
 * `lane`: the PostgreSQL lane on an embedded PostgreSQL (bench/lane.ts, which is also its children's
 * entry): wake latency over the lane, the TCP mesh and a bare `pg_notify` round trip, hints per second
 * and the database's CPU per hint, and the wakes again under writing transactions.
 */
import type { Driver } from "../driver.js"
import * as Lane from "../lane.js"
import { check, fmt, info, type Row, row } from "../report.js"
import { section } from "../section.js"

interface LaneSectionPlan {
  readonly lane: Lane.LanePlan
}

type Measured = Extract<Lane.LaneResult, { readonly measured: true }>

const run = (driver: Driver, plan: LaneSectionPlan) =>
  Lane.runLane(plan.lane, driver.progress, (role) => driver.profile(`lane-${role}`))

const wakeRows = (w: Measured["wake"]): ReadonlyArray<Row> =>
  (
    [
      ["lane", w.lane],
      ["TCP mesh", w.tcp],
      ["bare pg_notify", w.bare],
      ["bare NOTIFY, lane's statement form", w.bareLean]
    ] as const
  ).map(([name, v]) =>
    row(
      `wake p50 / p99, ${name} (µs; lost)`,
      `${fmt(v.latencyUs.p50)} / ${fmt(v.latencyUs.p99)}; ${v.lost}`,
      "-",
      name === "lane" ? fmt(w.ratios.laneOverBareP50, 2) : "-"
    )
  )

/**
 * The stage table: the traced lane's wake stage by stage, then the bare round trip's, each stage's p50
 * and mean (the path's means add up to the wake's mean over the same wakes; p50s need not).
 */
const stageRows = (w: Measured["wake"]): ReadonlyArray<Row> => {
  const rows: Array<Row> = [
    row(
      "wake p50 / p99, lane with its stage tracer (µs; lost)",
      `${fmt(w.traced.latencyUs.p50)} / ${fmt(w.traced.latencyUs.p99)}; ${w.traced.lost}`,
      "-",
      fmt(w.ratios.tracedOverBareP50, 2)
    )
  ]
  for (const [name, series] of [
    ["lane", w.traced],
    ["bare", w.bare],
    ["bare lean", w.bareLean]
  ] as const) {
    const stages = series.stages
    if (stages === undefined) continue
    rows.push(
      row(
        `${name} stages over ${stages.wakes} wakes (µs p50 / mean; whole wake)`,
        `${fmt(stages.totalUs.p50)} / ${fmt(stages.totalUs.mean)}`
      )
    )
    for (const stage of stages.stages) {
      rows.push(row(`  ${name}: ${stage.stage}`, `${fmt(stage.us.p50)} / ${fmt(stage.us.mean)}`))
    }
  }
  return rows
}

const floodRows = (f: Measured["flood"]): ReadonlyArray<Row> => [
  row(
    "lane hints/s, coalesced (hints per notification)",
    `${fmt(f.hintsPerSec, 0)} (${fmt(f.hintsPerNotification)})`
  ),
  row(
    "lane: database CPU per hint, gross / net of idle (µs)",
    `${fmt(f.dbCpuUsPerHint, 3)} / ${fmt(f.dbCpuUsPerHintNetOfIdle, 3)}`
  ),
  row("lane: sender CPU per hint (µs); hints lost", `${fmt(f.senderCpuUsPerHint, 3)}; ${f.lost}`),
  row(
    "lane, one hint per notification: database / sender CPU per hint, net of idle (µs)",
    `${fmt(f.oneAtATime.dbCpuUsPerHintNetOfIdle)} / ${fmt(f.oneAtATime.senderCpuUsPerHintNetOfIdle)}`
  )
]

const loadedRows = (l: Measured["loaded"]): ReadonlyArray<Row> => [
  row(
    `wake p50 / p99 under ${l.clients} writers (${fmt(l.transactionsPerSec, 0)} tx/s), lane (µs)`,
    `${fmt(l.lane.latencyUs.p50)} / ${fmt(l.lane.latencyUs.p99)}`,
    "-",
    fmt(l.ratios.laneOverBareP50, 2)
  ),
  row(
    `wake p50 / p99 under ${l.clients} writers, bare pg_notify (µs)`,
    `${fmt(l.bare.latencyUs.p50)} / ${fmt(l.bare.latencyUs.p99)}`
  )
]

const targets = (lane: Lane.LaneResult | undefined) => {
  const measured = lane?.measured === true ? lane : undefined
  return [
    check(
      "lane wake p50 / bare pg_notify round trip p50",
      measured?.wake.ratios.laneOverBareP50,
      "<= 1.2",
      (v) => v <= 1.2
    ),
    check("wakes lost on the lane while connected", measured?.lostWhileConnected, "= 0", (v) => v === 0),
    ...(lane === undefined
      ? []
      : [
          info("lane wake p50 / TCP mesh wake p50", measured?.wake.ratios.laneOverTcpP50),
          info(
            "lane wake p50 / bare NOTIFY in the lane's statement form p50",
            measured?.wake.ratios.laneOverBareLeanP50
          ),
          info("lane wake p50 under write load / bare under load", measured?.loaded.ratios.laneOverBareP50)
        ])
  ]
}

const note = (lane: Lane.LaneResult, plan: Lane.LanePlan): string =>
  lane.measured
    ? `Lane: bench/lane.ts on an embedded PostgreSQL ${lane.postgres} (${lane.settings}). Each wake pair has a database of its own (PostgreSQL signals every listener of the notifying database, whatever its channel). Wake = A's push (mesh.unsafeMessageAvailable; for TCP the same call over the TCP mesh) to B's parked LocalWaker pop, separate processes, CLOCK_MONOTONIC stamps, variants in alternating blocks of ${plan.wake.block}, ${plan.wake.measured} measured after ${plan.wake.warmup} warm-up; bare = SELECT pg_notify($1, $2) of a ${"bench.".length + 230}-byte payload on A's client to B's LISTENing client, stamped in its notification handler; bare lean = the same by hand in the lane's own statement form (NOTIFY with a string constant in the simple protocol, synchronous_commit off), as information. Flood = ${plan.flood.hints.toLocaleString("en-US")} distinct hints pushed back to back, yielding every ${plan.flood.yieldEvery} and pausing while half the lane's send buffer is full; one at a time = ${plan.flood.trickle} hints 2 ms apart, each its own notification; database CPU = every PostgreSQL process's schedstat over the flood (net: minus the idle rate measured for 1 s before). Load = ${plan.load.clients} connections running BEGIN; INSERT; UPDATE; COMMIT back to back while ${plan.load.measured} lane and bare wakes are measured. A wake not applied within 5 s is lost. Stages: a fourth pair runs the lane with its internal stage tracer (src/internal/lane/trace.ts) on a channel of its own, each stage stamped on the path on CLOCK_MONOTONIC in A and B and subtracted per wake (the path's means add up to the wake's mean; its p50 is its own row, the untraced lane's is the target's); the bare pair stamps the statement handed to pg and its acknowledgement by hand.`
    : `Lane skipped: ${lane.reason}`

export const lane = section({
  names: ["lane"],
  plan: { full: { lane: Lane.fullPlan }, quick: { lane: Lane.quickPlan } },
  run,
  results: (result) => ({ lane: result }),
  rows: (result) =>
    result.measured
      ? [
          ...wakeRows(result.wake),
          ...stageRows(result.wake),
          ...floodRows(result.flood),
          ...loadedRows(result.loaded)
        ]
      : [row("PostgreSQL lane", "skipped (see notes)")],
  targets,
  notes: (result, plan) => (result === undefined ? [] : [note(result, plan.lane)]),
  cleanup: () => {
    Lane.killLaneChildren()
    Lane.stopLaneDatabase()
  }
})
