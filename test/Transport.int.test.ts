/**
 * `Transport.fromSocket`: a transport over effect sockets in a few lines, and a mesh linked
 * through it over loopback TCP, refusals included.
 */
import { NodeSocket, NodeSocketServer } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Option, Redacted, References } from "effect"
import * as Mesh from "../src/Mesh.js"
import * as MeshConfig from "../src/MeshConfig.js"
import * as MeshTest from "../src/MeshTest.js"
import * as Transport from "../src/Transport.js"
import { freePort, nodeFromContext } from "./fixtures/cluster.js"
import { active } from "./fixtures/memory.js"
import { SECRET } from "./fixtures/secret.js"

const SocketTransport = Layer.succeed(
  Transport.Transport,
  Transport.fromSocket({
    connect: (host, port) => NodeSocket.makeNet({ host, port }),
    serve: ({ host, port }) => NodeSocketServer.make({ host, port })
  })
)

const node = (serverId: string, port: number, peer: number, secret = SECRET) =>
  Effect.map(
    Layer.build(
      Mesh.layerLocal().pipe(
        Layer.provide(SocketTransport),
        Layer.provide(
          MeshConfig.layer({
            serverId,
            port,
            bindHost: "127.0.0.1",
            peers: [{ host: "127.0.0.1", port: peer }],
            secret: Redacted.make(secret)
          })
        )
      )
    ).pipe(Effect.provideService(References.MinimumLogLevel, "Error")),
    nodeFromContext
  )

describe("Transport.fromSocket", () => {
  it.live("links a mesh over platform sockets: a wake crosses both ways", () =>
    Effect.gen(function* () {
      const [portA, portB] = [yield* freePort, yield* freePort]
      const a = yield* node("socket-a", portA, portB)
      const b = yield* node("socket-b", portB, portA)
      yield* MeshTest.eventually(Effect.zipWith(MeshTest.linked(a), MeshTest.linked(b), (x, y) => x && y))
      yield* MeshTest.eventually(MeshTest.hears(b, 1))
      const pop = yield* Effect.forkChild(
        b.waker.awaitWake({ queue: "orders", tenant: Option.none() }, { maxWait: "10 seconds" })
      )
      yield* MeshTest.eventually(Effect.map(b.waker.parked, (n) => n === 1))
      yield* a.mesh.messageAvailable({ queue: "orders", partition: "p1" })
      assert.strictEqual(yield* Fiber.join(pop), "woken")
      yield* a.mesh.setMaintenance(true)
      yield* MeshTest.eventually(Effect.map(b.mesh.stats, (s) => s.maintenance_mode))
    })
  )

  it.live("a HELLO under another secret is refused and counted, through the adapter", () =>
    Effect.gen(function* () {
      const [portA, portB] = [yield* freePort, yield* freePort]
      const a = yield* node("socket-a", portA, portB)
      yield* node("socket-b", portB, portA, "another secret")
      yield* MeshTest.eventually(Effect.map(a.mesh.stats, (s) => active(s).rejections.bad_mac >= 1))
      assert.strictEqual(active(yield* a.mesh.stats).inbound.authenticated_total, 0)
    })
  )
})
