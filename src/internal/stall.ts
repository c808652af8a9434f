/**
 * Judging silence after a stall of this process. A process that was stopped (SIGSTOP, a VM pause) or
 * whose event loop was held (a long GC, synchronous work) runs its overdue timers before it reads what
 * its sockets received meanwhile: Node's timers phase comes before its poll phase. A check fired then
 * would judge a peer silent whose frames are waiting unread, and a deadline spent while this process
 * was not running says nothing about the peer. So a check that wakes late by more than `LATE_MILLIS`
 * first yields one real turn of the event loop (a `setImmediate`, which runs after the poll phase, so
 * the pending data has been read and has refreshed whatever it refreshes), then judges on the clock as
 * it reads then. A check on time judges at once, as before.
 *
 * Every silence or deadline judgment of the links, the liveness map and the lane's members waits
 * through `sleep` here rather than `Effect.sleep`.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { yieldToEventLoop } from "./wire/batchScan.js"

/** A check this much later than it was due was held up: what arrived meanwhile is read first. */
export const LATE_MILLIS = 20

/** Once the clock reads `due` or later: at once when on time, after one turn of the event loop when late. */
export const caughtUp = (due: number): Effect.Effect<void> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => (now - due > LATE_MILLIS ? yieldToEventLoop : Effect.void))

/** `Effect.sleep` for a check that judges silence: a wake-up late past `LATE_MILLIS` reads pending I/O first. */
export const sleep = (duration: Duration.Input): Effect.Effect<void> =>
  Effect.flatMap(Clock.currentTimeMillis, (start) =>
    Effect.andThen(Effect.sleep(duration), caughtUp(start + Duration.toMillis(duration)))
  )

/**
 * `Effect.timeoutOrElse` failing with `onTimeout()`, for an answer awaited from elsewhere (the lane's
 * checks): the deadline is judged only once what arrived while this process was held up has been read,
 * and, given `busy`, only after a whole window in which the other side delivered nothing.
 */
export const within =
  <E2>(duration: Duration.Input, onTimeout: () => E2, busy?: Busy) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | E2, R> =>
    Effect.raceFirst(
      effect,
      Effect.andThen(
        quiet(duration, busy),
        Effect.suspend(() => Effect.fail(onTimeout()))
      )
    )

/**
 * What keeps a deadline of `within` from passing: a counter of what the awaited party has delivered
 * meanwhile, and how many whole windows it may buy. An answer queued behind a backlog that is being
 * delivered is late, not lost: a window in which `progress` moved starts another, up to `windows` in all.
 */
export interface Busy {
  readonly progress: () => number
  readonly windows: number
}

/** Sleeps `duration`, and again while `busy` says the awaited side is still delivering. */
const quiet = (duration: Duration.Input, busy: Busy | undefined): Effect.Effect<void> =>
  busy === undefined
    ? sleep(duration)
    : Effect.suspend(() => {
        let seen = busy.progress()
        let windows = 1
        const again: Effect.Effect<void> = Effect.flatMap(sleep(duration), () => {
          const now = busy.progress()
          if (now === seen || windows >= busy.windows) return Effect.void
          seen = now
          windows++
          return again
        })
        return again
      })

/** The runtime's own clock: the `Clock` reference's default, which every fiber reads unless given another. */
const liveClock = Context.get(Context.empty(), Clock.Clock)

/**
 * Whether `clock` is the runtime's own: its sleeps are Node's timers, so a check can arm one directly
 * and run no fiber until it has something to say. An idle node is mostly its wake-ups, and a fiber
 * woken once a second runs cold code each time; under `TestClock` every check sleeps on the clock.
 */
export const isLive = (clock: Clock.Clock): boolean => clock === liveClock

/**
 * Calls `run` once `millis` have passed on Node's timers, as `sleep` wakes: late past `LATE_MILLIS`,
 * after one turn of the event loop. Returns the function that cancels it (harmless once it has run).
 */
export const after = (clock: Clock.Clock, millis: number, run: () => void): (() => void) => {
  const due = clock.currentTimeMillisUnsafe() + millis
  let immediate: ReturnType<typeof setImmediate> | undefined
  const timer = setTimeout(() => {
    if (clock.currentTimeMillisUnsafe() - due > LATE_MILLIS) immediate = setImmediate(run)
    else run()
  }, millis)
  return () => {
    clearTimeout(timer)
    if (immediate !== undefined) clearImmediate(immediate)
  }
}

/**
 * Completes once `remaining(now)` is zero or less, asking again each time the milliseconds it returned
 * have passed (a silence judged against a moving last-heard time). Each wake-up judges as `sleep`'s
 * does: late past `LATE_MILLIS`, after one turn of the event loop. On the live clock every wait shares
 * one timer (`Silences`), with no fiber woken until it completes.
 */
export const until = (remaining: (now: number) => number): Effect.Effect<void> =>
  Clock.clockWith((clock) => {
    if (!isLive(clock)) {
      const check: Effect.Effect<void> = Effect.suspend(() => {
        const left = remaining(clock.currentTimeMillisUnsafe())
        return left <= 0 ? Effect.void : Effect.andThen(sleep(Duration.millis(left)), check)
      })
      return check
    }
    return Effect.callback<void>((resume) => silences.wait(remaining, resume))
  })

/** A wait of `until` on the live clock: when it was last asked to be judged again. */
interface Silence {
  readonly remaining: (now: number) => number
  readonly resume: (effect: Effect.Effect<void>) => void
  due: number
}

/**
 * The waits of `until` on the live clock, on one timer armed for the earliest. Each wait's deadline is a
 * last-heard time plus a timeout, moved on by every frame, so a timer per wait woke the process once per
 * link per timeout only to find it later again; one timer wakes once for all of them (they are asked
 * together, each heard within the last interval), and a node of 16 links wakes as often as a node of 1.
 */
class Silences {
  private readonly waiting = new Set<Silence>()
  private cancel: (() => void) | undefined = undefined
  private armedFor = Number.POSITIVE_INFINITY

  /** Waits until `remaining` says the silence is long enough; the returned effect cancels the wait. */
  wait(
    remaining: (now: number) => number,
    resume: (effect: Effect.Effect<void>) => void
  ): Effect.Effect<void> {
    const left = remaining(liveClock.currentTimeMillisUnsafe())
    if (left <= 0) {
      resume(Effect.void)
      return Effect.void
    }
    const silence: Silence = { remaining, resume, due: liveClock.currentTimeMillisUnsafe() + left }
    this.waiting.add(silence)
    if (silence.due < this.armedFor) this.arm(silence.due)
    return Effect.sync(() => {
      this.waiting.delete(silence)
      if (this.waiting.size === 0) this.arm(Number.POSITIVE_INFINITY)
    })
  }

  /** The timer for `due` (none for infinity), replacing the one armed. */
  private arm(due: number): void {
    this.cancel?.()
    this.cancel = undefined
    this.armedFor = due
    if (due === Number.POSITIVE_INFINITY) return
    this.cancel = after(liveClock, Math.max(0, due - liveClock.currentTimeMillisUnsafe()), this.judge)
  }

  /** Every wait asked again: the silent ones complete, the others are due later; then the next timer. */
  private readonly judge = (): void => {
    this.cancel = undefined
    this.armedFor = Number.POSITIVE_INFINITY
    const now = liveClock.currentTimeMillisUnsafe()
    let next = Number.POSITIVE_INFINITY
    for (const silence of [...this.waiting]) {
      let left: number
      try {
        left = silence.remaining(now)
      } catch (defect) {
        this.waiting.delete(silence)
        silence.resume(Effect.die(defect))
        continue
      }
      if (left <= 0) {
        this.waiting.delete(silence)
        silence.resume(Effect.void)
      } else {
        silence.due = now + left
        if (silence.due < next) next = silence.due
      }
    }
    if (next < this.armedFor) this.arm(next)
  }
}

const silences = new Silences()
