/**
 * The in-memory frames as plain types: what a decoded payload is. `Frame.ts` owns the wire (the
 * table, the Schemas, the codec) and re-exports these; they sit apart only so that the hand-written
 * payload checks (`quick.ts`), which the table refers to, can build the same values without importing
 * the table back.
 *
 * @internal
 */
import type { Option } from "effect"

/** `{queue, partition, tenant}`: the item of `MESSAGE_AVAILABLE` and of both batch frames. */
export interface QueueItem {
  readonly queue: string
  readonly partition: string
  readonly tenant: Option.Option<string>
}

/**
 * An item of `HOTLIST_DIRTY_BATCH`: a queue item, scoped to one consumer group's ring when `group` is
 * present (a seek or a group-delete repair); absent, it marks every ring of the queue.
 */
export interface HotItem extends QueueItem {
  readonly group: Option.Option<string>
}

/** `{queue, tenant}`: the target of the queue-config invalidations. */
export interface QueueRef {
  readonly queue: string
  readonly tenant: Option.Option<string>
}

/** The v2 part of a HELLO, on the wire as `qm2_challenge`, `qm2_receiver`, `qm2_label`, `qm2_mac`. */
export interface HelloV2Fields {
  /** The listener's nonce, echoed. */
  readonly challenge: string
  /** The listener's server id as the dialer understood it. */
  readonly receiver: string
  /** The dialer's cluster label, `""` when none. */
  readonly label: string
  /** The v2 MAC over the fields above, or `""` in open mode. */
  readonly mac: string
}

export interface MessageAvailable extends QueueItem {
  readonly _tag: "MessageAvailable"
}

export interface MessageAvailableBatch {
  readonly _tag: "MessageAvailableBatch"
  readonly items: ReadonlyArray<QueueItem>
  /** Items of the batch that broke a rule and were left out; present only when some were. */
  readonly skipped?: number
}

export interface Heartbeat {
  readonly _tag: "Heartbeat"
  readonly server_id: Option.Option<string>
}

export interface Hello {
  readonly _tag: "Hello"
  readonly server_id: string
  readonly nonce: string
  readonly mac: string
  /** The challenge-response fields of a v2 dialer; none for a legacy one. */
  readonly v2: Option.Option<HelloV2Fields>
  /** Upstream's HELLO v2: where the peer takes ephemeral traffic (`http://host:port`), if it said. */
  readonly http_addr: Option.Option<string>
  /** Upstream's HELLO v2: the peer's boot incarnation, a u64 in hex, if it said. */
  readonly eph_epoch: Option.Option<string>
  /** Ours (`qm2_key`, v2 HELLOs only): the id of the key the dialer proves, never the key. */
  readonly key_id: Option.Option<string>
}

export interface HotlistDirtyBatch {
  readonly _tag: "HotlistDirtyBatch"
  readonly items: ReadonlyArray<HotItem>
  readonly skipped?: number
}

export interface QueueConfigSet extends QueueRef {
  readonly _tag: "QueueConfigSet"
}

export interface QueueConfigDelete extends QueueRef {
  readonly _tag: "QueueConfigDelete"
}

export interface MaintenanceModeSet {
  readonly _tag: "MaintenanceModeSet"
  readonly enabled: boolean
}

export interface PopMaintenanceModeSet {
  readonly _tag: "PopMaintenanceModeSet"
  readonly enabled: boolean
}

/** What a v2 listener writes on accept: its server id, a fresh nonce, its cluster label (`""`: none). */
export interface Challenge {
  readonly _tag: "Challenge"
  readonly server_id: string
  readonly nonce: string
  readonly label: string
}

/** The ephemeral-queue admin operations upstream broadcasts. */
export type EphOp = "reset" | "delete" | "config_set"

/**
 * `EPH_ADMIN` (tag 20): an ephemeral-queue admin verb, `{op, tenant, queue}`. The tenant is a UUID and
 * never absent: a destructive frame is never broadened to every tenant.
 */
export interface EphAdmin {
  readonly _tag: "EphAdmin"
  readonly op: EphOp
  readonly tenant: string
  readonly queue: string
}
