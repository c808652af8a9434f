/**
 * What the mesh observed: the effect of every received frame, peers coming and going, and refused or
 * malformed input. Published on `Mesh.events` for observers (the CLI prints them as JSON lines).
 *
 * @since 0.1.0
 */
import type { QueueItem, QueueRef } from "./Frame.js"

/**
 * @since 0.1.0
 * @category models
 */
export type MeshEvent =
  | { readonly _tag: "Wake"; readonly from: string; readonly item: QueueItem }
  | { readonly _tag: "HotlistDirty"; readonly from: string; readonly item: QueueItem }
  | {
      readonly _tag: "QueueConfigInvalidated"
      readonly from: string
      readonly op: "set" | "delete"
      readonly ref: QueueRef
    }
  | { readonly _tag: "Maintenance"; readonly from: string; readonly enabled: boolean }
  | { readonly _tag: "PopMaintenance"; readonly from: string; readonly enabled: boolean }
  | { readonly _tag: "PeerUp"; readonly serverId: string }
  | { readonly _tag: "PeerDown"; readonly serverId: string }
  | { readonly _tag: "HandshakeFailed"; readonly remote: string; readonly reason: string }
  | { readonly _tag: "InvalidFrame"; readonly from: string; readonly tag: number; readonly detail: string }
