/**
 * One computation shared by every caller (the cluster page's fetch of its peers' stats): however many
 * browsers poll, and however fast, the peers see at most one request each per `ttl`. Once a value
 * exists, callers get the latest one at once while a newer one is computed, so a peer that takes its
 * whole timeout to not answer delays no page; only the very first callers wait. The computation runs
 * in a fiber of its own, so a caller that gives up (a closed tab) interrupts only its own wait; the
 * computation must bound its own time.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"

interface Flight<A> {
  readonly at: number
  readonly result: Deferred.Deferred<A>
  done: boolean
}

export class SingleFlight<A> {
  private current: Flight<A> | undefined = undefined
  private latest: Option.Option<A> = Option.none()

  constructor(private readonly ttlMillis: number) {}

  /**
   * The latest value; a new one is computed with `compute` when the last began more than the ttl ago
   * and none is being computed. Until a first value exists, callers wait for it.
   */
  get(compute: Effect.Effect<A>): Effect.Effect<A> {
    return Effect.gen(this, function* () {
      const now = yield* Clock.currentTimeMillis
      let flight = this.current
      if (flight === undefined || (flight.done && now - flight.at >= this.ttlMillis))
        flight = yield* this.start(compute, now)
      return Option.isSome(this.latest) ? this.latest.value : yield* Deferred.await(flight.result)
    })
  }

  private start(compute: Effect.Effect<A>, now: number): Effect.Effect<Flight<A>> {
    return Effect.gen(this, function* () {
      const flight: Flight<A> = { at: now, result: yield* Deferred.make<A>(), done: false }
      this.current = flight
      // Whatever way the computation ends (a defect included), its waiters are answered.
      const run = Effect.flatMap(Effect.exit(compute), (exit) =>
        Effect.zipRight(
          Effect.sync(() => {
            flight.done = true
            if (exit._tag === "Success") this.latest = Option.some(exit.value)
          }),
          Deferred.done(flight.result, exit)
        )
      )
      yield* Effect.forkDaemon(run)
      return flight
    })
  }
}
