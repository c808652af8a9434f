/**
 * The peer book's learner reads the members when something can have changed what it must ask: a
 * membership change, a failed question falling due again, a question ending, and at least every
 * `interval`; never on a timer of its own while nothing happens (an idle node is mostly its wake-ups).
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { TestClock } from "effect/testing"
import * as PeerBook from "../../../src/internal/view/peerBook.js"
import { StatsFetchError } from "../../../src/internal/view/statsFetch.js"
import * as MeshConfig from "../../../src/MeshConfig.js"
import * as MeshTest from "../../../src/MeshTest.js"

const advance = (millis: number, step = 100) =>
  Effect.gen(function* () {
    for (let t = 0; t < millis; t += step) {
      yield* TestClock.adjust(step)
      yield* MeshTest.settle
    }
  })

const question = (serverId: string): PeerBook.Question => ({
  serverId,
  httpAddr: `http://${serverId}:6632`,
  key: `http://${serverId}:6632\u0000`
})

/** Two nodes listed by address, announcing their HTTP address; `a`'s members read through a counter. */
const pair = Effect.gen(function* () {
  const network = yield* MeshTest.network
  const hosts = { a: "127.0.0.11", b: "127.0.0.12" } as const
  const config = (host: string) => ({
    heartbeatInterval: MeshConfig.defaults.heartbeatInterval,
    deadThreshold: MeshConfig.defaults.deadThreshold,
    advertiseHost: host
  })
  const a = yield* MeshTest.node(network, {
    serverId: "a",
    host: hosts.a,
    peers: [hosts.b],
    config: config(hosts.a)
  })
  yield* MeshTest.node(network, { serverId: "b", host: hosts.b, peers: [hosts.a], config: config(hosts.a) })
  const reads = { count: 0 }
  const mesh = { ...a.mesh, members: Effect.tap(a.mesh.members, () => Effect.sync(() => reads.count++)) }
  return { mesh, reads }
})

describe("PeerBook", () => {
  it("nextRetry: the earliest failed question still to come; none for one past or not to be retried", () => {
    const book = new PeerBook.PeerBook()
    assert.isUndefined(book.nextRetry(0))
    book.asking(question("b"))
    book.unanswered(question("b"), "unreachable", 1000)
    book.asking(question("c"))
    book.unanswered(question("c"), "timeout", 500)
    // A failure asking again cannot mend is not retried.
    book.asking(question("d"))
    book.unanswered(question("d"), "other_node", 0)
    assert.strictEqual(book.nextRetry(1000), 1500)
    assert.strictEqual(book.nextRetry(1600), 2000)
    assert.isUndefined(book.nextRetry(2000))
  })

  it.effect("an answered peer: the members are read again only on a change or after `interval`", () =>
    Effect.gen(function* () {
      const { mesh, reads } = yield* pair
      const asked: Array<string> = []
      const ask: PeerBook.Ask = (serverId) =>
        Effect.sync(() => asked.push(serverId)).pipe(
          Effect.andThen(Effect.fail(new StatsFetchError({ reason: "other_node", detail: "not asked here" })))
        )
      yield* PeerBook.learn(mesh, { ask, interval: "30 seconds" })
      yield* advance(3_000)
      assert.deepStrictEqual(asked, ["b"])
      const settled = reads.count
      // Heartbeats only for 20 s: nothing read.
      yield* advance(20_000)
      assert.strictEqual(reads.count, settled)
      // The interval: one pass, which asks nothing more (the answer was final).
      yield* advance(10_000)
      assert.strictEqual(reads.count, settled + 1)
      assert.deepStrictEqual(asked, ["b"])
    })
  )

  it.effect(
    "a peer that cannot be reached is asked again after 1 s, then 2 s, with nothing else happening",
    () =>
      Effect.gen(function* () {
        const { mesh } = yield* pair
        const asked: Array<number> = []
        const ask: PeerBook.Ask = () =>
          Effect.flatMap(Clock.currentTimeMillis, (now) => {
            asked.push(now)
            return Effect.fail(new StatsFetchError({ reason: "unreachable", detail: "ECONNREFUSED" }))
          })
        yield* PeerBook.learn(mesh, { ask })
        yield* advance(10_000, 10)
        assert.isAtLeast(asked.length, 3)
        const gaps = asked.slice(1).map((at, i) => at - asked[i]!)
        assert.deepStrictEqual(gaps.slice(0, 3), [1000, 2000, 4000])
      })
  )
})
