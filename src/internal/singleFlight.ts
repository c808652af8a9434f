/**
 * One computation shared by every caller while it runs and for a while after (the cluster page's
 * fetch of its peers' stats): however many browsers poll, and however fast, the peers see at most one
 * request each per `ttl`. The computation runs in a fiber of its own, so a caller that gives up (a
 * closed tab) interrupts only its own wait; the computation must bound its own time.
 *
 * @internal
 */
import { Clock, Deferred, Effect } from "effect"

interface Flight<A> {
  readonly at: number
  readonly result: Deferred.Deferred<A>
  done: boolean
}

export class SingleFlight<A> {
  private current: Flight<A> | undefined = undefined

  constructor(private readonly ttlMillis: number) {}

  /** The value computed less than the ttl ago, the one being computed, or a new one from `compute`. */
  get(compute: Effect.Effect<A>): Effect.Effect<A> {
    return Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const current = this.current
      if (current !== undefined && (!current.done || now - current.at < this.ttlMillis))
        return Deferred.await(current.result)
      return Effect.flatMap(Deferred.make<A>(), (result) => {
        const flight: Flight<A> = { at: now, result, done: false }
        this.current = flight
        // Whatever way the computation ends (a defect included), its waiters are answered.
        const run = Effect.flatMap(Effect.exit(compute), (exit) =>
          Effect.zipRight(
            Effect.sync(() => {
              flight.done = true
            }),
            Deferred.done(result, exit)
          )
        )
        return Effect.zipRight(Effect.forkDaemon(run), Deferred.await(result))
      })
    })
  }
}
