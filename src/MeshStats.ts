/**
 * The mesh's own statistics (spec "Observing it"): the counters every part of the runtime bumps, and
 * the JSON body served on the stats routes.
 *
 * @since 0.1.0
 */

/**
 * Counters shared by the listener, the dialers and the broadcast path. Plain mutable fields, since they
 * are bumped on the hot path; every read goes through `Mesh.stats`.
 *
 * @since 0.1.0
 * @category models
 */
export class Counters {
  /** Frames written to peers (HELLO excluded, heartbeats included). */
  sent = 0
  /** Frames received after a handshake (HELLO excluded, heartbeats included), unknown tags excluded. */
  received = 0
  /** Frames that did not fit a peer's send queue. */
  dropped = 0
  /** Accepted connections that never produced a valid HELLO. */
  handshakeFailures = 0
  /** Frames whose payload failed its Schema (counted and skipped). */
  invalid = 0
  /** Frames with a tag this version does not know (skipped). */
  unknown = 0
}

/**
 * One configured peer as the stats show it.
 *
 * @since 0.1.0
 * @category models
 */
export interface PeerStats {
  readonly host: string
  readonly port: number
  /** Whether the outbound connection is established. */
  readonly connected: boolean
  /** Whether the host has ever resolved to an address we connected to. */
  readonly resolved: boolean
  readonly resolved_ip: string | null
  /** Frames waiting in the peer's bounded send queue. */
  readonly queued: number
}

/**
 * One peer as inbound liveness knows it: by the server id it announced in its HELLO.
 *
 * @since 0.1.0
 * @category models
 */
export interface ServerStats {
  readonly server_id: string
  readonly alive: boolean
  /** Milliseconds since the last frame from it. */
  readonly last_seen_ms_ago: number
}

/**
 * The stats body of an active mesh.
 *
 * @since 0.1.0
 * @category models
 */
export interface ActiveStats {
  readonly enabled: true
  readonly server_id: string
  readonly transport: "tcp-mesh"
  readonly port: number
  readonly peer_count: number
  readonly peers: ReadonlyArray<PeerStats>
  readonly servers_alive: number
  readonly servers_dead: number
  /** Every peer heard from so far, alive or dead (never-heard peers are absent). */
  readonly servers: ReadonlyArray<ServerStats>
  readonly messages_sent: number
  readonly messages_received: number
  readonly messages_dropped: number
  readonly handshake_failures: number
  readonly frames_invalid: number
  readonly frames_unknown: number
  readonly maintenance_mode: boolean
  readonly pop_maintenance_mode: boolean
}

/**
 * The stats body when the mesh does not run: no peers configured, or sync turned off.
 *
 * @since 0.1.0
 * @category models
 */
export interface InactiveStats {
  readonly enabled: false
  readonly reason: "no_peers" | "disabled"
  readonly server_id: string
  readonly transport: "tcp-mesh"
  readonly maintenance_mode: boolean
  readonly pop_maintenance_mode: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export type MeshStats = ActiveStats | InactiveStats
