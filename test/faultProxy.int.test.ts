/**
 * The fault proxy fixture on its own, with plain sockets and an echo server as its target: each fault
 * does what the fixture promises, so tests that use it can trust what they inject. What must not happen
 * is shown by the proxy's state (a stalled proxy reads from no socket, so it cannot forward) or by an
 * ordering (a connection made after another proves the earlier one was handled first), never by
 * watching for a while.
 */
import * as Net from "node:net"
import { assert, describe, it } from "@effect/vitest"
import { type Duration, Effect, Exit, Fiber, Schedule, Scope } from "effect"
import * as FaultProxy from "./fixtures/faultProxy.js"

const HOST = "127.0.0.1"
interface Echo {
  readonly port: number
  /** Every chunk the echo server read, per connection, in order. */
  readonly connections: Array<{ readonly socket: Net.Socket; readonly chunks: Array<Buffer>; ended: boolean }>
}

/** An echo server on 127.0.0.1, closed with the scope. */
const echoServer: Effect.Effect<Echo, never, Scope.Scope> = Effect.acquireRelease(
  Effect.callback<{ echo: Echo; server: Net.Server }>((resume) => {
    const connections: Echo["connections"] = []
    const server = Net.createServer((socket) => {
      const entry = { socket, chunks: [] as Buffer[], ended: false }
      connections.push(entry)
      socket.setNoDelay(true)
      socket.on("data", (chunk: Buffer) => {
        entry.chunks.push(chunk)
        if (!socket.destroyed && socket.writable) socket.write(chunk)
      })
      socket.on("end", () => {
        entry.ended = true
      })
      socket.on("error", () => {})
    })
    server.listen(0, HOST, () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      resume(Effect.succeed({ echo: { port, connections }, server }))
    })
  }),
  ({ echo, server }) =>
    Effect.callback<void>((resume) => {
      for (const { socket } of echo.connections) socket.destroy()
      server.close(() => resume(Effect.void))
    })
).pipe(Effect.map(({ echo }) => echo))

interface Client {
  readonly socket: Net.Socket
  readonly chunks: Array<Buffer>
  readonly state: { closed: boolean; error: string | undefined }
}

const received = (chunks: ReadonlyArray<Buffer>): string => Buffer.concat(chunks).toString("latin1")

/** Writes `data` and waits until it has been handed to the kernel. */
const write = (socket: Net.Socket, data: string) =>
  Effect.callback<void>((resume) => {
    socket.write(data, () => resume(Effect.void))
  })

/** A plain client socket, connected, destroyed with the scope. */
const client = (port: number): Effect.Effect<Client, Error, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.callback<Client, Error>((resume) => {
      const socket = Net.connect({ host: HOST, port })
      socket.setNoDelay(true)
      const chunks: Array<Buffer> = []
      const state: Client["state"] = { closed: false, error: undefined }
      socket.on("data", (chunk: Buffer) => chunks.push(chunk))
      socket.on("close", () => {
        state.closed = true
      })
      socket.on("error", (error: NodeJS.ErrnoException) => {
        state.error = error.code ?? error.message
      })
      socket.once("connect", () => resume(Effect.succeed({ socket, chunks, state })))
      socket.once("error", (error) => resume(Effect.fail(error)))
    }),
    ({ socket }) => Effect.sync(() => socket.destroy())
  )

/** Polls `check` until it holds; fails after `within`. */
const eventually = (check: () => boolean, within: Duration.Input = "30 seconds") =>
  Effect.sync(check).pipe(
    Effect.repeat({ schedule: Schedule.spaced("5 millis"), until: (ok) => ok }),
    Effect.timeoutOrElse({
      duration: within,
      orElse: () => Effect.fail(new Error("condition not reached in time"))
    }),
    Effect.asVoid
  )

const setup = Effect.gen(function* () {
  const echo = yield* echoServer
  const proxy = yield* FaultProxy.make({ target: { host: HOST, port: echo.port } })
  return { echo, proxy }
})

/** Closes `scope`; fails, rather than hanging, when that takes more than `within`. */
const closeWithin = (scope: Scope.Closeable, within: Duration.Input = "10 seconds") =>
  // A finalizer that hangs cannot be interrupted: close in a fiber of its own and stop waiting for it
  // instead (from a release too, which runs uninterruptibly).
  Effect.forkDetach(Scope.close(scope, Exit.void)).pipe(
    Effect.flatMap(Fiber.join),
    Effect.interruptible,
    Effect.timeoutOrElse({
      duration: within,
      orElse: () => Effect.fail(new Error("the scope did not close in time"))
    })
  )

/** `f` in a scope of its own, closed however `f` ends, within `closeWithin`'s bound. */
const inScope = <A, E>(f: (scope: Scope.Closeable) => Effect.Effect<A, E>) =>
  Effect.acquireUseRelease(Scope.make(), f, (scope) => Effect.orDie(closeWithin(scope)))

const tcpHandles = (): number =>
  process.getActiveResourcesInfo().filter((name) => name.startsWith("TCP") || name === "Timeout").length

describe("faultProxy", () => {
  it.live("forwards both ways and counts", () =>
    Effect.gen(function* () {
      const { echo, proxy } = yield* setup
      assert.strictEqual(proxy.host, HOST)
      const c = yield* client(proxy.port)
      c.socket.write("hello")
      yield* eventually(() => received(c.chunks) === "hello")
      assert.strictEqual(echo.connections.length, 1)
      const counters = proxy.counters()
      assert.strictEqual(counters.accepted, 1)
      assert.strictEqual(counters.open, 1)
      assert.strictEqual(counters.bytesUp, 5)
      assert.strictEqual(counters.bytesDown, 5)
    })
  )

  it.live("latency delays every chunk each way", () =>
    Effect.gen(function* () {
      const { proxy } = yield* setup
      const c = yield* client(proxy.port)
      proxy.setLatency(100)
      const started = performance.now()
      c.socket.write("slow")
      yield* eventually(() => received(c.chunks) === "slow")
      // Two legs of 100 ms each; timers may fire a millisecond early.
      assert.isAtLeast(performance.now() - started, 195)
      proxy.setLatency(0)
      c.socket.write("fast")
      yield* eventually(() => received(c.chunks) === "slowfast")
    })
  )

  it.live("latency keeps the order of chunks", () =>
    Effect.gen(function* () {
      const { proxy } = yield* setup
      const c = yield* client(proxy.port)
      proxy.setLatency(60)
      c.socket.write("a")
      proxy.setLatency(0)
      c.socket.write("b")
      yield* eventually(() => received(c.chunks) === "ab")
    })
  )

  it.live("slicing forwards 1-byte writes", () =>
    Effect.gen(function* () {
      const { echo, proxy } = yield* setup
      const c = yield* client(proxy.port)
      proxy.setSlicing(true)
      // A target that has not accepted yet would read the first bytes together.
      yield* eventually(() => echo.connections.length === 1)
      const message = "0123456789abcdefghijklmnopqrstuv"
      c.socket.write(message)
      yield* eventually(() => received(c.chunks) === message)
      const counters = proxy.counters()
      assert.strictEqual(counters.writesUp, message.length)
      assert.strictEqual(counters.writesDown, message.length)
      const chunks = echo.connections[0]!.chunks
      assert.strictEqual(received(chunks), message)
      assert.isTrue(
        chunks.every((chunk) => chunk.length === 1),
        `the target read 1-byte chunks: ${chunks.map((chunk) => chunk.length).join(",")}`
      )
      assert.isTrue(
        c.chunks.every((chunk) => chunk.length === 1),
        `the client read 1-byte chunks: ${c.chunks.map((chunk) => chunk.length).join(",")}`
      )
    })
  )

  it.live("stall stops forwarding on open connections, then resumes", () =>
    Effect.gen(function* () {
      const { echo, proxy } = yield* setup
      const c = yield* client(proxy.port)
      c.socket.write("one")
      yield* eventually(() => received(c.chunks) === "one")
      proxy.stall(true)
      // Reading from no socket, the proxy cannot forward "two" until the stall is lifted.
      assert.strictEqual(proxy.counters().reading, 0)
      yield* write(c.socket, "two")
      assert.strictEqual(proxy.counters().reading, 0)
      assert.strictEqual(proxy.counters().bytesUp, 3)
      proxy.stall(false)
      yield* eventually(() => received(c.chunks) === "onetwo")
      assert.strictEqual(received(echo.connections[0]!.chunks), "onetwo")
    })
  )

  it.live("stall holds new connections too", () =>
    Effect.gen(function* () {
      const { echo, proxy } = yield* setup
      proxy.stall(true)
      const c = yield* client(proxy.port)
      yield* write(c.socket, "held")
      // Accepted, and read from on neither side.
      yield* eventually(() => proxy.counters().open === 1)
      assert.strictEqual(proxy.counters().reading, 0)
      assert.strictEqual(proxy.counters().bytesUp, 0)
      assert.strictEqual(c.chunks.length, 0)
      proxy.stall(false)
      yield* eventually(() => received(c.chunks) === "held")
      assert.strictEqual(echo.connections.length, 1)
    })
  )

  it.live("reset closes both sides of every connection", () =>
    Effect.gen(function* () {
      const { echo, proxy } = yield* setup
      const a = yield* client(proxy.port)
      const b = yield* client(proxy.port)
      a.socket.write("a")
      b.socket.write("b")
      yield* eventually(() => received(a.chunks) === "a" && received(b.chunks) === "b")
      proxy.reset()
      yield* eventually(() => a.state.closed && b.state.closed)
      yield* eventually(() => echo.connections.every(({ socket }) => socket.destroyed))
      assert.strictEqual(a.state.error, "ECONNRESET")
      yield* eventually(() => proxy.counters().open === 0)
      assert.strictEqual(proxy.counters().resets, 2)
      // The proxy still accepts after a reset.
      const c = yield* client(proxy.port)
      c.socket.write("again")
      yield* eventually(() => received(c.chunks) === "again")
    })
  )

  it.live("black hole accepts and never forwards nor answers", () =>
    Effect.gen(function* () {
      const { echo, proxy } = yield* setup
      proxy.blackHole(true)
      const c = yield* client(proxy.port)
      yield* write(c.socket, "into the void")
      yield* eventually(() => proxy.counters().accepted === 1)
      const counters = proxy.counters()
      assert.strictEqual(counters.blackHoled, 1)
      assert.strictEqual(counters.reading, 0)
      assert.strictEqual(counters.bytesUp, 0)
      // Lifting the hole heals new connections; the swallowed one stays dead.
      proxy.blackHole(false)
      const d = yield* client(proxy.port)
      d.socket.write("ok")
      yield* eventually(() => received(d.chunks) === "ok")
      // The target accepts in order: had the first connection been forwarded, its upstream, dialled
      // first, would be there before the second's.
      assert.strictEqual(echo.connections.length, 1)
      assert.strictEqual(c.chunks.length, 0)
      assert.isFalse(c.state.closed, "a half-open link stays open")
    })
  )

  it.live("black hole freezes open connections until lifted", () =>
    Effect.gen(function* () {
      const { proxy } = yield* setup
      const c = yield* client(proxy.port)
      c.socket.write("x")
      yield* eventually(() => received(c.chunks) === "x")
      proxy.blackHole(true)
      // Reading from no socket, the proxy cannot forward "y" until the hole is lifted.
      assert.strictEqual(proxy.counters().reading, 0)
      yield* write(c.socket, "y")
      assert.strictEqual(proxy.counters().reading, 0)
      assert.strictEqual(received(c.chunks), "x")
      proxy.blackHole(false)
      yield* eventually(() => received(c.chunks) === "xy")
    })
  )

  it.live("a target that closed while the hole was on is seen closed once it is lifted", () =>
    Effect.gen(function* () {
      const { echo, proxy } = yield* setup
      const c = yield* client(proxy.port)
      c.socket.write("x")
      yield* eventually(() => received(c.chunks) === "x")
      proxy.blackHole(true)
      // The listener gives up on a silent dialer (as a mesh node closes a silent inbound link) and
      // closes; the dialer keeps writing into the hole.
      echo.connections[0]!.socket.destroy()
      yield* write(c.socket, "y")
      yield* Effect.sleep("200 millis")
      assert.isFalse(c.state.closed)
      proxy.blackHole(false)
      // Once the path is back, the close reaches the dialer, as a real peer's FIN or RST would.
      yield* eventually(() => c.state.closed)
    })
  )

  it.live("limitBytes forwards exactly n bytes, then cuts", () =>
    Effect.gen(function* () {
      const { echo, proxy } = yield* setup
      proxy.limitBytes(10)
      const c = yield* client(proxy.port)
      c.socket.write("x".repeat(100))
      yield* eventually(() => c.state.closed)
      yield* eventually(() => echo.connections[0]?.ended === true)
      assert.strictEqual(received(echo.connections[0]!.chunks), "x".repeat(10))
      assert.strictEqual(proxy.counters().cuts, 1)
      assert.strictEqual(proxy.counters().bytesUp, 10)
    })
  )

  it.live("limitBytes applies to open connections", () =>
    Effect.gen(function* () {
      const { proxy } = yield* setup
      const c = yield* client(proxy.port)
      c.socket.write("12345")
      yield* eventually(() => received(c.chunks) === "12345")
      proxy.limitBytes(3)
      yield* eventually(() => c.state.closed)
      assert.strictEqual(proxy.counters().cuts, 1)
    })
  )

  it.live("limitBytes with slicing still delivers exactly n bytes", () =>
    Effect.gen(function* () {
      const { echo, proxy } = yield* setup
      proxy.setSlicing(true)
      proxy.limitBytes(7)
      const c = yield* client(proxy.port)
      c.socket.write("abcdefghijkl")
      yield* eventually(() => c.state.closed)
      yield* eventually(() => echo.connections[0]?.ended === true)
      assert.strictEqual(received(echo.connections[0]!.chunks), "abcdefg")
    })
  )

  it.live("refuse stops listening; lifting it listens again on the same port", () =>
    Effect.gen(function* () {
      const { proxy } = yield* setup
      const open = yield* client(proxy.port)
      yield* proxy.refuse(true)
      const refused = yield* Effect.exit(client(proxy.port))
      assert.isTrue(Exit.isFailure(refused))
      if (Exit.isFailure(refused)) assert.include(String(refused.cause), "ECONNREFUSED")
      // Open connections are kept.
      open.socket.write("still here")
      yield* eventually(() => received(open.chunks) === "still here")
      yield* proxy.refuse(false)
      const c = yield* client(proxy.port)
      c.socket.write("back")
      yield* eventually(() => received(c.chunks) === "back")
    })
  )

  it.live("an unreachable target closes the accepted connection", () =>
    Effect.gen(function* () {
      const echo = yield* echoServer
      const proxy = yield* FaultProxy.make({ target: { host: HOST, port: echo.port } })
      // A port that was just freed: nothing listens there.
      const dead = yield* Effect.scoped(Effect.map(echoServer, ({ port }) => port))
      const broken = yield* FaultProxy.make({ target: { host: HOST, port: dead } })
      const c = yield* client(broken.port)
      yield* eventually(() => c.state.closed)
      yield* eventually(() => broken.counters().open === 0)
      assert.strictEqual(proxy.counters().accepted, 0)
    })
  )

  it.live("closing the scope closes the listener, every connection and every timer", () =>
    Effect.gen(function* () {
      const outer = yield* Scope.make()
      const echo = yield* Scope.provide(echoServer, outer)
      const baseline = tcpHandles()
      const scope = yield* Scope.make()
      const proxy = yield* Scope.provide(FaultProxy.make({ target: { host: HOST, port: echo.port } }), scope)
      const c = yield* Scope.provide(client(proxy.port), outer)
      c.socket.write("a")
      yield* eventually(() => received(c.chunks) === "a")
      const blackHoled = yield* Effect.sync(() => proxy.blackHole(true)).pipe(
        Effect.andThen(Scope.provide(client(proxy.port), outer))
      )
      proxy.blackHole(false)
      // Leave a delayed chunk pending, so a timer is live at close.
      proxy.setLatency(10_000)
      c.socket.write("b")
      yield* eventually(() => proxy.counters().open === 2)
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(proxy.counters().open, 0)
      yield* eventually(() => c.state.closed && blackHoled.state.closed)
      const refused = yield* Effect.exit(Effect.scoped(client(proxy.port)))
      assert.isTrue(Exit.isFailure(refused))
      yield* Scope.close(outer, Exit.void)
      // The client sockets and the echo server's are gone too: back under the baseline.
      yield* eventually(() => tcpHandles() <= baseline)
    })
  )

  it.live("a reset as the hole is lifted closes a link whose other side closed inside it", () =>
    inScope((scope) =>
      Effect.gen(function* () {
        const { echo, proxy } = yield* Scope.provide(setup, scope)
        const c = yield* Scope.provide(client(proxy.port), scope)
        c.socket.write("x")
        yield* eventually(() => received(c.chunks) === "x")
        proxy.blackHole(true)
        echo.connections[0]!.socket.destroy()
        // The upstream side has closed; the end it owes the dialer waits for the hole to be lifted.
        yield* eventually(() => proxy.handles().sockets === 1)
        // Lifting the hole sends that end (a shutdown under way), and the reset comes before it is done:
        // Node's reset failed there and left the socket's handle open for ever, never closed.
        proxy.blackHole(false)
        proxy.reset()
        yield* eventually(() => proxy.handles().sockets === 0 && c.state.closed, "10 seconds")
        assert.strictEqual(proxy.counters().open, 0)
      })
    )
  )

  it.live("closing the scope releases every socket and server the faults left behind, at once", () =>
    inScope((outer) =>
      Effect.gen(function* () {
        const echo = yield* Scope.provide(echoServer, outer)
        const connect = (port: number) => Scope.provide(client(port), outer)
        const baseline = tcpHandles()
        const scope = yield* Scope.fork(outer, "sequential")
        const proxy = yield* Scope.provide(
          FaultProxy.make({ target: { host: HOST, port: echo.port } }),
          scope
        )
        const clients: Array<Client> = []

        // Reset as a hole is lifted: a link whose target closed inside the hole, and one accepted into it.
        const a = yield* connect(proxy.port)
        clients.push(a)
        a.socket.write("a")
        yield* eventually(() => received(a.chunks) === "a")
        proxy.blackHole(true)
        clients.push(yield* connect(proxy.port))
        yield* eventually(() => proxy.counters().accepted === 2)
        echo.connections[0]!.socket.destroy()
        yield* eventually(() => proxy.handles().sockets === 2)
        proxy.blackHole(false)
        proxy.reset()

        // Stalled with bytes held, then refused: the first server stops listening while the stalled
        // link lives on, so that server's own close callback cannot come before the link's end.
        const b = yield* connect(proxy.port)
        clients.push(b)
        b.socket.write("b")
        yield* eventually(() => received(b.chunks) === "b")
        proxy.stall(true)
        yield* write(b.socket, "held")
        yield* proxy.refuse(true)

        // Listening again (a second server): a link held by the stall, and one in a new hole.
        yield* proxy.refuse(false)
        clients.push(yield* connect(proxy.port))
        yield* eventually(() => proxy.counters().accepted === 4)
        proxy.blackHole(true)
        clients.push(yield* connect(proxy.port))
        yield* eventually(() => proxy.counters().accepted === 5)
        assert.isAbove(proxy.handles().sockets, 0)

        // It takes milliseconds; it hung for ever when a reset had left a handle open.
        yield* closeWithin(scope)
        assert.deepStrictEqual(proxy.handles(), { listening: 0, sockets: 0 })
        assert.strictEqual(proxy.counters().open, 0)
        yield* eventually(() => clients.every((client) => client.state.closed))
        for (const client of clients) client.socket.destroy()
        for (const connection of echo.connections) connection.socket.destroy()
        // Nothing of the proxy is left open in the process: back under the baseline.
        yield* eventually(() => tcpHandles() <= baseline)
      })
    )
  )
})
