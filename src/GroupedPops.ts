/**
 * Grouped pops: the pops waiting on one queue (and tenant) of a replica are served by at most one claim
 * in flight, and the rows it returns are handed to them in the order they came, each up to its batch.
 * A wake then costs PostgreSQL one claim however many consumers wait, instead of one claim per waiting
 * pop (the thundering herd of waking every parked pop, each to run its own claim).
 *
 * The host supplies the claim and the release as Effects; the groups ride on the shipped `LocalWaker`
 * (spec "The frame set", tags 1 and 2), so the mesh's wakes, partition hints, pop maintenance
 * (`releaseAll`), shutdown and the degraded-health re-poll reach them as they reach parked pops, and the
 * wire is unchanged. What holds:
 *
 * - one claim in flight per group; a wake, or a pop that comes, while it runs folds into one follow-up
 *   claim, run only while pops still wait: as soon as the claim is done, or (`followUpInterval`) no
 *   sooner than that long after it began, so a stream of commits costs a bounded rate of claims;
 * - every pop claims once on its arrival (folded like a wake), so it sees what was committed before it
 *   came whatever hints were lost; the group re-polls on its own every `repoll` while pops wait;
 * - no row is stranded or given twice: rows claimed for pops that have gone (interrupted, timed out)
 *   go to the next waiting pop or back to the host's `release` at once;
 * - `offer` lets the pushing replica's own pops claim first, and says when they left nothing for the
 *   peers (so the push need not be announced).
 *
 * @since 0.1.0
 */
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Internal from "./internal/waker/popGroups.js"
import { LocalWaker } from "./LocalWaker.js"

/**
 * The grouped pops of one host's claim: `pop`, `offer`, and their counts.
 *
 * @since 0.1.0
 * @category models
 */
export interface GroupedPops<A, E> extends Internal.GroupedPops<A, E> {}

/**
 * The host's claim and release, the re-poll interval, the largest claim, and the least interval from
 * a claim's start to the follow-up owed to what landed while it ran (default 0: at once).
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<A, E> extends Internal.GroupedPopsOptions<A, E> {}

/**
 * What the host's claim is asked for: the queue, the tenant, the most rows to claim (the waiting pops'
 * batches added up) and the partitions hinted since the group's last claim.
 *
 * @since 0.1.0
 * @category models
 */
export interface ClaimRequest extends Internal.ClaimRequest {}

/**
 * A claim's rows and whether it left rows to claim, for a claim that can tell (say, with an `EXISTS`
 * that locks nothing: a row locked only to be looked at is skipped by a concurrent claim elsewhere, and
 * then leased by neither). A claim that returns only its rows is taken to have left some when it filled
 * its limit.
 *
 * @since 0.1.0
 * @category models
 */
export interface ClaimResult<A> extends Internal.ClaimResult<A> {}

/**
 * A group's queue and tenant, as `release` is told them.
 *
 * @since 0.1.0
 * @category models
 */
export interface GroupKey extends Internal.GroupKey {}

/**
 * What a grouped pop waits on: a queue and its tenant, as `LocalWaker`'s `WaitTarget`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Target extends Internal.GroupTarget {}

/**
 * What a grouped pop answers: its rows (all from one claim, at most its batch) and how its wait ended.
 *
 * @since 0.1.0
 * @category models
 */
export interface PopResult<A> extends Internal.GroupedPopResult<A> {}

/**
 * How a grouped pop's wait ended: `"none"` (the first claim after it came found rows), `"woken"` (a
 * later claim found them), `"timeout"` (`maxWait` elapsed, or the group's own re-poll found rows),
 * `"shutdown"` (the waker shut down or released its pops).
 *
 * @since 0.1.0
 * @category models
 */
export type Wake = Internal.GroupedWake

/**
 * A group set's running totals: claims run, rows handed to pops, rows given back to `release`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Counts extends Internal.GroupCounts {}

/**
 * Grouped pops over the `LocalWaker` in context; their claims and timers run in the current scope.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, strictEqual } from "node:assert"
 * import { Effect, Fiber } from "effect"
 * import { Frame, GroupedPops, LocalWaker, MeshTest } from "queen-mesh"
 *
 * // A queue of three rows standing in for PostgreSQL; each claim takes up to `limit` of them.
 * const rows = ["m1", "m2", "m3"]
 * let claims = 0
 * const program = Effect.gen(function* () {
 *   const pops = yield* GroupedPops.make({
 *     claim: ({ limit }) =>
 *       Effect.sync(() => {
 *         claims++
 *         return rows.splice(0, limit)
 *       }),
 *     release: (_key, back) => Effect.sync(() => rows.unshift(...back))
 *   })
 *   const target = { queue: "orders" }
 *   // A hundred consumers wait on one queue: one claim serves them, not a hundred.
 *   const waiting = yield* Effect.forEach(Array.from({ length: 100 }), () =>
 *     Effect.forkChild(pops.pop(target, { batch: 1, maxWait: "30 seconds" }))
 *   )
 *   yield* MeshTest.settleUntil(Effect.map(pops.waiting, (n) => n === 97))
 *   rows.push("m4")
 *   const before = claims
 *   const waker = yield* LocalWaker.LocalWaker
 *   yield* waker.wake(Frame.queueItem({ queue: "orders", partition: "p1" }))
 *   yield* MeshTest.settleUntil(Effect.map(pops.waiting, (n) => n === 96))
 *   strictEqual(claims - before, 1)
 *   deepStrictEqual((yield* Fiber.join(waiting[0]!)).rows, ["m1"])
 *   deepStrictEqual((yield* Fiber.join(waiting[3]!)).rows, ["m4"])
 * })
 *
 * Effect.runPromise(Effect.scoped(Effect.provide(program, LocalWaker.layer())))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <A, E>(
  options: Options<A, E>
): Effect.Effect<GroupedPops<A, E>, never, Scope.Scope | LocalWaker> =>
  Effect.flatMap(LocalWaker, (waker) => waker.grouped(options))

/**
 * The default re-poll of a group with pops waiting, the default largest claim, and the default interval
 * from a claim's start to its follow-up (zero: at once).
 *
 * @since 0.1.0
 * @category constants
 */
export const defaults: {
  readonly repoll: Duration.Duration
  readonly maxClaim: number
  readonly followUpInterval: Duration.Duration
} = Internal.DEFAULTS
