import { assert, describe, it } from "@effect/vitest"
import { Effect, HashMap, Ref, TestClock } from "effect"
import * as Liveness from "../src/Liveness.js"
import { settle } from "./fixtures/memory.js"

describe("Liveness", () => {
  it.scoped("dead exactly one threshold after the last frame, alive again on the next, once each", () =>
    Effect.gen(function* () {
      const transitions = yield* Ref.make<ReadonlyArray<string>>([])
      const liveness = yield* Liveness.make({
        deadThreshold: "5 seconds",
        onTransition: ({ serverId, alive }) =>
          Ref.update(transitions, (all) => [...all, `${serverId}:${alive ? "up" : "down"}`])
      })
      yield* settle
      assert.deepStrictEqual(yield* liveness.counts, { alive: 0, dead: 0 })
      yield* liveness.heard("a")
      yield* TestClock.adjust("2 seconds")
      yield* liveness.heard("b")
      yield* liveness.heard("a")
      yield* TestClock.adjust("4999 millis")
      yield* settle
      assert.deepStrictEqual(yield* liveness.counts, { alive: 2, dead: 0 })
      yield* TestClock.adjust("1 millis")
      yield* settle
      assert.deepStrictEqual(yield* liveness.counts, { alive: 0, dead: 2 })
      yield* TestClock.adjust("1 minute")
      yield* settle
      yield* liveness.heard("a")
      assert.deepStrictEqual(yield* liveness.counts, { alive: 1, dead: 1 })
      assert.deepStrictEqual(yield* Ref.get(transitions), ["a:up", "b:up", "a:down", "b:down", "a:up"])
      assert.isTrue(HashMap.has(yield* liveness.peers, "b"))
      assert.isFalse(HashMap.has(yield* liveness.peers, "never-seen"))
    })
  )
})
