/**
 * The stdout protocol of `queen-mesh node`: one JSON object per line (docs/cli.md, "node"). The key
 * order is part of the contract, so each line is built field by field rather than by spreading the
 * event. Peer-supplied strings are escaped beyond JSON's own rules (`safeJson`: DEL and C1 too), so a
 * line is safe to print on a terminal.
 *
 * @since 0.1.0
 */
import * as Option from "effect/Option"
import type { HotItem, QueueItem } from "../Frame.js"
import type { MeshEvent } from "../MeshEvent.js"
import { safeJson, safeJsonString } from "./escape.js"

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

/**
 * The kinds of event `--quiet` prints.
 *
 * @since 0.1.0
 * @category lines
 */
export const quietTags: ReadonlyArray<MeshEvent["_tag"]> = ["PeerUp", "PeerDown"]

/**
 * The kinds of event that make a line (the others are logged, or not part of the protocol).
 *
 * @since 0.1.0
 * @category lines
 */
export const lineTags: ReadonlyArray<MeshEvent["_tag"]> = [
  "Wake",
  "HotlistDirty",
  "QueueConfigInvalidated",
  "Maintenance",
  "PopMaintenance",
  "EphAdmin",
  "PeerUp",
  "PeerDown"
]

/** Events `--quiet` keeps. */
const QUIET = new Set<MeshEvent["_tag"]>(quietTags)

/**
 * The line for a mesh event, or none for events that are not part of the protocol (refused handshakes
 * and invalid frames: those are logged) or that `quiet` filters out.
 *
 * @since 0.1.0
 * @category lines
 */
export const toLine = (event: MeshEvent, options: { readonly quiet: boolean }): Option.Option<string> =>
  Option.fromNullishOr(lineOf(event, options.quiet))

/** The peer id last printed, as a JSON string: a node hears from a few peers, most lines repeat one. */
let lastFrom = ""
let lastFromJson = '""'

const fromJson = (from: string): string => {
  if (from !== lastFrom) {
    lastFrom = from
    lastFromJson = safeJsonString(from)
  }
  return lastFromJson
}

/**
 * A wake or hot-list line, written out field by field: the same text as `safeJson` of the object (the
 * key order is the contract), at a fraction of the cost, on the path every received wake takes.
 */
const itemLine = (event: "wake" | "hotlist_dirty", from: string, item: QueueItem): string =>
  `{"event":"${event}","from":${fromJson(from)},"tenant":${
    item.tenant._tag === "Some" ? safeJsonString(item.tenant.value) : "null"
  },"queue":${safeJsonString(item.queue)},"partition":${safeJsonString(item.partition)}}`

/** A hot-list line: the item line, with `group` last when the mark is scoped (as upstream omits it). */
const hotLine = (from: string, item: HotItem): string => {
  const line = itemLine("hotlist_dirty", from, item)
  return Option.isSome(item.group)
    ? `${line.slice(0, -1)},"group":${safeJsonString(item.group.value)}}`
    : line
}

/**
 * Whom a line speaks for, for stdout's fair share: the peer a frame came from, or `""` for the node's
 * own lines (a peer up or down).
 *
 * @since 0.1.0
 * @category lines
 */
export const sourceOf = (event: MeshEvent): string => ("from" in event ? event.from : "")

/**
 * `toLine` without the `Option`: the line, or `undefined`.
 *
 * @since 0.1.0
 * @category lines
 */
export const lineOf = (event: MeshEvent, quiet: boolean): string | undefined => {
  if (quiet && !QUIET.has(event._tag)) return undefined
  switch (event._tag) {
    case "Wake":
      return itemLine("wake", event.from, event.item)
    case "HotlistDirty":
      return hotLine(event.from, event.item)
    case "EphAdmin":
      return safeJson({
        event: "eph_admin",
        from: event.from,
        op: event.op,
        tenant: event.tenant,
        queue: event.queue
      })
    case "QueueConfigInvalidated":
      return safeJson({
        event: "queue_config_invalidated",
        from: event.from,
        op: event.op,
        tenant: Option.getOrNull(event.ref.tenant),
        queue: event.ref.queue
      })
    case "Maintenance":
    case "PopMaintenance":
      return safeJson({
        event: event._tag === "Maintenance" ? "maintenance" : "pop_maintenance",
        from: event.from,
        enabled: event.enabled
      })
    case "PeerUp":
      return safeJson({ event: "peer_up", server_id: event.serverId })
    case "PeerDown":
      return safeJson({ event: "peer_down", server_id: event.serverId })
    case "HandshakeFailed":
    case "LaneRefused":
    case "InvalidFrame":
    case "LinkUp":
    case "LinkDown":
    case "SelfRecognized":
      return undefined
  }
}
