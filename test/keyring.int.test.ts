/**
 * The keyring (`QUEEN_SYNC_SECRETS`): a rotation in three rolling steps (add the new key second, make
 * it primary, remove the old), one restart at a time across three nodes under `TestClock`, with every
 * wake sent at every step delivered; a node with a key nobody holds refused and counted by reason; the
 * stats showing which key each peer proved. Over TLS-PSK too, on real loopback sockets.
 */
import { assert, describe, it } from "@effect/vitest"
import {
  ConfigProvider,
  Duration,
  Effect,
  Exit,
  Fiber,
  Layer,
  Option,
  Redacted,
  References,
  Scope
} from "effect"
import { TestClock } from "effect/testing"
import * as Keyring from "../src/internal/keyring.js"
import * as Mesh from "../src/Mesh.js"
import * as MeshConfig from "../src/MeshConfig.js"
import type { ActiveStats, MeshStats } from "../src/MeshStats.js"
import * as MeshTest from "../src/MeshTest.js"
import { eventually, freePort, nodeFromContext } from "./fixtures/cluster.js"

const OLD = "old-secret"
const NEW = "new-secret"

const active = (stats: MeshStats): ActiveStats => {
  if (!stats.enabled) throw new Error(`mesh not active: ${stats.reason}`)
  return stats
}

const advance = (millis: number, step = 500) =>
  Effect.gen(function* () {
    for (let done = 0; done < millis; done += step) {
      yield* TestClock.adjust(Duration.millis(step))
      yield* MeshTest.settle
    }
  })

const NAMES = ["a", "b", "c"] as const

describe("keyring rotation", () => {
  for (const auth of ["legacy", "permissive", "required"] as const) {
    it.effect(`${auth}: three rolling steps, one restart at a time, every wake delivered at every step`, () =>
      Effect.gen(function* () {
        const network = yield* MeshTest.network
        const running = new Map<string, { scope: Scope.Closeable; node: MeshTest.Node }>()
        const start = (name: string, keys: ReadonlyArray<string>) =>
          Effect.gen(function* () {
            const scope = yield* Scope.make()
            const node = yield* Scope.provide(
              MeshTest.node(network, {
                serverId: name,
                peers: NAMES.filter((peer) => peer !== name),
                secret: keys[0]!,
                config: {
                  auth,
                  acceptedSecrets: keys.slice(1).map((key) => Redacted.make(key)),
                  heartbeatInterval: Duration.seconds(1),
                  deadThreshold: Duration.seconds(3)
                }
              }),
              scope
            )
            running.set(name, { scope, node })
          })
        const restart = (name: string, keys: ReadonlyArray<string>) =>
          Effect.gen(function* () {
            yield* Scope.close(running.get(name)!.scope, Exit.void)
            yield* start(name, keys)
            // The others' dialers back off while it is down; give them time to come back.
            yield* advance(6_000)
          })
        /** Every node wakes a pop parked on every other node. */
        const everyWakeDelivered = (step: string) =>
          Effect.gen(function* () {
            const pops: Array<{ readonly what: string; readonly fiber: Fiber.Fiber<string> }> = []
            for (const from of NAMES) {
              for (const to of NAMES) {
                if (from === to) continue
                const target = { queue: `${step}-${from}-${to}`, tenant: Option.none() }
                const fiber = yield* Effect.forkChild(
                  running.get(to)!.node.waker.awaitWake(target, { maxWait: "1 minute" })
                )
                pops.push({ what: `${step}: the wake from ${from} to ${to}`, fiber })
              }
            }
            yield* MeshTest.settle
            for (const from of NAMES) {
              for (const to of NAMES) {
                if (from !== to) {
                  yield* running
                    .get(from)!
                    .node.mesh.messageAvailable({ queue: `${step}-${from}-${to}`, partition: "p" })
                }
              }
            }
            yield* advance(500)
            for (const { what, fiber } of pops) {
              const outcome = fiber.pollUnsafe()
              assert.isTrue(
                outcome !== undefined && Exit.isSuccess(outcome) && outcome.value === "woken",
                what
              )
            }
          })
        const keyIdsSeen = (name: string) =>
          Effect.map(running.get(name)!.node.mesh.stats, (stats) =>
            active(stats)
              .servers.filter((server) => server.alive)
              .map((server) => `${server.server_id}:${server.key_id}`)
              .sort()
          )

        for (const name of NAMES) yield* start(name, [OLD])
        yield* advance(3_000)
        yield* everyWakeDelivered("start")
        const oldId = Keyring.keyIdOf(OLD)
        const newId = Keyring.keyIdOf(NEW)
        assert.deepStrictEqual(yield* keyIdsSeen("a"), [`b:${oldId}`, `c:${oldId}`])

        // Step 1: the new key installed second, one node at a time.
        for (const name of NAMES) {
          yield* restart(name, [OLD, NEW])
          yield* everyWakeDelivered(`add-${name}`)
        }
        // Step 2: the new key made primary.
        for (const name of NAMES) {
          yield* restart(name, [NEW, OLD])
          yield* everyWakeDelivered(`promote-${name}`)
        }
        assert.deepStrictEqual(yield* keyIdsSeen("a"), [`b:${newId}`, `c:${newId}`])
        // Step 3: the old key removed.
        for (const name of NAMES) {
          yield* restart(name, [NEW])
          yield* everyWakeDelivered(`remove-${name}`)
        }
        const stats = active(yield* running.get("a")!.node.mesh.stats)
        assert.strictEqual(stats.key_id, newId)
        assert.deepStrictEqual(stats.accepted_key_ids, [])
        assert.strictEqual(stats.handshake_failures, 0)

        // A node with a key nobody holds is refused, and counted by reason.
        yield* MeshTest.node(network, {
          serverId: "d",
          peers: ["a"],
          secret: "nobody-holds-this",
          config: { auth }
        })
        yield* advance(3_000)
        const after = active(yield* running.get("a")!.node.mesh.stats)
        const refused = auth === "legacy" ? after.rejections.bad_mac : after.rejections.unknown_key
        assert.isAbove(refused, 0)
        assert.isFalse(after.servers.some((server) => server.server_id === "d"))
      })
    )
  }

  it("the key id is derived from the key and never shows it", () => {
    const id = Keyring.keyIdOf(OLD)
    assert.match(id, /^[0-9a-f]{16}$/)
    assert.notInclude(id, OLD)
    assert.notStrictEqual(id, Keyring.keyIdOf(NEW))
  })

  it.effect(
    "QUEEN_SYNC_SECRETS: the primary first, then the keys accepted; never beside QUEEN_SYNC_SECRET",
    () =>
      Effect.gen(function* () {
        const read = (env: Record<string, string>) =>
          Effect.result(
            Effect.provide(
              MeshConfig.MeshConfig,
              MeshConfig.layerConfig.pipe(Layer.provide(ConfigProvider.layer(providerOf(env))))
            )
          )
        const ok = yield* read({ QUEEN_SYNC_SECRETS: `${NEW}, ${OLD}` })
        assert.isTrue(ok._tag === "Success")
        if (ok._tag === "Success") {
          assert.strictEqual(Redacted.value(ok.success.secret), NEW)
          assert.deepStrictEqual(ok.success.acceptedSecrets.map(Redacted.value), [OLD])
        }
        for (const bad of [
          { QUEEN_SYNC_SECRETS: `${NEW},,${OLD}` },
          { QUEEN_SYNC_SECRETS: `${NEW},${NEW}` },
          { QUEEN_SYNC_SECRETS: NEW, QUEEN_SYNC_SECRET: OLD }
        ]) {
          const failed = yield* read(bad)
          assert.isTrue(
            failed._tag === "Failure" && String(failed.failure).includes("QUEEN_SYNC_SECRETS"),
            JSON.stringify(bad)
          )
        }
      })
  )
})

/** The test's variables only, so the machine's environment cannot leak in. */
const providerOf = (env: Readonly<Record<string, string>>) => ConfigProvider.fromEnv({ env: { ...env } })

describe("keyring over TLS-PSK", () => {
  it.live("a node holding the new key as primary links with one still on the old, both ways", () =>
    Effect.gen(function* () {
      const [portA, portB] = [yield* freePort, yield* freePort]
      const node = (serverId: string, port: number, peer: number, keys: ReadonlyArray<string>) =>
        Effect.map(
          Layer.build(
            Mesh.layerTcp().pipe(
              Layer.provide(
                MeshConfig.layer({
                  serverId,
                  port,
                  bindHost: "127.0.0.1",
                  peers: [{ host: "127.0.0.1", port: peer }],
                  tls: "psk",
                  secret: Redacted.make(keys[0]!),
                  acceptedSecrets: keys.slice(1).map((key) => Redacted.make(key)),
                  heartbeatInterval: Duration.millis(200),
                  deadThreshold: Duration.seconds(2)
                })
              )
            )
          ).pipe(Effect.provideService(References.MinimumLogLevel, "Error")),
          nodeFromContext
        )
      // Mid-rotation: a made the new key primary, b has both with the old one primary.
      const a = yield* node("a", portA, portB, [NEW, OLD])
      const b = yield* node("b", portB, portA, [OLD, NEW])
      yield* eventually(
        Effect.map(Effect.all([a.mesh.stats, b.mesh.stats]), (all) =>
          all.every((stats) => stats.enabled && stats.peers[0]!.connected && stats.servers_alive === 1)
        )
      )
      const pop = yield* Effect.forkChild(
        b.waker.awaitWake({ queue: "tls", tenant: Option.none() }, { maxWait: "10 seconds" })
      )
      yield* eventually(Effect.map(b.waker.parked, (n) => n === 1))
      yield* a.mesh.messageAvailable({ queue: "tls", partition: "p" })
      assert.strictEqual(yield* Fiber.join(pop), "woken")
      const seenByB = active(yield* b.mesh.stats).servers.map((server) => server.key_id)
      assert.deepStrictEqual(seenByB, [Keyring.keyIdOf(NEW)])
    })
  )
})
