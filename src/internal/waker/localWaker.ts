/**
 * The shipped waker: a registry of parked pops (spec "The frame set", tags 1 and 2), the machinery
 * behind `LocalWaker`. It composes five units, each owning its state:
 *
 * - the tenant rule (`tenants.ts`): which tenant a wake or a pop names; an absent tenant on a wake fans
 *   out to every tenant parked on the queue;
 * - the parked-pop index (`parkedPops.ts`): queue -> tenant -> pops, and the deadline heap;
 * - the hint store (`hintStore.ts`): partition hints, bounded, the hints not kept counted;
 * - the deadline reaper (`deadlineReaper.ts`): the one fiber that times pops out, at most
 *   `timeoutResolution` late;
 * - the degraded-health shortening (`degradedWait.ts`): `degradedMaxWait` while the mesh is not trusted.
 *
 * A name longer than the wire's limit (255 characters) given through the host API is refused: such a
 * wake is ignored, such a pop waits out its `maxWait` unregistered (no mesh wake could name it), such a
 * take returns nothing. Refusals and the hints not kept are counted together in `dropped`. When the
 * scope closes (or `shutdown` is called) every parked pop returns `"shutdown"`.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as EntryPoints from "../synchronousEntryPoints.js"
import * as Names from "../wire/names.js"
import type { QueueItem } from "../wire/payloads.js"
import { DeadlineReaper } from "./deadlineReaper.js"
import { DegradedWait } from "./degradedWait.js"
import { HintStore } from "./hintStore.js"
import { ParkedPops, SHUTDOWN_NOW, type WakeOutcome } from "./parkedPops.js"
import {
  type GroupedPops,
  type GroupedPopsOptions,
  type GroupHost,
  type GroupSink,
  type GroupTarget,
  PopGroups
} from "./popGroups.js"
import { Tenants } from "./tenants.js"

export type { WakeOutcome } from "./parkedPops.js"

/**
 * What a parked pop is waiting on: a queue and its tenant, given as the mesh's inputs take one (a
 * string, an `Option`, or none: `undefined`, `null` or `""` name the default tenant).
 */
export interface WaitTarget {
  readonly queue: string
  readonly tenant?: Option.Option<string> | string | null | undefined
}

/**
 * The shipped waker: park pops, wake them, and read the partition hints they were woken for.
 */
export interface LocalWakerShape {
  /** Wake the pops parked on `item`'s queue (and tenant), and note the partition hint. */
  readonly wake: (item: QueueItem) => Effect.Effect<void>
  /**
   * Parks the calling fiber until a wake for `target` arrives (`"woken"`), `maxWait` elapses
   * (`"timeout"`), or the waker shuts down (`"shutdown"`, at once; immediately too for a pop parked
   * after the shut-down). An absent tenant parks for the default tenant; a target with a name over
   * `MAX_NAME_CHARS` characters is not registered and just waits out `maxWait`.
   */
  readonly awaitWake: (
    target: WaitTarget,
    options: { readonly maxWait: Duration.Input }
  ) => Effect.Effect<WakeOutcome>
  /** How many pops are parked now, in all. */
  readonly parked: Effect.Effect<number>
  /**
   * Every pop parked now returns `"shutdown"` at once; pops parked later wait as usual. Returns how many
   * were released. For a broker that hands its parked long-polls back without stopping.
   */
  readonly releaseAll: Effect.Effect<number>
  /**
   * Shuts the waker down, as closing its scope does: every parked pop returns `"shutdown"` at once (the
   * count is returned), and every later `awaitWake` returns `"shutdown"` immediately. Wakes are then
   * ignored. For a broker draining before its scope ends; calling it again releases nothing more.
   */
  readonly shutdown: Effect.Effect<number>
  /** Takes (and clears) the partitions hinted for `target` since the last call. */
  readonly takePartitionHints: (target: WaitTarget) => Effect.Effect<ReadonlyArray<string>>
  /**
   * How many hints were not recorded because a bound was reached, plus host calls refused for a name
   * over `MAX_NAME_CHARS`, since the waker started.
   */
  readonly dropped: Effect.Effect<number>
  /**
   * Grouped pops over this waker: the pops waiting on one queue (and tenant) share one claim in flight,
   * the host's `claim`, and its rows are handed to them in the order they came. They are woken, released,
   * shut down and shortened while the mesh is degraded as the parked pops are. Their claims and timers
   * run in the current scope.
   */
  readonly grouped: <A, E>(
    options: GroupedPopsOptions<A, E>
  ) => Effect.Effect<GroupedPops<A, E>, never, Scope.Scope>
}

/**
 * The shipped in-memory waker: a registry of parked pops.
 */
export class LocalWakerTag extends Context.Service<LocalWakerTag, LocalWakerShape>()(
  "queen-mesh/LocalWaker"
) {}

/**
 * The shipped waker's tenancy and bounds.
 */
export interface LocalWakerOptions {
  /** Whether tenants other than the default exist. Default true. */
  readonly tenancy?: boolean
  /**
   * The default tenant's name. Default upstream Queen's `"00000000-0000-0000-0000-000000000001"`, which
   * is what upstream peers send for it; change it only if every peer names the default tenant the same.
   */
  readonly defaultTenant?: string
  /** Distinct `(tenant, queue)` keys of partition hints kept before new ones are ignored. Default 10,000. */
  readonly maxHintKeys?: number
  /** Partitions kept per key. Default 1,000. */
  readonly maxHintsPerKey?: number
  /**
   * UTF-8 bytes of partition hints kept across all keys, each hint counting its queue, tenant and
   * partition. Default 4 MiB.
   */
  readonly maxHintBytes?: number
  /**
   * The least time between two passes of the reaper that time pops out, so pops due close together
   * share one wake-up: a pop times out never early and at most this late. A wake-up costs far more than
   * a pop, so this is what keeps a few pops timing out as cheap per pop as many. `0` for exact timeouts.
   * Default 25 ms.
   */
  readonly timeoutResolution?: Duration.Input
  /**
   * While the mesh is neither `clustered` nor `solo` (see `MeshHealth`), parked pops wait at most this
   * long: the host's re-poll is then the fallback path, so a broken mesh costs about this, not a whole
   * `maxWait`. Pops already parked when the mesh degrades are timed out this long after it did. Needs
   * the `MeshHealth` value the mesh publishes (`Mesh.layerLocal` and the layers above provide it to
   * both). Default: off.
   */
  readonly degradedMaxWait?: Duration.Input
}

/**
 * The registry: the units, composed; it owns only whether it shut down, what it refused, and which
 * group sets it drives.
 */
class Registry implements GroupHost {
  closed = false
  /** Host calls and wakes refused for a name over `MAX_NAME_CHARS`. */
  private refused = 0
  /** The grouped pops' sets, woken and released with the parked pops. */
  private readonly sinks = new Set<GroupSink>()

  constructor(
    private readonly tenants: Tenants,
    private readonly pops: ParkedPops,
    private readonly hints: HintStore,
    private readonly reaper: DeadlineReaper,
    private readonly degraded: DegradedWait,
    private readonly clock: Clock.Clock
  ) {}

  get parked(): number {
    let parked = this.pops.parked
    for (const sink of this.sinks) parked += sink.parked
    return parked
  }

  /** A group set starts (or stops) following this waker's wakes. */
  follow(sink: GroupSink): Effect.Effect<void, never, Scope.Scope> {
    return Effect.acquireRelease(
      Effect.sync(() => this.sinks.add(sink)),
      () => Effect.sync(() => this.sinks.delete(sink))
    )
  }

  tenantOf(target: GroupTarget): string | undefined {
    const tenant = this.tenants.ofTarget(target.queue, target.tenant)
    if (tenant === undefined) this.refused++
    return tenant
  }

  takeHints(queue: string, tenant: string): ReadonlyArray<string> {
    return this.hints.take(queue, tenant)
  }

  repollWithin(asked: Duration.Duration): Duration.Duration {
    return this.degraded.cap(asked)
  }

  /** The mesh degraded: the groups re-poll within `short`. */
  shortenGroups(short: Duration.Duration): void {
    for (const sink of this.sinks) sink.shortenRepoll(short)
  }

  get dropped(): number {
    return this.hints.dropped + this.refused
  }

  /** The receive path's wake: synchronous, and allocation-free unless a new hint key is kept. */
  wake(item: QueueItem): void {
    if (this.closed) return
    const queue = item.queue
    const partition = item.partition
    if (!Names.fitsName(queue) || !Names.fitsName(partition)) {
      this.refused++
      return
    }
    if (this.tenants.fansOut(item.tenant)) {
      const tenants = this.pops.tenantsOn(queue)
      if (tenants !== undefined) for (const tenant of tenants) this.hints.record(queue, tenant, partition)
      this.pops.wakeQueue(queue)
      // Most wakers have no grouped pops: the receive path then allocates no iterator for them.
      if (this.sinks.size > 0) this.wakeGroupsOnQueue(queue, partition)
      return
    }
    const tenant = this.tenants.ofWake(item.tenant)
    if (tenant === undefined) {
      this.refused++
      return
    }
    this.hints.record(queue, tenant, partition)
    this.pops.wake(queue, tenant)
    if (this.sinks.size > 0) for (const sink of this.sinks) sink.wake(queue, tenant)
  }

  /** A wake with no tenant, for the grouped pops: a hint for each tenant waiting, then a claim each. */
  private wakeGroupsOnQueue(queue: string, partition: string): void {
    for (const sink of this.sinks) {
      const grouped = sink.tenantsOn(queue)
      if (grouped !== undefined) for (const tenant of grouped) this.hints.record(queue, tenant, partition)
    }
    for (const sink of this.sinks) sink.wakeQueue(queue)
  }

  /** Parks the calling fiber (the body of `awaitWake`'s `Effect.callback`). */
  park(
    target: WaitTarget,
    maxWait: Duration.Input,
    resume: (outcome: Effect.Effect<WakeOutcome>) => void
  ): Effect.Effect<void> | undefined {
    if (this.closed) {
      resume(SHUTDOWN_NOW)
      return
    }
    const duration = this.degraded.cap(Duration.fromInputUnsafe(maxWait))
    const tenant = this.tenants.ofTarget(target.queue, target.tenant)
    if (tenant === undefined) {
      this.refused++
      resume(Effect.as(Effect.sleep(duration), "timeout"))
      return
    }
    const deadline = this.clock.currentTimeMillisUnsafe() + Duration.toMillis(duration)
    const pop = this.pops.park(target.queue, tenant, deadline, resume)
    this.reaper.parked(deadline)
    return Effect.sync(() => this.pops.leave(pop))
  }

  takePartitionHints(target: WaitTarget): ReadonlyArray<string> {
    const tenant = this.tenants.ofTarget(target.queue, target.tenant)
    if (tenant === undefined) {
      this.refused++
      return []
    }
    return this.hints.take(target.queue, tenant)
  }

  releaseAll(): number {
    let released = this.pops.releaseAll()
    for (const sink of this.sinks) released += sink.releaseAll()
    return released
  }

  shutdown(): number {
    if (this.closed) return 0
    this.closed = true
    return this.releaseAll()
  }
}

/** The shipped waker and its reaper fiber, in the current scope. */
export const make = (options: LocalWakerOptions = {}): Effect.Effect<LocalWakerShape, never, Scope.Scope> =>
  Effect.gen(function* () {
    const pops = new ParkedPops()
    const resolution = Duration.toMillis(
      Duration.fromInputUnsafe(options.timeoutResolution ?? Duration.millis(25))
    )
    let onDegrade = (_short: Duration.Duration): void => {}
    const registry: Registry = new Registry(
      new Tenants(options),
      pops,
      new HintStore({
        maxKeys: options.maxHintKeys ?? 10_000,
        maxPerKey: options.maxHintsPerKey ?? 1_000,
        maxBytes: options.maxHintBytes ?? 4 * 1024 * 1024
      }),
      yield* DeadlineReaper.make(pops, resolution),
      yield* DegradedWait.make(pops, options.degradedMaxWait, (short) => onDegrade(short)),
      yield* Clock.Clock
    )
    onDegrade = (short) => registry.shortenGroups(short)
    const wakeUnsafe = (item: QueueItem): void => registry.wake(item)
    const shutdown = Effect.sync(() => registry.shutdown())
    // Closing the scope hands every parked pop back: a broker's requests never hang on a waker gone.
    yield* Effect.addFinalizer(() => shutdown)
    return {
      wake: EntryPoints.register((item: QueueItem) => Effect.sync(() => wakeUnsafe(item)), wakeUnsafe),
      awaitWake: (target, { maxWait }) =>
        Effect.callback<WakeOutcome>((resume) => registry.park(target, maxWait, resume)),
      parked: Effect.sync(() => registry.parked),
      releaseAll: Effect.sync(() => registry.releaseAll()),
      shutdown,
      takePartitionHints: (target) => Effect.sync(() => registry.takePartitionHints(target)),
      dropped: Effect.sync(() => registry.dropped),
      grouped: (groupOptions) =>
        Effect.gen(function* () {
          const groups = yield* PopGroups.make(registry, groupOptions, resolution)
          yield* registry.follow(groups)
          return groups.api()
        })
    }
  })
