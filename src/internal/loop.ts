/**
 * The one shape of every background loop of the mesh (liveness monitor, hot-list flush, heartbeats,
 * the waker's reaper, the metrics sync): the work, `catchAllCause` to a logged error so a defect never
 * stops the loop for the life of the process, then the loop's pause, annotated with its module, forked
 * into the owning scope and interruptible.
 *
 * `injectDefect` is the seam the tests use to prove that: the next iteration of the named loop dies
 * with a defect before its work, and the loop must carry on.
 *
 * @internal
 */
import { Duration, Effect, type Fiber, type Scope } from "effect"

const pending = new Map<string, number>()

/** Makes the next `times` iterations of every loop named `name` die with a defect (tests only). */
export const injectDefect = (name: string, times = 1): void => {
  pending.set(name, (pending.get(name) ?? 0) + times)
}

/** Defects caught per loop name since the process started (tests read it). */
export const caught = new Map<string, number>()

const maybeDefect = (name: string) =>
  Effect.suspend(() => {
    const left = pending.get(name)
    if (left === undefined || left <= 0) return Effect.void
    if (left === 1) pending.delete(name)
    else pending.set(name, left - 1)
    return Effect.dieMessage(`injected defect in loop ${name}`)
  })

export interface LoopOptions {
  /** The pause after each iteration: fixed, or computed after the work. Default: none. */
  readonly sleep?: Duration.DurationInput | (() => Duration.DurationInput)
  /** Waits before each iteration (e.g. until there is work), instead of or beside `sleep`. */
  readonly before?: Effect.Effect<void>
  readonly annotations?: Readonly<Record<string, unknown>>
}

/** Forks `work` as a loop of the one shape into the current scope. */
export const loop = <R>(
  name: string,
  work: Effect.Effect<void, never, R>,
  options: LoopOptions = {}
): Effect.Effect<Fiber.RuntimeFiber<never>, never, Scope.Scope | R> => {
  const pause =
    options.sleep === undefined
      ? Effect.void
      : typeof options.sleep === "function"
        ? Effect.suspend(() =>
            Effect.sleep(Duration.decode((options.sleep as () => Duration.DurationInput)()))
          )
        : Effect.sleep(options.sleep)
  const iteration = Effect.zipRight(maybeDefect(name), work).pipe(
    Effect.catchAllCause((cause) =>
      Effect.zipRight(
        Effect.sync(() => caught.set(name, (caught.get(name) ?? 0) + 1)),
        Effect.logError(`background loop ${name} failed; it carries on`, cause)
      )
    )
  )
  const body = options.before === undefined ? iteration : Effect.zipRight(options.before, iteration)
  return Effect.zipRight(body, pause).pipe(
    Effect.forever,
    Effect.annotateLogs({ module: name, ...options.annotations }),
    Effect.interruptible,
    Effect.forkScoped
  )
}
