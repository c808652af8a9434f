/**
 * `floor`: the reference broker against the bare parts it is made of (bench/brokerFloor.ts): start,
 * memory, each request and its stages, the hand-off across replicas and the CPU of a push, every
 * figure beside its floor from the same run.
 */
import * as Floor from "../brokerFloor.js"
import type { Driver } from "../driver.js"
import { check, fmt, info, row } from "../report.js"
import { section } from "../section.js"

interface FloorSectionPlan {
  readonly floor: Floor.FloorPlan
}

type Result = Floor.FloorSection | string

const measured = (result: Result | undefined): Floor.FloorSection | undefined =>
  typeof result === "object" ? result : undefined

export const floor = section<FloorSectionPlan, Result>({
  names: ["floor"],
  plan: { full: { floor: Floor.fullPlan }, quick: { floor: Floor.quickPlan } },
  run: (driver: Driver, plan) => Floor.runFloor(plan.floor, driver.progress),
  results: (result) => ({ floor: typeof result === "string" ? { measured: false, reason: result } : result }),
  rows: (result) => {
    if (typeof result === "string") return [row("broker floor", `not measured: ${result}`)]
    const r = result.requestsUs
    const us = (value: number) => fmt(value, 0)
    const m = result.rss.breakdown
    return [
      row(
        "broker replica start, spawn to ready, unbundled: median (each), ms; CPU then, ms",
        `${fmt(result.start.medianMs, 0)} (${result.start.ms.join(", ")}); ${fmt(result.start.medianCpuMs, 0)}`
      ),
      row(
        "broker replica RSS, 3 clustered: 5 s after / at rest, median, MiB",
        `${fmt(result.rss.medianIdleMiB)} / ${fmt(result.rss.medianRestMiB)}`
      ),
      row(
        "broker replica at rest: RSS anon / file; heap used / total; code + bytecode; script source; external (MiB); pool connections",
        `${fmt(m.rssAnon)} / ${fmt(m.rssFile)}; ${fmt(m.heapUsed)} / ${fmt(m.heapTotal)}; ${fmt(m.codeAndBytecode)}; ${fmt(m.scriptSource)}; ${fmt(m.external)}; ${result.rss.poolConnections}`
      ),
      row(
        "broker replica's parts, each loaded alone after the ones before: heap / anon RSS (MiB)",
        result.rss.parts.map((p) => `${p.part} ${fmt(p.heapMiB)} / ${fmt(p.anonMiB)}`).join("; ")
      ),
      row(
        "broker push p50, µs (floor: bare node:http POST + bare INSERT; prepared)",
        us(r.push.p50),
        `${us(r.httpPost.p50)} + ${us(r.insert.p50)}; ${us(r.insertPrepared.p50)}`,
        fmt(result.ratios.push, 2)
      ),
      row(
        "broker ready pop p50, µs (floor: bare node:http GET + bare claim; prepared)",
        us(r.pop.p50),
        `${us(r.httpGet.p50)} + ${us(r.claim.p50)}; ${us(r.claimPrepared.p50)}`,
        fmt(result.ratios.pop, 2)
      ),
      row(
        "broker /readyz p50, µs (floor: bare node:http GET)",
        us(r.readyz.p50),
        us(r.httpGet.p50),
        fmt(result.ratios.readyz, 2)
      ),
      row(
        "broker push-to-pop across replicas p50 (p99), µs (floor: bare LISTEN/NOTIFY hand-off; the mesh's library hand-off)",
        `${us(result.cross.p50Us)} (${us(result.cross.p99Us)})`,
        `${us(result.cross.bareHandoffP50Us)}; ${us(result.cross.meshHandoffP50Us)}`,
        fmt(result.ratios.cross, 2)
      ),
      row(
        "broker CPU per push on the pushing replica, µs (pushes/s)",
        `${fmt(result.cpu.usPerPush)} (${fmt(result.cpu.pushesPerSec, 0)})`
      ),
      row(
        "broker push stages p50, µs",
        Object.entries(result.stagesUs.push)
          .map(([name, value]) => `${name} ${us(value)}`)
          .join("; "),
        `JSON.parse ${fmt(result.decodeUs.jsonParse, 2)} + Schema ${fmt(result.decodeUs.schema, 2)}; INSERT ${us(r.insert.p50)}`
      ),
      row(
        "broker push-to-pop across replicas, stages p50 (tracer on), µs",
        Object.entries(result.stagesUs.cross)
          .map(([name, value]) => `${name} ${us(value)}`)
          .join("; "),
        `bare hand-off: ${Object.entries(result.stagesUs.bareHandoff)
          .map(([name, value]) => `${name} ${us(value)}`)
          .join("; ")}; the mesh's library: ${Object.entries(result.stagesUs.meshHandoff)
          .map(([name, value]) => `${name} ${us(value)}`)
          .join("; ")}`
      ),
      row(
        "broker ready pop stages p50, µs",
        Object.entries(result.stagesUs.pop)
          .map(([name, value]) => `${name} ${us(value)}`)
          .join("; "),
        `claim ${us(r.claim.p50)}`
      )
    ]
  },
  targets: (result) => {
    const r = measured(result)
    return [
      check("broker replica start, unbundled, median (ms)", r?.start.medianMs, "<= 600", (v) => v <= 600),
      check(
        "broker replica RSS at rest, 3 clustered, median (MiB)",
        r?.rss.medianRestMiB,
        "<= 90",
        (v) => v <= 90
      ),
      info("broker replica RSS 5 s after clustering, median (MiB)", r?.rss.medianIdleMiB),
      check("broker push p50 / (bare HTTP + bare INSERT)", r?.ratios.push, "<= 2", (v) => v <= 2),
      check("broker ready pop p50 / (bare HTTP + bare claim)", r?.ratios.pop, "<= 2", (v) => v <= 2),
      check("broker /readyz p50 / bare HTTP", r?.ratios.readyz, "<= 2", (v) => v <= 2),
      check("broker push-to-pop across replicas p50 / bare hand-off", r?.ratios.cross, "<= 2", (v) => v <= 2),
      check("broker CPU per push on the pushing replica (µs)", r?.cpu.usPerPush, "<= 250", (v) => v <= 250),
      check(
        "broker floor: lost + delivered twice",
        r === undefined ? undefined : r.cross.lost + r.cross.duplicated,
        "= 0",
        (v) => v === 0
      )
    ]
  },
  notes: () => [
    "Broker floor: bench/brokerFloor.ts. One embedded PostgreSQL (fsync off); a TCP cluster of three replicas started one after another (unbundled, as `npm run broker` runs them); RSS 5 s after they cluster and at rest (20 s), the last one's memory broken down; requests on the first replica one at a time on one kept-alive connection, in blocks taking turns with a bare node:http server (a process of its own, same body) and `pg` running the broker's own INSERT and claim; push-to-pop from A to pops parked on B and C against bench/handoff.ts's bare LISTEN/NOTIFY hand-off; CPU per push with clients pushing back to back on A (no pop waiting); stages from a replica of its own with BROKER_TRACE_STAGES=true."
  ]
})
