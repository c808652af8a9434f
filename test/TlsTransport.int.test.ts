import * as Net from "node:net"
import * as Tls from "node:tls"
import { assert, describe, it } from "@effect/vitest"
import {
  Cause,
  Deferred,
  Effect,
  Exit,
  Fiber,
  Layer,
  Option,
  Queue,
  Redacted,
  References,
  Scope
} from "effect"
import * as Frame from "../src/Frame.js"
import * as Handshake from "../src/internal/links/handshake.js"
import * as Mesh from "../src/Mesh.js"
import * as MeshConfig from "../src/MeshConfig.js"
import type { TransportError } from "../src/MeshError.js"
import * as Resolver from "../src/Resolver.js"
import * as TlsTransport from "../src/TlsTransport.js"
import { type Connection, Transport, type TransportShape } from "../src/Transport.js"
import {
  allConnected,
  eventually,
  freePort,
  hearsFrom,
  type Node,
  nodeFromContext
} from "./fixtures/cluster.js"
import { SECRET } from "./fixtures/secret.js"

const LOOPBACK = { host: "127.0.0.1", port: 0 }

const socketHandles = () =>
  process
    .getActiveResourcesInfo()
    .filter((r) => r === "TCPServerWrap" || r === "TCPSocketWrap" || r === "TLSWrap").length

interface Failure {
  readonly reason: string
  readonly remote: string
}

/** A TLS transport whose listener's handshake failures land in a queue. */
const transport = (options: Partial<TlsTransport.TlsOptions> & { readonly identity: string }) =>
  Effect.gen(function* () {
    const failures = yield* Queue.unbounded<Failure>()
    const shape = yield* TlsTransport.make({
      secret: SECRET,
      onHandshakeFailure: (reason, remote) => Queue.offerUnsafe(failures, { reason, remote }),
      ...options
    })
    return { shape, failures }
  })

/** Listens; every accepted connection goes to the queue and stays open until the scope closes. */
const listen = (shape: TransportShape) =>
  Effect.gen(function* () {
    const accepted = yield* Queue.unbounded<Connection>()
    const port = yield* shape.listen(LOOPBACK, (connection) =>
      Effect.andThen(Queue.offer(accepted, connection), Effect.never)
    )
    return { port, accepted }
  })

/** Reads `connection` in the background, keeping every chunk. */
const collect = (connection: Connection) =>
  Effect.gen(function* () {
    const chunks: Array<Uint8Array> = []
    const fiber = yield* connection
      .read((chunk) => {
        chunks.push(chunk)
        // Hand back an effect now and then, so the pause-and-resume path runs too.
        return chunks.length % 2 === 0 ? Effect.yieldNow : undefined
      })
      .pipe(Effect.forkScoped)
    const all = () => Buffer.concat(chunks)
    const text = () => all().toString("utf8")
    const bytes = () => chunks.reduce((n, chunk) => n + chunk.length, 0)
    return { fiber, all, text, bytes }
  })

const waitClose = (socket: Net.Socket) =>
  Effect.callback<void>((resume) => {
    if (socket.destroyed) return resume(Effect.void)
    socket.once("close", () => resume(Effect.void))
  })

const plainConnect = (port: number) =>
  Effect.acquireRelease(
    Effect.callback<Net.Socket>((resume) => {
      const socket = Net.connect({ host: "127.0.0.1", port }, () => resume(Effect.succeed(socket)))
      // Whatever the listener answers is read and dropped, so its close is seen.
      socket.on("error", () => {}).resume()
    }),
    (socket) => Effect.sync(() => socket.destroy())
  )

/**
 * A TCP relay in front of `target`, as an attacker on the path would run it: it forwards both ways and
 * can write bytes of its own into the stream toward the listener.
 */
const relay = (target: number) =>
  Effect.gen(function* () {
    const upstreams: Array<Net.Socket> = []
    const server = yield* Effect.acquireRelease(
      Effect.callback<Net.Server>((resume) => {
        const server = Net.createServer((downstream) => {
          const upstream = Net.connect({ host: "127.0.0.1", port: target })
          upstreams.push(upstream)
          for (const socket of [downstream, upstream]) socket.on("error", () => {})
          downstream.on("data", (chunk) => upstream.write(chunk))
          upstream.on("data", (chunk) => downstream.write(chunk))
          downstream.on("close", () => upstream.destroy())
          upstream.on("close", () => downstream.destroy())
        })
        server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
      }),
      (server) =>
        Effect.callback<void>((resume) => {
          for (const socket of upstreams) socket.destroy()
          server.close(() => resume(Effect.void))
        })
    )
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    const inject = (bytes: Uint8Array) => Effect.sync(() => upstreams[0]?.write(bytes))
    return { port, inject }
  })

const hello = Frame.encode(Handshake.helloWithNonce("node-x", SECRET, "00".repeat(16)))

describe("TlsTransport", () => {
  it.live("closing the scope closes the listener, its connections and handshakes in flight", () =>
    Effect.gen(function* () {
      // First in this file, so no earlier test's sockets are still closing.
      const before = socketHandles()
      const scope = yield* Scope.make()
      const { port, failures } = yield* Effect.gen(function* () {
        const a = yield* transport({ identity: "node-a" })
        const b = yield* transport({ identity: "node-b" })
        const { port, accepted } = yield* listen(a.shape)
        const outbound = yield* b.shape.dial("127.0.0.1", port)
        yield* outbound.write(new TextEncoder().encode("x"))
        yield* Queue.take(accepted)
        return { port, failures: a.failures }
      }).pipe(Scope.provide(scope))
      // A socket that connects and never starts TLS, owned by the test: the listener must end it.
      const pending = yield* plainConnect(port)
      assert.isAbove(socketHandles(), before)
      yield* Scope.close(scope, Exit.void)
      yield* waitClose(pending)
      yield* eventually(Effect.sync(() => socketHandles() <= before))
      // Ending a handshake on shutdown is not a handshake failure.
      assert.strictEqual(yield* Queue.size(failures), 0)
    })
  )

  it.live("two transports with the same secret exchange bytes both ways", () =>
    Effect.gen(function* () {
      const a = yield* transport({ identity: "node-a" })
      const b = yield* transport({ identity: "node-b" })
      const { port, accepted } = yield* listen(a.shape)
      const outbound = yield* b.shape.dial("127.0.0.1", port)
      const inbound = yield* Queue.take(accepted)
      assert.strictEqual(inbound.identity, "node-b")
      assert.strictEqual(outbound.identity, undefined)
      assert.deepStrictEqual(inbound.remoteAddress, Option.some("127.0.0.1"))
      assert.deepStrictEqual(outbound.remoteAddress, Option.some("127.0.0.1"))

      const atListener = yield* collect(inbound)
      const atDialer = yield* collect(outbound)
      yield* outbound.write(new TextEncoder().encode("ping "))
      assert.isTrue(outbound.unsafeTryWrite?.(new TextEncoder().encode("fast ")))
      assert.isTrue(outbound.unsafeTryWrite?.(new TextEncoder().encode("path")))
      yield* eventually(Effect.sync(() => atListener.text() === "ping fast path"))
      yield* inbound.write(new TextEncoder().encode("pong"))
      yield* eventually(Effect.sync(() => atDialer.text() === "pong"))

      // A megabyte through a reader that pauses now and then, in order and intact.
      const big = Buffer.alloc(1 << 20)
      for (let i = 0; i < big.length; i++) big[i] = i % 251
      for (let offset = 0; offset < big.length; offset += 65_536) {
        yield* outbound.write(big.subarray(offset, offset + 65_536))
      }
      const total = "ping fast path".length + big.length
      yield* eventually(Effect.sync(() => atListener.bytes() === total))
      assert.isTrue(atListener.all().equals(Buffer.concat([Buffer.from("ping fast path"), big])))
    })
  )

  it.live("a dialer with another secret cannot connect, and the listener counts the failure", () =>
    Effect.gen(function* () {
      const a = yield* transport({ identity: "node-a" })
      const intruder = yield* transport({ identity: "node-b", secret: "guessed" })
      const { port, accepted } = yield* listen(a.shape)
      const error = yield* Effect.flip(intruder.shape.dial("127.0.0.1", port))
      assert.strictEqual(error._tag, "TransportError")
      assert.strictEqual(error.reason, "Dial")
      const failure = yield* Queue.take(a.failures)
      assert.strictEqual(failure.reason, "ERR_SSL_BINDER_DOES_NOT_VERIFY")
      assert.match(failure.remote, /^127\.0\.0\.1:\d+$/)
      assert.strictEqual(yield* Queue.size(accepted), 0)
    })
  )

  it.live("a plaintext client sending a HELLO gets nothing applied and is disconnected", () =>
    Effect.gen(function* () {
      const a = yield* transport({ identity: "node-a" })
      const { port, accepted } = yield* listen(a.shape)
      const socket = yield* plainConnect(port)
      socket.write(hello)
      yield* waitClose(socket)
      const failure = yield* Queue.take(a.failures)
      assert.strictEqual(failure.reason, "ERR_SSL_WRONG_VERSION_NUMBER")
      assert.strictEqual(yield* Queue.size(accepted), 0)
    })
  )

  it.live("a socket that never finishes TLS is dropped at the handshake deadline", () =>
    Effect.gen(function* () {
      const a = yield* transport({ identity: "node-a", handshakeTimeout: "100 millis" })
      const { port, accepted } = yield* listen(a.shape)
      const socket = yield* plainConnect(port)
      const failure = yield* Queue.take(a.failures)
      assert.strictEqual(failure.reason, "ERR_TLS_HANDSHAKE_TIMEOUT")
      yield* waitClose(socket)
      assert.strictEqual(yield* Queue.size(accepted), 0)
    })
  )

  it.live("an identity with control characters is refused before any key is derived", () =>
    Effect.gen(function* () {
      const a = yield* transport({ identity: "node-a" })
      const { port, accepted } = yield* listen(a.shape)
      const offered = "node\u0001b"
      const result = yield* Effect.callback<string>((resume) => {
        const socket = Tls.connect({
          host: "127.0.0.1",
          port,
          ciphers: TlsTransport.CIPHERS,
          minVersion: "TLSv1.3",
          pskCallback: () => ({ psk: TlsTransport.derivePsk(SECRET, offered), identity: offered }),
          checkServerIdentity: () => undefined
        })
        socket.on("error", () => resume(Effect.succeed("refused")))
        socket.on("secureConnect", () => {
          socket.destroy()
          resume(Effect.succeed("connected"))
        })
      })
      assert.strictEqual(result, "refused")
      const failure = yield* Queue.take(a.failures)
      assert.strictEqual(failure.reason, "InvalidIdentity")
      assert.strictEqual(yield* Queue.size(accepted), 0)
    })
  )

  // A raw HELLO, and the same HELLO dressed as a TLS 1.3 application-data record.
  const header = Buffer.from([0x17, 0x03, 0x03, 0, 0])
  header.writeUInt16BE(hello.length + 16, 3)
  const forged = Buffer.concat([header, hello, Buffer.alloc(16)])
  it.live.each([
    // OpenSSL 3.0 (Node 20) names it by the record's version, 3.5 (Node 22) by its type.
    { name: "a plaintext frame", bytes: hello, error: /wrong version number|bad record type/ },
    { name: "a forged TLS record", bytes: forged, error: /bad record mac|decryption failed/ }
  ])(
    "$name injected into the stream breaks the link instead of being delivered",
    ({ bytes, error: expected }) =>
      Effect.gen(function* () {
        const a = yield* transport({ identity: "node-a" })
        const { port, accepted } = yield* listen(a.shape)
        const path = yield* relay(port)
        const b = yield* transport({
          identity: "node-b",
          // The peer's name resolves to the relay, as a hijacked address would.
          resolve: (host, _port) =>
            host === "node-a.mesh"
              ? Effect.succeed({ host: "127.0.0.1", port: path.port })
              : Effect.die(new Error(`unexpected host ${host}`))
        })
        const outbound = yield* b.shape.dial("node-a.mesh", port)
        const inbound = yield* Queue.take(accepted)
        const received: Array<Uint8Array> = []
        const arrived = yield* Deferred.make<void>()
        const reader = yield* inbound
          .read<never>((chunk) => {
            received.push(chunk)
            Deferred.doneUnsafe(arrived, Exit.void)
            return undefined
          })
          .pipe(Effect.exit, Effect.forkChild)

        yield* outbound.write(new TextEncoder().encode("genuine"))
        yield* Deferred.await(arrived)
        yield* path.inject(bytes)
        // Whatever the dialer sends after the injection must not arrive either.
        yield* outbound.write(new TextEncoder().encode("after")).pipe(Effect.ignore)

        const exit: Exit.Exit<void, TransportError> = yield* Fiber.join(reader)
        assert.isTrue(Exit.isFailure(exit))
        if (Exit.isFailure(exit)) {
          const error = Option.getOrThrow(Cause.findErrorOption(exit.cause))
          assert.strictEqual(error.reason, "Read")
          assert.match(error.message, expected)
        }
        assert.strictEqual(Buffer.concat(received).toString("utf8"), "genuine")
      })
  )

  it.live("a dial to a server that never answers TLS fails at the connect deadline", () =>
    Effect.gen(function* () {
      const silent = yield* Effect.acquireRelease(
        Effect.callback<Net.Server>((resume) => {
          // It reads and drops what it gets, so it sees the dialer's close.
          const server = Net.createServer((socket) => socket.on("error", () => {}).resume())
          server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
        }),
        (server) => Effect.callback<void>((resume) => void server.close(() => resume(Effect.void)))
      )
      const address = silent.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      const b = yield* transport({ identity: "node-b", connectTimeout: "100 millis" })
      const error = yield* Effect.flip(b.shape.dial("127.0.0.1", port))
      assert.strictEqual(error.reason, "Timeout")
    })
  )

  it.live("layerResolved dials through the Resolver in context", () =>
    Effect.gen(function* () {
      const a = yield* transport({ identity: "node-a" })
      const { port, accepted } = yield* listen(a.shape)
      const registry = yield* Resolver.makeRegistry({
        initial: [["node-a.mesh", { host: "127.0.0.1", port }]]
      })
      const outbound = yield* Effect.flatMap(Transport, (t) => t.dial("node-a.mesh", 1)).pipe(
        Effect.provide(
          TlsTransport.layerResolved({ secret: SECRET, identity: "node-b" }).pipe(
            Layer.provide(Resolver.layerRegistry(registry))
          )
        )
      )
      const inbound = yield* Queue.take(accepted)
      const atListener = yield* collect(inbound)
      yield* outbound.write(new TextEncoder().encode("resolved"))
      yield* eventually(Effect.sync(() => atListener.text() === "resolved"))
    })
  )

  it.live("a two-node mesh runs over it unchanged", () =>
    Effect.gen(function* () {
      const ports = [yield* freePort, yield* freePort] as const
      const nodes: Array<Node> = []
      for (const [i, serverId] of ["node-a", "node-b"].entries()) {
        const context = yield* Layer.build(
          Mesh.layerLocal().pipe(
            Layer.provide(TlsTransport.layer({ secret: SECRET, identity: serverId })),
            Layer.provide(
              MeshConfig.layer({
                serverId,
                port: ports[i]!,
                bindHost: "127.0.0.1",
                peers: [{ host: "127.0.0.1", port: ports[1 - i]! }],
                secret: Redacted.make(SECRET)
              })
            )
          )
        ).pipe(Effect.provideService(References.MinimumLogLevel, "Error"))
        nodes.push(nodeFromContext(context))
      }
      for (const node of nodes) yield* eventually(allConnected(node))
      for (const node of nodes) yield* eventually(hearsFrom(node, 1))
    })
  )

  it.effect("refuses to start with an empty secret or an unusable identity", () =>
    Effect.gen(function* () {
      for (const secret of ["", Redacted.make("")]) {
        const error = yield* Effect.flip(TlsTransport.make({ secret, identity: "node-a" }))
        assert.strictEqual(error._tag, "TlsConfigError")
        assert.strictEqual(error.reason, "EmptySecret")
      }
      for (const identity of [
        "",
        "a\u0000b",
        "x".repeat(TlsTransport.MAX_IDENTITY_BYTES + 1),
        "é".repeat(129)
      ]) {
        const error = yield* Effect.flip(TlsTransport.make({ secret: SECRET, identity }))
        assert.strictEqual(error.reason, "InvalidIdentity")
      }
      yield* TlsTransport.make({ secret: Redacted.make(SECRET), identity: "x".repeat(256) })
      yield* TlsTransport.make({ secret: SECRET, identity: "nœud-ä.queen" })
    })
  )

  it("derives the documented key: HKDF-SHA256(secret, salt, identity, 32)", () => {
    assert.strictEqual(TlsTransport.PSK_SALT, "queen-mesh tls-psk v1")
    const key = TlsTransport.derivePsk("secret", "node-a")
    assert.strictEqual(key.length, 32)
    assert.isFalse(key.equals(TlsTransport.derivePsk("secret", "node-b")))
    assert.isFalse(key.equals(TlsTransport.derivePsk("secret2", "node-a")))
    assert.isTrue(key.equals(TlsTransport.derivePsk("secret", "node-a")))
  })
})
