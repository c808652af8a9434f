/**
 * The names and histogram boundaries of the mesh's metrics, shared by `MeshMetrics` (which syncs the
 * counters) and the two hot paths that observe their histograms directly (the listener's
 * receive-to-apply time, the peers' frames per write).
 *
 * @internal
 */
import * as Context from "effect/Context"
import * as Metric from "effect/Metric"

export const names = {
  framesSent: "queen_mesh_frames_sent_total",
  framesReceived: "queen_mesh_frames_received_total",
  framesDropped: "queen_mesh_frames_dropped_total",
  drops: "queen_mesh_drops_total",
  framesRejected: "queen_mesh_frames_rejected_total",
  itemsInvalid: "queen_mesh_items_invalid_total",
  rejections: "queen_mesh_rejections_total",
  handshakeFailures: "queen_mesh_handshake_failures_total",
  connectionsOpen: "queen_mesh_connections_open",
  peersAlive: "queen_mesh_peers_alive",
  peersDead: "queen_mesh_peers_dead",
  queueDepth: "queen_mesh_queue_depth",
  reconnects: "queen_mesh_reconnects_total",
  ephMembers: "queen_mesh_eph_members",
  ephAdmin: "queen_mesh_eph_admin_total",
  health: "queen_mesh_health",
  livenessCloses: "queen_mesh_liveness_closes_total",
  peerKey: "queen_mesh_peer_key_info",
  membersJoined: "queen_mesh_members_joined_total",
  membersLeft: "queen_mesh_members_left_total",
  discoveryRounds: "queen_mesh_discovery_rounds_total",
  laneUp: "queen_mesh_lane_up",
  laneNotifications: "queen_mesh_lane_notifications_total",
  laneBytes: "queen_mesh_lane_bytes_total",
  laneRefused: "queen_mesh_lane_refused_total",
  laneDropped: "queen_mesh_lane_dropped_total",
  laneReconnects: "queen_mesh_lane_reconnects_total",
  laneQueueUsage: "queen_mesh_lane_queue_usage",
  applySeconds: "queen_mesh_receive_apply_seconds",
  writeFrames: "queen_mesh_frames_per_write"
} as const

/** Upper bounds of the receive-to-apply buckets: 2^i microseconds, in seconds. */
const APPLY_BOUNDS = Array.from({ length: 24 }, (_, i) => 2 ** i / 1e6)
/** Upper bounds of the frames-per-write buckets: 2^(i+1) - 1 frames. */
const WRITE_BOUNDS = Array.from({ length: 16 }, (_, i) => 2 ** (i + 1) - 1)

/**
 * Observes one value. The value is stored, and the histogram updated from the stored values at the
 * next metrics sync ({@link flushHistograms}: every scrape and every sync interval, as the counters
 * are), or at once when 1,024 are waiting: a chunk read or a write then costs a store, not a
 * histogram update nor a timer of its own.
 */
export type Observe = (value: number) => void

/**
 * The context the mesh's metrics are updated and read in: an empty one, so its `MetricRegistry` is
 * Effect's process-wide default (the registry `Metric.snapshot` reads unless a host provides another)
 * and no fiber's `CurrentMetricAttributes` is merged into a series.
 */
export const registry: Context.Context<never> = Context.empty()

const BUFFERED = 1024

/** The histograms with values waiting, each by its flush. */
const waitingHistograms = new Set<() => void>()

/**
 * Moves every waiting histogram value into its Effect metric. The metrics sync calls it before it reads
 * or exports anything.
 */
export const flushHistograms = (): void => {
  for (const flush of waitingHistograms) flush()
  waitingHistograms.clear()
}

const histogram = (
  name: string,
  bounds: ReadonlyArray<number>,
  description: string,
  tags: ReadonlyArray<readonly [string, string]>
): Observe => {
  const metric = Metric.histogram(name, {
    description,
    boundaries: Metric.boundariesFromIterable(bounds),
    attributes: Object.fromEntries(tags)
  })
  const waiting = new Float64Array(BUFFERED)
  let count = 0
  const flush = () => {
    const n = count
    count = 0
    for (let i = 0; i < n; i++) metric.updateUnsafe(waiting[i]!, registry)
  }
  return (value) => {
    if (count === 0) waitingHistograms.add(flush)
    else if (count === BUFFERED) flush()
    waiting[count++] = value
  }
}

export const applyHistogram = (serverId: string): Observe =>
  histogram(names.applySeconds, APPLY_BOUNDS, "receive-to-apply time of a chunk", [["server_id", serverId]])

export const writeHistogram = (serverId: string, peer: string): Observe =>
  histogram(names.writeFrames, WRITE_BOUNDS, "frames per coalesced write", [
    ["peer", peer],
    ["server_id", serverId]
  ])
