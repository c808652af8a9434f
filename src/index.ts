/**
 * queen-mesh: the inter-replica mesh of the Queen broker as Effect services and Layers. Each public
 * module is also importable on its own (`queen-mesh/Mesh`, `queen-mesh/Frame`, ...).
 *
 * @example
 * ```ts
 * import { strictEqual } from "node:assert"
 * import { Context, Effect, Fiber, Layer, Option } from "effect"
 * import { LocalWaker, MemoryTransport, Mesh, MeshConfig, MeshTest } from "queen-mesh"
 *
 * // Two nodes on one in-memory network, each with its own name, configuration and shipped host
 * // services: a push on queen-a wakes a pop parked on queen-b.
 * const node = (network: MemoryTransport.Network, name: string, peer: string) =>
 *   Layer.build(
 *     Mesh.layerLocal().pipe(
 *       Layer.provide(MemoryTransport.layer(network, { host: name })),
 *       Layer.provide(MeshConfig.layer({ serverId: name, peers: [{ host: peer, port: 6633 }] }))
 *     )
 *   )
 *
 * const program = Effect.gen(function* () {
 *   const network = yield* MemoryTransport.makeNetwork
 *   const a = yield* node(network, "queen-a", "queen-b")
 *   const b = yield* node(network, "queen-b", "queen-a")
 *   const meshA = Context.get(a, Mesh.Mesh)
 *   const wakerB = Context.get(b, LocalWaker.LocalWaker)
 *   yield* MeshTest.eventually(MeshTest.linked({ mesh: meshA }))
 *   const pop = yield* Effect.forkChild(
 *     wakerB.awaitWake({ queue: "orders", tenant: Option.none() }, { maxWait: "30 seconds" })
 *   )
 *   yield* MeshTest.eventually(Effect.map(wakerB.parked, (parked) => parked === 1))
 *   yield* meshA.messageAvailable({ queue: "orders", partition: "p1" })
 *   strictEqual(yield* Fiber.join(pop), "woken")
 * })
 *
 * Effect.runPromise(Effect.scoped(program))
 * ```
 *
 * @since 0.1.0
 */

/**
 * @since 0.1.0
 * @category modules
 */
export * as ClusterView from "./ClusterView.js"
/**
 * @since 0.1.0
 * @category modules
 */
export * as Discovery from "./Discovery.js"
/**
 * @since 0.1.0
 * @category modules
 */
export * as EphemeralAdmin from "./EphemeralAdmin.js"
/**
 * @since 0.1.0
 * @category modules
 */
export * as Frame from "./Frame.js"
/**
 * @since 0.1.0
 * @category modules
 */
export * as GroupedPops from "./GroupedPops.js"
/**
 * @since 0.1.0
 * @category modules
 */
export * as HotList from "./HotList.js"
/**
 * @since 0.1.0
 * @category modules
 */
export * as HttpRoutes from "./HttpRoutes.js"
/**
 * @since 0.1.0
 * @category modules
 */
export * as Lane from "./Lane.js"
/**
 * @since 0.1.0
 * @category modules
 */
export * as LocalWaker from "./LocalWaker.js"
/**
 * @since 0.1.0
 * @category modules
 */
export * as MaintenanceFlags from "./MaintenanceFlags.js"
/**
 * @since 0.1.0
 * @category modules
 */
export * as Membership from "./Membership.js"
/**
 * @since 0.1.0
 * @category modules
 */
export * as MemoryTransport from "./MemoryTransport.js"
/**
 * @since 0.1.0
 * @category modules
 */
export * as Mesh from "./Mesh.js"
/**
 * @since 0.1.0
 * @category modules
 */
export * as MeshConfig from "./MeshConfig.js"
/**
 * @since 0.1.0
 * @category modules
 */
export * as MeshError from "./MeshError.js"
/**
 * @since 0.1.0
 * @category modules
 */
export * as MeshEvent from "./MeshEvent.js"
/**
 * @since 0.1.0
 * @category modules
 */
export * as MeshHealth from "./MeshHealth.js"
/**
 * @since 0.1.0
 * @category modules
 */
export * as MeshMetrics from "./MeshMetrics.js"
/**
 * @since 0.1.0
 * @category modules
 */
export * as MeshStats from "./MeshStats.js"
/**
 * @since 0.1.0
 * @category modules
 */
export * as MeshTest from "./MeshTest.js"
/**
 * @since 0.1.0
 * @category modules
 */
export * as QueueConfigCache from "./QueueConfigCache.js"
/**
 * @since 0.1.0
 * @category modules
 */
export * as Resolver from "./Resolver.js"
/**
 * @since 0.1.0
 * @category modules
 */
export * as TcpTransport from "./TcpTransport.js"
/**
 * @since 0.1.0
 * @category modules
 */
export * as TlsTransport from "./TlsTransport.js"
/**
 * @since 0.1.0
 * @category modules
 */
export * as Transport from "./Transport.js"
/**
 * @since 0.1.0
 * @category modules
 */
export * as Waker from "./Waker.js"
