/**
 * Where a lane wake's time goes, stage by stage: stamps taken on the path by the lane's internal tracer
 * (src/internal/lane/trace.ts) in the traced pair of processes, and by hand in the bare `pg_notify`
 * pair, all on `CLOCK_MONOTONIC` (one clock for every process here), so a stamp on A can be subtracted
 * from one on B. A stage's time is the difference of two stamps of the same wake, never of two totals.
 */
import { Schema } from "effect"
import { install, type LaneStage } from "../src/internal/lane/trace.js"
import { nowNs } from "./ipc.js"
import { type Distribution, distribution } from "./stats.js"

/** The stages stamped, by the tracer or by hand (`handed`, `acked` on the bare pair). */
const STAGES = [
  "offered",
  "tick",
  "packed",
  "sealed",
  "handed",
  "acked",
  "echoed",
  "notified",
  "verified",
  "checked",
  "decoded",
  "dispatched"
] as const satisfies ReadonlyArray<LaneStage>

/** The receiving stages of one notification: they run in one call, `notified` first, `dispatched` last. */
const CHAIN = new Set<LaneStage>(["notified", "verified", "checked", "decoded"])

export const Stamps = Schema.Record(Schema.String, Schema.Array(Schema.Number))
export type Stamps = typeof Stamps.Type

/**
 * One process's stamps, per wake: `begin(i)` before wake `i` is pushed (A) or parked for (B). A sending
 * stage keeps the first stamp of its wake; a receiving chain is kept only when it ends in `dispatched`
 * (a heartbeat, a probe or a refused notification starts a chain that is never kept), and our own echo
 * keeps the time of its notification event.
 */
export class StageRecorder {
  private readonly stamps = new Map<LaneStage, Array<number>>()
  private current = -1
  private readonly chain = new Map<LaneStage, number>()

  constructor(readonly total: number) {
    for (const stage of STAGES) this.stamps.set(stage, new Array<number>(total).fill(0))
  }

  begin(i: number): void {
    this.current = i
  }

  /** Records `stage` now for the current wake (the first stamp of a stage wins). */
  record(stage: LaneStage, at: number = nowNs()): void {
    const i = this.current
    if (i < 0 || i >= this.total) return
    const list = this.stamps.get(stage)!
    if (list[i] === 0) list[i] = at
  }

  /** The tracer's `stamp`. */
  readonly stamp = (stage: LaneStage): void => {
    const at = nowNs()
    if (stage === "notified") {
      this.chain.clear()
      this.chain.set(stage, at)
    } else if (CHAIN.has(stage)) this.chain.set(stage, at)
    else if (stage === "dispatched") {
      for (const [s, t] of this.chain) this.record(s, t)
      this.record(stage, at)
      this.chain.clear()
    } else if (stage === "echoed") {
      this.record(stage, this.chain.get("notified") ?? at)
      this.chain.clear()
    } else this.record(stage, at)
  }

  /** Installs this recorder as the process's lane tracer. */
  install(): this {
    install({ stamp: this.stamp })
    return this
  }

  toJSON(): Stamps {
    return Object.fromEntries(this.stamps)
  }
}

// ---------------------------------------------------------------------------------------------
// the driver's side
// ---------------------------------------------------------------------------------------------

/** One stage of the breakdown: where it starts and ends, and on which side. */
interface Span {
  readonly name: string
  readonly from: StampRef
  readonly to: StampRef
}

/** A stamp of one wake: A's, B's, or the wake's own push (`sent`) and wake (`woken`) stamps. */
type StampRef = { readonly side: "a" | "b"; readonly stage: LaneStage } | "sent" | "woken"

const a = (stage: LaneStage): StampRef => ({ side: "a", stage })
const b = (stage: LaneStage): StampRef => ({ side: "b", stage })

/** The lane's path, in order: the spans add up to the wake (push on A to the pop woken on B). */
const LANE_PATH: ReadonlyArray<Span> = [
  { name: "A: wake called -> frame offered to the lane", from: "sent", to: a("offered") },
  { name: "A: offered -> sender runs (end of tick)", from: a("offered"), to: a("tick") },
  { name: "A: tick -> frames packed into a body", from: a("tick"), to: a("packed") },
  { name: "A: packed -> envelope sealed (seq, time, MAC)", from: a("packed"), to: a("sealed") },
  { name: "A: sealed -> statement handed to pg", from: a("sealed"), to: a("handed") },
  { name: "PostgreSQL: handed on A -> notification event on B", from: a("handed"), to: b("notified") },
  { name: "B: notification -> MAC verified", from: b("notified"), to: b("verified") },
  { name: "B: verified -> body parsed, replay and epoch checked", from: b("verified"), to: b("checked") },
  { name: "B: checked -> frame decoded", from: b("checked"), to: b("decoded") },
  { name: "B: decoded -> dispatched (waker woken)", from: b("decoded"), to: b("dispatched") },
  { name: "B: dispatched -> parked pop's fiber resumed", from: b("dispatched"), to: "woken" }
]

/** Off the path, beside it. */
const LANE_ASIDE: ReadonlyArray<Span> = [
  { name: "A (aside): handed -> NOTIFY acknowledged", from: a("handed"), to: a("acked") },
  { name: "A (aside): handed -> own echo's event on A", from: a("handed"), to: a("echoed") }
]

const BARE_PATH: ReadonlyArray<Span> = [
  { name: "A: wake called -> statement handed to pg", from: "sent", to: a("handed") },
  { name: "PostgreSQL: handed on A -> notification event on B", from: a("handed"), to: "woken" }
]

const BARE_ASIDE: ReadonlyArray<Span> = [
  { name: "A (aside): handed -> NOTIFY acknowledged", from: a("handed"), to: a("acked") }
]

export interface StageRow {
  readonly stage: string
  /** Whether the stage is on the wake's path (the path's stages add up to the wake). */
  readonly onPath: boolean
  readonly us: Distribution
}

export interface Breakdown {
  /** The wakes every stamp of the path was found for. */
  readonly wakes: number
  readonly stages: ReadonlyArray<StageRow>
  /** The wake itself over the same wakes (the sum of the path's means is its mean). */
  readonly totalUs: Distribution
}

interface WakeStamps {
  readonly sent: ReadonlyArray<number>
  readonly woken: ReadonlyArray<number>
  readonly a: Stamps
  readonly b: Stamps
}

const breakdown = (
  path: ReadonlyArray<Span>,
  aside: ReadonlyArray<Span>,
  stamps: WakeStamps,
  kept: ReadonlyArray<number>
): Breakdown => {
  const at = (ref: StampRef, i: number): number => {
    if (ref === "sent") return stamps.sent[i] ?? 0
    if (ref === "woken") return stamps.woken[i] ?? 0
    return (ref.side === "a" ? stamps.a : stamps.b)[ref.stage]?.[i] ?? 0
  }
  const complete = kept.filter((i) => path.every((span) => at(span.from, i) > 0 && at(span.to, i) > 0))
  const spanRow = (span: Span, onPath: boolean): StageRow => {
    const values: Array<number> = []
    for (const i of complete) {
      const from = at(span.from, i)
      const to = at(span.to, i)
      if (from > 0 && to > 0) values.push((to - from) / 1000)
    }
    return { stage: span.name, onPath, us: distribution(values) }
  }
  return {
    wakes: complete.length,
    stages: [...path.map((s) => spanRow(s, true)), ...aside.map((s) => spanRow(s, false))],
    totalUs: distribution(complete.map((i) => (at("woken", i) - at("sent", i)) / 1000))
  }
}

export const laneBreakdown = (stamps: WakeStamps, kept: ReadonlyArray<number>): Breakdown =>
  breakdown(LANE_PATH, LANE_ASIDE, stamps, kept)

export const bareBreakdown = (stamps: WakeStamps, kept: ReadonlyArray<number>): Breakdown =>
  breakdown(BARE_PATH, BARE_ASIDE, stamps, kept)
