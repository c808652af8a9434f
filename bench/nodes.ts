/**
 * Building mesh nodes inside bench processes: a `ManagedRuntime` over the real layers, with logging
 * turned down to warnings so the table stays readable.
 */
import { Effect, Layer, ManagedRuntime, Redacted, References } from "effect"
import * as HotList from "../src/HotList.js"
import * as MaintenanceFlags from "../src/MaintenanceFlags.js"
import * as Mesh from "../src/Mesh.js"
import * as MeshConfig from "../src/MeshConfig.js"
import * as QueueConfigCache from "../src/QueueConfigCache.js"
import * as TcpTransport from "../src/TcpTransport.js"
import * as Waker from "../src/Waker.js"

export interface NodeOptions {
  readonly serverId: string
  /** 0 for an ephemeral port. */
  readonly port: number
  /** Ports of peers on 127.0.0.1; none means the mesh is off (spec "Enabling it"). */
  readonly peers: ReadonlyArray<number>
  readonly secret: string
}

/** Warnings and worse only. */
const quiet = Layer.succeed(References.MinimumLogLevel, "Warn")

const configLayer = (options: NodeOptions) =>
  MeshConfig.layer({
    serverId: options.serverId,
    port: options.port,
    bindHost: "127.0.0.1",
    peers: options.peers.map((port) => ({ host: "127.0.0.1", port })),
    secret: Redacted.make(options.secret)
  })

/** A node with the shipped host services (`LocalWaker` for parking pops). */
export const localNode = (options: NodeOptions) =>
  ManagedRuntime.make(
    Mesh.layerTcp().pipe(Layer.provide(configLayer(options)), Layer.provide(quiet), Layer.merge(quiet))
  )

/** A node whose `Waker` is the given one, and the shipped in-memory services for the rest. */
export const wakerNode = (options: NodeOptions, waker: Waker.WakerShape) =>
  ManagedRuntime.make(
    Mesh.layer.pipe(
      Layer.provide(
        Layer.mergeAll(
          Layer.succeed(Waker.Waker, waker),
          QueueConfigCache.layerMemory(),
          HotList.layerMemory(),
          MaintenanceFlags.layer(),
          TcpTransport.layer(),
          configLayer(options)
        )
      ),
      Layer.provide(quiet),
      Layer.merge(quiet)
    )
  )

/** Polls `check` on the runtime until it holds, for at most `ms`. */
export const until = async <R, ER>(
  runtime: ManagedRuntime.ManagedRuntime<R, ER>,
  check: Effect.Effect<boolean, never, R>,
  ms: number,
  what: string
): Promise<void> => {
  const deadline = Date.now() + ms
  while (!(await runtime.runPromise(check))) {
    if (Date.now() > deadline) throw new Error(`not reached within ${ms} ms: ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/** Every configured peer has an established outbound link. */
export const linksUp = Effect.map(
  Effect.flatMap(Mesh.Mesh, (mesh) => mesh.stats),
  (stats) => stats.enabled && stats.peers.every((peer) => peer.connected)
)

/** This node has heard a HELLO from at least `count` peers. */
export const hears = (count: number) =>
  Effect.map(
    Effect.flatMap(Mesh.Mesh, (mesh) => mesh.stats),
    (stats) => stats.enabled && stats.servers_alive >= count
  )
