import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { TestClock } from "effect/testing"
import { type GroupHost, PopGroups } from "../../../src/internal/waker/popGroups.js"
import { settle } from "../../fixtures/memory.js"

/** A waker that never shuts down, with one tenant and no hints. */
const host: GroupHost = {
  closed: false,
  tenantOf: () => "t",
  takeHints: () => [],
  repollWithin: (asked) => asked
}

describe("PopGroups", () => {
  it.effect("a group whose last pop was answered stays, timer and all, until its timer fires", () =>
    Effect.gen(function* () {
      const rows: Array<number> = []
      const groups = yield* PopGroups.make<number, never>(
        host,
        {
          // Answers on the next turn, as a claim over a connection does.
          claim: ({ limit }) =>
            Effect.andThen(
              Effect.yieldNow,
              Effect.sync(() => rows.splice(0, limit))
            ),
          release: () => Effect.void,
          repoll: Duration.seconds(1)
        },
        0
      )
      const pops = groups.api()
      const pop = pops.pop({ queue: "q" }, { batch: 1, maxWait: "10 seconds" })
      rows.push(1)
      assert.deepStrictEqual((yield* pop).rows, [1])
      assert.strictEqual(groups.groupCount, 1)
      // A pop coming back finds it; so does the next one.
      rows.push(2, 3)
      assert.deepStrictEqual((yield* pop).rows, [2])
      assert.deepStrictEqual((yield* pop).rows, [3])
      assert.strictEqual(groups.groupCount, 1)
      assert.strictEqual(yield* pops.waiting, 0)
      // Once its timer has fired with no pop waiting, it leaves the index.
      yield* TestClock.adjust("10 seconds")
      yield* settle
      assert.strictEqual(groups.groupCount, 0)
      // And a pop after that makes a new group, as the first did.
      rows.push(4)
      assert.deepStrictEqual((yield* pop).rows, [4])
      assert.strictEqual(groups.groupCount, 1)
    })
  )
})
