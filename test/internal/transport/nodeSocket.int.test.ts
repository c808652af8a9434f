/**
 * The socket adapter's write policy, on a real loopback connection: a lone frame leaves at once (a
 * wake does not wait for the caller's turn to end), the frames that follow it in the same turn of the
 * event loop leave as one write (handed from separate callbacks too, as the acknowledgements of many
 * commits arrive), and the link goes back to writing at once after a turn with a single frame. Order is
 * kept throughout, also against the back-pressured `write`.
 */
import * as Net from "node:net"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { connectionOf } from "../../../src/internal/transport/nodeSocket.js"

const nextTick = () => new Promise<void>((resolve) => process.nextTick(resolve))
/** The end of this turn of the event loop: the adapter's gathered frames leave then. */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve))

const pair = async () => {
  const received: Array<Buffer> = []
  const server = Net.createServer((socket) => socket.on("data", (chunk) => received.push(chunk)))
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  const socket = Net.createConnection({ host: "127.0.0.1", port, noDelay: true })
  await new Promise<void>((resolve) => socket.once("connect", () => resolve()))
  // Every system write the adapter makes, counted.
  let writes = 0
  const write = socket.write.bind(socket)
  socket.write = ((...args: Parameters<typeof socket.write>) => {
    writes++
    return write(...args)
  }) as typeof socket.write
  const close = () => {
    socket.destroy()
    server.close()
  }
  return { socket, received, writes: () => writes, close }
}

describe("socket adapter writes", () => {
  it("writes a lone frame at once, the rest of a turn's frames as one write, and keeps their order", async () => {
    const { socket, received, writes, close } = await pair()
    try {
      const connection = connectionOf(socket, "127.0.0.1")
      const tryWrite = connection.unsafeTryWrite!
      const frame = (n: number) => Buffer.from([n])

      // An idle link: the first frame is written before the call returns; the rest of the turn wait,
      // also those handed from later callbacks of the same turn.
      assert.isTrue(tryWrite(frame(1)))
      assert.strictEqual(writes(), 1)
      tryWrite(frame(2))
      await nextTick()
      tryWrite(frame(3))
      await nextTick()
      assert.strictEqual(writes(), 1)
      await nextTurn()
      assert.strictEqual(writes(), 2, "the rest of the turn left as one write")

      // That turn was busy: the next one gathers all its frames into one write.
      tryWrite(frame(4))
      tryWrite(frame(5))
      assert.strictEqual(writes(), 2)
      await nextTurn()
      assert.strictEqual(writes(), 3)

      // A turn with one frame (still gathered) makes the link idle again: the next lone frame is
      // written at once.
      tryWrite(frame(6))
      await nextTurn()
      assert.strictEqual(writes(), 4)
      tryWrite(frame(7))
      assert.strictEqual(writes(), 5)
      await nextTurn()
      assert.strictEqual(writes(), 5)

      // Frames still gathered leave before a frame of the back-pressured path handed after them.
      tryWrite(frame(8))
      tryWrite(frame(9))
      await Effect.runPromise(connection.write(frame(10)))
      await nextTurn()

      const deadline = Date.now() + 30_000
      while (Buffer.concat(received).length < 10 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 5))
      }
      assert.deepStrictEqual([...Buffer.concat(received)], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    } finally {
      close()
    }
  })

  it("refuses a write once the socket is destroyed", async () => {
    const { socket, close } = await pair()
    try {
      const connection = connectionOf(socket, "127.0.0.1")
      socket.destroy()
      assert.isFalse(connection.unsafeTryWrite!(Buffer.from([1])))
    } finally {
      close()
    }
  })
})
