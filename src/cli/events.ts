/**
 * The stdout protocol of `queen-mesh node`: one JSON object per line (docs/cli.md, "node"). The key
 * order is part of the contract, so each line is built field by field rather than by spreading the
 * event. Peer-supplied strings are escaped beyond JSON's own rules (`safeJson`: DEL and C1 too), so a
 * line is safe to print on a terminal.
 *
 * @since 0.1.0
 */
import { Option } from "effect"
import type { MeshEvent } from "../MeshEvent.js"
import { safeJson } from "./escape.js"

/**
 * The first line, once both listeners are ready. `port` is null when the mesh is not active.
 *
 * @since 0.1.0
 * @category lines
 */
export const listening = (options: {
  readonly serverId: string
  readonly port: Option.Option<number>
  readonly httpPort: number
}): string =>
  safeJson({
    event: "listening",
    server_id: options.serverId,
    port: Option.getOrNull(options.port),
    http_port: options.httpPort
  })

/** Events `--quiet` keeps. */
const QUIET = new Set<MeshEvent["_tag"]>(["PeerUp", "PeerDown"])

/**
 * The line for a mesh event, or none for events that are not part of the protocol (refused handshakes
 * and invalid frames: those are logged) or that `quiet` filters out.
 *
 * @since 0.1.0
 * @category lines
 */
export const toLine = (event: MeshEvent, options: { readonly quiet: boolean }): Option.Option<string> => {
  if (options.quiet && !QUIET.has(event._tag)) return Option.none()
  switch (event._tag) {
    case "Wake":
    case "HotlistDirty":
      return Option.some(
        safeJson({
          event: event._tag === "Wake" ? "wake" : "hotlist_dirty",
          from: event.from,
          tenant: Option.getOrNull(event.item.tenant),
          queue: event.item.queue,
          partition: event.item.partition
        })
      )
    case "QueueConfigInvalidated":
      return Option.some(
        safeJson({
          event: "queue_config_invalidated",
          from: event.from,
          op: event.op,
          tenant: Option.getOrNull(event.ref.tenant),
          queue: event.ref.queue
        })
      )
    case "Maintenance":
    case "PopMaintenance":
      return Option.some(
        safeJson({
          event: event._tag === "Maintenance" ? "maintenance" : "pop_maintenance",
          from: event.from,
          enabled: event.enabled
        })
      )
    case "PeerUp":
      return Option.some(safeJson({ event: "peer_up", server_id: event.serverId }))
    case "PeerDown":
      return Option.some(safeJson({ event: "peer_down", server_id: event.serverId }))
    case "HandshakeFailed":
    case "InvalidFrame":
      return Option.none()
  }
}
