/**
 * The degraded-health shortening of the shipped waker (`degradedMaxWait`): while the mesh is neither
 * `clustered` nor `solo` (see `MeshHealth`) it cannot be trusted to wake pops, so the host's re-poll is
 * the path that finds remote messages, and a pop parked then waits at most `short`. Pops already parked
 * when the mesh degrades are timed out `short` after it did, unless it is trusted again before then
 * (their wakes are flowing again). Off without a `degradedMaxWait`, or without the `MeshHealth` value
 * the mesh publishes.
 *
 * @internal
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberHandle from "effect/FiberHandle"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as MeshHealth from "../../MeshHealth.js"
import type { ParkedPops } from "./parkedPops.js"

/** How long a pop may wait, by the mesh's health. */
export class DegradedWait {
  /** Whether the mesh's health was trusted at its last change. */
  private trusted = true

  private constructor(
    private readonly pops: ParkedPops,
    private readonly short: Duration.Duration | undefined,
    private readonly runShortening: (shortening: Effect.Effect<void>) => unknown,
    private readonly onDegrade: (short: Duration.Duration) => void
  ) {}

  /**
   * The shortening for `pops`: with `degradedMaxWait` and the `MeshHealth` value in context, it follows
   * the health from a fiber in the current scope; otherwise it never shortens.
   */
  static make(
    pops: ParkedPops,
    degradedMaxWait: Duration.Input | undefined,
    onDegrade: (short: Duration.Duration) => void = () => {}
  ): Effect.Effect<DegradedWait, never, Scope.Scope> {
    return Effect.gen(function* () {
      const health =
        degradedMaxWait === undefined ? Option.none() : yield* Effect.serviceOption(MeshHealth.MeshHealth)
      if (degradedMaxWait === undefined || Option.isNone(health)) {
        return new DegradedWait(pops, undefined, () => undefined, onDegrade)
      }
      const run = yield* FiberHandle.makeRuntime<never, never, void>()
      const wait = new DegradedWait(pops, Duration.fromInputUnsafe(degradedMaxWait), run, onDegrade)
      yield* SubscriptionRef.changes(health.value).pipe(
        Stream.runForEach((now) => Effect.sync(() => wait.healthIs(MeshHealth.isTrusted(now)))),
        Effect.forkScoped
      )
      return wait
    })
  }

  /** The longest a pop parked now waits, when it asked for `asked`. */
  cap(asked: Duration.Duration): Duration.Duration {
    return this.trusted || this.short === undefined ? asked : Duration.min(asked, this.short)
  }

  /** The mesh's health changed: trusted or not. */
  healthIs(trusted: boolean): void {
    if (trusted === this.trusted) return
    this.trusted = trusted
    // Grouped pops re-poll as a group: its next claim comes within `short`.
    if (!trusted && this.short !== undefined) this.onDegrade(this.short)
    this.runShortening(trusted || this.short === undefined ? Effect.void : this.shortenParked(this.short))
  }

  /** Times out the pops parked now, `short` from now. */
  private shortenParked(short: Duration.Duration): Effect.Effect<void> {
    return Effect.suspend(() => {
      const parkedThen = this.pops.snapshot()
      return Effect.andThen(
        Effect.sleep(short),
        Effect.sync(() => this.pops.timeOut(parkedThen))
      )
    })
  }
}
