/**
 * One timer for the heartbeats of every outbound link of a node (spec "Topology": heartbeats every
 * interval keep liveness fresh on an idle link). Each tick hands every link that is up its heartbeat
 * (a link busy since the last tick may skip it: `PeerLink.heartbeat`) and runs
 * its liveness check, all in one turn of the event loop. A timer per link woke the process once per
 * link per interval, and what an idle node costs is mostly its wake-ups; with one timer a node of 16
 * wakes as often as a node of 2. While no link is up the loop waits with no timer armed.
 *
 * A link's first heartbeat comes at the first tick after it is up: within one interval, as before.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { loop } from "../loop.js"
import * as Stall from "../stall.js"

/** What one link does on a tick, given the clock's time in milliseconds. */
export type Beat = (now: number) => void

export class Heartbeats {
  private readonly beats = new Set<Beat>()

  constructor(private readonly some: Effect.Latch) {}

  /** Links beating now. */
  get size(): number {
    return this.beats.size
  }

  /** Calls `beat` on every tick from now until the returned function is called (once or more). */
  add(beat: Beat): () => void {
    // Wrapped, so the same function added twice is two beats and each removal removes its own.
    const own: Beat = (now) => beat(now)
    this.beats.add(own)
    this.some.unsafeOpen()
    return () => {
      this.beats.delete(own)
      if (this.beats.size === 0) this.some.unsafeClose()
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

/** The heartbeat timer of a node, ticking every `interval` while a link is up, in the current scope. */
export const make = (interval: Duration.Duration): Effect.Effect<Heartbeats, never, Scope.Scope> =>
  Effect.gen(function* () {
    const some = yield* Effect.makeLatch(false)
    const heartbeats = new Heartbeats(some)
    const tick = Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => heartbeats.tick(now)))
    // A late tick reads what arrived meanwhile before its liveness checks judge (`Stall`).
    yield* loop("Heartbeats", Effect.zipRight(Stall.sleep(interval), tick), { before: some.await })
    return heartbeats
  })
