/**
 * The parked-pop index of the shipped waker: which pops are parked on which queue and tenant
 * (`queue -> tenant -> pops`, nested maps rather than a joined key, so no two names can collide), and
 * the deadline heap the reaper times them out from.
 *
 * A pop leaves the index the moment it ends (woken, timed out, interrupted, shut down), but its heap
 * entry is left behind, stale, until it surfaces or the heap is compacted: compaction runs when the
 * stale entries outnumber the live ones (and are at least 64), so the heap stays within about twice
 * the parked count and no wake pays for a heap removal. The index keeps that accounting (`live`,
 * `stale`) itself; nothing else changes it.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import { DeadlineHeap } from "./deadlineHeap.js"

/**
 * How a parked pop ended: woken by a hint; its own backoff elapsed (the fallback when a hint is lost);
 * or the waker shut down (its scope closed, or the broker drains), so the pop should answer now.
 */
export type WakeOutcome = "woken" | "timeout" | "shutdown"

/**
 * The outcomes a parked pop's fiber is resumed with, one value each: resuming allocates nothing. Each
 * yields first. Effect 4 runs a resumed fiber inside `resume`, so without the yield a wake (the mesh's
 * receive path) would run every woken pop's continuation itself, and a continuation that parks again
 * would reach the index while it is being walked; the yield hands each pop to the scheduler instead,
 * as effect 3's resume did.
 */
export const WOKEN: Effect.Effect<WakeOutcome> = Effect.as(Effect.yieldNow, "woken")
export const TIMEOUT: Effect.Effect<WakeOutcome> = Effect.as(Effect.yieldNow, "timeout")
export const SHUTDOWN: Effect.Effect<WakeOutcome> = Effect.as(Effect.yieldNow, "shutdown")

/** The answer for a pop that comes after the shut-down: given while it parks, so at once. */
export const SHUTDOWN_NOW: Effect.Effect<WakeOutcome> = Effect.succeed("shutdown")

/** Below this many stale heap entries compaction is not worth a pass. */
const COMPACT_FLOOR = 64

/** How a parked pop's fiber is resumed (the `resume` of its `Effect.callback`). */
export type Resume = (outcome: Effect.Effect<WakeOutcome>) => void

/**
 * A parked pop: filed in the index (`waiters`) and in the deadline heap. Once it is done it stays in
 * the heap until it surfaces or the heap is compacted, so it lets go of its fiber then: a stale entry
 * in a long-lived array would otherwise keep the fiber alive through every minor GC.
 */
export class ParkedPop {
  /** Set once the pop is woken, timed out or interrupted; its heap entry is then stale. */
  done = false
  constructor(
    readonly queue: string,
    readonly tenant: string,
    readonly deadline: number,
    readonly seq: number,
    private resume: Resume | undefined,
    readonly waiters: Set<ParkedPop>
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

/** The pops parked now, by queue and tenant, and their deadlines. */
export class ParkedPops {
  private readonly byQueue = new Map<string, Map<string, Set<ParkedPop>>>()
  private readonly heap = new DeadlineHeap<ParkedPop>()
  private live = 0
  private stale = 0
  private seq = 0

  /** How many pops are parked now. */
  get parked(): number {
    return this.live
  }

  /** How many entries the deadline heap holds, the stale ones included. */
  get heapEntries(): number {
    return this.heap.size
  }

  /** Files a pop under `queue` and `tenant`, due at `deadline` (`Clock` milliseconds). */
  park(queue: string, tenant: string, deadline: number, resume: Resume): ParkedPop {
    let byTenant = this.byQueue.get(queue)
    if (byTenant === undefined) {
      byTenant = new Map()
      this.byQueue.set(queue, byTenant)
    }
    let waiters = byTenant.get(tenant)
    if (waiters === undefined) {
      waiters = new Set()
      byTenant.set(tenant, waiters)
    }
    const pop = new ParkedPop(queue, tenant, deadline, this.seq++, resume, waiters)
    waiters.add(pop)
    this.heap.push(pop)
    this.live++
    return pop
  }

  /** The pop's fiber left (it was interrupted): it leaves the index, if it is still in it. */
  leave(pop: ParkedPop): void {
    pop.release()
    if (pop.done) return
    this.retire(pop)
    this.compactIfStale()
  }

  /** Wakes the pops parked on `queue` for `tenant`. */
  wake(queue: string, tenant: string): void {
    const byTenant = this.byQueue.get(queue)
    const waiters = byTenant?.get(tenant)
    if (waiters === undefined) return
    byTenant!.delete(tenant)
    if (byTenant!.size === 0) this.byQueue.delete(queue)
    this.finishAll(waiters, WOKEN)
    this.compactIfStale()
  }

  /** The tenants with pops parked on `queue`, if any. */
  tenantsOn(queue: string): IterableIterator<string> | undefined {
    return this.byQueue.get(queue)?.keys()
  }

  /** Wakes every pop parked on `queue`, whatever its tenant. */
  wakeQueue(queue: string): void {
    const byTenant = this.byQueue.get(queue)
    if (byTenant === undefined) return
    this.byQueue.delete(queue)
    for (const waiters of byTenant.values()) this.finishAll(waiters, WOKEN)
    this.compactIfStale()
  }

  /** Every parked pop returns `"shutdown"` now; returns how many did. */
  releaseAll(): number {
    let released = 0
    for (const byTenant of this.byQueue.values()) {
      for (const waiters of byTenant.values()) {
        this.finishAll(waiters, SHUTDOWN)
        released += waiters.size
      }
    }
    this.byQueue.clear()
    this.compactIfStale()
    return released
  }

  /**
   * Times out every pop due by `now` (dropping the stale entries it meets on the way) and returns how
   * many it timed out.
   */
  expire(now: number): number {
    let timedOut = 0
    let top = this.liveTop()
    while (top !== undefined && top.deadline <= now) {
      this.heap.pop()
      top.done = true
      this.live--
      this.detach(top)
      top.finish(TIMEOUT)
      timedOut++
      top = this.liveTop()
    }
    return timedOut
  }

  /** The earliest deadline of a parked pop; `+Infinity` when none is parked or none has a deadline. */
  nextDeadline(): number {
    const top = this.liveTop()
    return top === undefined ? Number.POSITIVE_INFINITY : top.deadline
  }

  /** Every pop parked now. */
  snapshot(): Array<ParkedPop> {
    const pops: Array<ParkedPop> = []
    for (const byTenant of this.byQueue.values())
      for (const waiters of byTenant.values()) pops.push(...waiters)
    return pops
  }

  /** Times out those of `pops` that are still parked. */
  timeOut(pops: ReadonlyArray<ParkedPop>): void {
    for (const pop of pops) {
      if (pop.done) continue
      this.retire(pop)
      pop.finish(TIMEOUT)
    }
    this.compactIfStale()
  }

  /** The heap's top once the stale entries above the first live one are dropped. */
  private liveTop(): ParkedPop | undefined {
    let top = this.heap.peek()
    while (top?.done) {
      this.heap.pop()
      this.stale--
      top = this.heap.peek()
    }
    return top
  }

  /** Ends a pop that is still in the index: out of the index, its heap entry stale. */
  private retire(pop: ParkedPop): void {
    pop.done = true
    this.live--
    this.stale++
    this.detach(pop)
  }

  /** Resumes every pop of a set already taken out of the index; their heap entries go stale. */
  private finishAll(waiters: Set<ParkedPop>, outcome: Effect.Effect<WakeOutcome>): void {
    for (const pop of waiters) {
      pop.done = true
      pop.finish(outcome)
    }
    this.live -= waiters.size
    this.stale += waiters.size
  }

  /** Takes a pop out of the index (not the heap). */
  private detach(pop: ParkedPop): void {
    const waiters = pop.waiters
    waiters.delete(pop)
    if (waiters.size > 0) return
    const byTenant = this.byQueue.get(pop.queue)
    if (byTenant === undefined || byTenant.get(pop.tenant) !== waiters) return
    byTenant.delete(pop.tenant)
    if (byTenant.size === 0) this.byQueue.delete(pop.queue)
  }

  private compactIfStale(): void {
    if (this.stale > this.live && this.stale >= COMPACT_FLOOR) {
      this.heap.compact()
      this.stale = 0
    }
  }
}
