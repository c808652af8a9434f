/**
 * Waking parked pops (spec "The frame set", tags 1 and 2): `Waker` is what the mesh calls for every
 * received wake, and for every `messageAvailable` of the local broker. A host provides its own, or the
 * shipped `LocalWaker` (a real parked-pop registry).
 *
 * The contract is one entry point, `wake`. A waker that needs no effects is best built with
 * {@link sync}: the mesh then calls its function straight from the receive path, saving an effect per
 * frame. To decorate a waker (count, log, forward), use {@link tap}, or replace `wake`: the mesh calls
 * whatever `wake` is, so a wrapper is never bypassed.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { QueueItem } from "./Frame.js"
import * as EntryPoints from "./internal/synchronousEntryPoints.js"

/**
 * What the mesh calls for every received wake.
 *
 * @since 0.1.0
 * @category models
 */
export interface WakerShape {
  /** Wake the pops parked on `item`'s queue (and tenant), and note the partition hint. */
  readonly wake: (item: QueueItem) => Effect.Effect<void>
}

/**
 * The function the mesh calls for a wake without an effect, if `waker` has one: the twin `sync`
 * recorded for its `wake`.
 *
 * @since 0.1.0
 * @category models
 */
export const syncWakeOf = (waker: WakerShape): ((item: QueueItem) => void) | undefined =>
  EntryPoints.twinOf(waker.wake)

/**
 * The host's waker, as the mesh sees it.
 *
 * @since 0.1.0
 * @category tags
 */
export class Waker extends Context.Service<Waker, WakerShape>()("queen-mesh/Waker") {}

/**
 * A waker from one synchronous function. The mesh calls `wake` straight from the receive path (no
 * effect per frame); `wake` as an effect runs the same function.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert"
 * import { Effect } from "effect"
 * import { Frame, Waker } from "queen-mesh"
 *
 * const woken: Array<string> = []
 * const waker = Waker.sync((item) => woken.push(item.queue))
 * Effect.runSync(waker.wake(Frame.queueItem({ queue: "orders", partition: "p1" })))
 * deepStrictEqual(woken, ["orders"])
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const sync = (wake: (item: QueueItem) => void): WakerShape => ({
  wake: EntryPoints.register((item: QueueItem) => Effect.sync(() => wake(item)), wake)
})

/**
 * `waker`, with `f` run for every wake first: the way to decorate the shipped waker (count, log, or
 * forward wakes to the broker's own parked requests). A synchronous waker stays synchronous.
 *
 * @example
 * ```ts
 * import { strictEqual } from "node:assert"
 * import { Effect } from "effect"
 * import { Frame, LocalWaker, Waker } from "queen-mesh"
 *
 * const program = Effect.gen(function* () {
 *   const local = yield* LocalWaker.make()
 *   let seen = 0
 *   const counted = Waker.tap(local, () => {
 *     seen++
 *   })
 *   yield* counted.wake(Frame.queueItem({ queue: "orders", partition: "p1" }))
 *   strictEqual(seen, 1)
 * })
 *
 * Effect.runPromise(Effect.scoped(program))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const tap = (waker: WakerShape, f: (item: QueueItem) => void): WakerShape => {
  const next = syncWakeOf(waker)
  if (next !== undefined) {
    return sync((item) => {
      f(item)
      next(item)
    })
  }
  return {
    wake: (item) =>
      Effect.andThen(
        Effect.sync(() => f(item)),
        waker.wake(item)
      )
  }
}

/**
 * A waker that does nothing, for hosts that only want the mesh's other effects.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerNoop: Layer.Layer<Waker> = Layer.succeed(
  Waker,
  sync(() => {})
)
