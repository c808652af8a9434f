/**
 * The body of the stats routes (spec "Observing it"), as `Mesh.stats` returns it.
 *
 * Every field upstream Queen's body has keeps upstream's meaning (`running`, `resolved`,
 * `resolved_ip`, `messages_received`, `signature_failures`, `sequence_rejections`, ...), so its
 * dashboards and scripts read ours; our extra detail is in fields of its own. The README's table of
 * fields says which side defines each.
 *
 * @since 0.1.0
 */

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
  /**
   * The entry names this node itself (a uniform peer list): recognised by its own HELLO, never
   * dialled again, and not a link (not connected, not down, not counted for readiness).
   */
  readonly self: boolean
  /** Upstream's meaning: the same as `connected`. */
  readonly resolved: boolean
  /** The established link's remote address; `null` while the link is down (upstream's meaning). */
  readonly resolved_ip: string | null
  /** The address the last established link used, kept while it is down. */
  readonly last_resolved_ip: string | null
  /** Frames waiting in the peer's bounded send queue. */
  readonly queued: number
  readonly queued_bytes: number
  /** Frames handed to this link = written + dropped_full + dropped_down + discarded + queued. */
  readonly handed: number
  readonly written: number
  /** Dropped because the send queue was full (the peer is slow). */
  readonly dropped_full: number
  /** Dropped because the link was down. */
  readonly dropped_down: number
  /** Queued when the link broke, discarded then (a stale hint is worse than none). */
  readonly discarded: number
  /** Links that were up and went down. */
  readonly reconnects: number
  /** Why the last dial or link failed, if one did. */
  readonly last_error: string | null
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
 * Refused inbound connections by reason; their sum is `handshake_failures`.
 *
 * @since 0.1.0
 * @category models
 */
export interface RejectionStats {
  readonly bad_mac: number
  readonly not_hello: number
  readonly invalid_hello: number
  readonly oversized_hello: number
  readonly missing_server_id: number
  readonly timeout: number
  readonly closed: number
  readonly bad_challenge_answer: number
  readonly wrong_receiver: number
  readonly wrong_label: number
  readonly legacy_refused: number
  readonly too_many_connections: number
  readonly own_server_id: number
  readonly tls_handshake: number
}

/**
 * The listener's connections now.
 *
 * @since 0.1.0
 * @category models
 */
export interface InboundStats {
  /** Inbound connections open now. */
  readonly open: number
  /** Of those, the ones whose HELLO verified. */
  readonly authenticated: number
  /** Inbound connections whose HELLO verified, since the start. */
  readonly authenticated_total: number
  /** Connections that closed without sending a byte (TCP health probes): never handshake failures. */
  readonly closed_silent: number
  /** Authenticated links closed after a silence longer than the idle timeout. */
  readonly closed_idle: number
  /** Legacy HELLOs accepted in `permissive` mode (still replayable). */
  readonly legacy_accepted: number
  /** Our own dials recognised and closed (the peer list names this node): not handshake failures. */
  readonly self_dials: number
}

/**
 * The stats body of an active mesh.
 *
 * @since 0.1.0
 * @category models
 */
export interface ActiveStats {
  readonly enabled: true
  /** Upstream's: the mesh runs; `false` once the mesh's scope has closed. */
  readonly running: boolean
  readonly server_id: string
  readonly transport: "tcp-mesh"
  readonly port: number
  readonly version: string
  readonly uptime_ms: number
  readonly auth: "legacy" | "permissive" | "required"
  readonly tls: "off" | "psk"
  readonly peer_count: number
  readonly peers: ReadonlyArray<PeerStats>
  readonly servers_alive: number
  readonly servers_dead: number
  /** Every peer heard from so far, alive or dead (never-heard peers are absent); bounded. */
  readonly servers: ReadonlyArray<ServerStats>
  /** Frames written to peers (HELLO excluded, heartbeats included). */
  readonly messages_sent: number
  /** Every frame read after a HELLO (upstream's meaning) = frames_dispatched + frames_invalid + frames_unknown + frames_oversized. */
  readonly messages_received: number
  /** Frames handed to the mesh that no peer got: dropped_full + dropped_down + discarded over all peers. */
  readonly messages_dropped: number
  /** Refused inbound connections, every reason (see `rejections`). */
  readonly handshake_failures: number
  /** Upstream's name for the same count. */
  readonly signature_failures: number
  /** Upstream's; always 0 here (no sequence numbers on the wire). */
  readonly sequence_rejections: number
  readonly frames_dispatched: number
  /** Frames whose payload broke its Schema (counted and skipped). */
  readonly frames_invalid: number
  /** Frames with a tag this version does not know (skipped). */
  readonly frames_unknown: number
  /** Frames over their tag's cap, skipped without being buffered. */
  readonly frames_oversized: number
  /** Batch items skipped for breaking a rule; the rest of their batch was applied. */
  readonly items_invalid: number
  readonly rejections: RejectionStats
  readonly inbound: InboundStats
  readonly maintenance_mode: boolean
  readonly pop_maintenance_mode: boolean
}

/**
 * The stats body when the mesh does not run: no peers configured, or sync turned off. Upstream's body
 * is exactly `{enabled, reason, maintenance_mode, pop_maintenance_mode}`; ours adds the rest.
 *
 * @since 0.1.0
 * @category models
 */
export interface InactiveStats {
  readonly enabled: false
  readonly reason: "no_peers" | "disabled"
  readonly server_id: string
  readonly transport: "tcp-mesh"
  readonly version: string
  readonly uptime_ms: number
  readonly maintenance_mode: boolean
  readonly pop_maintenance_mode: boolean
}

/**
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { MeshTest, type MeshStats } from "queen-mesh"
 *
 * const program = Effect.gen(function* () {
 *   const network = yield* MeshTest.network
 *   const a = yield* MeshTest.node(network, { serverId: "a", peers: ["b"] })
 *   const stats: MeshStats.MeshStats = yield* a.mesh.stats
 *   // `enabled` tells an active mesh's stats from an inactive one's.
 *   if (stats.enabled) {
 *     assert.strictEqual(stats.peer_count, 1)
 *     assert.strictEqual(stats.peers[0]?.host, "b")
 *   }
 * })
 *
 * Effect.runPromise(Effect.scoped(program))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type MeshStats = ActiveStats | InactiveStats
