/**
 * queen-mesh: the inter-replica mesh of the Queen broker as Effect services and Layers.
 *
 * @since 0.1.0
 */
export * as Dialer from "./Dialer.js"
export * as Frame from "./Frame.js"
export * as FrameDecoder from "./FrameDecoder.js"
export * as Handshake from "./Handshake.js"
export * as HotList from "./HotList.js"
export * as HttpRoutes from "./HttpRoutes.js"
export * as Listener from "./Listener.js"
export * as Liveness from "./Liveness.js"
export * as MaintenanceFlags from "./MaintenanceFlags.js"
export * as MemoryTransport from "./MemoryTransport.js"
export * as Mesh from "./Mesh.js"
export * as MeshConfig from "./MeshConfig.js"
export * as MeshError from "./MeshError.js"
export * as MeshEvent from "./MeshEvent.js"
export * as MeshStats from "./MeshStats.js"
export * as QueueConfigCache from "./QueueConfigCache.js"
export * as TcpTransport from "./TcpTransport.js"
export * as Transport from "./Transport.js"
export * as Waker from "./Waker.js"
