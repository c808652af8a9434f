/**
 * The README's examples, run as written (bar the environment and the runtime), so the docs keep
 * matching the code.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Fiber, Layer, Option, TestClock } from "effect"
import {
  Frame,
  HotList,
  MaintenanceFlags,
  Mesh,
  MeshConfig,
  MeshTest,
  QueueConfigCache,
  TcpTransport,
  Waker
} from "../src/index.js"
import { assertEqual } from "./fixtures/equality.js"

describe("README", () => {
  it.scoped("the Effect example wakes its own consumer", () =>
    Effect.gen(function* () {
      const mesh = yield* Mesh.Mesh
      const waker = yield* Waker.LocalWaker
      const consumer = yield* Effect.fork(
        waker.awaitWake({ queue: "orders", tenant: Option.some("acme") }, { maxWait: "5 seconds" })
      )
      yield* Effect.yieldNow()
      yield* mesh.messageAvailable({ queue: "orders", partition: "p-1", tenant: "acme" })
      assert.strictEqual(yield* Fiber.join(consumer), "woken")
      assert.isFalse((yield* mesh.stats).enabled)
    }).pipe(Effect.provide(Mesh.layerTcp().pipe(Layer.provide(MeshConfig.layer({ peers: [] })))))
  )

  it.scoped("a custom waker composes with the shipped services", () =>
    Effect.gen(function* () {
      const woken: Array<string> = []
      const MyWaker = Layer.succeed(Waker.Waker, {
        wake: (item) => Effect.sync(() => woken.push(item.queue))
      })
      const mesh = Mesh.layer.pipe(
        Layer.provide(
          Layer.mergeAll(
            MyWaker,
            QueueConfigCache.layerMemory(),
            HotList.layerMemory(),
            MaintenanceFlags.layer()
          )
        ),
        Layer.provide(TcpTransport.layer()),
        Layer.provide(MeshConfig.layer({ peers: [] }))
      )
      yield* Effect.flatMap(Mesh.Mesh, (m) => m.messageAvailable({ queue: "orders", partition: "p" })).pipe(
        Effect.provide(mesh)
      )
      assert.deepStrictEqual(woken, ["orders"])
    })
  )

  it("the codec example", () => {
    const bytes = Frame.encode({
      _tag: "MessageAvailable",
      ...Frame.queueItem({ queue: "orders", partition: "p-1" })
    })
    assert.strictEqual(Buffer.from(bytes.subarray(0, 5)).toString("hex"), "0000002501")
    assert.strictEqual(Buffer.from(bytes.subarray(5)).toString(), '{"queue":"orders","partition":"p-1"}')
    assertEqual(
      Frame.decodePayload(bytes[4]!, bytes.subarray(5)),
      Either.right({ _tag: "MessageAvailable", queue: "orders", partition: "p-1", tenant: Option.none() })
    )
  })

  it.scoped("the test kit example: a push on a wakes a pop parked on b", () =>
    Effect.gen(function* () {
      const network = yield* MeshTest.network
      const a = yield* MeshTest.node(network, { serverId: "a", peers: ["b", "c"] })
      const b = yield* MeshTest.node(network, { serverId: "b", peers: ["a", "c"] })
      yield* MeshTest.node(network, { serverId: "c", peers: ["a", "b"] })
      // a dialled before b listened: step the clock through a's first backoff.
      yield* TestClock.adjust("250 millis")
      yield* MeshTest.settleUntil(MeshTest.linked(a))
      const pop = yield* Effect.fork(
        b.waker.awaitWake({ queue: "orders", tenant: Option.some("acme") }, { maxWait: "1 minute" })
      )
      yield* MeshTest.settle
      yield* a.mesh.messageAvailable({ queue: "orders", partition: "p0", tenant: "acme" })
      assert.strictEqual(yield* Fiber.join(pop), "woken")
    })
  )
})
