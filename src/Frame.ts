/**
 * The wire as a host or a transport author sees it (spec "Framing" and "The frame set"): the frames as
 * values (the `Frame` union and its members), the items they carry, their constructors, and the codec
 * between a frame and its bytes, `u32 BE length | u8 tag | JSON payload`.
 *
 * The frame set is one table inside the runtime: `Tag`, the union, the per-tag caps and the decoders
 * derive from it. Receiving is lenient per item, as upstream Queen is: a batch applies its valid items
 * and counts the others (`skipped`), and a missing partition is `""`. These are hints; applying what is
 * valid is the right answer.
 *
 * @since 0.1.0
 */
import type * as Option from "effect/Option"
import type * as Result from "effect/Result"
import * as Codec from "./internal/wire/codec.js"
import * as Frames from "./internal/wire/frames.js"
import * as Names from "./internal/wire/names.js"
import * as Payloads from "./internal/wire/payloads.js"
import type { FrameDecodeError, FrameTooLargeError } from "./MeshError.js"

// ---------------------------------------------------------------------------------------------
// constants
// ---------------------------------------------------------------------------------------------

/**
 * The length prefix cap (spec "Framing"): larger prefixes are rejected before any buffer exists.
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_FRAME_LENGTH: number = Payloads.MAX_FRAME_LENGTH

/**
 * Bytes before the tag byte: the u32 length prefix.
 *
 * @since 0.1.0
 * @category constants
 */
export const LENGTH_PREFIX_BYTES: number = Payloads.LENGTH_PREFIX_BYTES

/**
 * The longest queue name, partition, tenant or consumer group accepted, in characters (code points),
 * any script: upstream stores them as `VARCHAR(255)`. Longer ones are refused and counted
 * (`frames_invalid`, or `items_invalid` inside a batch).
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_NAME_CHARS: number = Names.MAX_NAME_CHARS

/**
 * The most UTF-8 bytes a name of {@link MAX_NAME_CHARS} characters can take (four per character).
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_NAME_BYTES: number = Names.MAX_NAME_BYTES

/**
 * The longest server id accepted, in UTF-8 bytes.
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_SERVER_ID_BYTES: number = Names.MAX_SERVER_ID_BYTES

/**
 * Upstream Queen's default tenant, as it goes out on the wire for a queue of the default tenant.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_TENANT: string = Names.DEFAULT_TENANT

// ---------------------------------------------------------------------------------------------
// the items
// ---------------------------------------------------------------------------------------------

/**
 * `{queue, partition, tenant}`: the item of `MESSAGE_AVAILABLE` and of both batch frames. An absent
 * tenant (`Option.none()`) is a peer that predates tenant scoping: the wake fans out to every tenant
 * holding the queue name, never to the default tenant alone (spec "The frame set"). A UUID tenant is
 * kept lowercased.
 *
 * @since 0.1.0
 * @category schemas
 */
export const QueueItem = Payloads.QueueItem

/**
 * @since 0.1.0
 * @category models
 */
export interface QueueItem extends Payloads.QueueItem {}

/**
 * `{queue, tenant}`: the target of the queue-config invalidations.
 *
 * @since 0.1.0
 * @category schemas
 */
export const QueueRef = Payloads.QueueRef

/**
 * @since 0.1.0
 * @category models
 */
export interface QueueRef extends Payloads.QueueRef {}

/**
 * `{queue, partition, tenant, group}`: the item of `HOTLIST_DIRTY_BATCH`. A present `group` scopes the
 * mark to that consumer group's ring (a seek or a group-delete repair); absent, it marks every ring.
 *
 * @since 0.1.0
 * @category schemas
 */
export const HotItem = Payloads.HotItem

/**
 * @since 0.1.0
 * @category models
 */
export interface HotItem extends Payloads.HotItem {}

/**
 * The operations of `EPH_ADMIN` (tag 20): upstream's ephemeral-queue admin verbs, one list from which
 * the type, the stats' counts, the metrics' `op` label and the CLI's command derive.
 *
 * @since 0.1.0
 * @category schemas
 */
export const EphOp = Payloads.EphOp

/**
 * @since 0.1.0
 * @category models
 */
export type EphOp = Payloads.EphOp

// ---------------------------------------------------------------------------------------------
// the frames
// ---------------------------------------------------------------------------------------------

/**
 * Frame tags, as the spec's table numbers them (`EPH_ADMIN` is upstream's later frame, `CHALLENGE`
 * queen-mesh's v2 handshake).
 *
 * @since 0.1.0
 * @category tags
 */
export const Tag: typeof Frames.Tag = Frames.Tag

/**
 * @since 0.1.0
 * @category tags
 */
export type Tag = Frames.Tag

/**
 * Every frame of the table, as a value: the payload's fields plus `_tag`.
 *
 * @example
 * ```ts
 * import { Frame } from "queen-mesh"
 *
 * const wake: Frame.Frame = { _tag: "MessageAvailable", ...Frame.queueItem({ queue: "orders", partition: "p1" }) }
 * console.log(Frame.nameOf(Frame.tagOf(wake))) // MESSAGE_AVAILABLE
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export type Frame = Frames.Frame

/**
 * The tagged union of all frames as one Schema, for users who validate frames they build themselves.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Frame: typeof Frames.Frame = Frames.Frame

/**
 * @since 0.1.0
 * @category models
 */
export type MessageAvailable = Payloads.MessageAvailable
/**
 * @since 0.1.0
 * @category models
 */
export type MessageAvailableBatch = Payloads.MessageAvailableBatch
/**
 * @since 0.1.0
 * @category models
 */
export type Heartbeat = Payloads.Heartbeat
/**
 * @since 0.1.0
 * @category models
 */
export type Hello = Payloads.Hello
/**
 * @since 0.1.0
 * @category models
 */
export type HotlistDirtyBatch = Payloads.HotlistDirtyBatch
/**
 * @since 0.1.0
 * @category models
 */
export type EphAdmin = Payloads.EphAdmin
/**
 * @since 0.1.0
 * @category models
 */
export type QueueConfigSet = Payloads.QueueConfigSet
/**
 * @since 0.1.0
 * @category models
 */
export type QueueConfigDelete = Payloads.QueueConfigDelete
/**
 * @since 0.1.0
 * @category models
 */
export type MaintenanceModeSet = Payloads.MaintenanceModeSet
/**
 * @since 0.1.0
 * @category models
 */
export type PopMaintenanceModeSet = Payloads.PopMaintenanceModeSet
/**
 * @since 0.1.0
 * @category models
 */
export type Challenge = Payloads.Challenge

/**
 * A frame whose tag this version does not know. It is skipped, never an error that closes the link,
 * so a newer peer can add frames.
 *
 * @since 0.1.0
 * @category models
 */
export interface UnknownFrame extends Frames.UnknownFrame {}

/**
 * The tag byte of each frame.
 *
 * @since 0.1.0
 * @category tags
 */
export const tagOf: (frame: Frame) => Tag = Frames.tagOf

/**
 * The spec's name of a tag (`MESSAGE_AVAILABLE`), or `tag <n>` for one this version does not know.
 *
 * @since 0.1.0
 * @category tags
 */
export const nameOf: (tag: number) => string = Frames.nameOf

/**
 * The largest frame (tag byte plus payload) accepted with `tag`: small for single items, flags,
 * heartbeats and the HELLO; the 16 MiB cap only for the batch frames.
 *
 * @since 0.1.0
 * @category constants
 */
export const maxLengthOf: (tag: number) => number = Frames.maxLengthOf

// ---------------------------------------------------------------------------------------------
// constructors
// ---------------------------------------------------------------------------------------------

/**
 * Input for a queue-carrying item: the tenant may be given as an `Option`, a string, or left out.
 *
 * @since 0.1.0
 * @category constructors
 */
export interface QueueItemInput extends Frames.QueueItemInput {}

/**
 * @since 0.1.0
 * @category constructors
 */
export interface QueueRefInput extends Frames.QueueRefInput {}

/**
 * Input for a hot-list item: a queue item, and the consumer group whose ring it marks (left out,
 * `null` or `""`: every ring of the queue).
 *
 * @since 0.1.0
 * @category constructors
 */
export interface HotItemInput extends Frames.HotItemInput {}

/**
 * Normalises a tenant the way the wire does: `undefined`, `null` and `""` are absent; a UUID is
 * lowercased. Does not check the length (the `Mesh` API does).
 *
 * @since 0.1.0
 * @category constructors
 */
export const tenantOf: (tenant: Option.Option<string> | string | null | undefined) => Option.Option<string> =
  Frames.tenantOf

/**
 * @since 0.1.0
 * @category constructors
 */
export const queueItem: (input: QueueItemInput) => QueueItem = Frames.queueItem

/**
 * @since 0.1.0
 * @category constructors
 */
export const queueRef: (input: QueueRefInput) => QueueRef = Frames.queueRef

/**
 * @since 0.1.0
 * @category constructors
 */
export const hotItem: (input: HotItemInput) => HotItem = Frames.hotItem

/**
 * A heartbeat, with this node's server id as upstream's heartbeats carry it.
 *
 * @since 0.1.0
 * @category constructors
 */
export const heartbeat: (serverId?: string) => Heartbeat = Frames.heartbeat

// ---------------------------------------------------------------------------------------------
// the codec
// ---------------------------------------------------------------------------------------------

/**
 * `u32 BE length | u8 tag | JSON` (spec "Framing"): the one way bytes of a frame are laid out. `json` is
 * the payload's text (`""` for an empty payload); the caller keeps the length within the cap.
 *
 * @since 0.1.0
 * @category encoding
 */
export const frameBytes: (tag: number, json: string) => Uint8Array = Codec.frameBytes

/**
 * Encodes a frame as `u32 BE length | u8 tag | JSON`, or fails when it would exceed the 16 MiB cap (named
 * `encodeEither` before effect 4, when it returned an `Either`).
 *
 * @since 0.1.0
 * @category encoding
 */
export const encodeResult: (frame: Frame) => Result.Result<Uint8Array, FrameTooLargeError> =
  Codec.encodeResult

/**
 * Encodes a frame as `u32 BE length | u8 tag | JSON`. Every frame but an oversized batch fits the cap;
 * for batches built from untrusted sizes use {@link encodeResult}, which reports the overflow.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, strictEqual } from "node:assert"
 * import { Option, Result } from "effect"
 * import { Frame } from "queen-mesh"
 *
 * const item = Frame.queueItem({ queue: "orders", partition: "p1" })
 * const bytes = Frame.encode({ _tag: "MessageAvailable", ...item })
 * // u32 BE length | u8 tag | JSON payload
 * strictEqual(bytes[4], Frame.Tag.MESSAGE_AVAILABLE)
 *
 * const decoded = Frame.decodePayload(bytes[4]!, bytes.subarray(5))
 * deepStrictEqual(
 *   decoded,
 *   Result.succeed({ _tag: "MessageAvailable", queue: "orders", partition: "p1", tenant: Option.none() })
 * )
 * ```
 *
 * @since 0.1.0
 * @category encoding
 */
export const encode: (frame: Frame) => Uint8Array = Codec.encode

/**
 * Decodes one frame's payload by its tag. An unknown tag yields an `UnknownFrame`; a payload that fails
 * its Schema (or is not JSON) yields a `FrameDecodeError` the caller can count and skip. A heartbeat may
 * have an empty payload. Never throws, whatever the bytes.
 *
 * @since 0.1.0
 * @category decoding
 */
export const decodePayload: (
  tag: number,
  payload: Uint8Array
) => Result.Result<Frame | UnknownFrame, FrameDecodeError> = Codec.decodePayload

/**
 * Decodes an already parsed JSON payload by its tag, as {@link decodePayload} does. Never throws.
 *
 * @since 0.1.0
 * @category decoding
 */
export const decodeJson: (
  tag: number,
  json: unknown
) => Result.Result<Frame | UnknownFrame, FrameDecodeError> = Codec.decodeJson
