import { readFileSync } from "node:fs"
import * as Net from "node:net"
import { assert, describe, it } from "@effect/vitest"
import * as Ports from "../../src/internal/ports.js"

const listenOn = (port: number): Promise<Net.Server> =>
  new Promise((resolve, reject) => {
    const server = Net.createServer()
    server.once("error", reject)
    server.listen({ port, host: "127.0.0.1", exclusive: true }, () => resolve(server))
  })

const close = (server: Net.Server): Promise<void> => new Promise((resolve) => server.close(() => resolve()))

/** Where this machine's kernel picks ephemeral ports from, if it says (Linux). */
const ephemeralLow = ((): number | undefined => {
  try {
    return Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0])
  } catch {
    return undefined
  }
})()

describe("ports", () => {
  it.skipIf(ephemeralLow === undefined)(
    "the range lies just below the ephemeral one, its slices apart",
    () => {
      const whole = Ports.belowEphemeral()
      if (whole === undefined) return assert.fail("no range where /proc says where the ephemeral one starts")
      assert.strictEqual(whole.from + whole.size, ephemeralLow)
      const slices = Array.from({ length: 16 }, (_, index) => Ports.belowEphemeral({ index, count: 16 }))
      for (const [i, slice] of slices.entries()) {
        if (slice === undefined) return assert.fail(`slice ${i}`)
        assert.isAtLeast(slice.from, whole.from)
        assert.isAtMost(slice.from + slice.size, whole.from + whole.size)
        const after = slices[i + 1]
        if (after !== undefined) assert.isAtMost(slice.from + slice.size, after.from)
      }
    }
  )

  it.skipIf(ephemeralLow === undefined)(
    "skips a port in use, and hands out every port of its range before any twice",
    async () => {
      // Three consecutive ports free below the ephemeral range, in a slice no test worker picks from.
      const slice = Ports.belowEphemeral({ index: 15, count: 16 })
      if (slice === undefined) return assert.fail("no range")
      let held: Array<Net.Server> = []
      for (let from = slice.from; held.length === 0 && from + 3 <= slice.from + slice.size; from++) {
        const tried = await Promise.allSettled([0, 1, 2].map((k) => listenOn(from + k)))
        const bound = tried.flatMap((t) => (t.status === "fulfilled" ? [t.value] : []))
        if (bound.length === 3) held = bound
        else await Promise.all(bound.map(close))
      }
      const portOf = (server: Net.Server): number => {
        const address = server.address()
        return typeof address === "object" && address !== null ? address.port : 0
      }
      const [first, middle, last] = held
      if (first === undefined || middle === undefined || last === undefined)
        return assert.fail("no free ports")
      const range = { from: portOf(first), size: 3 }
      assert.strictEqual(portOf(last), range.from + 2)
      try {
        // The first and the last in use: whatever its start, the picker gives the middle one.
        await close(middle)
        assert.strictEqual(await Ports.picker(range)(), range.from + 1)
        // None in use: one round gives all three, each bindable; the next begins again.
        await Promise.all([close(first), close(last)])
        const pick = Ports.picker(range)
        const round = [await pick(), await pick(), await pick()]
        assert.deepStrictEqual(
          [...round].sort((a, b) => a - b),
          [range.from, range.from + 1, range.from + 2]
        )
        assert.strictEqual(await pick(), round[0])
        for (const port of round) await close(await listenOn(port))
      } finally {
        await Promise.all(held.filter((server) => server.listening).map(close))
      }
    }
  )

  it("falls back to a port the kernel picks where the range is unknown", async () => {
    const port = await Ports.picker(undefined)()
    assert.isAbove(port, 0)
    await close(await listenOn(port))
  })
})
