import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Latch, Option, Result } from "effect"
import { TestClock } from "effect/testing"
import { Pipe, Wire } from "../../../src/internal/memory/pipe.js"

const noDelay = { delayMillis: 0 }
const bytes = (...values: Array<number>) => Uint8Array.from(values)

/** Reads `pipe` in a fiber, collecting every chunk's first byte. */
const collect = (pipe: Pipe, gate?: Latch.Latch) =>
  Effect.gen(function* () {
    const seen: Array<number> = []
    const fiber = yield* Effect.forkChild(
      pipe.read(gate, (chunk) => {
        seen.push(chunk[0]!)
        return undefined
      })
    )
    return { seen, fiber }
  })

describe("memory pipes", () => {
  it.effect("chunks arrive in order, as copies of what was written", () =>
    Effect.gen(function* () {
      const pipe = yield* Pipe.make
      const buffer = bytes(1)
      yield* pipe.write(buffer, "b", noDelay)
      buffer[0] = 9
      yield* pipe.write(bytes(2), "b", noDelay)
      const { seen, fiber } = yield* collect(pipe)
      yield* pipe.close()
      yield* Fiber.join(fiber)
      assert.deepStrictEqual(seen, [1, 2])
    })
  )

  it.effect("a chunk is read no earlier than the delay it was written with", () =>
    Effect.gen(function* () {
      const pipe = yield* Pipe.make
      const { seen } = yield* collect(pipe)
      yield* pipe.write(bytes(1), "b", { delayMillis: 100 })
      yield* TestClock.adjust(99)
      assert.deepStrictEqual(seen, [])
      yield* TestClock.adjust(1)
      assert.deepStrictEqual(seen, [1])
    })
  )

  it.effect("the writer suspends once 64 chunks wait, and resumes as the reader takes them", () =>
    Effect.gen(function* () {
      const pipe = yield* Pipe.make
      for (let i = 0; i < 64; i++) yield* pipe.write(bytes(i), "b", noDelay)
      const blocked = yield* Effect.forkChild(pipe.write(bytes(64), "b", noDelay))
      yield* TestClock.adjust(1)
      assert.isUndefined(blocked.pollUnsafe())
      const { seen } = yield* collect(pipe)
      yield* Fiber.join(blocked)
      yield* TestClock.adjust(1)
      assert.strictEqual(seen.length, 65)
    })
  )

  it.effect("a stopped reader holds still until its gate opens", () =>
    Effect.gen(function* () {
      const pipe = yield* Pipe.make
      const gate = yield* Latch.make(false)
      const { seen } = yield* collect(pipe, gate)
      yield* pipe.write(bytes(1), "b", noDelay)
      yield* TestClock.adjust(1)
      assert.deepStrictEqual(seen, [])
      yield* gate.open
      yield* TestClock.adjust(1)
      assert.deepStrictEqual(seen, [1])
    })
  )

  it.effect("a close lets the reader drain, then end; a write after it fails", () =>
    Effect.gen(function* () {
      const pipe = yield* Pipe.make
      yield* pipe.write(bytes(1), "b", noDelay)
      yield* pipe.close()
      const { seen, fiber } = yield* collect(pipe)
      yield* Fiber.join(fiber)
      assert.deepStrictEqual(seen, [1])
      const written = yield* Effect.result(pipe.write(bytes(2), "b", noDelay))
      assert.isTrue(Result.isFailure(written) && written.failure.reason === "Closed")
    })
  )

  it.effect("a cut wire fails both ends; a closed one ends both readers", () =>
    Effect.gen(function* () {
      const cut = yield* Wire.make("a", "b")
      const dialer = cut.dialerEnd("b", noDelay)
      const listener = cut.listenerEnd(yield* Latch.make(true), noDelay)
      assert.deepStrictEqual(dialer.remoteAddress, Option.some("b"))
      assert.deepStrictEqual(listener.remoteAddress, Option.some("a"))
      const reading = yield* Effect.forkChild(Effect.result(listener.read<never>(() => undefined)))
      yield* cut.cut("test")
      const read = yield* Fiber.join(reading)
      assert.isTrue(Result.isFailure(read) && read.failure.reason === "Read")
      assert.isTrue(Result.isFailure(yield* Effect.result(dialer.write(bytes(1)))))

      const closed = yield* Wire.make(undefined, "b")
      // An unnamed dialer is seen from loopback.
      const end = closed.listenerEnd(yield* Latch.make(true), noDelay)
      assert.deepStrictEqual(end.remoteAddress, Option.some("127.0.0.1"))
      const both = yield* Effect.forkChild(
        Effect.all([end.read(() => undefined), closed.dialerEnd("b", noDelay).read(() => undefined)])
      )
      yield* closed.close()
      yield* Fiber.join(both)
    })
  )
})
