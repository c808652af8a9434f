import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Option, Result, Scope } from "effect"
import { TestClock } from "effect/testing"
import { Faults } from "../../../src/internal/memory/faults.js"
import { Hosts } from "../../../src/internal/memory/hosts.js"
import type { Connection } from "../../../src/Transport.js"

/** A handler that records the remote address of each connection and keeps it open. */
const accepting = () => {
  const remotes: Array<string> = []
  const handler = (connection: Connection) =>
    Effect.andThen(
      Effect.sync(() => remotes.push(Option.getOrElse(connection.remoteAddress, () => "?"))),
      connection.read(() => undefined).pipe(Effect.ignore)
    )
  return { remotes, handler }
}

describe("memory network hosts", () => {
  it.effect("port 0 is an ephemeral port; a taken address is refused", () =>
    Effect.gen(function* () {
      const hosts = new Hosts(new Faults())
      assert.strictEqual(yield* hosts.listen("a", { host: "0.0.0.0", port: 0 }, () => Effect.void), 49152)
      assert.strictEqual(yield* hosts.listen("a", { host: "0.0.0.0", port: 0 }, () => Effect.void), 49153)
      yield* hosts.listen("a", { host: "0.0.0.0", port: 6633 }, () => Effect.void)
      const again = yield* Effect.result(hosts.listen("a", { host: "::", port: 6633 }, () => Effect.void))
      assert.isTrue(Result.isFailure(again) && again.failure.reason === "Listen")
      // Another node may bind the same port.
      yield* hosts.listen("b", { host: "0.0.0.0", port: 6633 }, () => Effect.void)
    })
  )

  it.effect("a named node's wildcard listener is reached by its name; an unnamed one's by loopback", () =>
    Effect.gen(function* () {
      const hosts = new Hosts(new Faults())
      yield* hosts.listen("queen-b", { host: "0.0.0.0", port: 6633 }, () => Effect.void)
      yield* hosts.listen(undefined, { host: "0.0.0.0", port: 7000 }, () => Effect.void)
      assert.strictEqual(hosts.route("a", "queen-b", 6633)?.host, "queen-b")
      assert.isUndefined(hosts.route("a", "127.0.0.1", 6633))
      assert.strictEqual(hosts.route(undefined, "localhost", 7000)?.host, "*")
      assert.strictEqual(hosts.route(undefined, "::1", 7000)?.port, 7000)
      assert.isUndefined(hosts.route(undefined, "queen-b", 7000))
    })
  )

  it.effect("refused targets and partitions route nowhere", () =>
    Effect.gen(function* () {
      const faults = new Faults()
      const hosts = new Hosts(faults)
      yield* hosts.listen("b", { host: "0.0.0.0", port: 6633 }, () => Effect.void)
      faults.refuse(6633, true)
      assert.isUndefined(hosts.route("a", "b", 6633))
      faults.refuse(6633, false)
      faults.partition(["a"], ["b"])
      assert.isUndefined(hosts.route("a", "b", 6633))
      assert.isDefined(hosts.route("c", "b", 6633))
    })
  )

  it.effect(
    "a connection reaches the handler with the dialer's name, and closes with the dialer's scope",
    () =>
      Effect.gen(function* () {
        const hosts = new Hosts(new Faults())
        const { remotes, handler } = accepting()
        yield* hosts.listen("b", { host: "0.0.0.0", port: 6633 }, handler)
        const listener = hosts.route("a", "b", 6633)!
        const dial = yield* Scope.make()
        const connection = yield* listener.connect("a", "b").pipe(Scope.provide(dial))
        yield* TestClock.adjust(1)
        assert.deepStrictEqual(remotes, ["a"])
        assert.deepStrictEqual(connection.remoteAddress, Option.some("b"))
        assert.strictEqual(listener.openConnections, 1)
        yield* Scope.close(dial, Exit.void)
        assert.strictEqual(listener.openConnections, 0)
      })
  )

  it.effect(
    "cutPartitioned resets only the connections a partition separates; a listener's scope closes its own",
    () =>
      Effect.gen(function* () {
        const faults = new Faults()
        const hosts = new Hosts(faults)
        const { handler } = accepting()
        const listenScope = yield* Scope.make()
        yield* hosts.listen("b", { host: "0.0.0.0", port: 6633 }, handler).pipe(Scope.provide(listenScope))
        const listener = hosts.route("a", "b", 6633)!
        const fromA = yield* listener.connect("a", "b")
        yield* listener.connect("c", "b")
        yield* TestClock.adjust(1)
        faults.partition(["a"], ["b"])
        yield* hosts.cutPartitioned()
        const write = yield* Effect.result(fromA.write(Uint8Array.of(1)))
        assert.isTrue(Result.isFailure(write))
        yield* TestClock.adjust(1)
        // The handler of the cut connection ended, which released it; c's is still open.
        assert.strictEqual(listener.openConnections, 1)
        assert.strictEqual(hosts.matching("b").length, 1)
        yield* Scope.close(listenScope, Exit.void)
        assert.strictEqual(listener.openConnections, 0)
        assert.strictEqual(hosts.matching("b").length, 0)
      })
  )
})
