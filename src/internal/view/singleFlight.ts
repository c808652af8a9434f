/**
 * One computation shared by every caller (the cluster page's fetch of its peers' stats): however many
 * browsers poll, and however fast, the peers see at most one request each per `ttl`. While the latest
 * value is younger than `maxAge`, callers get it at once while a newer one is computed, so a peer that
 * takes its whole timeout to not answer delays no page that keeps polling; an older value is never
 * served (a view read after a pause would show a peer killed meanwhile as up), so the first caller
 * after a pause, like the very first, waits for a fresh one. The computation runs
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
  private latest: Option.Option<{ readonly value: A; readonly at: number }> = Option.none()

  constructor(
    private readonly ttlMillis: number,
    private readonly maxAgeMillis: number
  ) {}

  /**
   * The latest value; a new one is computed with `compute` when the last began more than the ttl ago
   * and none is being computed. Until a value begun within `maxAge` exists, callers wait for one.
   */
  get(compute: Effect.Effect<A>): Effect.Effect<A> {
    return Effect.gen({ self: this }, function* () {
      const now = yield* Clock.currentTimeMillis
      let flight = this.current
      if (flight === undefined || (flight.done && now - flight.at >= this.ttlMillis))
        flight = yield* this.start(compute, now)
      const latest = this.latest
      return Option.isSome(latest) && now - latest.value.at <= this.maxAgeMillis
        ? latest.value.value
        : yield* Deferred.await(flight.result)
    })
  }

  private start(compute: Effect.Effect<A>, now: number): Effect.Effect<Flight<A>> {
    return Effect.gen({ self: this }, function* () {
      const flight: Flight<A> = { at: now, result: yield* Deferred.make<A>(), done: false }
      this.current = flight
      // Whatever way the computation ends (a defect included), its waiters are answered.
      const run = Effect.flatMap(Effect.exit(compute), (exit) =>
        Effect.andThen(
          Effect.sync(() => {
            flight.done = true
            if (exit._tag === "Success") this.latest = Option.some({ value: exit.value, at: flight.at })
          }),
          Deferred.done(flight.result, exit)
        )
      )
      yield* Effect.forkDetach(run)
      return flight
    })
  }
}
