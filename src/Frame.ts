/**
 * The wire: frame tags, one Schema per payload, the in-memory `Frame` union, and the codec between
 * them (spec "Framing" and "The frame set").
 *
 * On the wire a frame is `u32 BE length | u8 tag | JSON payload`, where `length` counts the tag byte
 * plus the payload. In memory a frame is a tagged value whose fields are the decoded payload; the
 * payload Schemas are the single source of truth for what a peer may send us.
 *
 * @since 0.1.0
 */
import { Either, Option, ParseResult, Schema } from "effect"
import { FrameDecodeError, FrameTooLargeError } from "./MeshError.js"

// ---------------------------------------------------------------------------------------------
// tags
// ---------------------------------------------------------------------------------------------

/**
 * Frame tags, as the spec's table numbers them.
 *
 * @since 0.1.0
 * @category tags
 */
export const Tag = {
  MESSAGE_AVAILABLE: 1,
  MESSAGE_AVAILABLE_BATCH: 2,
  HEARTBEAT: 3,
  HELLO: 4,
  HOTLIST_DIRTY_BATCH: 5,
  QUEUE_CONFIG_SET: 10,
  QUEUE_CONFIG_DELETE: 11,
  MAINTENANCE_MODE_SET: 40,
  POP_MAINTENANCE_MODE_SET: 41
} as const

/**
 * @since 0.1.0
 * @category tags
 */
export type Tag = (typeof Tag)[keyof typeof Tag]

/**
 * The length prefix cap (spec "Framing"): larger prefixes are rejected before any buffer exists.
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_FRAME_LENGTH = 16 * 1024 * 1024

/**
 * Bytes before the tag byte: the u32 length prefix.
 *
 * @since 0.1.0
 * @category constants
 */
export const LENGTH_PREFIX_BYTES = 4

// ---------------------------------------------------------------------------------------------
// payload schemas
// ---------------------------------------------------------------------------------------------

/**
 * The tenant of a queue-carrying item. Absent, `null` and `""` all decode to `Option.none()`: an
 * absent tenant means a peer that predates tenant scoping and must fan out to every tenant, so it is
 * never turned into the default tenant (spec "The frame set"). Encoding omits an absent tenant.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Tenant = Schema.optionalToRequired(
  Schema.NullOr(Schema.String),
  Schema.OptionFromSelf(Schema.String),
  {
    decode: (given) => Option.filter(Option.flatMap(given, Option.fromNullable), (tenant) => tenant !== ""),
    encode: (tenant) => tenant
  }
)

/**
 * A queue name: a queue-carrying item with an empty or missing queue reaches no handler.
 *
 * @since 0.1.0
 * @category schemas
 */
export const QueueName = Schema.String.pipe(
  Schema.minLength(1, { message: () => "queue must be a non-empty string" })
)

/**
 * `{queue, partition, tenant}`: the item of `MESSAGE_AVAILABLE` and of both batch frames.
 *
 * @since 0.1.0
 * @category schemas
 */
export const QueueItem = Schema.Struct({
  queue: QueueName,
  partition: Schema.String,
  tenant: Tenant
})

/**
 * @since 0.1.0
 * @category models
 */
export interface QueueItem extends Schema.Schema.Type<typeof QueueItem> {}

/**
 * `{queue, tenant}`: the target of the queue-config invalidations.
 *
 * @since 0.1.0
 * @category schemas
 */
export const QueueRef = Schema.Struct({
  queue: QueueName,
  tenant: Tenant
})

/**
 * @since 0.1.0
 * @category models
 */
export interface QueueRef extends Schema.Schema.Type<typeof QueueRef> {}

const Items = Schema.Struct({ items: Schema.Array(QueueItem) })

/**
 * `{server_id, nonce, mac}`: the HELLO payload. Its meaning is checked by `Handshake.verify`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const HelloPayload = Schema.Struct({
  server_id: Schema.String,
  nonce: Schema.String,
  mac: Schema.String
})

/**
 * @since 0.1.0
 * @category models
 */
export interface HelloPayload extends Schema.Schema.Type<typeof HelloPayload> {}

const HeartbeatPayload = Schema.Struct({
  server_id: Schema.optionalWith(Schema.String, { as: "Option", nullable: true })
})

const Enabled = Schema.Struct({ enabled: Schema.Boolean })

// ---------------------------------------------------------------------------------------------
// frames
// ---------------------------------------------------------------------------------------------

/**
 * One Schema per frame: the decoded side is the in-memory frame (payload fields plus `_tag`), the
 * encoded side is the JSON payload. Unknown extra fields are ignored on decode, as Schema does by
 * default, so newer peers can add fields.
 *
 * @since 0.1.0
 * @category schemas
 */
export const MessageAvailable = QueueItem.pipe(Schema.attachPropertySignature("_tag", "MessageAvailable"))
/** @since 0.1.0 @category schemas */
export const MessageAvailableBatch = Items.pipe(
  Schema.attachPropertySignature("_tag", "MessageAvailableBatch")
)
/** @since 0.1.0 @category schemas */
export const Heartbeat = HeartbeatPayload.pipe(Schema.attachPropertySignature("_tag", "Heartbeat"))
/** @since 0.1.0 @category schemas */
export const Hello = HelloPayload.pipe(Schema.attachPropertySignature("_tag", "Hello"))
/** @since 0.1.0 @category schemas */
export const HotlistDirtyBatch = Items.pipe(Schema.attachPropertySignature("_tag", "HotlistDirtyBatch"))
/** @since 0.1.0 @category schemas */
export const QueueConfigSet = QueueRef.pipe(Schema.attachPropertySignature("_tag", "QueueConfigSet"))
/** @since 0.1.0 @category schemas */
export const QueueConfigDelete = QueueRef.pipe(Schema.attachPropertySignature("_tag", "QueueConfigDelete"))
/** @since 0.1.0 @category schemas */
export const MaintenanceModeSet = Enabled.pipe(Schema.attachPropertySignature("_tag", "MaintenanceModeSet"))
/** @since 0.1.0 @category schemas */
export const PopMaintenanceModeSet = Enabled.pipe(
  Schema.attachPropertySignature("_tag", "PopMaintenanceModeSet")
)

/** @since 0.1.0 @category models */
export type MessageAvailable = typeof MessageAvailable.Type
/** @since 0.1.0 @category models */
export type MessageAvailableBatch = typeof MessageAvailableBatch.Type
/** @since 0.1.0 @category models */
export type Heartbeat = typeof Heartbeat.Type
/** @since 0.1.0 @category models */
export type Hello = typeof Hello.Type
/** @since 0.1.0 @category models */
export type HotlistDirtyBatch = typeof HotlistDirtyBatch.Type
/** @since 0.1.0 @category models */
export type QueueConfigSet = typeof QueueConfigSet.Type
/** @since 0.1.0 @category models */
export type QueueConfigDelete = typeof QueueConfigDelete.Type
/** @since 0.1.0 @category models */
export type MaintenanceModeSet = typeof MaintenanceModeSet.Type
/** @since 0.1.0 @category models */
export type PopMaintenanceModeSet = typeof PopMaintenanceModeSet.Type

/**
 * Every frame of the spec's table.
 *
 * @since 0.1.0
 * @category models
 */
export type Frame =
  | MessageAvailable
  | MessageAvailableBatch
  | Heartbeat
  | Hello
  | HotlistDirtyBatch
  | QueueConfigSet
  | QueueConfigDelete
  | MaintenanceModeSet
  | PopMaintenanceModeSet

/**
 * The tagged union of all frames as one Schema, for users who validate frames they build themselves.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Frame = Schema.Union(
  MessageAvailable,
  MessageAvailableBatch,
  Heartbeat,
  Hello,
  HotlistDirtyBatch,
  QueueConfigSet,
  QueueConfigDelete,
  MaintenanceModeSet,
  PopMaintenanceModeSet
)

/**
 * A frame whose tag this version does not know. It is skipped, never an error that closes the link,
 * so a newer peer can add frames.
 *
 * @since 0.1.0
 * @category models
 */
export interface UnknownFrame {
  readonly _tag: "Unknown"
  readonly tag: number
  readonly payload: Uint8Array
}

/**
 * The tag byte of each frame.
 *
 * @since 0.1.0
 * @category tags
 */
export const tagOf = (frame: Frame): Tag => {
  switch (frame._tag) {
    case "MessageAvailable":
      return Tag.MESSAGE_AVAILABLE
    case "MessageAvailableBatch":
      return Tag.MESSAGE_AVAILABLE_BATCH
    case "Heartbeat":
      return Tag.HEARTBEAT
    case "Hello":
      return Tag.HELLO
    case "HotlistDirtyBatch":
      return Tag.HOTLIST_DIRTY_BATCH
    case "QueueConfigSet":
      return Tag.QUEUE_CONFIG_SET
    case "QueueConfigDelete":
      return Tag.QUEUE_CONFIG_DELETE
    case "MaintenanceModeSet":
      return Tag.MAINTENANCE_MODE_SET
    case "PopMaintenanceModeSet":
      return Tag.POP_MAINTENANCE_MODE_SET
  }
}

// ---------------------------------------------------------------------------------------------
// constructors
// ---------------------------------------------------------------------------------------------

/**
 * Input for a queue-carrying item: the tenant may be given as an `Option`, a string, or left out.
 *
 * @since 0.1.0
 * @category constructors
 */
export interface QueueItemInput {
  readonly queue: string
  readonly partition: string
  readonly tenant?: Option.Option<string> | string | null | undefined
}

/**
 * @since 0.1.0
 * @category constructors
 */
export interface QueueRefInput {
  readonly queue: string
  readonly tenant?: Option.Option<string> | string | null | undefined
}

/**
 * Normalises a tenant the way the wire does: `undefined`, `null` and `""` are absent.
 *
 * @since 0.1.0
 * @category constructors
 */
export const tenantOf = (
  tenant: Option.Option<string> | string | null | undefined
): Option.Option<string> => {
  if (tenant === undefined || tenant === null || tenant === "") return Option.none()
  if (typeof tenant === "string") return Option.some(tenant)
  return Option.filter(tenant, (t) => t !== "")
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const queueItem = (input: QueueItemInput): QueueItem => ({
  queue: input.queue,
  partition: input.partition,
  tenant: tenantOf(input.tenant)
})

/**
 * @since 0.1.0
 * @category constructors
 */
export const queueRef = (input: QueueRefInput): QueueRef => ({
  queue: input.queue,
  tenant: tenantOf(input.tenant)
})

const heartbeatNoId: Heartbeat = { _tag: "Heartbeat", server_id: Option.none() }

/**
 * @since 0.1.0
 * @category constructors
 */
export const heartbeat = (serverId?: string): Heartbeat =>
  serverId === undefined ? heartbeatNoId : { _tag: "Heartbeat", server_id: Option.some(serverId) }

// ---------------------------------------------------------------------------------------------
// encoding
// ---------------------------------------------------------------------------------------------

interface WireItem {
  queue: string
  partition: string
  tenant?: string
}

const wireItem = (item: QueueItem): WireItem =>
  Option.isSome(item.tenant)
    ? { queue: item.queue, partition: item.partition, tenant: item.tenant.value }
    : { queue: item.queue, partition: item.partition }

const wireRef = (ref: QueueRef): { queue: string; tenant?: string } =>
  Option.isSome(ref.tenant) ? { queue: ref.queue, tenant: ref.tenant.value } : { queue: ref.queue }

/**
 * The JSON payload of a frame, or `undefined` for an empty payload (a heartbeat without server id).
 * Written by hand rather than through `Schema.encode` because it sits on the broadcast hot path; the
 * tests prove it agrees with the Schemas.
 *
 * @since 0.1.0
 * @category encoding
 */
export const payloadOf = (frame: Frame): object | undefined => {
  switch (frame._tag) {
    case "MessageAvailable":
      return wireItem(frame)
    case "MessageAvailableBatch":
    case "HotlistDirtyBatch":
      return { items: frame.items.map(wireItem) }
    case "Heartbeat":
      return Option.isSome(frame.server_id) ? { server_id: frame.server_id.value } : undefined
    case "Hello":
      return { server_id: frame.server_id, nonce: frame.nonce, mac: frame.mac }
    case "QueueConfigSet":
    case "QueueConfigDelete":
      return wireRef(frame)
    case "MaintenanceModeSet":
    case "PopMaintenanceModeSet":
      return { enabled: frame.enabled }
  }
}

/**
 * Encodes a frame as `u32 BE length | u8 tag | JSON`, or fails when it would exceed the 16 MiB cap.
 *
 * @since 0.1.0
 * @category encoding
 */
export const encodeEither = (frame: Frame): Either.Either<Uint8Array, FrameTooLargeError> => {
  const payload = payloadOf(frame)
  const json = payload === undefined ? "" : JSON.stringify(payload)
  const payloadBytes = Buffer.byteLength(json, "utf8")
  const length = 1 + payloadBytes
  if (length > MAX_FRAME_LENGTH) return Either.left(new FrameTooLargeError({ length }))
  const out = Buffer.allocUnsafe(LENGTH_PREFIX_BYTES + length)
  out.writeUInt32BE(length, 0)
  out[LENGTH_PREFIX_BYTES] = tagOf(frame)
  if (payloadBytes > 0) out.write(json, LENGTH_PREFIX_BYTES + 1, "utf8")
  return Either.right(out)
}

/**
 * Encodes a frame as `u32 BE length | u8 tag | JSON`. Every frame but an oversized batch fits the cap;
 * for batches built from untrusted sizes use {@link encodeEither}, which reports the overflow.
 *
 * @since 0.1.0
 * @category encoding
 */
export const encode = (frame: Frame): Uint8Array => {
  const result = encodeEither(frame)
  if (Either.isLeft(result)) throw result.left
  return result.right
}

// ---------------------------------------------------------------------------------------------
// decoding
// ---------------------------------------------------------------------------------------------

const describe = (error: ParseResult.ParseError): string =>
  ParseResult.ArrayFormatter.formatErrorSync(error)
    .map((issue) => (issue.path.length === 0 ? issue.message : `${issue.path.join(".")}: ${issue.message}`))
    .join("; ")

// The receive hot path. Each payload goes through a hand-written check that accepts exactly what its
// Schema accepts and builds the same value; anything it does not recognise falls through to the Schema,
// which then decides, and words the error. The tests prove the two agree on arbitrary input.

const NONE: Option.Option<string> = Option.none()

const isRecord = (u: unknown): u is { readonly [key: string]: unknown } =>
  typeof u === "object" && u !== null && !Array.isArray(u)

const quickTenant = (u: unknown): Option.Option<string> | undefined =>
  u === undefined || u === null || u === "" ? NONE : typeof u === "string" ? Option.some(u) : undefined

const quickItem = (u: unknown): QueueItem | undefined => {
  if (!isRecord(u)) return undefined
  const { queue, partition } = u
  if (typeof queue !== "string" || queue === "" || typeof partition !== "string") return undefined
  const tenant = quickTenant(u.tenant)
  return tenant === undefined ? undefined : { queue, partition, tenant }
}

const quickItems = (u: unknown): Array<QueueItem> | undefined => {
  if (!isRecord(u) || !Array.isArray(u.items)) return undefined
  const items: Array<QueueItem> = new Array(u.items.length)
  for (let i = 0; i < items.length; i++) {
    const item = quickItem(u.items[i])
    if (item === undefined) return undefined
    items[i] = item
  }
  return items
}

const quickRef = (u: unknown): QueueRef | undefined => {
  if (!isRecord(u) || typeof u.queue !== "string" || u.queue === "") return undefined
  const tenant = quickTenant(u.tenant)
  return tenant === undefined ? undefined : { queue: u.queue, tenant }
}

const quickEnabled = (u: unknown): boolean | undefined =>
  isRecord(u) && typeof u.enabled === "boolean" ? u.enabled : undefined

/**
 * The fast check of each tag's payload: the decoded frame, or `undefined` to let the Schema decide.
 *
 * @since 0.1.0
 * @category decoding
 */
export const quickDecoders: Record<number, (json: unknown) => Frame | undefined> = {
  [Tag.MESSAGE_AVAILABLE]: (u) => {
    const item = quickItem(u)
    return item === undefined ? undefined : { _tag: "MessageAvailable", ...item }
  },
  [Tag.MESSAGE_AVAILABLE_BATCH]: (u) => {
    const items = quickItems(u)
    return items === undefined ? undefined : { _tag: "MessageAvailableBatch", items }
  },
  [Tag.HEARTBEAT]: (u) => {
    if (!isRecord(u)) return undefined
    const id = u.server_id
    if (id === undefined || id === null) return heartbeatNoId
    return typeof id === "string" ? { _tag: "Heartbeat", server_id: Option.some(id) } : undefined
  },
  [Tag.HELLO]: (u) =>
    isRecord(u) && typeof u.server_id === "string" && typeof u.nonce === "string" && typeof u.mac === "string"
      ? { _tag: "Hello", server_id: u.server_id, nonce: u.nonce, mac: u.mac }
      : undefined,
  [Tag.HOTLIST_DIRTY_BATCH]: (u) => {
    const items = quickItems(u)
    return items === undefined ? undefined : { _tag: "HotlistDirtyBatch", items }
  },
  [Tag.QUEUE_CONFIG_SET]: (u) => {
    const ref = quickRef(u)
    return ref === undefined ? undefined : { _tag: "QueueConfigSet", ...ref }
  },
  [Tag.QUEUE_CONFIG_DELETE]: (u) => {
    const ref = quickRef(u)
    return ref === undefined ? undefined : { _tag: "QueueConfigDelete", ...ref }
  },
  [Tag.MAINTENANCE_MODE_SET]: (u) => {
    const enabled = quickEnabled(u)
    return enabled === undefined ? undefined : { _tag: "MaintenanceModeSet", enabled }
  },
  [Tag.POP_MAINTENANCE_MODE_SET]: (u) => {
    const enabled = quickEnabled(u)
    return enabled === undefined ? undefined : { _tag: "PopMaintenanceModeSet", enabled }
  }
}

/**
 * The longest error detail built from wire data: a short excerpt, never the whole value.
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_DETAIL_LENGTH = 200

/**
 * Cuts a detail built from wire data to {@link MAX_DETAIL_LENGTH} characters.
 *
 * @since 0.1.0
 * @category decoding
 */
export const excerpt = (text: string): string =>
  text.length <= MAX_DETAIL_LENGTH ? text : `${text.slice(0, MAX_DETAIL_LENGTH)}... (${text.length} chars)`

const schemaDecoder = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknownEither(schema, { errors: "first" })
  return (json: unknown): Either.Either<A, string> => {
    // Formatting a failure prints the offending value, which may nest deeper than the stack (a hostile
    // `[[[[...]]]]`): a throw here is a refusal with a fixed detail, never an escape.
    try {
      return Either.mapLeft(decode(json), (error) => excerpt(describe(error)))
    } catch {
      return Either.left("payload too deeply nested to describe")
    }
  }
}

/**
 * Each tag's payload Schema, as a decoder of parsed JSON: the authority on what a payload may be.
 *
 * @since 0.1.0
 * @category decoding
 */
export const schemaDecoders: Record<number, (json: unknown) => Either.Either<Frame, string>> = {
  [Tag.MESSAGE_AVAILABLE]: schemaDecoder(MessageAvailable),
  [Tag.MESSAGE_AVAILABLE_BATCH]: schemaDecoder(MessageAvailableBatch),
  [Tag.HEARTBEAT]: schemaDecoder(Heartbeat),
  [Tag.HELLO]: schemaDecoder(Hello),
  [Tag.HOTLIST_DIRTY_BATCH]: schemaDecoder(HotlistDirtyBatch),
  [Tag.QUEUE_CONFIG_SET]: schemaDecoder(QueueConfigSet),
  [Tag.QUEUE_CONFIG_DELETE]: schemaDecoder(QueueConfigDelete),
  [Tag.MAINTENANCE_MODE_SET]: schemaDecoder(MaintenanceModeSet),
  [Tag.POP_MAINTENANCE_MODE_SET]: schemaDecoder(PopMaintenanceModeSet)
}

const utf8 = new TextDecoder("utf-8")

/**
 * Decodes one frame's payload by its tag through the Schemas. An unknown tag yields an `UnknownFrame`;
 * a payload that fails its Schema (or is not JSON) yields a `FrameDecodeError` the caller can count
 * and skip. A heartbeat may have an empty payload.
 *
 * @since 0.1.0
 * @category decoding
 */
export const decodePayload = (
  tag: number,
  payload: Uint8Array
): Either.Either<Frame | UnknownFrame, FrameDecodeError> => {
  const schema = schemaDecoders[tag]
  if (schema === undefined) return Either.right({ _tag: "Unknown", tag, payload })
  if (payload.length === 0 && tag === Tag.HEARTBEAT) return Either.right(heartbeatNoId)
  let json: unknown
  try {
    json = JSON.parse(Buffer.isBuffer(payload) ? payload.toString("utf8") : utf8.decode(payload))
  } catch (error) {
    const detail = `not JSON: ${excerpt(error instanceof Error ? error.message : String(error))}`
    return Either.left(new FrameDecodeError({ tag, detail }))
  }
  try {
    const quick = quickDecoders[tag]!(json)
    if (quick !== undefined) return Either.right(quick)
    return Either.mapLeft(schema(json), (detail) => new FrameDecodeError({ tag, detail }))
  } catch {
    // Total on any input: whatever a peer sends is refused with a reason, never thrown.
    return Either.left(new FrameDecodeError({ tag, detail: "payload could not be checked" }))
  }
}
