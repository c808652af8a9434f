/**
 * The deadline reaper of the shipped waker: the one fiber that times parked pops out, so a pop costs
 * no timer fiber of its own and a wake resumes it directly.
 *
 * It sleeps (on the `Clock`, so `TestClock` drives it) until the earliest deadline in the parked-pop
 * index. A park due before the reaper would wake restarts it (the `FiberHandle` interrupts the sleeping
 * one), so the common pass is one plain sleep, not a race. Passes that time pops out are at least
 * `resolution` apart: a wake-up costs far more than a pop, so pops due close together share one (never
 * early, at most `resolution` late). With nothing parked the reaper ends.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberHandle from "effect/FiberHandle"
import type * as Scope from "effect/Scope"
import type { ParkedPops } from "./parkedPops.js"

/** The longest timer the clock will arm (`setTimeout`'s limit). */
const MAX_SLEEP_MILLIS = 2 ** 31 - 1

/** The reaper of one parked-pop index. */
export class DeadlineReaper {
  /** When the sleeping reaper wakes next (`+Infinity`: it is not running). */
  private wakesAt = Number.POSITIVE_INFINITY
  /** When the last pass that timed a pop out ran. */
  private lastPass = Number.NEGATIVE_INFINITY
  /** The reaper's fiber body, built once: restarting it allocates no new effect. */
  private readonly loop: Effect.Effect<void>

  private constructor(
    private readonly pops: ParkedPops,
    /** The least time between two passes that time pops out, in milliseconds. */
    readonly resolution: number,
    private readonly clock: Clock.Clock,
    private readonly run: (reaper: Effect.Effect<void>) => unknown
  ) {
    const pass = Effect.suspend(() => this.pass())
    // The loop shape of every background loop: one pass, `catchCause` to a log (then a pause, so a
    // persistent defect cannot spin), repeated; annotated, interruptible, owned by the scope's handle.
    const iteration = pass.pipe(
      Effect.catchCause((cause) =>
        Effect.logError("reaper pass failed; carrying on", cause).pipe(
          Effect.andThen(Effect.sleep(Duration.millis(Math.max(resolution, 100)))),
          Effect.as(true)
        )
      )
    )
    this.loop = Effect.suspend(() => {
      let more = true
      // A plain loop: `Effect.repeat` would run a `Schedule` step on every pass.
      return Effect.whileLoop({ while: () => more, body: () => iteration, step: (next) => (more = next) })
    }).pipe(Effect.annotateLogs({ module: "LocalWaker", fiber: "reaper" }), Effect.interruptible)
  }

  /** The reaper of `pops`, its fiber in the current scope (started by the first park). */
  static make(pops: ParkedPops, resolution: number): Effect.Effect<DeadlineReaper, never, Scope.Scope> {
    return Effect.gen(function* () {
      const clock = yield* Clock.Clock
      const run = yield* FiberHandle.makeRuntime<never, never, void>()
      return new DeadlineReaper(pops, resolution, clock, run)
    })
  }

  /** When the reaper wakes next, in `Clock` milliseconds (`+Infinity` while it is not running). */
  get nextWake(): number {
    return this.wakesAt
  }

  /** A pop was parked, due at `deadline`: (re)starts the reaper if it would otherwise wake later. */
  parked(deadline: number): void {
    const due = Math.max(deadline, this.lastPass + this.resolution)
    if (due < this.wakesAt) {
      this.wakesAt = due
      this.run(this.loop)
    }
  }

  /** Times out the pops due now, then sleeps until the next is due; false when none is left to wait for. */
  private pass(): Effect.Effect<boolean> {
    const now = this.clock.currentTimeMillisUnsafe()
    if (this.pops.expire(now) > 0) this.lastPass = now
    const next = this.pops.nextDeadline()
    if (next === Number.POSITIVE_INFINITY) {
      this.wakesAt = Number.POSITIVE_INFINITY
      return Effect.succeed(false)
    }
    // Timers past ~24.8 days never fire, so a longer wait is taken in steps.
    const wait = Math.min(Math.max(next, this.lastPass + this.resolution) - now, MAX_SLEEP_MILLIS)
    this.wakesAt = now + wait
    return Effect.as(Effect.sleep(Duration.millis(wait)), true)
  }
}
