/**
 * One timer for the heartbeats of every outbound link of a node (spec "Topology": heartbeats every
 * interval keep liveness fresh on an idle link). Each tick hands every link that is up its heartbeat
 * (a link busy since the last tick may skip it: `PeerLink.heartbeat`) and runs
 * its liveness check, all in one turn of the event loop. A timer per link woke the process once per
 * link per interval, and what an idle node costs is mostly its wake-ups; with one timer a node of 16
 * wakes as often as a node of 2. While no link is up the loop waits with no timer armed.
 *
 * A link's first heartbeat comes at the first tick after it is up: within one interval, as before. On
 * the live clock the ticks fall on the clock's multiples of the interval, the same moments on every node.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Latch from "effect/Latch"
import type * as Scope from "effect/Scope"
import { loop, loopFaults } from "../loop.js"
import * as Stall from "../stall.js"

/** What one link does on a tick, given the clock's time in milliseconds. */
export type Beat = (now: number) => void

export class Heartbeats {
  private readonly beats = new Set<Beat>()

  constructor(
    /** Called when the first beat is added (none were beating). */
    private readonly onSome: () => void,
    /** Called when the last beat is removed. */
    private readonly onNone: () => void
  ) {}

  /** Links beating now. */
  get size(): number {
    return this.beats.size
  }

  /** Calls `beat` on every tick from now until the returned function is called (once or more). */
  add(beat: Beat): () => void {
    // Wrapped, so the same function added twice is two beats and each removal removes its own.
    const own: Beat = (now) => beat(now)
    this.beats.add(own)
    if (this.beats.size === 1) this.onSome()
    return () => {
      if (this.beats.delete(own) && this.beats.size === 0) this.onNone()
    }
  }

  /** One tick: every beat, each on its own (a defect in one leaves the others their heartbeat). */
  tick(now: number): void {
    let failure: { readonly defect: unknown } | undefined
    for (const beat of [...this.beats]) {
      try {
        beat(now)
      } catch (defect) {
        failure ??= { defect }
      }
    }
    if (failure !== undefined) throw failure.defect
  }
}

/**
 * The heartbeat timer of a node, ticking every `interval` while a link is up, in the current scope.
 *
 * On the live clock the tick is a plain timer that calls the beats directly: a tick that runs no fiber
 * costs an idle node a fraction of one that does (the runtime's code is cold after a second asleep, and
 * an idle node is mostly its wake-ups). Under any other clock (`TestClock`) it is a fiber sleeping on
 * that clock, so tests move it with the clock.
 */
export const make = (interval: Duration.Duration): Effect.Effect<Heartbeats, never, Scope.Scope> =>
  Clock.clockWith((clock) =>
    Stall.isLive(clock) ? onTimers(Duration.toMillis(interval), clock) : onFiber(interval)
  )

/** Ticks on the clock's fiber: a loop sleeping `interval` while a link is up. */
const onFiber = (interval: Duration.Duration): Effect.Effect<Heartbeats, never, Scope.Scope> =>
  Effect.gen(function* () {
    const some = yield* Latch.make(false)
    const heartbeats = new Heartbeats(
      () => some.openUnsafe(),
      () => some.closeUnsafe()
    )
    const tick = Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => heartbeats.tick(now)))
    // A late tick reads what arrived meanwhile before its liveness checks judge (`Stall`).
    yield* loop("Heartbeats", Effect.andThen(Stall.sleep(interval), tick), { before: some.await })
    return heartbeats
  })

/**
 * The next tick of a timer that ticks on the clock's multiples of `intervalMs`: after `now`, or, right
 * after a tick (which a timer may run a little early or late), the boundary nearest one interval on.
 */
export const nextBoundary = (now: number, intervalMs: number, ticked: boolean): number =>
  ticked
    ? Math.round((now + intervalMs) / intervalMs) * intervalMs
    : (Math.floor(now / intervalMs) + 1) * intervalMs

/**
 * Ticks on Node's timers: armed while a link is up, each tick arming the next, on the wall clock's
 * multiples of the interval. Every node of a mesh then beats at the same moments (as far as their
 * clocks agree), so a node's own tick and its peers' heartbeats wake it once per interval together
 * instead of once per peer, each at its own phase: what an idle node costs is mostly its wake-ups. A tick woken more than
 * `Stall.LATE_MILLIS` late reads what arrived meanwhile first (one turn of the event loop), as the
 * fiber's does; a defect in a beat is logged and the timer carries on, as `loop` does.
 */
const onTimers = (intervalMs: number, clock: Clock.Clock): Effect.Effect<Heartbeats, never, Scope.Scope> =>
  Effect.gen(function* () {
    const runFork = Effect.runForkWith(yield* Effect.context<never>())
    const faults = yield* loopFaults
    let cancel: (() => void) | undefined
    let closed = false
    const heartbeats: Heartbeats = new Heartbeats(
      () => arm(),
      () => {}
    )
    const tick = () => {
      cancel = undefined
      if (closed || heartbeats.size === 0) return
      try {
        if (faults?.next("Heartbeats")) throw new Error("injected defect in loop Heartbeats")
        heartbeats.tick(clock.currentTimeMillisUnsafe())
      } catch (defect) {
        faults?.record("Heartbeats")
        runFork(
          Effect.logError("background loop Heartbeats failed; it carries on", Cause.die(defect)).pipe(
            Effect.annotateLogs({ module: "Heartbeats" })
          )
        )
      }
      arm(true)
    }
    function arm(ticked = false): void {
      if (closed || cancel !== undefined || heartbeats.size === 0) return
      const now = clock.currentTimeMillisUnsafe()
      cancel = Stall.after(clock, nextBoundary(now, intervalMs, ticked) - now, tick)
    }
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        closed = true
        cancel?.()
      })
    )
    return heartbeats
  })
