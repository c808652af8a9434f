/**
 * Grouped pops of the shipped waker: the pops parked on one queue (and tenant) are served by at most
 * one claim in flight, and the rows it returns are handed to them in the order they came, each up to its
 * batch. This is what keeps a wake's cost to PostgreSQL flat as the consumers grow: a wake starts one
 * claim (or, landing while one runs, folds into one follow-up), never one claim per waiting pop.
 *
 * The pieces, per `(queue, tenant)` group:
 * - a FIFO of waiting pops (hand-out order) and a deadline heap (their timeouts), both with lazy removal;
 * - `demand`, the sum of the waiting pops' batches: the claim's limit, capped at `maxClaim`;
 * - whether a claim is in flight, and the reason for the one owed after it (a wake, an arrival), which
 *   waits out `followUpInterval` from the start of the claim before it when the host asked for one;
 * - one timer fiber, armed for the earliest of the next re-poll (the fallback for a lost hint, shortened
 *   while the mesh is degraded) and the earliest pop's deadline (at most `resolution` late). A group
 *   with no pop left keeps it and stays in the index until it fires, so a pop that comes back (a
 *   consumer popping again after each answer) finds the group with its timer armed.
 *
 * Rows never strand: rows claimed for pops that left during the claim, or handed to a pop whose fiber
 * was interrupted before it took them, go to the next waiting pop of the group or back to the host's
 * `release` at once. A claim runs uninterruptibly (its rows must reach someone), in a fiber of the scope
 * the group set was made in.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Fiber from "effect/Fiber"
import * as FiberSet from "effect/FiberSet"
import type * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { DeadlineHeap } from "./deadlineHeap.js"

/**
 * How a grouped pop's wait ended: `"none"` (the first claim after it came found rows), `"woken"` (a
 * later claim, started by a wake or by another pop's arrival, found rows), `"timeout"` (its `maxWait`
 * elapsed, or the group's re-poll found rows), `"shutdown"` (the waker shut down or released its pops).
 */
export type GroupedWake = "none" | "woken" | "timeout" | "shutdown"

/** What the host's claim is asked for. */
export interface ClaimRequest {
  readonly queue: string
  readonly tenant: string
  /** The most rows to claim: the waiting pops' batches added up, capped at `maxClaim`. */
  readonly limit: number
  /** The partitions hinted since the group's last claim (the waker's partition hints, taken). */
  readonly partitions: ReadonlyArray<string>
}

/**
 * A claim's rows, and whether it left rows to claim. A claim that returns only its rows is taken to
 * have left some when it filled its limit; one that can tell (say, with an `EXISTS` that locks nothing:
 * a row locked only to be looked at is skipped by a concurrent claim elsewhere, and then leased by
 * neither) saves the follow-up claim and the peers' wake a full claim would cost.
 */
export interface ClaimResult<A> {
  readonly rows: ReadonlyArray<A>
  readonly more: boolean
}

/** The queue and tenant of a group. */
export interface GroupKey {
  readonly queue: string
  readonly tenant: string
}

/** What a grouped pop answers. */
export interface GroupedPopResult<A> {
  /** At most the pop's batch, all from one claim; empty when it timed out or was shut down. */
  readonly rows: ReadonlyArray<A>
  readonly wake: GroupedWake
}

/** The host's side of a group set. */
export interface GroupedPopsOptions<A, E> {
  /**
   * Claims up to `request.limit` rows. Fewer than `limit` must mean none were left to claim: that is
   * how `offer` knows the peers need no wake.
   */
  readonly claim: (request: ClaimRequest) => Effect.Effect<ReadonlyArray<A> | ClaimResult<A>, E>
  /** Hands back rows claimed for pops that have gone, at once (not when their lease runs out). */
  readonly release: (key: GroupKey, rows: ReadonlyArray<A>) => Effect.Effect<void, unknown>
  /** How often a group with pops waiting claims on its own: the fallback for a lost hint. Default 10 s. */
  readonly repoll?: Duration.Input | undefined
  /** The largest limit one claim asks for. Default 1,000. */
  readonly maxClaim?: number | undefined
  /**
   * The least time from the start of a claim to the start of the follow-up claim owed to the wakes and
   * arrivals that landed while it ran; what lands meanwhile folds into that follow-up too. Under a
   * stream of commits a group's claims then come at most once per interval and take bigger batches,
   * at the cost of up to this much latency per row; a group with no claim in flight still claims at
   * once on a wake or an arrival, and a claim that filled its limit is still followed at once. Default
   * 0 (the follow-up starts as soon as the claim before it is done).
   */
  readonly followUpInterval?: Duration.Input | undefined
}

/** What a grouped pop waits on: as `LocalWaker`'s `WaitTarget`. */
export interface GroupTarget {
  readonly queue: string
  readonly tenant?: Option.Option<string> | string | null | undefined
}

/** A set of groups, as a host reaches it. */
export interface GroupedPops<A, E> {
  /**
   * Waits for rows of `target`'s queue: at most `batch`, from the group's claims, or none once `maxWait`
   * elapses or the waker shuts down. Once it returns rows they are the caller's; interrupted before,
   * the rows meant for it go to another pop or back to `release`.
   */
  readonly pop: (
    target: GroupTarget,
    options: { readonly batch: number; readonly maxWait: Duration.Input }
  ) => Effect.Effect<GroupedPopResult<A>, E>
  /**
   * Rows were committed on `target` here: the pops waiting here claim first. `true` when a claim that
   * began after this call left nothing to claim (the peers need no wake), `false` otherwise: no pop
   * waits here, the claim filled its limit, or it failed.
   */
  readonly offer: (target: GroupTarget) => Effect.Effect<boolean>
  /** How many pops wait in the groups now. */
  readonly waiting: Effect.Effect<number>
  /** Claims run, rows handed to pops, and rows given back to `release`, since the set was made. */
  readonly counts: Effect.Effect<GroupCounts>
}

/** A group set's running totals. */
export interface GroupCounts {
  readonly claims: number
  readonly handed: number
  readonly released: number
}

/** What a group set needs from the waker that owns it. */
export interface GroupHost {
  /** The waker shut down: pops answer `"shutdown"` at once. */
  readonly closed: boolean
  /** The tenant a target names, or `undefined` when its names do not fit the wire. */
  tenantOf(target: GroupTarget): string | undefined
  /** Takes (and clears) the partition hints of a group. */
  takeHints(queue: string, tenant: string): ReadonlyArray<string>
  /** The re-poll interval in force: `asked`, or shorter while the mesh is degraded. */
  repollWithin(asked: Duration.Duration): Duration.Duration
}

/** How the waker drives a group set: wakes, releases and health, without knowing its row type. */
export interface GroupSink {
  /** Pops whose arrival claim has run and found nothing for them: parked, as an ungrouped pop would be. */
  readonly parked: number
  wake(queue: string, tenant: string): void
  wakeQueue(queue: string): void
  tenantsOn(queue: string): Iterable<string> | undefined
  /** Every waiting pop answers `"shutdown"`; returns how many did. */
  releaseAll(): number
  /** The mesh degraded: groups re-poll within `short` from now. */
  shortenRepoll(short: Duration.Duration): void
}

/** The tenants of a queue's groups that have pops waiting. */
function* waitingTenants(byTenant: ReadonlyMap<string, { readonly live: number }>): Iterable<string> {
  for (const [tenant, group] of byTenant) if (group.live > 0) yield tenant
}

const isResult = <A>(result: ReadonlyArray<A> | ClaimResult<A>): result is ClaimResult<A> =>
  !Array.isArray(result)

/** The re-poll of a group with pops waiting, the largest claim and the follow-up's interval, by default. */
export const DEFAULTS = {
  repoll: Duration.seconds(10),
  maxClaim: 1_000,
  followUpInterval: Duration.zero
} as const

const QUEUED = 0
const HANDED = 1
const FINISHED = 2
const GONE = 3
type WaiterState = typeof QUEUED | typeof HANDED | typeof FINISHED | typeof GONE

/** Below this many stale heap entries compaction is not worth a pass. */
const COMPACT_FLOOR = 64
/** The longest timer the clock will arm (`setTimeout`'s limit). */
const MAX_SLEEP_MILLIS = 2 ** 31 - 1

type Resume<A, E> = (result: Effect.Effect<GroupedPopResult<A>, E>) => void

/** A waiting pop: in its group's FIFO and deadline heap until it is answered or leaves. */
class Waiter<A, E> {
  state: WaiterState = QUEUED
  /** For the heap: the pop is out of the FIFO. */
  get done(): boolean {
    return this.state !== QUEUED
  }
  /** Whether its entry is still in the deadline heap. */
  inHeap = true
  /** It joined parked pops after a claim that left nothing: no claim of its own, never fresh. */
  joined = false
  rows: ReadonlyArray<A> = []
  resume: Resume<A, E> | undefined = undefined
  /** The answer, when it came before the fiber registered its `resume`. */
  answer: Effect.Effect<GroupedPopResult<A>, E> | undefined = undefined
  constructor(
    readonly group: Group<A, E>,
    readonly batch: number,
    readonly deadline: number,
    readonly seq: number,
    /** How many claims of the group had started when it came. */
    readonly arrivedAt: number
  ) {}
}

/** One `(queue, tenant)`: its waiting pops, its claim in flight, its timer. */
class Group<A, E> {
  readonly fifo: Array<Waiter<A, E>> = []
  head = 0
  live = 0
  demand = 0
  readonly heap = new DeadlineHeap<Waiter<A, E>>()
  stale = 0
  /** A claim runs or is owed and waits to start: wakes and arrivals fold into it. */
  inFlight = false
  /** A claim runs (from its start until its rows are handed out). */
  running = false
  owed: GroupedWake | undefined = undefined
  lastFull = false
  /** The last claim succeeded and left nothing to claim: a pop that joins parked pops needs no claim. */
  lastDrained = false
  claimsStarted = 0
  /** When the latest claim started (clock millis). */
  claimBegan = Number.NEGATIVE_INFINITY
  /** Waiting pops that came since the last claim started (their first claim is still to run). */
  freshNow = 0
  /** Waiting pops whose first claim is the one in flight. */
  freshInClaim = 0
  repollAt = Number.POSITIVE_INFINITY
  timer: Fiber.Fiber<void, never> | undefined = undefined
  timerAt = Number.POSITIVE_INFINITY
  lastPass = Number.NEGATIVE_INFINITY
  /** `offer`s waiting for the next claim to start. */
  probes: Array<(drained: boolean) => void> = []
  /** Pops past their deadline whose first claim had not finished: they time out once it has. */
  overdue: Array<Waiter<A, E>> = []
  constructor(
    readonly queue: string,
    readonly tenant: string
  ) {}
}

const shutdownResult = Effect.succeed({ rows: [], wake: "shutdown" as const })
const timeoutResult = Effect.succeed({ rows: [], wake: "timeout" as const })
const FALSE = Effect.succeed(false)
/**
 * An `offer`'s answer once its claim is done. Effect 4 runs a resumed fiber inside `resume`: this one
 * yields first, so the claim's fiber finishes its step before the caller's continuation runs (see
 * `deliver`).
 */
const DRAINED = Effect.as(Effect.yieldNow, true)
const NOT_DRAINED = Effect.as(Effect.yieldNow, false)

/** The groups of one host's claim, keyed `queue -> tenant` (nested, so no two names collide). */
export class PopGroups<A, E> implements GroupSink {
  private readonly byQueue = new Map<string, Map<string, Group<A, E>>>()
  private waiters = 0
  /** Waiting pops whose first claim has not finished yet. */
  private fresh = 0
  private seq = 0
  private claims = 0
  private handed = 0
  private released = 0
  private readonly repoll: Duration.Duration
  private readonly maxClaim: number
  private readonly followUpMillis: number

  private constructor(
    private readonly host: GroupHost,
    private readonly options: GroupedPopsOptions<A, E>,
    private readonly clock: Clock.Clock,
    private readonly resolution: number,
    private readonly run: (effect: Effect.Effect<void>) => Fiber.Fiber<void, never>
  ) {
    this.repoll = Duration.fromInputUnsafe(options.repoll ?? DEFAULTS.repoll)
    this.maxClaim = options.maxClaim ?? DEFAULTS.maxClaim
    this.followUpMillis = Duration.toMillis(
      Duration.fromInputUnsafe(options.followUpInterval ?? DEFAULTS.followUpInterval)
    )
  }

  /** A group set whose claims and timers run in fibers of the current scope. */
  static make<A, E>(
    host: GroupHost,
    options: GroupedPopsOptions<A, E>,
    resolution: number
  ): Effect.Effect<PopGroups<A, E>, never, Scope.Scope> {
    return Effect.gen(function* () {
      const maxClaim = options.maxClaim
      if (maxClaim !== undefined && !(Number.isSafeInteger(maxClaim) && maxClaim >= 1)) {
        return yield* Effect.die(
          new Cause.IllegalArgumentError(
            `grouped pops: maxClaim must be a whole number of rows, 1 or more (got ${maxClaim})`
          )
        )
      }
      const followUp = options.followUpInterval
      if (followUp !== undefined && !Duration.isFinite(Duration.fromInputUnsafe(followUp))) {
        return yield* Effect.die(
          new Cause.IllegalArgumentError(
            "grouped pops: followUpInterval must be finite (a wake must be claimed)"
          )
        )
      }
      const clock = yield* Clock.Clock
      const run = yield* FiberSet.makeRuntime<never, void, never>()
      return new PopGroups(host, options, clock, resolution, (effect) => run(effect))
    })
  }

  get parked(): number {
    return this.waiters - this.fresh
  }

  /** The groups in the index, those with no pop waiting for their timer included (for tests). */
  get groupCount(): number {
    let count = 0
    for (const byTenant of this.byQueue.values()) count += byTenant.size
    return count
  }

  /** The host's API, as effects. */
  api(): GroupedPops<A, E> {
    return {
      pop: (target, options) => this.pop(target, options),
      offer: (target) => this.offer(target),
      waiting: Effect.sync(() => this.waiters),
      counts: Effect.sync(() => ({ claims: this.claims, handed: this.handed, released: this.released }))
    }
  }

  // -------------------------------------------------------------------------------------------
  // the waker's side
  // -------------------------------------------------------------------------------------------

  wake(queue: string, tenant: string): void {
    const group = this.byQueue.get(queue)?.get(tenant)
    if (group !== undefined) this.demandClaim(group, "woken")
  }

  wakeQueue(queue: string): void {
    const byTenant = this.byQueue.get(queue)
    if (byTenant === undefined) return
    for (const group of [...byTenant.values()]) this.demandClaim(group, "woken")
  }

  tenantsOn(queue: string): Iterable<string> | undefined {
    const byTenant = this.byQueue.get(queue)
    if (byTenant === undefined) return undefined
    // Groups that wait for their timer to leave have no pop: they are not waiting for hints.
    for (const group of byTenant.values()) if (group.live === 0) return waitingTenants(byTenant)
    return byTenant.keys()
  }

  releaseAll(): number {
    let released = 0
    for (const byTenant of [...this.byQueue.values()]) {
      for (const group of [...byTenant.values()]) {
        released += this.answerAll(group, shutdownResult)
        this.resolveProbes(group, false)
        this.settleIdle(group)
      }
    }
    return released
  }

  shortenRepoll(short: Duration.Duration): void {
    const due = this.clock.currentTimeMillisUnsafe() + Duration.toMillis(short)
    for (const byTenant of this.byQueue.values()) {
      for (const group of byTenant.values()) {
        if (group.inFlight || group.live === 0 || group.repollAt <= due) continue
        group.repollAt = due
        this.arm(group)
      }
    }
  }

  // -------------------------------------------------------------------------------------------
  // the host's side
  // -------------------------------------------------------------------------------------------

  private pop(
    target: GroupTarget,
    options: { readonly batch: number; readonly maxWait: Duration.Input }
  ): Effect.Effect<GroupedPopResult<A>, E> {
    return Effect.uninterruptibleMask((restore) =>
      Effect.suspend(() => {
        if (this.host.closed) return shutdownResult
        const maxWait = Duration.toMillis(Duration.fromInputUnsafe(options.maxWait))
        const tenant = this.host.tenantOf(target)
        // A name no wake could carry: nothing to claim for, so it just waits out `maxWait`.
        if (tenant === undefined) return restore(Effect.andThen(Effect.sleep(maxWait), timeoutResult))
        const batch = Number.isFinite(options.batch) ? Math.max(1, Math.floor(options.batch)) : 1
        const deadline = this.clock.currentTimeMillisUnsafe() + Math.max(0, maxWait)
        const waiter = this.arrive(this.groupOf(target.queue, tenant), batch, deadline)
        const wait = Effect.callback<GroupedPopResult<A>, E>((resume) => {
          if (waiter.answer !== undefined) resume(waiter.answer)
          else waiter.resume = resume
        })
        return restore(wait).pipe(
          Effect.onInterrupt(() => Effect.sync(() => this.leave(waiter))),
          // Outside `restore`: once the answer is out of the wait, no interruption can lose its rows.
          Effect.map((result) => {
            waiter.state = FINISHED
            waiter.rows = []
            return result
          })
        )
      })
    )
  }

  private offer(target: GroupTarget): Effect.Effect<boolean> {
    return Effect.suspend(() => {
      if (this.host.closed) return FALSE
      const tenant = this.host.tenantOf(target)
      const group = tenant === undefined ? undefined : this.byQueue.get(target.queue)?.get(tenant)
      if (group === undefined || group.live === 0) return FALSE
      return Effect.callback<boolean>((resume) => {
        const probe = (drained: boolean) => resume(drained ? DRAINED : NOT_DRAINED)
        group.probes.push(probe)
        this.demandClaim(group, "woken")
        return Effect.sync(() => {
          const at = group.probes.indexOf(probe)
          if (at >= 0) group.probes.splice(at, 1)
        })
      })
    })
  }

  // -------------------------------------------------------------------------------------------
  // the groups
  // -------------------------------------------------------------------------------------------

  private groupOf(queue: string, tenant: string): Group<A, E> {
    let byTenant = this.byQueue.get(queue)
    if (byTenant === undefined) {
      byTenant = new Map()
      this.byQueue.set(queue, byTenant)
    }
    let group = byTenant.get(tenant)
    if (group === undefined) {
      group = new Group(queue, tenant)
      byTenant.set(tenant, group)
    }
    return group
  }

  private arrive(group: Group<A, E>, batch: number, deadline: number): Waiter<A, E> {
    const waiter = new Waiter(group, batch, deadline, this.seq++, group.claimsStarted)
    // Pops already parked here, after a claim that left nothing: what is committed from now on reaches
    // them through a wake or the group's re-poll, and this pop with them, so it joins them without a
    // claim of its own. A consumer's re-pop then costs nothing while its queue is empty.
    const joins = group.lastDrained && group.live - group.freshNow - group.freshInClaim > 0
    group.fifo.push(waiter)
    group.heap.push(waiter)
    group.live++
    group.demand += batch
    this.waiters++
    if (joins) {
      waiter.joined = true
    } else {
      group.freshNow++
      this.fresh++
      // Otherwise it claims once on its arrival, as an ungrouped pop would: it must see what was
      // committed before it came, whatever hints were lost.
      this.demandClaim(group, "woken")
    }
    this.arm(group)
    return waiter
  }

  /** A claim is wanted: started now, or owed after the one in flight. */
  private demandClaim(group: Group<A, E>, reason: GroupedWake): void {
    if (group.live === 0) return
    if (group.inFlight) {
      group.owed ??= reason
      return
    }
    this.startClaim(group, reason)
  }

  private startClaim(group: Group<A, E>, reason: GroupedWake): void {
    group.inFlight = true
    group.repollAt = Number.POSITIVE_INFINITY
    this.run(Effect.uninterruptible(this.claimLoop(group, reason)))
  }

  /** One claim, its rows handed out, then the next claim if one is owed. */
  private claimLoop(group: Group<A, E>, reason: GroupedWake): Effect.Effect<void> {
    return Effect.suspend(() => {
      const seq = ++group.claimsStarted
      group.claimBegan = this.clock.currentTimeMillisUnsafe()
      group.running = true
      group.freshInClaim = group.freshNow
      group.freshNow = 0
      const limit = Math.min(Math.max(group.demand, 1), this.maxClaim)
      const probes = group.probes
      group.probes = []
      group.owed = undefined
      this.claims++
      const request: ClaimRequest = {
        queue: group.queue,
        tenant: group.tenant,
        limit,
        partitions: this.host.takeHints(group.queue, group.tenant)
      }
      const claimed = Effect.suspend(() => this.options.claim(request)).pipe(
        Effect.map(
          (result): ClaimResult<A> =>
            isResult(result) ? result : { rows: result, more: result.length >= limit }
        )
      )
      return Effect.flatMap(Effect.exit(claimed), (exit) => {
        const leftover = this.settleClaim(group, seq, reason, exit)
        if (group.overdue.length > 0) this.timeOutOverdue(group, seq)
        // The pops this claim was the first for, and still waiting, are parked now.
        this.fresh -= group.freshInClaim
        group.freshInClaim = 0
        group.running = false
        for (const probe of probes) probe(Exit.isSuccess(exit) && !exit.value.more)
        const next = Effect.suspend(() => {
          const again = this.nextClaim(group)
          if (again === undefined) return this.idle(group)
          // Owed to wakes and arrivals (not to a full claim): spaced from the claim before it. The group
          // stays in flight meanwhile, so what lands folds into this follow-up.
          const wait = group.lastFull
            ? 0
            : group.claimBegan + this.followUpMillis - this.clock.currentTimeMillisUnsafe()
          if (wait <= 0) return this.claimLoop(group, again)
          // Only the wait is wrapped (and interruptible): the loop after it must not nest in it.
          return Effect.interruptible(Effect.sleep(Duration.millis(wait))).pipe(
            // The scope closed while it waited: nothing will claim for this group any more.
            Effect.onInterrupt(() =>
              Effect.sync(() => {
                group.inFlight = false
                this.resolveProbes(group, false)
              })
            ),
            Effect.andThen(
              Effect.suspend(() => {
                const owed = this.nextClaim(group)
                return owed === undefined ? this.idle(group) : this.claimLoop(group, owed)
              })
            )
          )
        })
        return leftover.length === 0 ? next : Effect.andThen(this.releaseRows(group, leftover), next)
      })
    })
  }

  /** No claim owed: the group waits for a wake, an arrival or its re-poll. */
  private idle(group: Group<A, E>): Effect.Effect<void> {
    group.inFlight = false
    group.repollAt =
      this.clock.currentTimeMillisUnsafe() + Duration.toMillis(this.host.repollWithin(this.repoll))
    this.arm(group)
    this.settleIdle(group)
    return Effect.void
  }

  /** Hands a claim's rows out (or fails the pops it was for); returns the rows no pop took. */
  private settleClaim(
    group: Group<A, E>,
    seq: number,
    reason: GroupedWake,
    exit: Exit.Exit<ClaimResult<A>, E>
  ): ReadonlyArray<A> {
    if (Exit.isFailure(exit)) {
      group.lastFull = false
      group.lastDrained = false
      // The pops this claim was for fail with it, as each would have with a claim of its own; those
      // that came during it are owed the next one.
      this.failPresent(group, seq, exit.cause)
      return []
    }
    const { rows, more } = exit.value
    group.lastFull = more
    group.lastDrained = !more
    return this.handOut(group, rows, (waiter) =>
      !waiter.joined && waiter.arrivedAt + 1 === seq ? "none" : reason
    )
  }

  /** Gives `rows` to the waiting pops in the order they came; returns what is left. */
  private handOut(
    group: Group<A, E>,
    rows: ReadonlyArray<A>,
    wakeOf: (waiter: Waiter<A, E>) => GroupedWake
  ): ReadonlyArray<A> {
    let at = 0
    while (at < rows.length) {
      const waiter = this.nextQueued(group)
      if (waiter === undefined) break
      const mine = rows.slice(at, at + waiter.batch)
      at += mine.length
      this.dequeue(group, waiter, HANDED)
      waiter.rows = mine
      this.handed += mine.length
      this.deliver(waiter, Effect.succeed({ rows: mine, wake: wakeOf(waiter) }))
    }
    return at === 0 ? rows : rows.slice(at)
  }

  private failPresent(group: Group<A, E>, seq: number, cause: Cause.Cause<E>): void {
    const failed = Effect.failCause(cause)
    for (let i = group.head; i < group.fifo.length; i++) {
      const waiter = group.fifo[i]!
      if (waiter.state !== QUEUED || waiter.arrivedAt >= seq) continue
      this.dequeue(group, waiter, FINISHED)
      this.deliver(waiter, failed)
    }
    this.compactFifo(group)
  }

  /** The reason for another claim right away, if one is owed and pops still wait. */
  private nextClaim(group: Group<A, E>): GroupedWake | undefined {
    if (group.live === 0) {
      group.owed = undefined
      return undefined
    }
    const owed = group.owed
    if (owed !== undefined) return owed
    return group.lastFull ? "woken" : undefined
  }

  /** The pop's fiber was interrupted before it took its answer. */
  private leave(waiter: Waiter<A, E>): void {
    const group = waiter.group
    if (waiter.state === QUEUED) {
      this.dequeue(group, waiter, GONE)
      this.compactFifo(group)
      if (group.live === 0) this.settleIdle(group)
      else this.arm(group)
      return
    }
    if (waiter.state !== HANDED) return
    waiter.state = GONE
    const rows = waiter.rows
    waiter.rows = []
    this.handed -= rows.length
    const leftover = this.handOut(group, rows, () => "woken")
    if (leftover.length > 0) this.run(this.releaseRows(group, leftover))
    if (group.live === 0) this.settleIdle(group)
  }

  private releaseRows(group: Group<A, E>, rows: ReadonlyArray<A>): Effect.Effect<void> {
    this.released += rows.length
    // Claimable again: the next pop to come must claim.
    group.lastDrained = false
    return Effect.suspend(() =>
      this.options.release({ queue: group.queue, tenant: group.tenant }, rows)
    ).pipe(
      Effect.catchCause((cause) =>
        Effect.logWarning(`${rows.length} claimed rows not released; their lease will hand them back`, cause)
      ),
      Effect.annotateLogs({ module: "LocalWaker", fiber: "release" })
    )
  }

  /**
   * Hands `answer` to the pop, or keeps it for the pop to take when it registers. Effect 4 runs a
   * resumed fiber inside `resume`: the answer yields first, so the pop's continuation runs on the
   * scheduler once the hand-out (or time-out, or release) is done, never inside it, as with effect 3.
   * Until it has run, the pop's rows are handed but not taken: interrupted then, it gives them back.
   */
  private deliver(waiter: Waiter<A, E>, answer: Effect.Effect<GroupedPopResult<A>, E>): void {
    const resume = waiter.resume
    waiter.resume = undefined
    if (resume !== undefined) resume(Effect.andThen(Effect.yieldNow, answer))
    else waiter.answer = answer
  }

  /**
   * Out of the FIFO, in its new `state`: out of the live count and demand; its heap entry, unless
   * already popped, goes stale.
   */
  private dequeue(
    group: Group<A, E>,
    waiter: Waiter<A, E>,
    state: Exclude<WaiterState, typeof QUEUED>
  ): void {
    waiter.state = state
    if (waiter.joined) {
      // Never fresh.
    } else if (waiter.arrivedAt === group.claimsStarted) {
      group.freshNow--
      this.fresh--
    } else if (group.running && waiter.arrivedAt === group.claimsStarted - 1) {
      group.freshInClaim--
      this.fresh--
    }
    group.live--
    group.demand -= waiter.batch
    this.waiters--
    if (!waiter.inHeap) return
    group.stale++
    if (group.stale > group.live && group.stale >= COMPACT_FLOOR) {
      group.heap.compact()
      group.stale = 0
    }
  }

  private nextQueued(group: Group<A, E>): Waiter<A, E> | undefined {
    const fifo = group.fifo
    while (group.head < fifo.length && fifo[group.head]!.state !== QUEUED) group.head++
    this.compactFifo(group)
    return fifo[group.head]
  }

  private compactFifo(group: Group<A, E>): void {
    if (group.head >= COMPACT_FLOOR && group.head * 2 >= group.fifo.length) {
      group.fifo.splice(0, group.head)
      group.head = 0
    }
    if (group.live === 0 && group.fifo.length > 0) {
      group.fifo.length = 0
      group.head = 0
    }
  }

  private answerAll(group: Group<A, E>, answer: Effect.Effect<GroupedPopResult<A>, E>): number {
    let answered = 0
    for (let i = group.head; i < group.fifo.length; i++) {
      const waiter = group.fifo[i]!
      if (waiter.state !== QUEUED) continue
      this.dequeue(group, waiter, FINISHED)
      this.deliver(waiter, answer)
      answered++
    }
    this.compactFifo(group)
    return answered
  }

  private resolveProbes(group: Group<A, E>, drained: boolean): void {
    const probes = group.probes
    group.probes = []
    for (const probe of probes) probe(drained)
  }

  /**
   * A group with no pop and no claim leaves the index once it has no timer armed. One whose last pop
   * was just answered keeps its timer (armed for that pop's deadline or the group's re-poll, so it
   * lingers no longer than a pop of it would have waited) and stays until the timer fires: a pop that
   * comes back meanwhile (a consumer popping again after each answer) finds its group with its timer
   * armed, where it used to make a new group, fork a timer fiber for it and interrupt the old one, once
   * per message.
   */
  private settleIdle(group: Group<A, E>): void {
    if (group.live > 0 || group.inFlight) return
    this.resolveProbes(group, false)
    if (group.timer !== undefined) return
    const byTenant = this.byQueue.get(group.queue)
    if (byTenant?.get(group.tenant) !== group) return
    byTenant.delete(group.tenant)
    if (byTenant.size === 0) this.byQueue.delete(group.queue)
  }

  // -------------------------------------------------------------------------------------------
  // time: deadlines and the re-poll
  // -------------------------------------------------------------------------------------------

  /** The earliest deadline of a waiting pop, its stale heap entries dropped on the way. */
  private firstDeadline(group: Group<A, E>): number {
    let top = group.heap.peek()
    while (top?.done) {
      group.heap.pop()
      group.stale--
      top = group.heap.peek()
    }
    return top === undefined ? Number.POSITIVE_INFINITY : top.deadline
  }

  /** Arms the group's timer for its next deadline or re-poll, if it would otherwise wake later. */
  private arm(group: Group<A, E>): void {
    // A group with no pop keeps the timer it has, and leaves the index when that fires (`settleIdle`).
    if (group.live === 0) return
    const deadline = this.firstDeadline(group)
    const due = Math.min(
      group.repollAt,
      deadline === Number.POSITIVE_INFINITY ? deadline : Math.max(deadline, group.lastPass + this.resolution)
    )
    if (due === Number.POSITIVE_INFINITY || due >= group.timerAt) return
    this.stopTimer(group)
    const wait = Math.min(Math.max(0, due - this.clock.currentTimeMillisUnsafe()), MAX_SLEEP_MILLIS)
    group.timerAt = due
    const timer = this.run(
      Effect.andThen(
        Effect.sleep(Duration.millis(wait)),
        Effect.sync(() => {
          group.timer = undefined
          group.timerAt = Number.POSITIVE_INFINITY
          this.tick(group)
        })
      ).pipe(Effect.annotateLogs({ module: "LocalWaker", fiber: "group-timer" }))
    )
    // A wait of zero ticks inside `run` (the fiber starts at once): that timer is gone already, and the
    // tick may have armed the next one.
    if (timer.pollUnsafe() === undefined) group.timer = timer
  }

  private stopTimer(group: Group<A, E>): void {
    const timer = group.timer
    group.timer = undefined
    group.timerAt = Number.POSITIVE_INFINITY
    timer?.interruptUnsafe()
  }

  /** Whether the pop's first claim (the one for its arrival) has not finished yet. */
  private isFresh(group: Group<A, E>, waiter: Waiter<A, E>): boolean {
    return (
      !waiter.joined &&
      (waiter.arrivedAt === group.claimsStarted ||
        (group.running && waiter.arrivedAt === group.claimsStarted - 1))
    )
  }

  /** The overdue pops whose first claim was `seq` or earlier, and found nothing for them, time out. */
  private timeOutOverdue(group: Group<A, E>, seq: number): void {
    const still: Array<Waiter<A, E>> = []
    for (const waiter of group.overdue) {
      if (waiter.state !== QUEUED) continue
      if (waiter.arrivedAt >= seq) {
        still.push(waiter)
        continue
      }
      this.dequeue(group, waiter, FINISHED)
      this.deliver(waiter, timeoutResult)
    }
    group.overdue = still
    this.compactFifo(group)
  }

  /** Times out the pops due, and re-polls when the group's re-poll is due. */
  private tick(group: Group<A, E>): void {
    const now = this.clock.currentTimeMillisUnsafe()
    let expired = false
    while (this.firstDeadline(group) <= now) {
      const waiter = group.heap.pop()!
      waiter.inHeap = false
      // A pop always gets its arrival claim's answer, however short its wait: it times out after it.
      if (this.isFresh(group, waiter)) {
        group.overdue.push(waiter)
        continue
      }
      this.dequeue(group, waiter, FINISHED)
      this.deliver(waiter, timeoutResult)
      expired = true
    }
    if (expired) {
      group.lastPass = now
      this.compactFifo(group)
    }
    if (group.live > 0 && !group.inFlight && now >= group.repollAt) this.startClaim(group, "timeout")
    this.arm(group)
    this.settleIdle(group)
  }
}
