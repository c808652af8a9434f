/**
 * One wake against many waiting pops, in the library alone (no PostgreSQL, no HTTP; the child role
 * `grouped-wake` of the `consumers` section). Pops wait on one queue of a `LocalWaker`, either as grouped
 * pops (`waker.grouped`, over an in-memory claim that takes rows from an array) or parked with
 * `awaitWake`; one row is added and one wake given through the waker's synchronous entry point (the
 * mesh's receive path), and the round is timed from the wake until the pops it frees have resumed:
 *
 * - grouped: one claim runs, hands its one row to the first pop in line, and that pop resumes; the
 *   others stay parked (the pop that left is replaced before the next round, untimed);
 * - ungrouped: every parked pop resumes (each would then run a claim of its own in a broker).
 *
 * Each with `parked` pops waiting and with one. Wall time (`process.hrtime`) and this process's CPU
 * (`process.cpuUsage`, every thread) per round; medians over the rounds, after warm-up rounds.
 */
import { Effect, Exit, ManagedRuntime, Option, Scope } from "effect"
import * as Frame from "../src/Frame.js"
import * as LocalWaker from "../src/LocalWaker.js"
import * as Waker from "../src/Waker.js"
import { median, percentile, round } from "./stats.js"

export interface GroupedWakePlan {
  /** Pops waiting in the large case (the small case has one). */
  readonly parked: number
  /** Rounds of the grouped wake, each case; and of the ungrouped one (each re-parks every pop). */
  readonly rounds: number
  readonly ungroupedRounds: number
}

/** One case's rounds: wall and CPU time of a wake, µs. */
export interface WakeCost {
  readonly parked: number
  readonly rounds: number
  /** Pops resumed by one wake. */
  readonly resumed: number
  readonly wallUs: { readonly p50: number; readonly p90: number }
  readonly cpuUs: { readonly p50: number; readonly p90: number }
}

export interface GroupedWakeResult {
  readonly grouped: { readonly one: WakeCost; readonly many: WakeCost }
  readonly ungrouped: { readonly one: WakeCost; readonly many: WakeCost }
}

const TENANT = "00000000-0000-0000-0000-000000000001"
const QUEUE = "orders"
const item = Frame.queueItem({ queue: QUEUE, partition: "p1", tenant: TENANT })
const target = { queue: QUEUE, tenant: TENANT }
const HOUR = "1 hour"

const turn = () => new Promise<void>((resolve) => setImmediate(resolve))
const cpuNs = () => {
  const usage = process.cpuUsage()
  return (usage.user + usage.system) * 1000
}

const costOf = (
  parked: number,
  resumed: number,
  samples: ReadonlyArray<{ wallNs: number; cpuNs: number }>
): WakeCost => {
  const us = (values: ReadonlyArray<number>) => ({
    p50: round(median(values) / 1000, 1),
    p90: round(percentile(values, 90) / 1000, 1)
  })
  return {
    parked,
    rounds: samples.length,
    resumed,
    wallUs: us(samples.map((s) => s.wallNs)),
    cpuUs: us(samples.map((s) => s.cpuNs))
  }
}

/** `parked` grouped pops on one queue; per round one row, one wake, one pop resumed and replaced. */
const groupedCase = async (parked: number, rounds: number, warmup: number): Promise<WakeCost> => {
  const runtime = ManagedRuntime.make(LocalWaker.layer())
  const scope = Effect.runSync(Scope.make())
  try {
    const waker = await runtime.runPromise(Effect.service(LocalWaker.LocalWaker))
    const wake = Waker.syncWakeOf(waker)
    if (wake === undefined) throw new Error("the shipped waker has no synchronous wake")
    const rows: Array<number> = []
    const pops = await runtime.runPromise(
      Scope.provide(
        waker.grouped<number, never>({
          claim: ({ limit }) => Effect.sync(() => rows.splice(0, limit)),
          release: (_key, back) => Effect.sync(() => void rows.unshift(...back)),
          repoll: HOUR
        }),
        scope
      )
    )
    let resumedWith: ((rows: number) => void) | undefined
    const park = () =>
      runtime.runFork(
        Effect.tap(pops.pop(target, { batch: 1, maxWait: HOUR }), (result) =>
          Effect.sync(() => resumedWith?.(result.rows.length))
        )
      )
    const parkedNow = () => runtime.runSync(waker.parked)
    const untilParked = async () => {
      while (parkedNow() < parked) await turn()
    }
    for (let i = 0; i < parked; i++) park()
    await untilParked()
    const samples: Array<{ wallNs: number; cpuNs: number }> = []
    for (let i = 0; i < warmup + rounds; i++) {
      rows.push(i)
      const resumed = new Promise<number>((resolve) => {
        resumedWith = resolve
      })
      const cpu0 = cpuNs()
      const t0 = process.hrtime.bigint()
      wake(item)
      const got = await resumed
      const wallNs = Number(process.hrtime.bigint() - t0)
      const cpu = cpuNs() - cpu0
      resumedWith = undefined
      if (got !== 1) throw new Error(`grouped wake: a pop resumed with ${got} rows, not 1`)
      if (i >= warmup) samples.push({ wallNs, cpuNs: cpu })
      park()
      await untilParked()
    }
    return costOf(parked, 1, samples)
  } finally {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    await runtime.dispose()
  }
}

/** `parked` pops in `awaitWake` on one queue; per round one wake resumes them all, then they park again. */
const ungroupedCase = async (parked: number, rounds: number, warmup: number): Promise<WakeCost> => {
  const runtime = ManagedRuntime.make(LocalWaker.layer())
  try {
    const waker = await runtime.runPromise(Effect.service(LocalWaker.LocalWaker))
    const wake = Waker.syncWakeOf(waker)
    if (wake === undefined) throw new Error("the shipped waker has no synchronous wake")
    const parkedNow = () => runtime.runSync(waker.parked)
    const samples: Array<{ wallNs: number; cpuNs: number }> = []
    for (let i = 0; i < warmup + rounds; i++) {
      let left = parked
      let allResumed = () => {}
      const resumed = new Promise<void>((resolve) => {
        allResumed = resolve
      })
      const done = Effect.sync(() => {
        if (--left === 0) allResumed()
      })
      for (let p = 0; p < parked; p++)
        runtime.runFork(Effect.andThen(waker.awaitWake(target, { maxWait: HOUR }), done))
      while (parkedNow() < parked) await turn()
      const cpu0 = cpuNs()
      const t0 = process.hrtime.bigint()
      wake(item)
      await resumed
      const wallNs = Number(process.hrtime.bigint() - t0)
      const cpu = cpuNs() - cpu0
      if (i >= warmup) samples.push({ wallNs, cpuNs: cpu })
      runtime.runSync(waker.takePartitionHints({ queue: QUEUE, tenant: Option.some(TENANT) }))
    }
    return costOf(parked, parked, samples)
  } finally {
    await runtime.dispose()
  }
}

/** Both ways, each with one pop waiting and with `plan.parked`; the small cases first, as warm-up too. */
export const runGroupedWake = async (plan: GroupedWakePlan): Promise<GroupedWakeResult> => {
  const warmup = Math.max(20, Math.floor(plan.rounds / 5))
  // Every path compiled before anything is timed: the first case run would otherwise pay for it.
  await groupedCase(1, 50, 0)
  await groupedCase(1_000, 50, 0)
  await ungroupedCase(1, 50, 0)
  await ungroupedCase(1_000, 3, 0)
  const groupedOne = await groupedCase(1, plan.rounds, warmup)
  const groupedMany = await groupedCase(plan.parked, plan.rounds, warmup)
  const ungroupedOne = await ungroupedCase(1, plan.rounds, warmup)
  const ungroupedMany = await ungroupedCase(plan.parked, plan.ungroupedRounds, 3)
  return {
    grouped: { one: groupedOne, many: groupedMany },
    ungrouped: { one: ungroupedOne, many: ungroupedMany }
  }
}
