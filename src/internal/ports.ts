/**
 * Ports to name before anything listens on them: a peer list, a page's address, a server's command
 * line. Between choosing such a port and the real bind, someone else may take it. The usual choice, a
 * port the kernel hands out for `listen(0)` and released at once, comes from the ephemeral range, which
 * every outgoing connection on the machine draws its local port from too: a node of a starting cluster,
 * dialling its peers again and again until they listen, can land on a port chosen for another. So where
 * the range is known (Linux), ports are picked below it, where only an explicit bind can land, and a
 * picker hands out the ports of its range in turn, none twice before it has tried all the others.
 * Elsewhere the kernel picks.
 *
 * The demo, the bench and the test suite (each worker its own slice of the range) choose their ports
 * here; the example broker's harness has a picker of its own (`examples/broker/harness/ports.ts`), as a
 * copy of the example imports nothing of the library but its public modules.
 *
 * @internal
 */
import { readFileSync } from "node:fs"
import * as Net from "node:net"

/** Consecutive ports to pick from. */
export interface PortRange {
  readonly from: number
  readonly size: number
}

/** How many ports below the ephemeral range are tried. */
const SPAN = 10_000

/**
 * The `SPAN` ports just below the ephemeral range, cut into `count` slices of which this is `index`
 * (processes that pick at the same time take a slice each), or undefined where the range is not known.
 */
export const belowEphemeral = (slice?: {
  readonly index: number
  readonly count: number
}): PortRange | undefined => {
  let low: number
  try {
    low = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0])
  } catch {
    return undefined
  }
  if (!Number.isInteger(low) || low <= SPAN + 2_000) return undefined
  const from = low - SPAN
  if (slice === undefined) return { from, size: SPAN }
  const size = Math.floor(SPAN / slice.count)
  return { from: from + (slice.index % slice.count) * size, size }
}

/** Binds `port` on 127.0.0.1 (0: any) and releases it: the port bound, or undefined if it was taken. */
const probe = (port: number): Promise<number | undefined> =>
  new Promise((resolve) => {
    const server = Net.createServer()
    server.once("error", () => resolve(undefined))
    server.listen({ port, host: "127.0.0.1", exclusive: true }, () => {
      const address = server.address()
      const bound = typeof address === "object" && address !== null ? address.port : undefined
      server.close(() => resolve(bound))
    })
  })

/**
 * A picker over `range`: each call gives a port that was free on 127.0.0.1 a moment ago, trying the
 * range's ports in turn from a random start (so none is given twice before all the others were tried),
 * and one the kernel picks when the range is unknown or every port in it is taken. Rejects only when
 * not even the kernel has one.
 */
export const picker = (range: PortRange | undefined): (() => Promise<number>) => {
  let next = range === undefined ? 0 : Math.floor(Math.random() * range.size)
  return async () => {
    if (range !== undefined) {
      for (let attempt = 0; attempt < range.size; attempt++) {
        const port = range.from + (next % range.size)
        next++
        const bound = await probe(port)
        if (bound !== undefined) return bound
      }
    }
    const any = await probe(0)
    if (any === undefined) throw new Error("no free port on 127.0.0.1")
    return any
  }
}

/** This process's picker over the whole range below the ephemeral one. */
export const freePort: () => Promise<number> = picker(belowEphemeral())
