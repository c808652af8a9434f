/**
 * Waking parked pops (spec "The frame set", tags 1 and 2). `Waker` is what the mesh calls for every
 * received wake; a host injects its own, or uses the shipped `LocalWaker`, a real parked-pop registry.
 *
 * The tenant rule: an **absent** tenant comes from a peer that predates tenant scoping and fans out to
 * every tenant with pops parked on that queue name; attributing it to the default tenant would drop the
 * wake for everyone else. With tenancy off no other tenant can exist, so an absent tenant names the
 * default tenant and the lookup is one hash probe.
 *
 * @since 0.1.0
 */
import { Context, Duration, Effect, Layer, Option, type Scope } from "effect"
import type { QueueItem } from "./Frame.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface WakerShape {
  /** Wake the pops parked on `item`'s queue (and tenant), and note the partition hint. */
  readonly wake: (item: QueueItem) => Effect.Effect<void>
  /**
   * Optional synchronous twin of `wake`, for wakers that need no effects. When present the mesh calls
   * it straight from the receive path, which saves an effect per frame.
   */
  readonly unsafeWake?: (item: QueueItem) => void
}

/**
 * The host's waker, as the mesh sees it.
 *
 * @since 0.1.0
 * @category tags
 */
export class Waker extends Context.Tag("queen-mesh/Waker")<Waker, WakerShape>() {}

/**
 * What a parked pop is waiting on.
 *
 * @since 0.1.0
 * @category models
 */
export interface WaitTarget {
  readonly queue: string
  readonly tenant: Option.Option<string>
}

/**
 * How a parked pop ended: woken by a hint, or its own backoff elapsed (the fallback when a hint is lost).
 *
 * @since 0.1.0
 * @category models
 */
export type WakeOutcome = "woken" | "timeout"

/**
 * @since 0.1.0
 * @category models
 */
export interface LocalWakerShape extends WakerShape {
  /** Parks the calling fiber until a wake for `target` arrives or `maxWait` elapses. */
  readonly awaitWake: (
    target: WaitTarget,
    options: { readonly maxWait: Duration.DurationInput }
  ) => Effect.Effect<WakeOutcome>
  /** How many pops are parked now, in all. */
  readonly parked: Effect.Effect<number>
  /** Takes (and clears) the partitions hinted for `target` since the last call. */
  readonly takePartitionHints: (target: WaitTarget) => Effect.Effect<ReadonlyArray<string>>
}

/**
 * The shipped in-memory waker: a registry of parked pops.
 *
 * @since 0.1.0
 * @category tags
 */
export class LocalWaker extends Context.Tag("queen-mesh/LocalWaker")<LocalWaker, LocalWakerShape>() {}

/**
 * @since 0.1.0
 * @category models
 */
export interface LocalWakerOptions {
  /** Whether tenants other than the default exist. Default true. */
  readonly tenancy?: boolean
  /** The default tenant's name. Default `"default"`. */
  readonly defaultTenant?: string
  /** Distinct `(tenant, queue)` keys of partition hints kept before new ones are ignored. Default 10,000. */
  readonly maxHintKeys?: number
  /** Partitions kept per key. Default 1,000. */
  readonly maxHintsPerKey?: number
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const makeLocal = (
  options: LocalWakerOptions = {}
): Effect.Effect<LocalWakerShape, never, Scope.Scope> =>
  Effect.gen(function* () {
    const tenancy = options.tenancy ?? true
    const defaultTenant = options.defaultTenant ?? "default"
    const maxHintKeys = options.maxHintKeys ?? 10_000
    const maxHintsPerKey = options.maxHintsPerKey ?? 1_000
    const clock = yield* Effect.clock
    // queue -> tenant -> parked pops
    const parked = new Map<string, Map<string, Set<Parked>>>()
    const all = new Set<Parked>()
    const hints = new Map<string, Set<string>>()

    const tenantKey = (tenant: Option.Option<string>) =>
      Option.isSome(tenant) ? tenant.value : defaultTenant
    const hintKey = (queue: string, tenant: string) => `${tenant}\u0000${queue}`

    const unpark = (pop: Parked): boolean => {
      if (!all.delete(pop)) return false
      const byTenant = parked.get(pop.queue)
      const waiters = byTenant?.get(pop.tenant)
      waiters?.delete(pop)
      if (waiters?.size === 0) byTenant!.delete(pop.tenant)
      if (byTenant?.size === 0) parked.delete(pop.queue)
      return true
    }

    const release = (waiters: Set<Parked> | undefined) => {
      if (waiters === undefined) return
      for (const pop of [...waiters]) {
        if (unpark(pop)) pop.resume("woken")
      }
    }

    const recordHint = (queue: string, tenant: string, partition: string) => {
      const key = hintKey(queue, tenant)
      let set = hints.get(key)
      if (set === undefined) {
        if (hints.size >= maxHintKeys) return
        set = new Set()
        hints.set(key, set)
      }
      if (set.size < maxHintsPerKey) set.add(partition)
    }

    const unsafeWake = (item: QueueItem): void => {
      const byTenant = parked.get(item.queue)
      if (Option.isSome(item.tenant) || !tenancy) {
        const tenant = tenantKey(item.tenant)
        recordHint(item.queue, tenant, item.partition)
        release(byTenant?.get(tenant))
        return
      }
      // Absent tenant with tenancy on: every tenant with pops parked on this queue name.
      if (byTenant === undefined) return
      for (const [tenant, waiters] of byTenant) {
        recordHint(item.queue, tenant, item.partition)
        release(waiters)
      }
    }

    // One fiber times out every parked pop, sleeping (on the `Clock`, so `TestClock` drives it) until
    // the earliest deadline: a pop costs no timer fiber of its own, and a wake resumes it directly.
    let reaperWakesAt = Number.POSITIVE_INFINITY
    const earlier = yield* Effect.makeLatch(false)
    const reaper = Effect.gen(function* () {
      const now = clock.unsafeCurrentTimeMillis()
      let next = Number.POSITIVE_INFINITY
      for (const pop of [...all]) {
        if (pop.deadline <= now) {
          if (unpark(pop)) pop.resume("timeout")
        } else if (pop.deadline < next) {
          next = pop.deadline
        }
      }
      reaperWakesAt = next
      earlier.unsafeClose()
      if (next === Number.POSITIVE_INFINITY) return yield* earlier.await
      yield* Effect.raceFirst(Effect.sleep(Duration.millis(next - now)), earlier.await)
    }).pipe(Effect.forever)
    yield* Effect.forkScoped(reaper)

    const awaitWake: LocalWakerShape["awaitWake"] = (target, { maxWait }) =>
      Effect.async<WakeOutcome>((resume) => {
        const pop: Parked = {
          queue: target.queue,
          tenant: tenantKey(target.tenant),
          deadline: clock.unsafeCurrentTimeMillis() + Duration.toMillis(Duration.decode(maxWait)),
          resume: (outcome) => resume(Effect.succeed(outcome))
        }
        let byTenant = parked.get(pop.queue)
        if (byTenant === undefined) {
          byTenant = new Map()
          parked.set(pop.queue, byTenant)
        }
        let waiters = byTenant.get(pop.tenant)
        if (waiters === undefined) {
          waiters = new Set()
          byTenant.set(pop.tenant, waiters)
        }
        waiters.add(pop)
        all.add(pop)
        if (pop.deadline < reaperWakesAt) earlier.unsafeOpen()
        return Effect.sync(() => {
          unpark(pop)
        })
      })

    return {
      wake: (item) => Effect.sync(() => unsafeWake(item)),
      unsafeWake,
      awaitWake,
      parked: Effect.sync(() => all.size),
      takePartitionHints: (target) =>
        Effect.sync(() => {
          const key = hintKey(target.queue, tenantKey(target.tenant))
          const set = hints.get(key)
          hints.delete(key)
          return set === undefined ? [] : [...set]
        })
    }
  })

interface Parked {
  readonly queue: string
  readonly tenant: string
  readonly deadline: number
  readonly resume: (outcome: WakeOutcome) => void
}

/**
 * The shipped parked-pop registry, provided both as `LocalWaker` (for the host's pops) and as the
 * `Waker` the mesh calls.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerLocal = (options: LocalWakerOptions = {}): Layer.Layer<LocalWaker | Waker> =>
  Layer.scopedContext(
    Effect.map(makeLocal(options), (local) => Context.make(LocalWaker, local).pipe(Context.add(Waker, local)))
  )

/**
 * A waker that does nothing, for hosts that only want the mesh's other effects.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerNoop: Layer.Layer<Waker> = Layer.succeed(Waker, { wake: () => Effect.void })
