/**
 * What a host pays for the library: `node hostCost.js <kind> <params as JSON>` runs one Effect
 * program, standalone (not through bench/child.ts, whose roles import the mesh up front), and prints
 * one JSON line with its memory once it has settled.
 *
 * - `bare`: the host's program without the mesh: the `effect` barrel (as a host imports it) and a
 *   scoped program that waits.
 * - `mesh`: the same program with `Mesh.layer` (the shipped in-memory host services, TCP) and three
 *   peers, imported from the package's main entry the way the README does (`from "queen-mesh"`).
 * - `mesh-subpath`: the same, importing the modules it uses from their subpaths (`queen-mesh/Mesh`, ...).
 *
 * The memory is read twice, RSS and heap in use each time:
 * - `settled`: after the links to every peer are up and both ways heard, a settling pause and two full
 *   GCs (`--expose-gc`). V8's young generation is still as large as start-up made it (both programs grow
 *   it to its most while `effect` loads), and the RSS counts every page of it the program touched.
 * - `atRest`: once V8's memory reducer, which runs in any process that goes idle, has given the young
 *   generation back (its committed size at most half of what it was at `settled`), then two full GCs;
 *   what the program keeps while it idles. `released` says whether that happened before the deadline.
 */
import * as V8 from "node:v8"
import { Effect, Layer, ManagedRuntime, Redacted, References, Schema } from "effect"

const Params = Schema.Struct({
  port: Schema.Number,
  peers: Schema.Array(Schema.Number),
  secret: Schema.String,
  settleMs: Schema.Number
})

const kind = process.argv[2] ?? "bare"
const params = Schema.decodeUnknownSync(Schema.fromJsonString(Params))(process.argv[3] ?? "{}")

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
const gc = (): void => {
  const collect: unknown = Reflect.get(globalThis, "gc")
  if (typeof collect === "function") collect()
}

/** How long the program waits for V8's memory reducer before it reads `atRest` anyway. */
const REST_DEADLINE_MS = 60_000

const youngGeneration = (): number =>
  V8.getHeapSpaceStatistics().find((space) => space.space_name === "new_space")?.space_size ?? 0

const reading = () => {
  const memory = process.memoryUsage()
  return { rss: memory.rss, heapUsed: memory.heapUsed, heapTotal: memory.heapTotal, young: youngGeneration() }
}

const collect = async () => {
  gc()
  await sleep(100)
  gc()
}

/** Warnings and worse only. */
const quiet = Layer.succeed(References.MinimumLogLevel, "Warn")

/** The mesh's modules, from the main entry or from their subpaths. */
const meshModules = async (subpath: boolean) => {
  if (!subpath) {
    const { Mesh, MeshConfig } = await import("../src/index.js")
    return { Mesh, MeshConfig }
  }
  const [Mesh, MeshConfig] = await Promise.all([import("../src/Mesh.js"), import("../src/MeshConfig.js")])
  return { Mesh, MeshConfig }
}

const withMesh = async (subpath: boolean): Promise<() => Promise<void>> => {
  const { Mesh, MeshConfig } = await meshModules(subpath)
  const runtime = ManagedRuntime.make(
    Mesh.layerTcp().pipe(
      Layer.provide(
        MeshConfig.layer({
          serverId: "host",
          port: params.port,
          bindHost: "127.0.0.1",
          peers: params.peers.map((port) => ({ host: "127.0.0.1", port })),
          secret: Redacted.make(params.secret)
        })
      ),
      Layer.provide(quiet),
      Layer.merge(quiet)
    )
  )
  const linked = Effect.map(
    Effect.flatMap(Mesh.Mesh, (mesh) => mesh.stats),
    (stats) =>
      stats.enabled
        ? stats.peers.filter((peer) => !peer.self && peer.connected).length >= params.peers.length &&
          stats.servers_alive >= params.peers.length
        : false
  )
  const deadline = Date.now() + 30_000
  while (!(await runtime.runPromise(linked))) {
    if (Date.now() > deadline) throw new Error("the host's links to its three peers never came up")
    await sleep(20)
  }
  return () => runtime.dispose()
}

const withoutMesh = async (): Promise<() => Promise<void>> => {
  // The same shape of program: a runtime with the logger layer, a scoped fiber that waits.
  const runtime = ManagedRuntime.make(quiet)
  await runtime.runPromise(Effect.void)
  return () => runtime.dispose()
}

const main = async () => {
  const close = kind === "bare" ? await withoutMesh() : await withMesh(kind === "mesh-subpath")
  await sleep(params.settleMs)
  await collect()
  const settled = reading()
  const deadline = Date.now() + REST_DEADLINE_MS
  while (youngGeneration() > settled.young / 2 && Date.now() < deadline) await sleep(250)
  const released = youngGeneration() <= settled.young / 2
  await collect()
  const atRest = reading()
  process.stdout.write(`${JSON.stringify({ kind, settled, atRest, released })}\n`)
  await close()
  process.exit(0)
}

main().catch((error: unknown) => {
  process.stderr.write(`hostCost ${kind}: ${String(error)}\n`)
  process.exit(1)
})
