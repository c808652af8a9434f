/**
 * queen-mesh: the inter-replica mesh of the Queen broker as Effect services and Layers.
 *
 * @since 0.1.0
 */
export * as Frame from "./Frame.js"
export * as FrameDecoder from "./FrameDecoder.js"
export * as Handshake from "./Handshake.js"
export * as MeshConfig from "./MeshConfig.js"
export * as MeshError from "./MeshError.js"
