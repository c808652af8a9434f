/**
 * queen-mesh: the inter-replica mesh of the Queen broker as Effect services and Layers. Each public
 * module is also importable on its own (`queen-mesh/Mesh`, `queen-mesh/Frame`, ...).
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { MemoryTransport, Mesh, MeshConfig } from "queen-mesh"
 *
 * // A host provides a configuration and a transport; `Mesh.layerLocal` adds the shipped host services.
 * const program = Effect.gen(function* () {
 *   const mesh = yield* Mesh.Mesh
 *   assert.strictEqual(mesh.active, true)
 *   yield* mesh.messageAvailable({ queue: "orders", partition: "p1" })
 * })
 *
 * Effect.gen(function* () {
 *   const network = yield* MemoryTransport.makeNetwork
 *   const MeshLive = Mesh.layerLocal().pipe(
 *     Layer.provide(MemoryTransport.layer(network)),
 *     Layer.provide(MeshConfig.layer({ serverId: "queen-a", peers: [{ host: "queen-b", port: 6633 }] }))
 *   )
 *   yield* Effect.provide(program, MeshLive)
 * }).pipe(Effect.runPromise)
 * ```
 *
 * @since 0.1.0
 */

/**
 * @since 0.1.0
 * @category modules
 */
export * as Frame from "./Frame.js"
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
