/**
 * Ports the harness names before anything listens on them: each replica's mesh port in the others' peer
 * lists, the embedded PostgreSQL's on its command line. A port the kernel hands out for `listen(0)`
 * comes from the ephemeral range, where every outgoing connection takes its local port too: a replica
 * dialling a peer that does not listen yet can land on a port chosen for another. So on Linux, where
 * the range is known, ports come from just below it, where only an explicit bind lands, in turn from a
 * random start (none twice before the others were tried); elsewhere the kernel picks.
 *
 * The library's tests and tools pick their ports the same way; the example has its own picker, as a
 * copy of it imports nothing of the library but its public modules.
 */
import * as Fs from "node:fs"
import * as Net from "node:net"

/** How many ports below the ephemeral range are tried. */
const SPAN = 10_000

/** The first of the `SPAN` ports below the ephemeral range, or undefined where that range is not known. */
const below = ((): number | undefined => {
  try {
    const low = Number(
      Fs.readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]
    )
    return Number.isInteger(low) && low > SPAN + 2_000 ? low - SPAN : undefined
  } catch {
    return undefined
  }
})()

/** Binds `port` on 127.0.0.1 (0: any) and releases it: the port bound, or undefined if it was taken. */
const probe = (port: number): Promise<number | undefined> =>
  new Promise((resolve) => {
    const server = Net.createServer()
    server.once("error", () => resolve(undefined))
    server.listen({ port, host: "127.0.0.1", exclusive: true }, () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : undefined))
    })
  })

let next = Math.floor(Math.random() * SPAN)

/** A port that was free on 127.0.0.1 a moment ago and that this process has not handed out lately. */
export const freePort = async (): Promise<number> => {
  if (below !== undefined) {
    for (let attempt = 0; attempt < SPAN; attempt++) {
      const port = await probe(below + (next++ % SPAN))
      if (port !== undefined) return port
    }
  }
  const any = await probe(0)
  if (any === undefined) throw new Error("no free port on 127.0.0.1")
  return any
}
