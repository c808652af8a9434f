import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Option, Ref, Stream } from "effect"
import { TestClock } from "effect/testing"
import * as Handshake from "../../../src/internal/links/handshake.js"
import * as Liveness from "../../../src/internal/links/liveness.js"
import * as MeshEvent from "../../../src/MeshEvent.js"
import { settle } from "../../fixtures/memory.js"
import * as StalledClock from "../../fixtures/stalledClock.js"

/** Liveness alone, over its own event hub, recording PeerUp/PeerDown. */
const setup = (options: Partial<Liveness.LivenessOptions> = {}, clock?: StalledClock.StalledClock) =>
  Effect.gen(function* () {
    const events = yield* MeshEvent.make
    const transitions = yield* Ref.make<ReadonlyArray<string>>([])
    yield* events.events.pipe(
      Stream.runForEach((event) =>
        event._tag === "PeerUp" || event._tag === "PeerDown"
          ? Ref.update(transitions, (all) => [
              ...all,
              `${event.serverId}:${event._tag === "PeerUp" ? "up" : "down"}`
            ])
          : Effect.void
      ),
      Effect.forkScoped
    )
    yield* settle
    const made = Liveness.make({ deadThreshold: "5 seconds", ...options }).pipe(
      Effect.provideService(MeshEvent.MeshEvents, events)
    )
    const liveness = yield* clock === undefined ? made : Effect.provideService(made, Clock.Clock, clock)
    return { liveness, transitions }
  })

/** How the servers of these tests authenticated: it only shows in the stats. */
const V1 = { authVersion: 1, advert: Handshake.NO_ADVERT, keyId: Option.none() } as const

describe("Liveness", () => {
  it.effect("dead exactly one threshold after the last frame, alive again on the next, once each", () =>
    Effect.gen(function* () {
      const { liveness, transitions } = yield* setup()
      assert.deepStrictEqual(yield* liveness.counts, { alive: 0, dead: 0 })
      const a = liveness.register("a", V1)
      yield* TestClock.adjust("2 seconds")
      liveness.register("b", V1)
      a()
      yield* TestClock.adjust("4999 millis")
      yield* settle
      assert.deepStrictEqual(yield* liveness.counts, { alive: 2, dead: 0 })
      yield* TestClock.adjust("1 millis")
      yield* settle
      assert.deepStrictEqual(yield* liveness.counts, { alive: 0, dead: 2 })
      yield* TestClock.adjust("1 minute")
      yield* settle
      a()
      yield* settle
      assert.deepStrictEqual(yield* liveness.counts, { alive: 1, dead: 1 })
      assert.deepStrictEqual(yield* Ref.get(transitions), ["a:up", "b:up", "a:down", "b:down", "a:up"])
      const ids = (yield* liveness.servers).map((s) => s.serverId)
      assert.deepStrictEqual(ids, ["a", "b"])
    })
  )

  // A process stopped past the dead threshold runs its timers before it reads its sockets: the frames
  // its peers sent meanwhile are read before the monitor judges, and a silent peer still dies at once.
  it.effect("after a stall of this process, a peer whose frames wait unread is not declared dead", () =>
    Effect.gen(function* () {
      const clock = yield* StalledClock.make
      const { liveness, transitions } = yield* setup({}, clock)
      const a = liveness.register("a", V1)
      liveness.register("b", V1)
      yield* TestClock.adjust("1 second")
      yield* settle
      // Stopped for 10 s; a's heartbeats wait in its socket, b sent nothing.
      clock.stall(10_000, a)
      yield* TestClock.adjust("4 seconds")
      yield* settle
      assert.deepStrictEqual(yield* Ref.get(transitions), ["a:up", "b:up", "b:down"])
      assert.deepStrictEqual(
        (yield* liveness.servers).map((s) => [s.serverId, s.alive]),
        [
          ["a", true],
          ["b", false]
        ]
      )
    })
  )

  it.effect("the map is bounded: the longest silent is evicted, the long silent pruned", () =>
    Effect.gen(function* () {
      const { liveness } = yield* setup({ maxEntries: 3, pruneAfter: "10 minutes" })
      for (const id of ["a", "b", "c"]) {
        liveness.register(id, V1)
        yield* TestClock.adjust("1 second")
      }
      liveness.register("d", V1)
      assert.deepStrictEqual(
        (yield* liveness.servers).map((s) => s.serverId),
        ["b", "c", "d"]
      )
      for (let i = 0; i < 3000; i++) liveness.register(`flood-${i}`, V1)
      assert.strictEqual((yield* liveness.servers).length, 3)
      yield* TestClock.adjust("11 minutes")
      yield* settle
      assert.strictEqual((yield* liveness.servers).length, 0)
    })
  )

  it.effect("an evicted server whose link lives on comes back on its next frame", () =>
    Effect.gen(function* () {
      const { liveness } = yield* setup({ maxEntries: 1 })
      const a = liveness.register("a", V1)
      liveness.register("b", V1)
      assert.deepStrictEqual(
        (yield* liveness.servers).map((s) => s.serverId),
        ["b"]
      )
      a()
      assert.deepStrictEqual(
        (yield* liveness.servers).map((s) => s.serverId),
        ["a"]
      )
    })
  )
})
