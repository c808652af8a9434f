/**
 * The shipped waker: a registry of parked pops (spec "The frame set", tags 1 and 2), the machinery
 * behind `LocalWaker`.
 *
 * The tenant rule: an **absent** tenant comes from a peer that predates tenant scoping and fans out to
 * every tenant with pops parked on that queue name; attributing it to the default tenant would drop the
 * wake for everyone else. With tenancy off no other tenant can exist, so an absent tenant names the
 * default tenant and the lookup is one hash probe. The default tenant is upstream Queen's
 * `00000000-0000-0000-0000-000000000001` unless `defaultTenant` says otherwise, and a UUID tenant is the
 * same tenant in any case (the mesh decoder lowercases it; the host API does too).
 *
 * Bounds, all documented on `LocalWakerOptions`: partition hints are capped by keys (10,000), by
 * partitions per key (1,000) and by UTF-8 bytes (4 MiB in all); a hint past a bound is ignored, and a
 * lost hint costs the pop a full re-poll, nothing else. A name longer than the wire's limit (255 characters) given
 * through the host API is refused: such a wake is ignored, such a pop waits out its `maxWait`
 * unregistered (no mesh wake could name it), such a take returns nothing. Both kinds of refusal are
 * counted in `dropped`.
 *
 * Parked pops time out through one reaper fiber over a binary min-heap of deadlines: park, wake and
 * timeout are O(log n) or better, and no tick scans the pops. Woken and interrupted pops leave the heap
 * lazily; it is compacted when its stale entries outnumber the live ones, so it stays within about
 * twice the parked count. Timeout passes are at least `timeoutResolution` (25 ms) apart, so a pop times
 * out never early and at most that late. When the scope closes (or `shutdown` is called) every parked
 * pop returns `"shutdown"`.
 *
 * @internal
 */

import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberHandle from "effect/FiberHandle"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as MeshHealth from "../../MeshHealth.js"
import * as EntryPoints from "../synchronousEntryPoints.js"
import * as Names from "../wire/names.js"
import type { QueueItem } from "../wire/payloads.js"

/**
 * What a parked pop is waiting on: a queue and its tenant, given as the mesh's inputs take one (a
 * string, an `Option`, or none: `undefined`, `null` or `""` name the default tenant).
 */
export interface WaitTarget {
  readonly queue: string
  readonly tenant?: Option.Option<string> | string | null | undefined
}

/**
 * How a parked pop ended: woken by a hint; its own backoff elapsed (the fallback when a hint is lost);
 * or the waker shut down (its scope closed, or the broker drains), so the pop should answer now.
 */
export type WakeOutcome = "woken" | "timeout" | "shutdown"

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
    options: { readonly maxWait: Duration.DurationInput }
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
}

/**
 * The shipped in-memory waker: a registry of parked pops.
 */
export class LocalWakerTag extends Context.Tag("queen-mesh/LocalWaker")<LocalWakerTag, LocalWakerShape>() {}

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
  readonly timeoutResolution?: Duration.DurationInput
  /**
   * While the mesh is neither `clustered` nor `solo` (see `MeshHealth`), parked pops wait at most this
   * long: the host's re-poll is then the fallback path, so a broken mesh costs about this, not a whole
   * `maxWait`. Pops already parked when the mesh degrades are timed out this long after it did. Needs
   * the `MeshHealth` value the mesh publishes (`Mesh.layerLocal` and the layers above provide it to
   * both). Default: off.
   */
  readonly degradedMaxWait?: Duration.DurationInput
}

const WOKEN = Effect.succeed<WakeOutcome>("woken")
const TIMEOUT = Effect.succeed<WakeOutcome>("timeout")
const SHUTDOWN = Effect.succeed<WakeOutcome>("shutdown")

/** The longest timer the clock will arm (`setTimeout`'s limit). */
const MAX_SLEEP_MILLIS = 2 ** 31 - 1

/** Below this many stale heap entries compaction is not worth a pass. */
const COMPACT_FLOOR = 64

const byteLength = (text: string): number => Buffer.byteLength(text, "utf8")

/** The tenant rule for a name already known to be a non-empty string: `undefined` when over-long. */
const normalTenant = (tenant: string): string | undefined => {
  const read = Names.tenant(tenant)
  return read === undefined ? undefined : Option.getOrUndefined(read)
}

/** The shipped waker and its reaper fiber, in the current scope. */
export const make = (options: LocalWakerOptions = {}): Effect.Effect<LocalWakerShape, never, Scope.Scope> =>
  Effect.gen(function* () {
    const tenancy = options.tenancy ?? true
    const defaultTenant =
      options.defaultTenant === undefined || options.defaultTenant === ""
        ? Names.DEFAULT_TENANT
        : (normalTenant(options.defaultTenant) ?? options.defaultTenant)
    const maxHintKeys = options.maxHintKeys ?? 10_000
    const maxHintsPerKey = options.maxHintsPerKey ?? 1_000
    const maxHintBytes = options.maxHintBytes ?? 4 * 1024 * 1024
    const resolution = Duration.toMillis(Duration.decode(options.timeoutResolution ?? Duration.millis(25)))
    const clock = yield* Effect.clock

    // Tenants as normalised, by the string given: a wake names one of few tenants, and the rule (a UUID
    // test) costs more than the lookup. Bounded: dropped whole when full.
    const tenants = new Map<string, string | undefined>()
    const knownTenant = (given: string): string | undefined => {
      let normal = tenants.get(given)
      if (normal === undefined && !tenants.has(given)) {
        normal = normalTenant(given)
        if (tenants.size >= 256) tenants.clear()
        tenants.set(given, normal)
      }
      return normal
    }

    // queue -> tenant -> parked pops. Nested maps rather than a joined key: no two names can collide.
    const parked = new Map<string, Map<string, Set<Pop>>>()
    const heap = new DeadlineHeap()
    let live = 0
    let stale = 0
    let seq = 0
    let dropped = 0
    let closed = false

    // queue -> tenant -> hinted partitions
    const hints = new Map<string, Map<string, Hint>>()
    let hintKeys = 0
    let hintBytes = 0

    /** The tenant a host target names: `undefined` when refused. */
    const targetTenant = (target: WaitTarget): string | undefined => {
      if (!Names.fitsName(target.queue)) return undefined
      const tenant = Names.tenantInput(target.tenant)
      if (tenant === undefined) return undefined
      return Option.isSome(tenant) ? tenant.value : defaultTenant
    }

    const compactIfStale = () => {
      if (stale > live && stale >= COMPACT_FLOOR) {
        heap.compact()
        stale = 0
      }
    }

    /** Takes a pop out of the wake index (not the heap). */
    const detach = (pop: Pop) => {
      const waiters = pop.waiters
      waiters.delete(pop)
      if (waiters.size > 0) return
      const byTenant = parked.get(pop.queue)
      if (byTenant === undefined || byTenant.get(pop.tenant) !== waiters) return
      byTenant.delete(pop.tenant)
      if (byTenant.size === 0) parked.delete(pop.queue)
    }

    /** Resumes every pop of a set already taken out of the index; their heap entries go stale. */
    const release = (waiters: Set<Pop>) => {
      for (const pop of waiters) {
        pop.done = true
        pop.finish(WOKEN)
      }
      live -= waiters.size
      stale += waiters.size
    }

    const leave = (pop: Pop) => {
      pop.release()
      if (pop.done) return
      pop.done = true
      live--
      stale++
      detach(pop)
      compactIfStale()
    }

    const recordHint = (queue: string, tenant: string, partition: string) => {
      let byTenant = hints.get(queue)
      let hint = byTenant?.get(tenant)
      if (hint === undefined) {
        const keyBytes = byteLength(queue) + byteLength(tenant)
        const cost = keyBytes + byteLength(partition)
        if (hintKeys >= maxHintKeys || maxHintsPerKey < 1 || hintBytes + cost > maxHintBytes) {
          dropped++
          return
        }
        hint = new Hint(keyBytes)
        if (byTenant === undefined) {
          byTenant = new Map()
          hints.set(queue, byTenant)
        }
        byTenant.set(tenant, hint)
        hintKeys++
        hint.add(partition, cost)
        hintBytes += cost
        return
      }
      if (hint.partitions.has(partition)) return
      const cost = hint.keyBytes + byteLength(partition)
      if (hint.partitions.size >= maxHintsPerKey || hintBytes + cost > maxHintBytes) {
        dropped++
        return
      }
      hint.add(partition, cost)
      hintBytes += cost
    }

    const unsafeWake = (item: QueueItem): void => {
      if (closed) return
      const queue = item.queue
      const partition = item.partition
      if (!Names.fitsName(queue) || !Names.fitsName(partition)) {
        dropped++
        return
      }
      const byTenant = parked.get(queue)
      const named = Option.isSome(item.tenant) && item.tenant.value !== ""
      if (named || !tenancy) {
        const tenant = named ? knownTenant(item.tenant.value) : defaultTenant
        if (tenant === undefined) {
          dropped++
          return
        }
        recordHint(queue, tenant, partition)
        const waiters = byTenant?.get(tenant)
        if (waiters === undefined) return
        byTenant!.delete(tenant)
        if (byTenant!.size === 0) parked.delete(queue)
        release(waiters)
        compactIfStale()
        return
      }
      // Absent tenant with tenancy on: every tenant with pops parked on this queue name.
      if (byTenant === undefined) return
      parked.delete(queue)
      for (const [tenant, waiters] of byTenant) {
        recordHint(queue, tenant, partition)
        release(waiters)
      }
      compactIfStale()
    }

    /** Every parked pop returns `"shutdown"` now; their heap entries go stale. */
    const releaseEverything = (): number => {
      let released = 0
      for (const byTenant of parked.values()) {
        for (const waiters of byTenant.values()) {
          for (const pop of waiters) {
            pop.done = true
            pop.finish(SHUTDOWN)
          }
          released += waiters.size
        }
      }
      parked.clear()
      live -= released
      stale += released
      compactIfStale()
      return released
    }

    // One fiber times out every parked pop, sleeping (on the `Clock`, so `TestClock` drives it) until
    // the earliest deadline: a pop costs no timer fiber of its own, and a wake resumes it directly. A
    // park due before the reaper would wake restarts it (the `FiberHandle` interrupts the sleeping one),
    // so the common pass is one plain sleep, not a race. Passes that time pops out are at least
    // `resolution` apart: a wake-up costs far more than a pop, so pops due close together share one
    // (never early, at most `resolution` late). With nothing parked the reaper ends.
    let reaperWakesAt = Number.POSITIVE_INFINITY
    let lastPass = Number.NEGATIVE_INFINITY
    const pass: Effect.Effect<boolean> = Effect.suspend(() => {
      const now = clock.unsafeCurrentTimeMillis()
      let top = heap.peek()
      while (top !== undefined) {
        if (top.done) {
          heap.pop()
          stale--
        } else if (top.deadline <= now) {
          heap.pop()
          top.done = true
          live--
          detach(top)
          top.finish(TIMEOUT)
          lastPass = now
        } else {
          break
        }
        top = heap.peek()
      }
      if (top === undefined || top.deadline === Number.POSITIVE_INFINITY) {
        reaperWakesAt = Number.POSITIVE_INFINITY
        return Effect.succeed(false)
      }
      // Timers past ~24.8 days never fire, so a longer wait is taken in steps.
      const wait = Math.min(Math.max(top.deadline, lastPass + resolution) - now, MAX_SLEEP_MILLIS)
      reaperWakesAt = now + wait
      return Effect.as(Effect.sleep(Duration.millis(wait)), true)
    })
    // The loop shape of every background loop: one pass, `catchAllCause` to a log (then a pause, so a
    // persistent defect cannot spin), repeated; annotated, interruptible, owned by the scope's handle.
    const iteration = pass.pipe(
      Effect.catchAllCause((cause) =>
        Effect.logError("reaper pass failed; carrying on", cause).pipe(
          Effect.zipRight(Effect.sleep(Duration.millis(Math.max(resolution, 100)))),
          Effect.as(true)
        )
      )
    )
    const reaper = Effect.suspend(() => {
      let more = true
      // A plain loop: `Effect.repeat` would run a `Schedule` step on every pass.
      return Effect.whileLoop({ while: () => more, body: () => iteration, step: (next) => (more = next) })
    }).pipe(Effect.annotateLogs({ module: "LocalWaker", fiber: "reaper" }), Effect.interruptible)
    const runReaper = yield* FiberHandle.makeRuntime<never, never, void>()

    // The degraded path: while the mesh cannot be trusted to wake pops, they wait at most `short`.
    const short = options.degradedMaxWait === undefined ? undefined : Duration.decode(options.degradedMaxWait)
    let trusted = true
    const health = short === undefined ? Option.none() : yield* Effect.serviceOption(MeshHealth.MeshHealth)
    if (short !== undefined && Option.isSome(health)) {
      const runShortening = yield* FiberHandle.makeRuntime<never, never, void>()
      // Pops parked when the mesh degraded are timed out `short` after it did (a return to trusted
      // health before then cancels it: their wakes are flowing again).
      const shortenParked = Effect.suspend(() => {
        const parkedNow: Array<Pop> = []
        for (const byTenant of parked.values())
          for (const waiters of byTenant.values()) parkedNow.push(...waiters)
        return Effect.as(Effect.sleep(short), parkedNow)
      }).pipe(
        Effect.flatMap((parkedThen) =>
          Effect.sync(() => {
            for (const pop of parkedThen) {
              if (pop.done) continue
              pop.done = true
              live--
              stale++
              detach(pop)
              pop.finish(TIMEOUT)
            }
            compactIfStale()
          })
        )
      )
      yield* health.value.changes.pipe(
        Stream.runForEach((now) =>
          Effect.sync(() => {
            const next = MeshHealth.isTrusted(now)
            if (next === trusted) return
            trusted = next
            runShortening(next ? Effect.void : shortenParked)
          })
        ),
        Effect.forkScoped
      )
    }

    const awaitWake: LocalWakerShape["awaitWake"] = (target, { maxWait }) =>
      Effect.async<WakeOutcome>((resume) => {
        if (closed) return resume(SHUTDOWN)
        const asked = Duration.decode(maxWait)
        const duration = trusted || short === undefined ? asked : Duration.min(asked, short)
        const tenant = targetTenant(target)
        if (tenant === undefined) {
          dropped++
          resume(Effect.as(Effect.sleep(duration), "timeout"))
          return
        }
        let byTenant = parked.get(target.queue)
        if (byTenant === undefined) {
          byTenant = new Map()
          parked.set(target.queue, byTenant)
        }
        let waiters = byTenant.get(tenant)
        if (waiters === undefined) {
          waiters = new Set()
          byTenant.set(tenant, waiters)
        }
        const deadline = clock.unsafeCurrentTimeMillis() + Duration.toMillis(duration)
        const pop = new Pop(target.queue, tenant, deadline, seq++, resume, waiters)
        waiters.add(pop)
        heap.push(pop)
        live++
        const due = Math.max(deadline, lastPass + resolution)
        if (due < reaperWakesAt) {
          reaperWakesAt = due
          runReaper(reaper)
        }
        return Effect.sync(() => leave(pop))
      })

    const shutdown = Effect.sync(() => {
      if (closed) return 0
      closed = true
      return releaseEverything()
    })
    // Closing the scope hands every parked pop back: a broker's requests never hang on a waker gone.
    yield* Effect.addFinalizer(() => shutdown)

    return {
      wake: EntryPoints.register((item: QueueItem) => Effect.sync(() => unsafeWake(item)), unsafeWake),
      awaitWake,
      parked: Effect.sync(() => live),
      releaseAll: Effect.sync(releaseEverything),
      shutdown,
      takePartitionHints: (target) =>
        Effect.sync(() => {
          const tenant = targetTenant(target)
          if (tenant === undefined) {
            dropped++
            return []
          }
          const byTenant = hints.get(target.queue)
          const hint = byTenant?.get(tenant)
          if (hint === undefined) return []
          byTenant!.delete(tenant)
          if (byTenant!.size === 0) hints.delete(target.queue)
          hintKeys--
          hintBytes -= hint.bytes
          return [...hint.partitions]
        }),
      dropped: Effect.sync(() => dropped)
    }
  })

/**
 * A parked pop: filed in the wake index (`waiters`) and in the deadline heap. Once it is done it stays
 * in the heap until it surfaces or the heap is compacted, so it lets go of its fiber then: a stale
 * entry in a long-lived array would otherwise keep the fiber alive through every minor GC.
 */
class Pop {
  /** Set once the pop is woken, timed out or interrupted; its heap entry is then stale. */
  done = false
  constructor(
    readonly queue: string,
    readonly tenant: string,
    readonly deadline: number,
    readonly seq: number,
    private resume: ((effect: Effect.Effect<WakeOutcome>) => void) | undefined,
    readonly waiters: Set<Pop>
  ) {}

  /** Resumes the pop's fiber with `outcome`, once, and drops the reference to it. */
  finish(outcome: Effect.Effect<WakeOutcome>): void {
    const resume = this.resume
    this.resume = undefined
    resume?.(outcome)
  }

  /** Drops the reference to the pop's fiber (its fiber has left). */
  release(): void {
    this.resume = undefined
  }
}

/** The partitions hinted for one `(queue, tenant)`, with the bytes they are charged. */
class Hint {
  readonly partitions = new Set<string>()
  bytes = 0
  constructor(readonly keyBytes: number) {}
  add(partition: string, cost: number) {
    this.partitions.add(partition)
    this.bytes += cost
  }
}

/** Earlier deadline first; equal deadlines in park order, so timeouts are deterministic. */
const before = (a: Pop, b: Pop): boolean =>
  a.deadline < b.deadline || (a.deadline === b.deadline && a.seq < b.seq)

/** A binary min-heap of pops by deadline. Stale entries are dropped when they surface or on `compact`. */
class DeadlineHeap {
  private readonly items: Array<Pop> = []

  peek(): Pop | undefined {
    return this.items[0]
  }

  push(pop: Pop): void {
    const items = this.items
    let i = items.length
    items.push(pop)
    while (i > 0) {
      const parent = (i - 1) >> 1
      const above = items[parent]!
      if (!before(pop, above)) break
      items[i] = above
      i = parent
    }
    items[i] = pop
  }

  pop(): Pop | undefined {
    const items = this.items
    const top = items[0]
    const last = items.pop()
    if (top !== undefined && last !== undefined && items.length > 0) {
      items[0] = last
      this.siftDown(0)
    }
    return top
  }

  /** Drops every stale entry and re-heapifies: O(n), paid for by the stale entries it removes. */
  compact(): void {
    // In place, and truncated: a discarded array would still point at the stale entries until a full GC.
    const items = this.items
    let n = 0
    for (let i = 0; i < items.length; i++) {
      const pop = items[i]!
      if (!pop.done) items[n++] = pop
    }
    items.length = n
    for (let i = (n >> 1) - 1; i >= 0; i--) this.siftDown(i)
  }

  private siftDown(start: number): void {
    const items = this.items
    const n = items.length
    const pop = items[start]!
    let i = start
    for (;;) {
      const left = 2 * i + 1
      if (left >= n) break
      const right = left + 1
      let child = left
      if (right < n && before(items[right]!, items[left]!)) child = right
      const below = items[child]!
      if (!before(below, pop)) break
      items[i] = below
      i = child
    }
    items[i] = pop
  }
}
