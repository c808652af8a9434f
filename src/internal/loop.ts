/**
 * The one shape of every background loop of the mesh (liveness monitor, hot-list flush, heartbeats,
 * the waker's reaper, the metrics sync): the work, `catchCause` to a logged error so a defect never
 * stops the loop for the life of the process, then the loop's pause, annotated with its module, forked
 * into the owning scope and interruptible.
 *
 * `LoopFaults` is the seam the tests use to prove that: provided as the `loopFaults` reference while a
 * node is built, it makes the next iterations of a named loop die with a defect before their work, and
 * counts the defects each loop caught. A loop reads the reference once, when it is forked.
 *
 * @internal
 */
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import type * as Scope from "effect/Scope"

/** Defects to inject into named loops, and the defects they caught (tests only). */
export class LoopFaults {
  private readonly pending = new Map<string, number>()
  private readonly counts = new Map<string, number>()

  /** The next `times` iterations of every loop named `name` die with a defect. */
  inject(name: string, times = 1): void {
    this.pending.set(name, (this.pending.get(name) ?? 0) + times)
  }

  /** Defects the loops named `name` caught. */
  caught(name: string): number {
    return this.counts.get(name) ?? 0
  }

  /** @internal the loop's side */
  next(name: string): boolean {
    const left = this.pending.get(name)
    if (left === undefined || left <= 0) return false
    if (left === 1) this.pending.delete(name)
    else this.pending.set(name, left - 1)
    return true
  }

  /** @internal the loop's side */
  record(name: string): void {
    this.counts.set(name, this.caught(name) + 1)
  }
}

/** The faults loops forked under it inject and count; none in production. */
export const loopFaults: Context.Reference<LoopFaults | undefined> = Context.Reference<
  LoopFaults | undefined
>("queen-mesh/internal/loopFaults", { defaultValue: () => undefined })

export interface LoopOptions {
  /** The pause after each iteration: fixed, or computed after the work. Default: none. */
  readonly sleep?: Duration.Input | (() => Duration.Input)
  /** Waits before each iteration (e.g. until there is work), instead of or beside `sleep`. */
  readonly before?: Effect.Effect<void>
  readonly annotations?: Readonly<Record<string, unknown>>
}

/** Forks `work` as a loop of the one shape into the current scope. */
export const loop = <R>(
  name: string,
  work: Effect.Effect<void, never, R>,
  options: LoopOptions = {}
): Effect.Effect<Fiber.Fiber<never>, never, Scope.Scope | R> => {
  const sleep = options.sleep
  const pause =
    sleep === undefined
      ? Effect.void
      : typeof sleep === "function"
        ? Effect.suspend(() => Effect.sleep(sleep()))
        : Effect.sleep(sleep)
  return Effect.flatMap(Effect.service(loopFaults), (faults) => {
    const iteration = (
      faults === undefined
        ? work
        : Effect.andThen(
            Effect.suspend(() =>
              faults.next(name) ? Effect.die(new Error(`injected defect in loop ${name}`)) : Effect.void
            ),
            work
          )
    ).pipe(
      Effect.catchCause((cause) =>
        Effect.andThen(
          Effect.sync(() => faults?.record(name)),
          Effect.logError(`background loop ${name} failed; it carries on`, cause)
        )
      )
    )
    const body = options.before === undefined ? iteration : Effect.andThen(options.before, iteration)
    return Effect.forever(Effect.andThen(body, pause))
  }).pipe(
    Effect.annotateLogs({ module: name, ...options.annotations }),
    Effect.interruptible,
    Effect.forkScoped
  )
}
