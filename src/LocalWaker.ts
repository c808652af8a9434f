/**
 * The shipped waker: a registry of parked pops, the `Waker` a broker uses unless it brings its own.
 * A pop parks on its queue (and tenant) until a wake names it (`"woken"`), its own backoff elapses
 * (`"timeout"`, the fallback when a hint is lost), or the waker shuts down (`"shutdown"`: its scope
 * closed, or the broker drains). Partition hints are kept for the pops to read.
 *
 * Tenants: an **absent** tenant comes from a peer that predates tenant scoping and fans out to every
 * tenant parked on that queue name (spec "The frame set"); a pop parked without a tenant parks for the
 * default tenant, upstream Queen's `00000000-0000-0000-0000-000000000001` unless `defaultTenant` says
 * otherwise. Everything it keeps is bounded (see {@link LocalWakerOptions}); one reaper fiber times pops
 * out over a deadline heap, so a hundred thousand parked pops cost no timer each.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as Local from "./internal/waker/localWaker.js"
import { Waker } from "./Waker.js"

/**
 * The shipped waker, with what a broker's pops need: park, read hints, drain.
 *
 * @since 0.1.0
 * @category models
 */
export type LocalWakerShape = Local.LocalWakerShape

/**
 * The shipped waker's tenancy, bounds and timeout resolution.
 *
 * @since 0.1.0
 * @category models
 */
export type LocalWakerOptions = Local.LocalWakerOptions

/**
 * What a parked pop is waiting on.
 *
 * @since 0.1.0
 * @category models
 */
export type WaitTarget = Local.WaitTarget

/**
 * How a parked pop ended: `"woken"`, `"timeout"` or `"shutdown"`.
 *
 * @since 0.1.0
 * @category models
 */
export type WakeOutcome = Local.WakeOutcome

/**
 * The shipped waker, as the host's pops reach it.
 *
 * @since 0.1.0
 * @category tags
 */
export const LocalWaker = Local.LocalWakerTag

/**
 * @since 0.1.0
 * @category tags
 */
export type LocalWaker = Local.LocalWakerTag

/**
 * The shipped waker and its reaper fiber, in the current scope; closing the scope hands every parked
 * pop back with `"shutdown"`.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, strictEqual } from "node:assert"
 * import { Effect, Fiber, Option } from "effect"
 * import { Frame, LocalWaker, MeshTest } from "queen-mesh"
 *
 * const program = Effect.gen(function* () {
 *   const waker = yield* LocalWaker.make()
 *   const target = { queue: "orders", tenant: Option.none() }
 *   // A pop parks on its queue until a wake names it, or `maxWait` elapses.
 *   const pop = yield* Effect.forkChild(waker.awaitWake(target, { maxWait: "30 seconds" }))
 *   yield* MeshTest.settleUntil(Effect.map(waker.parked, (parked) => parked === 1))
 *   yield* waker.wake(Frame.queueItem({ queue: "orders", partition: "p1" }))
 *   strictEqual(yield* Fiber.join(pop), "woken")
 *   deepStrictEqual(yield* waker.takePartitionHints(target), ["p1"])
 * })
 *
 * Effect.runPromise(Effect.scoped(program))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: (options?: LocalWakerOptions) => Effect.Effect<LocalWakerShape, never, Scope.Scope> =
  Local.make

/**
 * The shipped waker, provided both as `LocalWaker` (for the host's pops) and as the `Waker` the mesh
 * calls.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: LocalWakerOptions = {}): Layer.Layer<LocalWaker | Waker> =>
  Layer.effectContext(
    Effect.map(make(options), (local) => Context.make(LocalWaker, local).pipe(Context.add(Waker, local)))
  )
