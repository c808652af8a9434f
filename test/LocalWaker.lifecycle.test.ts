/**
 * The shipped waker's lifecycle: when its scope closes every parked pop returns `"shutdown"` at once,
 * and a pop parked afterwards returns it immediately; a broker draining can release them itself. The
 * mesh's API after its scope closed fails with `MeshClosedError` and nothing hangs.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Fiber, Layer, Option, Result, Scope } from "effect"
import { TestClock } from "effect/testing"
import * as Frame from "../src/Frame.js"
import * as LocalWaker from "../src/LocalWaker.js"
import * as MeshTest from "../src/MeshTest.js"
import { active } from "./fixtures/memory.js"

const target = { queue: "orders", tenant: Option.none() }

describe("LocalWaker lifecycle", () => {
  it.effect("closing the waker's scope returns every parked pop as shutdown, at once (TestClock)", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const waker = yield* LocalWaker.make().pipe(Scope.provide(scope))
      const short = yield* Effect.forkChild(waker.awaitWake(target, { maxWait: "300 millis" }))
      const long = yield* Effect.forkChild(waker.awaitWake(target, { maxWait: "1 hour" }))
      yield* MeshTest.settleUntil(Effect.map(waker.parked, (n) => n === 2))
      yield* Scope.close(scope, Exit.void)
      // No time passes: the close itself hands them back.
      assert.strictEqual(yield* Fiber.join(short), "shutdown")
      assert.strictEqual(yield* Fiber.join(long), "shutdown")
      assert.strictEqual(yield* waker.parked, 0)
      // A pop parked after the close returns at once, and the count does not grow.
      assert.strictEqual(yield* waker.awaitWake(target, { maxWait: "1 hour" }), "shutdown")
      assert.strictEqual(yield* waker.parked, 0)
      // A wake after the close is ignored; a timeout never comes for what is gone.
      yield* waker.wake(Frame.queueItem({ queue: "orders", partition: "p" }))
      yield* TestClock.adjust("2 hours")
      assert.strictEqual(yield* waker.parked, 0)
    })
  )

  it.live("closing the waker's scope returns every parked pop as shutdown, on real time", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const waker = yield* LocalWaker.make().pipe(Scope.provide(scope))
      // Two real deadlines, both far off: the close, not a timer, must be what ends them.
      const pops = yield* Effect.forEach([30_000, 60_000], (ms) =>
        Effect.forkChild(waker.awaitWake(target, { maxWait: `${ms} millis` }))
      )
      yield* MeshTest.eventually(Effect.map(waker.parked, (n) => n === 2))
      yield* Scope.close(scope, Exit.void)
      // Bounded waits: a hanging pop fails the test instead of stalling it.
      for (const pop of pops) {
        assert.strictEqual(yield* Fiber.join(pop).pipe(Effect.timeout("20 seconds")), "shutdown")
      }
      assert.strictEqual(
        yield* waker.awaitWake(target, { maxWait: "1 minute" }).pipe(Effect.timeout("20 seconds")),
        "shutdown"
      )
    })
  )

  it.effect("the layer's scope closing does the same for a broker's pops (Waker.layerLocal)", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(LocalWaker.layer(), scope)
      const waker = Context.get(context, LocalWaker.LocalWaker)
      const pop = yield* Effect.forkChild(waker.awaitWake(target, { maxWait: "1 minute" }))
      yield* MeshTest.settleUntil(Effect.map(waker.parked, (n) => n === 1))
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(yield* Fiber.join(pop), "shutdown")
    })
  )

  it.effect("releaseAll hands back the pops parked now; later pops park as usual", () =>
    Effect.gen(function* () {
      const waker = yield* LocalWaker.make()
      const pops = yield* Effect.forEach(["a", "b", "c"], (queue) =>
        Effect.forkChild(waker.awaitWake({ queue, tenant: Option.some("acme") }, { maxWait: "1 minute" }))
      )
      yield* MeshTest.settleUntil(Effect.map(waker.parked, (n) => n === 3))
      assert.strictEqual(yield* waker.releaseAll, 3)
      for (const pop of pops) assert.strictEqual(yield* Fiber.join(pop), "shutdown")
      const later = yield* Effect.forkChild(waker.awaitWake(target, { maxWait: "1 minute" }))
      yield* MeshTest.settleUntil(Effect.map(waker.parked, (n) => n === 1))
      yield* waker.wake(Frame.queueItem({ queue: "orders", partition: "p" }))
      assert.strictEqual(yield* Fiber.join(later), "woken")
    })
  )

  it.effect("shutdown drains before the scope ends: released now, refused after, idempotent", () =>
    Effect.gen(function* () {
      const waker = yield* LocalWaker.make()
      const pop = yield* Effect.forkChild(waker.awaitWake(target, { maxWait: "1 minute" }))
      yield* MeshTest.settleUntil(Effect.map(waker.parked, (n) => n === 1))
      assert.strictEqual(yield* waker.shutdown, 1)
      assert.strictEqual(yield* Fiber.join(pop), "shutdown")
      assert.strictEqual(yield* waker.awaitWake(target, { maxWait: "1 minute" }), "shutdown")
      assert.strictEqual(yield* waker.shutdown, 0)
    })
  )
})

describe("Mesh lifecycle", () => {
  it.effect("after its scope closes the API fails with MeshClosedError, stats say not running", () =>
    Effect.gen(function* () {
      const network = yield* MeshTest.network
      const scope = yield* Scope.make()
      const a = yield* MeshTest.node(network, { serverId: "a", peers: ["b"] }).pipe(Scope.provide(scope))
      yield* MeshTest.node(network, { serverId: "b", peers: ["a"] })
      yield* TestClock.adjust("300 millis")
      yield* MeshTest.settleUntil(MeshTest.linked(a))
      const pop = yield* Effect.forkChild(a.waker.awaitWake(target, { maxWait: "1 hour" }))
      yield* MeshTest.settleUntil(Effect.map(a.waker.parked, (n) => n === 1))
      assert.isTrue(active(yield* a.mesh.stats).running)
      yield* Scope.close(scope, Exit.void)

      assert.strictEqual(yield* Fiber.join(pop), "shutdown")
      const item = { queue: "orders", partition: "p" }
      const calls = [
        a.mesh.messageAvailable(item),
        a.mesh.messageAvailableBatch([item]),
        a.mesh.hotlistDirty(item),
        a.mesh.queueConfigSet({ queue: "orders" }),
        a.mesh.queueConfigDelete({ queue: "orders" }),
        a.mesh.setMaintenance(true),
        a.mesh.setPopMaintenance(true)
      ]
      for (const call of calls) {
        const result = yield* Effect.result(call)
        assert.isTrue(Result.isFailure(result) && result.failure._tag === "MeshClosedError")
      }
      assert.throws(() => a.mesh.unsafeMessageAvailable(item), /the mesh is closed/)
      const stats = active(yield* a.mesh.stats)
      assert.isFalse(stats.running)
      assert.strictEqual(stats.peers[0]!.connected, false)
    })
  )
})
