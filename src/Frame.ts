/**
 * The wire: the frame set as one table, one Schema per payload, the in-memory `Frame` union, and the
 * codec between them (spec "Framing" and "The frame set").
 *
 * On the wire a frame is `u32 BE length | u8 tag | JSON payload`, where `length` counts the tag byte
 * plus the payload. In memory a frame is a tagged value whose fields are the decoded payload. The
 * payload Schemas are the authority on what a peer may send us; the naming rules they apply (queue
 * names, partitions, tenants, server ids) have one home, shared with the `Mesh` API and the CLI.
 *
 * Receiving is lenient per item, as upstream Queen is: a batch applies its valid items and counts the
 * others (`skipped`), and a missing partition is `""`. These are hints; applying what is valid is the
 * right answer.
 *
 * @since 0.1.0
 */
import { Either, Option, ParseResult, Schema } from "effect"
import * as Quick from "./internal/quick.js"
import * as Rules from "./internal/rules.js"
import { FrameDecodeError, FrameTooLargeError } from "./MeshError.js"

// ---------------------------------------------------------------------------------------------
// constants
// ---------------------------------------------------------------------------------------------

/**
 * The length prefix cap (spec "Framing"): larger prefixes are rejected before any buffer exists.
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_FRAME_LENGTH = 16 * 1024 * 1024

/**
 * The cap of every frame that carries one item, a flag, a heartbeat or a HELLO: a few KiB is generous
 * (three names of at most {@link MAX_NAME_BYTES} each, plus JSON). Only the batch frames may be larger.
 *
 * @since 0.1.0
 * @category constants
 */
export const SMALL_FRAME_LENGTH = 16 * 1024

/**
 * The cap of a frame whose tag this version does not know: skipped anyway, so never worth megabytes.
 *
 * @since 0.1.0
 * @category constants
 */
export const UNKNOWN_FRAME_LENGTH = 64 * 1024

/**
 * Bytes before the tag byte: the u32 length prefix.
 *
 * @since 0.1.0
 * @category constants
 */
export const LENGTH_PREFIX_BYTES = 4

/**
 * The longest queue name, partition or tenant accepted, in UTF-8 bytes. Longer ones are refused and
 * counted (`frames_invalid`, or `items_invalid` inside a batch).
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_NAME_BYTES = Rules.MAX_NAME_BYTES

/**
 * The longest server id accepted, in UTF-8 bytes.
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_SERVER_ID_BYTES = Rules.MAX_SERVER_ID_BYTES

/**
 * Upstream Queen's default tenant, as it goes out on the wire for a queue of the default tenant.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_TENANT = Rules.DEFAULT_TENANT

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

// ---------------------------------------------------------------------------------------------
// payload schemas
// ---------------------------------------------------------------------------------------------

const TenantString = Schema.String.pipe(
  Schema.filter((s) => Rules.fitsBytes(s, Rules.MAX_NAME_BYTES), {
    message: () => `tenant is longer than ${Rules.MAX_NAME_BYTES} bytes`
  })
)

/**
 * The tenant of a queue-carrying item. Absent, `null` and `""` all decode to `Option.none()`: an
 * absent tenant means a peer that predates tenant scoping and must fan out to every tenant, so it is
 * never turned into the default tenant (spec "The frame set"). A UUID is kept lowercased, since
 * upstream compares UUID tenants case-insensitively; any other string is kept as given. Encoding omits
 * an absent tenant.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Tenant = Schema.optionalToRequired(
  Schema.NullOr(TenantString),
  Schema.OptionFromSelf(Schema.String),
  {
    decode: (given) => Option.flatMap(given, (tenant) => Rules.tenant(tenant) ?? Option.none()),
    encode: (tenant) => tenant
  }
)

/**
 * A queue name: non-empty, at most {@link MAX_NAME_BYTES}. A queue-carrying item without one reaches
 * no handler.
 *
 * @since 0.1.0
 * @category schemas
 */
export const QueueName = Schema.String.pipe(
  Schema.filter((s) => Rules.queueName(s) !== undefined, {
    message: (issue) => Rules.describeName("queue", issue.actual)
  })
)

/**
 * A partition: at most {@link MAX_NAME_BYTES}; missing or `null` is `""`, as upstream takes it.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Partition = Schema.optionalWith(
  Schema.String.pipe(
    Schema.filter((s) => Rules.partition(s) !== undefined, {
      message: () => `partition is longer than ${Rules.MAX_NAME_BYTES} bytes`
    })
  ),
  { nullable: true, default: () => "" }
)

/**
 * A server id: non-empty, at most {@link MAX_SERVER_ID_BYTES}.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ServerId = Schema.String.pipe(
  Schema.filter((s) => Rules.serverId(s) !== undefined, {
    message: (issue) => Rules.describeName("server_id", issue.actual)
  })
)

/**
 * `{queue, partition, tenant}`: the item of `MESSAGE_AVAILABLE` and of both batch frames.
 *
 * @since 0.1.0
 * @category schemas
 */
export const QueueItem = Schema.Struct({ queue: QueueName, partition: Partition, tenant: Tenant })

/**
 * @since 0.1.0
 * @category models
 */
export interface QueueItem {
  readonly queue: string
  readonly partition: string
  readonly tenant: Option.Option<string>
}

/**
 * `{queue, tenant}`: the target of the queue-config invalidations.
 *
 * @since 0.1.0
 * @category schemas
 */
export const QueueRef = Schema.Struct({ queue: QueueName, tenant: Tenant })

/**
 * @since 0.1.0
 * @category models
 */
export interface QueueRef {
  readonly queue: string
  readonly tenant: Option.Option<string>
}

const decodeItemOption = Schema.decodeUnknownOption(QueueItem)

/**
 * `{items: [...]}`, lenient per item: the valid items are kept, the others counted in `skipped`
 * (present only when some were). An envelope that is not an object with an `items` array is invalid.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Items = Schema.transform(
  Schema.Struct({ items: Schema.Array(Schema.Unknown) }),
  Schema.Struct({
    items: Schema.Array(Schema.typeSchema(QueueItem)),
    skipped: Schema.optionalWith(Schema.Number, { exact: true })
  }),
  {
    strict: true,
    decode: ({ items }) => {
      const valid: Array<QueueItem> = []
      for (const item of items) {
        const decoded = decodeItemOption(item)
        if (Option.isSome(decoded)) valid.push(decoded.value)
      }
      const skipped = items.length - valid.length
      return skipped === 0 ? { items: valid } : { items: valid, skipped }
    },
    encode: ({ items }) => ({ items: items.map((item) => Quick.wireItem(item)) })
  }
)

/**
 * `{server_id, nonce, mac}`: the HELLO payload. Its meaning is checked by `Handshake.verify`. Later
 * upstream revisions add fields (`http_addr`, `eph_epoch`); unknown fields are ignored.
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
 * encoded side is the JSON payload. Unknown extra fields are ignored on decode, so newer peers can add
 * fields.
 *
 * @since 0.1.0
 * @category schemas
 */
export const MessageAvailable = QueueItem.pipe(Schema.attachPropertySignature("_tag", "MessageAvailable"))
/**
 * @since 0.1.0
 * @category schemas
 */
export const MessageAvailableBatch = Items.pipe(
  Schema.attachPropertySignature("_tag", "MessageAvailableBatch")
)
/**
 * @since 0.1.0
 * @category schemas
 */
export const Heartbeat = HeartbeatPayload.pipe(Schema.attachPropertySignature("_tag", "Heartbeat"))
/**
 * @since 0.1.0
 * @category schemas
 */
export const Hello = HelloPayload.pipe(Schema.attachPropertySignature("_tag", "Hello"))
/**
 * @since 0.1.0
 * @category schemas
 */
export const HotlistDirtyBatch = Items.pipe(Schema.attachPropertySignature("_tag", "HotlistDirtyBatch"))
/**
 * @since 0.1.0
 * @category schemas
 */
export const QueueConfigSet = QueueRef.pipe(Schema.attachPropertySignature("_tag", "QueueConfigSet"))
/**
 * @since 0.1.0
 * @category schemas
 */
export const QueueConfigDelete = QueueRef.pipe(Schema.attachPropertySignature("_tag", "QueueConfigDelete"))
/**
 * @since 0.1.0
 * @category schemas
 */
export const MaintenanceModeSet = Enabled.pipe(Schema.attachPropertySignature("_tag", "MaintenanceModeSet"))
/**
 * @since 0.1.0
 * @category schemas
 */
export const PopMaintenanceModeSet = Enabled.pipe(
  Schema.attachPropertySignature("_tag", "PopMaintenanceModeSet")
)

/**
 * @since 0.1.0
 * @category models
 */
export type MessageAvailable = typeof MessageAvailable.Type
/**
 * @since 0.1.0
 * @category models
 */
export type MessageAvailableBatch = typeof MessageAvailableBatch.Type
/**
 * @since 0.1.0
 * @category models
 */
export type Heartbeat = typeof Heartbeat.Type
/**
 * @since 0.1.0
 * @category models
 */
export type Hello = typeof Hello.Type
/**
 * @since 0.1.0
 * @category models
 */
export type HotlistDirtyBatch = typeof HotlistDirtyBatch.Type
/**
 * @since 0.1.0
 * @category models
 */
export type QueueConfigSet = typeof QueueConfigSet.Type
/**
 * @since 0.1.0
 * @category models
 */
export type QueueConfigDelete = typeof QueueConfigDelete.Type
/**
 * @since 0.1.0
 * @category models
 */
export type MaintenanceModeSet = typeof MaintenanceModeSet.Type
/**
 * @since 0.1.0
 * @category models
 */
export type PopMaintenanceModeSet = typeof PopMaintenanceModeSet.Type

// ---------------------------------------------------------------------------------------------
// the frame table
// ---------------------------------------------------------------------------------------------

/**
 * One row of the frame set: what the spec's table says of a frame, plus how this implementation
 * checks and encodes it. Adding a frame is adding a row (and its Schema and quick check).
 *
 * @since 0.1.0
 * @category models
 */
export interface FrameSpec<Name extends string, T extends number, A extends { readonly _tag: string }, I> {
  /** The spec's name, e.g. `MESSAGE_AVAILABLE`. */
  readonly name: Name
  readonly tag: T
  readonly schema: Schema.Schema<A, I>
  /** The largest frame (tag byte plus payload) accepted with this tag, checked from the length prefix. */
  readonly maxLength: number
  /** @internal */
  readonly quick: (json: unknown) => A | undefined
  /** @internal */
  readonly payload: (frame: A) => object | undefined
}

const row = <const Name extends string, const T extends number, A extends { readonly _tag: string }, I>(
  spec: FrameSpec<Name, T, A, I>
) => spec

/**
 * The frame set, by in-memory tag: the one table from which {@link Tag}, the {@link Frame} union,
 * {@link tagOf}, the per-tag caps and both decoder maps are derived.
 *
 * @since 0.1.0
 * @category tags
 */
export const frames = {
  MessageAvailable: row({
    name: "MESSAGE_AVAILABLE",
    tag: 1,
    schema: MessageAvailable,
    maxLength: SMALL_FRAME_LENGTH,
    quick: Quick.messageAvailable,
    payload: Quick.wireItem
  }),
  MessageAvailableBatch: row({
    name: "MESSAGE_AVAILABLE_BATCH",
    tag: 2,
    schema: MessageAvailableBatch,
    maxLength: MAX_FRAME_LENGTH,
    quick: Quick.messageAvailableBatch,
    payload: Quick.wireItems
  }),
  Heartbeat: row({
    name: "HEARTBEAT",
    tag: 3,
    schema: Heartbeat,
    maxLength: SMALL_FRAME_LENGTH,
    quick: Quick.heartbeat,
    payload: (frame: Heartbeat) =>
      Option.isSome(frame.server_id) ? { server_id: frame.server_id.value } : undefined
  }),
  Hello: row({
    name: "HELLO",
    tag: 4,
    schema: Hello,
    maxLength: SMALL_FRAME_LENGTH,
    quick: Quick.hello,
    payload: (frame: Hello) => ({ server_id: frame.server_id, nonce: frame.nonce, mac: frame.mac })
  }),
  HotlistDirtyBatch: row({
    name: "HOTLIST_DIRTY_BATCH",
    tag: 5,
    schema: HotlistDirtyBatch,
    maxLength: MAX_FRAME_LENGTH,
    quick: Quick.hotlistDirtyBatch,
    payload: Quick.wireItems
  }),
  QueueConfigSet: row({
    name: "QUEUE_CONFIG_SET",
    tag: 10,
    schema: QueueConfigSet,
    maxLength: SMALL_FRAME_LENGTH,
    quick: Quick.queueConfigSet,
    payload: Quick.wireRef
  }),
  QueueConfigDelete: row({
    name: "QUEUE_CONFIG_DELETE",
    tag: 11,
    schema: QueueConfigDelete,
    maxLength: SMALL_FRAME_LENGTH,
    quick: Quick.queueConfigDelete,
    payload: Quick.wireRef
  }),
  MaintenanceModeSet: row({
    name: "MAINTENANCE_MODE_SET",
    tag: 40,
    schema: MaintenanceModeSet,
    maxLength: SMALL_FRAME_LENGTH,
    quick: Quick.maintenanceModeSet,
    payload: (frame: MaintenanceModeSet) => ({ enabled: frame.enabled })
  }),
  PopMaintenanceModeSet: row({
    name: "POP_MAINTENANCE_MODE_SET",
    tag: 41,
    schema: PopMaintenanceModeSet,
    maxLength: SMALL_FRAME_LENGTH,
    quick: Quick.popMaintenanceModeSet,
    payload: (frame: PopMaintenanceModeSet) => ({ enabled: frame.enabled })
  })
} as const

type Frames = typeof frames
type Row = Frames[keyof Frames]

/**
 * Every frame of the spec's table.
 *
 * @since 0.1.0
 * @category models
 */
export type Frame = { readonly [K in keyof Frames]: Schema.Schema.Type<Frames[K]["schema"]> }[keyof Frames]

/**
 * Frame tags, as the spec's table numbers them.
 *
 * @since 0.1.0
 * @category tags
 */
export const Tag: { readonly [K in keyof Frames as Frames[K]["name"]]: Frames[K]["tag"] } = {
  MESSAGE_AVAILABLE: frames.MessageAvailable.tag,
  MESSAGE_AVAILABLE_BATCH: frames.MessageAvailableBatch.tag,
  HEARTBEAT: frames.Heartbeat.tag,
  HELLO: frames.Hello.tag,
  HOTLIST_DIRTY_BATCH: frames.HotlistDirtyBatch.tag,
  QUEUE_CONFIG_SET: frames.QueueConfigSet.tag,
  QUEUE_CONFIG_DELETE: frames.QueueConfigDelete.tag,
  MAINTENANCE_MODE_SET: frames.MaintenanceModeSet.tag,
  POP_MAINTENANCE_MODE_SET: frames.PopMaintenanceModeSet.tag
}

/**
 * @since 0.1.0
 * @category tags
 */
export type Tag = Row["tag"]

const rows: ReadonlyArray<Row> = Object.values(frames)

/**
 * The tagged union of all frames as one Schema, for users who validate frames they build themselves.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Frame = Schema.Union(
  frames.MessageAvailable.schema,
  frames.MessageAvailableBatch.schema,
  frames.Heartbeat.schema,
  frames.Hello.schema,
  frames.HotlistDirtyBatch.schema,
  frames.QueueConfigSet.schema,
  frames.QueueConfigDelete.schema,
  frames.MaintenanceModeSet.schema,
  frames.PopMaintenanceModeSet.schema
)

// Fails to compile when a row is missing from the union above.
const _unionCoversTable = (frame: Frame): typeof Frame.Type => frame
void _unionCoversTable

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
export const tagOf = (frame: Frame): Tag => frames[frame._tag].tag

/**
 * The largest frame (tag byte plus payload) accepted with `tag`: small for single items, flags,
 * heartbeats and the HELLO; the 16 MiB cap only for the batch frames.
 *
 * @since 0.1.0
 * @category constants
 */
export const maxLengthOf = (tag: number): number => byTag[tag]?.maxLength ?? UNKNOWN_FRAME_LENGTH

const byTag: Array<Row | undefined> = []
for (const r of rows) byTag[r.tag] = r

/**
 * The spec's name of a tag (`MESSAGE_AVAILABLE`), or `tag <n>` for one this version does not know.
 *
 * @since 0.1.0
 * @category tags
 */
export const nameOf = (tag: number): string => byTag[tag]?.name ?? `tag ${tag}`

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
 * Normalises a tenant the way the wire does: `undefined`, `null` and `""` are absent; a UUID is
 * lowercased. Does not check the length (see {@link validItem}).
 *
 * @since 0.1.0
 * @category constructors
 */
export const tenantOf = (
  tenant: Option.Option<string> | string | null | undefined
): Option.Option<string> => {
  const given = typeof tenant === "object" && tenant !== null ? Option.getOrUndefined(tenant) : tenant
  if (given === undefined || given === null || given === "") return Option.none()
  return Option.some(Rules.isUuid(given) ? given.toLowerCase() : given)
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

/**
 * An item as a caller gave it, checked by the same rules the wire applies: the item, or why not.
 *
 * @since 0.1.0
 * @category constructors
 */
export const validItem = (input: QueueItemInput): Either.Either<QueueItem, string> => {
  const queue = Rules.queueName(input.queue)
  if (queue === undefined) return Either.left(Rules.describeName("queue", input.queue))
  if (typeof input.partition !== "string" || Rules.partition(input.partition) === undefined) {
    return Either.left(Rules.describeName("partition", input.partition))
  }
  const tenant = Rules.tenantInput(input.tenant)
  if (tenant === undefined) return Either.left(Rules.describeName("tenant", input.tenant))
  return Either.right({ queue, partition: input.partition, tenant })
}

/**
 * A queue reference as a caller gave it, checked by the wire's rules.
 *
 * @since 0.1.0
 * @category constructors
 */
export const validRef = (input: QueueRefInput): Either.Either<QueueRef, string> => {
  const queue = Rules.queueName(input.queue)
  if (queue === undefined) return Either.left(Rules.describeName("queue", input.queue))
  const tenant = Rules.tenantInput(input.tenant)
  if (tenant === undefined) return Either.left(Rules.describeName("tenant", input.tenant))
  return Either.right({ queue, tenant })
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const heartbeat = (serverId?: string): Heartbeat =>
  serverId === undefined ? Quick.heartbeatNoId : { _tag: "Heartbeat", server_id: Option.some(serverId) }

// ---------------------------------------------------------------------------------------------
// encoding
// ---------------------------------------------------------------------------------------------

/**
 * The JSON payload of a frame, or `undefined` for an empty payload (a heartbeat without server id).
 * Written by hand rather than through `Schema.encode` because it sits on the broadcast hot path; the
 * tests prove it agrees with the Schemas.
 *
 * @since 0.1.0
 * @category encoding
 */
export const payloadOf = (frame: Frame): object | undefined => {
  // The row for `frame._tag` takes exactly that frame; TypeScript cannot see through the union.
  const spec = frames[frame._tag] as { readonly payload: (frame: Frame) => object | undefined }
  return spec.payload(frame)
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
 * @example
 * ```ts
 * import { Either, Option } from "effect"
 * import { Frame } from "queen-mesh"
 *
 * const item = Frame.queueItem({ queue: "orders", partition: "p1" })
 * const bytes = Frame.encode({ _tag: "MessageAvailable", ...item })
 * // u32 BE length | u8 tag | JSON payload
 * assert.strictEqual(bytes[4], Frame.Tag.MESSAGE_AVAILABLE)
 *
 * const decoded = Frame.decodePayload(bytes[4]!, bytes.subarray(5))
 * assert.deepStrictEqual(
 *   decoded,
 *   Either.right({ _tag: "MessageAvailable", queue: "orders", partition: "p1", tenant: Option.none() })
 * )
 * ```
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

/** @internal */
export const schemaDecoders: ReadonlyArray<((json: unknown) => Either.Either<Frame, string>) | undefined> =
  (() => {
    const out: Array<((json: unknown) => Either.Either<Frame, string>) | undefined> = []
    for (const r of rows)
      out[r.tag] = schemaDecoder<Frame, unknown>(r.schema as Schema.Schema<Frame, unknown>)
    return out
  })()

/** @internal */
export const quickDecoders: ReadonlyArray<((json: unknown) => Frame | undefined) | undefined> = (() => {
  const out: Array<((json: unknown) => Frame | undefined) | undefined> = []
  for (const r of rows) out[r.tag] = r.quick
  return out
})()

const utf8 = new TextDecoder("utf-8")

/**
 * Decodes parsed JSON by its tag: the quick check first, then the Schema, which decides what the quick
 * check does not recognise and words the error. Never throws.
 *
 * @since 0.1.0
 * @category decoding
 */
export const decodeJson = (
  tag: number,
  json: unknown
): Either.Either<Frame | UnknownFrame, FrameDecodeError> => {
  const schema = schemaDecoders[tag]
  if (schema === undefined) return Either.right({ _tag: "Unknown", tag, payload: new Uint8Array(0) })
  try {
    const quick = quickDecoders[tag]!(json)
    if (quick !== undefined) return Either.right(quick)
    return Either.mapLeft(schema(json), (detail) => new FrameDecodeError({ tag, detail }))
  } catch {
    // Total on any input: whatever a peer sends is refused with a reason, never thrown.
    return Either.left(new FrameDecodeError({ tag, detail: "payload could not be checked" }))
  }
}

/**
 * Decodes one frame's payload by its tag. An unknown tag yields an `UnknownFrame`; a payload that fails
 * its Schema (or is not JSON) yields a `FrameDecodeError` the caller can count and skip. A heartbeat may
 * have an empty payload. Never throws, whatever the bytes.
 *
 * @since 0.1.0
 * @category decoding
 */
export const decodePayload = (
  tag: number,
  payload: Uint8Array
): Either.Either<Frame | UnknownFrame, FrameDecodeError> => {
  if (schemaDecoders[tag] === undefined) return Either.right({ _tag: "Unknown", tag, payload })
  if (payload.length === 0 && tag === Tag.HEARTBEAT) return Either.right(Quick.heartbeatNoId)
  let json: unknown
  try {
    json = JSON.parse(Buffer.isBuffer(payload) ? payload.toString("utf8") : utf8.decode(payload))
  } catch (error) {
    const detail = `not JSON: ${excerpt(error instanceof Error ? error.message : String(error))}`
    return Either.left(new FrameDecodeError({ tag, detail }))
  }
  return decodeJson(tag, json)
}
