/**
 * queen-mesh: the inter-replica mesh of the Queen broker as Effect services and Layers. Each public
 * module is also importable on its own (`queen-mesh/Mesh`, `queen-mesh/Frame`, ...).
 *
 * @since 0.1.0
 */

/**
 * @since 0.1.0
 */
export * as Dispatch from "./Dispatch.js"
/**
 * @since 0.1.0
 */
export * as Frame from "./Frame.js"
/**
 * @since 0.1.0
 */
export * as FrameDecoder from "./FrameDecoder.js"
/**
 * @since 0.1.0
 */
export * as Handshake from "./Handshake.js"
/**
 * @since 0.1.0
 */
export * as HotList from "./HotList.js"
/**
 * @since 0.1.0
 */
export * as HttpRoutes from "./HttpRoutes.js"
/**
 * @since 0.1.0
 */
export * as Listener from "./Listener.js"
/**
 * @since 0.1.0
 */
export * as Liveness from "./Liveness.js"
/**
 * @since 0.1.0
 */
export * as MaintenanceFlags from "./MaintenanceFlags.js"
/**
 * @since 0.1.0
 */
export * as MemoryTransport from "./MemoryTransport.js"
/**
 * @since 0.1.0
 */
export * as Mesh from "./Mesh.js"
/**
 * @since 0.1.0
 */
export * as MeshConfig from "./MeshConfig.js"
/**
 * @since 0.1.0
 */
export * as MeshError from "./MeshError.js"
/**
 * @since 0.1.0
 */
export * as MeshEvent from "./MeshEvent.js"
/**
 * @since 0.1.0
 */
export * as MeshMetrics from "./MeshMetrics.js"
/**
 * @since 0.1.0
 */
export * as MeshStats from "./MeshStats.js"
/**
 * @since 0.1.0
 */
export * as MeshTest from "./MeshTest.js"
/**
 * @since 0.1.0
 */
export * as Peers from "./Peers.js"
/**
 * @since 0.1.0
 */
export * as QueueConfigCache from "./QueueConfigCache.js"
/**
 * @since 0.1.0
 */
export * as Resolver from "./Resolver.js"
/**
 * @since 0.1.0
 */
export * as TcpTransport from "./TcpTransport.js"
/**
 * @since 0.1.0
 */
export * as TlsTransport from "./TlsTransport.js"
/**
 * @since 0.1.0
 */
export * as Transport from "./Transport.js"
/**
 * @since 0.1.0
 */
export * as Waker from "./Waker.js"
