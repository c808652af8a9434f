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
import type * as Model from "./internal/wire/frameModel.js"
import * as Names from "./internal/wire/names.js"
import * as PayloadChecks from "./internal/wire/payloadChecks.js"
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
 * The cap of every frame that carries one item, a flag, a heartbeat or a HELLO: generous even for four
 * names of {@link MAX_NAME_CHARS} characters each JSON-escaped to twelve bytes a character. Only the
 * batch frames may be larger.
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
 * The longest queue name, partition, tenant or consumer group accepted, in characters (code points),
 * any script: upstream stores them as `VARCHAR(255)`. Longer ones are refused and counted
 * (`frames_invalid`, or `items_invalid` inside a batch).
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_NAME_CHARS = Names.MAX_NAME_CHARS

/**
 * The most UTF-8 bytes a name of {@link MAX_NAME_CHARS} characters can take (four per character).
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_NAME_BYTES = Names.MAX_NAME_BYTES

/**
 * The longest server id accepted, in UTF-8 bytes.
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_SERVER_ID_BYTES = Names.MAX_SERVER_ID_BYTES

/**
 * Upstream Queen's default tenant, as it goes out on the wire for a queue of the default tenant.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_TENANT = Names.DEFAULT_TENANT

/**
 * The longest error detail built from wire data: a short excerpt, never the whole value.
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_DETAIL_LENGTH = Names.MAX_DETAIL_LENGTH

/**
 * Cuts a detail built from wire data to {@link MAX_DETAIL_LENGTH} characters.
 *
 * @since 0.1.0
 * @category decoding
 */
export const excerpt = Names.excerpt

/**
 * The cap of a CHALLENGE payload: the largest valid one (two 256-byte fields, every byte escaped to six
 * JSON characters) is below it.
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_CHALLENGE_PAYLOAD_BYTES = 4096

// ---------------------------------------------------------------------------------------------
// payload schemas
// ---------------------------------------------------------------------------------------------

/**
 * The tenant of a queue-carrying item. Absent, `null` and `""` all decode to `Option.none()`: an
 * absent tenant means a peer that predates tenant scoping and must fan out to every tenant, so it is
 * never turned into the default tenant (spec "The frame set"). So does a tenant that is not a string or
 * is over {@link MAX_NAME_CHARS} characters, as upstream reads it: the hint still reaches every tenant,
 * never none. A UUID is kept lowercased, since upstream compares UUID tenants case-insensitively; any
 * other string is kept as given (the mesh's `tenants` setting then decides). Encoding omits an absent
 * tenant.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Tenant = Schema.optionalToRequired(Schema.Unknown, Schema.OptionFromSelf(Schema.String), {
  decode: (given) => Names.wireTenant(Option.getOrUndefined(given)),
  encode: (tenant) => tenant
})

/**
 * A queue name: non-empty, at most {@link MAX_NAME_CHARS} characters. A queue-carrying item without one reaches
 * no handler.
 *
 * @since 0.1.0
 * @category schemas
 */
export const QueueName = Schema.String.pipe(
  Schema.filter((s) => Names.queueName(s) !== undefined, {
    message: (issue) => Names.describeName("queue", issue.actual)
  })
)

/**
 * A partition: at most {@link MAX_NAME_CHARS} characters; missing or `null` is `""`, as upstream takes it.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Partition = Schema.optionalWith(
  Schema.String.pipe(
    Schema.filter((s) => Names.partition(s) !== undefined, {
      message: () => `partition is longer than ${Names.MAX_NAME_CHARS} characters`
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
  Schema.filter((s) => Names.serverId(s) !== undefined, {
    message: (issue) => Names.describeName("server_id", issue.actual)
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
export interface QueueItem extends Model.QueueItem {}

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
export interface QueueRef extends Model.QueueRef {}

/**
 * The consumer group of a hot-list item: present and non-empty, the mark is for that group's ring only
 * (a seek or a group-delete repair); absent, empty, not a string or over-long, it is for every ring of
 * the queue (the safe over-mark), as upstream reads it. Encoding omits an absent group.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Group = Schema.optionalToRequired(Schema.Unknown, Schema.OptionFromSelf(Schema.String), {
  decode: (given) => Names.group(Option.getOrUndefined(given)),
  encode: (group) => group
})

/**
 * `{queue, partition, tenant, group?}`: the item of `HOTLIST_DIRTY_BATCH`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const HotItem = Schema.Struct({ queue: QueueName, partition: Partition, tenant: Tenant, group: Group })

/**
 * @since 0.1.0
 * @category models
 */
export interface HotItem extends Model.HotItem {}

/** `{items: [...]}` of `item`, lenient per item: the valid items kept, the others counted in `skipped`. */
const itemsOf = <A, I>(item: Schema.Schema<A, I>, wire: (item: A) => object) => {
  const decodeOption = Schema.decodeUnknownOption(item)
  return Schema.transform(
    Schema.Struct({ items: Schema.Array(Schema.Unknown) }),
    Schema.Struct({
      items: Schema.Array(Schema.typeSchema(item)),
      skipped: Schema.optionalWith(Schema.Number, { exact: true })
    }),
    {
      strict: true,
      decode: ({ items }) => {
        const valid: Array<A> = []
        for (const one of items) {
          const decoded = decodeOption(one)
          if (Option.isSome(decoded)) valid.push(decoded.value)
        }
        const skipped = items.length - valid.length
        return skipped === 0 ? { items: valid } : { items: valid, skipped }
      },
      encode: ({ items }) => ({ items: items.map(wire) })
    }
  )
}

/**
 * `{items: [...]}`, lenient per item: the valid items are kept, the others counted in `skipped`
 * (present only when some were). An envelope that is not an object with an `items` array is invalid.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Items = itemsOf(QueueItem, PayloadChecks.wireItem)

/**
 * The items of `HOTLIST_DIRTY_BATCH`, lenient per item as {@link Items} is.
 *
 * @since 0.1.0
 * @category schemas
 */
export const HotItems = itemsOf(HotItem, PayloadChecks.wireHotItem)

const checkedText = (problem: (text: string) => string | undefined) =>
  Schema.String.pipe(Schema.filter((text) => problem(text) ?? true))

/**
 * The v2 fields of a HELLO (a queen-mesh extension, docs/security.md): all four or
 * none. Their lengths are bounded and lone surrogates refused here; their values are judged by the
 * handshake.
 */
const HelloV2Wire = {
  qm2_challenge: Schema.optional(Schema.String.pipe(Schema.maxLength(64))),
  qm2_receiver: Schema.optional(
    checkedText((text) => Names.textProblem("qm2_receiver", text, Names.MAX_SERVER_ID_BYTES))
  ),
  qm2_label: Schema.optional(
    checkedText((text) => Names.textProblem("qm2_label", text, Names.MAX_LABEL_BYTES))
  ),
  qm2_mac: Schema.optional(Schema.String.pipe(Schema.maxLength(128))),
  qm2_key: Schema.optional(Schema.Unknown)
}

/**
 * `{server_id, nonce, mac}`, and for a v2 dialer `qm2_challenge`, `qm2_receiver`, `qm2_label`,
 * `qm2_mac` (all four or none): the HELLO payload, decoded to the `Hello` frame's fields. Its meaning
 * (the MACs, the ids) is judged by the handshake. Other fields (those later upstream revisions add)
 * are ignored.
 *
 * @since 0.1.0
 * @category schemas
 */
export const HelloPayload = Schema.transformOrFail(
  Schema.Struct({
    server_id: Schema.String,
    nonce: Schema.String,
    mac: Schema.String,
    ...HelloV2Wire,
    http_addr: Schema.optional(Schema.Unknown),
    eph_epoch: Schema.optional(Schema.Unknown)
  }),
  Schema.Struct({
    server_id: Schema.String,
    nonce: Schema.String,
    mac: Schema.String,
    http_addr: Schema.OptionFromSelf(Schema.String),
    eph_epoch: Schema.OptionFromSelf(Schema.String),
    key_id: Schema.OptionFromSelf(Schema.String),
    v2: Schema.OptionFromSelf(
      Schema.Struct({
        challenge: Schema.String,
        receiver: Schema.String,
        label: Schema.String,
        mac: Schema.String
      })
    )
  }),
  {
    strict: true,
    decode: (wire, _, ast) => {
      const { qm2_challenge, qm2_receiver, qm2_label, qm2_mac } = wire
      // Upstream's HELLO v2 fields: read as strings, anything else as absent (the peer is then not
      // ephemeral-capable, nothing worse).
      const base = {
        server_id: wire.server_id,
        nonce: wire.nonce,
        mac: wire.mac,
        http_addr: typeof wire.http_addr === "string" ? Option.some(wire.http_addr) : Option.none(),
        eph_epoch: typeof wire.eph_epoch === "string" ? Option.some(wire.eph_epoch) : Option.none(),
        // Our key id: a short string, anything else as absent (every installed key is then tried).
        key_id:
          typeof wire.qm2_key === "string" && wire.qm2_key.length <= 64
            ? Option.some(wire.qm2_key)
            : Option.none()
      }
      if (
        qm2_challenge === undefined &&
        qm2_receiver === undefined &&
        qm2_label === undefined &&
        qm2_mac === undefined
      ) {
        return ParseResult.succeed({ ...base, v2: Option.none() })
      }
      if (
        qm2_challenge === undefined ||
        qm2_receiver === undefined ||
        qm2_label === undefined ||
        qm2_mac === undefined
      ) {
        return ParseResult.fail(new ParseResult.Type(ast, wire, "the v2 fields come all four or none"))
      }
      return ParseResult.succeed({
        ...base,
        v2: Option.some({ challenge: qm2_challenge, receiver: qm2_receiver, label: qm2_label, mac: qm2_mac })
      })
    },
    encode: (hello) => ParseResult.succeed(helloWire(hello))
  }
)

const helloWire = (hello: Omit<Model.Hello, "_tag">) => {
  const legacy = { server_id: hello.server_id, nonce: hello.nonce, mac: hello.mac }
  const upstream = {
    ...(Option.isSome(hello.http_addr) ? { http_addr: hello.http_addr.value } : {}),
    ...(Option.isSome(hello.eph_epoch) ? { eph_epoch: hello.eph_epoch.value } : {})
  }
  return Option.match(hello.v2, {
    onNone: () => ({ ...legacy, ...upstream }),
    onSome: (v2) => ({
      ...legacy,
      ...upstream,
      qm2_challenge: v2.challenge,
      qm2_receiver: v2.receiver,
      qm2_label: v2.label,
      qm2_mac: v2.mac,
      ...(Option.isSome(hello.key_id) ? { qm2_key: hello.key_id.value } : {})
    })
  })
}

/**
 * The CHALLENGE payload (tag 60, a queen-mesh extension): `{server_id, nonce, label?}`, what a v2
 * listener writes on accept. The server id is non-empty and at most 256 UTF-8 bytes, the nonce 32
 * lowercase hex characters, the label (absent or `null` read as `""`) at most 256 bytes; no lone
 * surrogates. An empty label is left out on the wire.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ChallengePayload = Schema.Struct({
  server_id: checkedText((text) => Names.idProblem("server_id", text)),
  nonce: checkedText((text) => Names.nonceProblem("nonce", text)),
  label: Schema.optionalToRequired(
    Schema.NullOr(checkedText((text) => Names.textProblem("label", text, Names.MAX_LABEL_BYTES))),
    Schema.String,
    {
      decode: (label) => Option.getOrElse(Option.flatMap(label, Option.fromNullable), () => ""),
      encode: (label) => (label === "" ? Option.none() : Option.some(label))
    }
  )
})

const HeartbeatPayload = Schema.Struct({
  server_id: Schema.optionalWith(Schema.String, { as: "Option", nullable: true })
})

const Enabled = Schema.Struct({ enabled: Schema.Boolean })

/**
 * The operations of `EPH_ADMIN`: upstream's ephemeral-queue admin verbs.
 *
 * @since 0.1.0
 * @category schemas
 */
export const EphOp = Schema.Literal("reset", "delete", "config_set")

/**
 * @since 0.1.0
 * @category models
 */
export type EphOp = typeof EphOp.Type

/**
 * The tenant of `EPH_ADMIN`: a UUID, kept lowercased, and never absent. Upstream drops the frame
 * otherwise: a destructive verb is never broadened to every tenant holding the queue name.
 *
 * @since 0.1.0
 * @category schemas
 */
export const EphTenant = Schema.transform(
  Schema.String.pipe(Schema.filter((s) => Names.isUuid(s), { message: () => "tenant must be a UUID" })),
  Schema.String,
  { strict: true, decode: (tenant) => tenant.toLowerCase(), encode: (tenant) => tenant }
)

/**
 * The `EPH_ADMIN` payload (tag 20): `{op, tenant, queue}`, the queue its bare name.
 *
 * @since 0.1.0
 * @category schemas
 */
export const EphAdminPayload = Schema.Struct({ op: EphOp, tenant: EphTenant, queue: QueueName })

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
export const Challenge = ChallengePayload.pipe(Schema.attachPropertySignature("_tag", "Challenge"))
/**
 * @since 0.1.0
 * @category schemas
 */
export const HotlistDirtyBatch = HotItems.pipe(Schema.attachPropertySignature("_tag", "HotlistDirtyBatch"))
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
 * @category schemas
 */
export const EphAdmin = EphAdminPayload.pipe(Schema.attachPropertySignature("_tag", "EphAdmin"))

/**
 * @since 0.1.0
 * @category models
 */
export type Challenge = typeof Challenge.Type
/**
 * @since 0.1.0
 * @category models
 */
export type EphAdmin = typeof EphAdmin.Type
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
 * One row of the frame set: what the spec's table says of a frame, plus the Schema of its payload and
 * the largest frame accepted with its tag. Adding a frame is adding a row (and its Schema).
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
}

/** A row as this module keeps it: with its hand-written payload check and encoder (the hot paths). */
interface Row<Name extends string, T extends number, A extends { readonly _tag: string }, I>
  extends FrameSpec<Name, T, A, I> {
  /** Accepts exactly what `schema` accepts, or says `undefined` to let the Schema decide and word it. */
  readonly quick: ((json: unknown) => A | undefined) | undefined
  /** The JSON payload, or `undefined` for an empty one. */
  readonly payload: (frame: A) => object | undefined
}

const row = <const Name extends string, const T extends number, A extends { readonly _tag: string }, I>(
  spec: Row<Name, T, A, I>
) => spec

const table = {
  MessageAvailable: row({
    name: "MESSAGE_AVAILABLE",
    tag: 1,
    schema: MessageAvailable,
    maxLength: SMALL_FRAME_LENGTH,
    quick: PayloadChecks.messageAvailable,
    payload: PayloadChecks.wireItem
  }),
  MessageAvailableBatch: row({
    name: "MESSAGE_AVAILABLE_BATCH",
    tag: 2,
    schema: MessageAvailableBatch,
    maxLength: MAX_FRAME_LENGTH,
    quick: PayloadChecks.messageAvailableBatch,
    payload: PayloadChecks.wireItems
  }),
  Heartbeat: row({
    name: "HEARTBEAT",
    tag: 3,
    schema: Heartbeat,
    maxLength: SMALL_FRAME_LENGTH,
    quick: PayloadChecks.heartbeat,
    payload: (frame: Heartbeat) =>
      Option.isSome(frame.server_id) ? { server_id: frame.server_id.value } : undefined
  }),
  Hello: row({
    name: "HELLO",
    tag: 4,
    schema: Hello,
    maxLength: SMALL_FRAME_LENGTH,
    // Once per connection: the Schema alone.
    quick: undefined,
    payload: helloWire
  }),
  HotlistDirtyBatch: row({
    name: "HOTLIST_DIRTY_BATCH",
    tag: 5,
    schema: HotlistDirtyBatch,
    maxLength: MAX_FRAME_LENGTH,
    quick: PayloadChecks.hotlistDirtyBatch,
    payload: PayloadChecks.wireHotItems
  }),
  EphAdmin: row({
    name: "EPH_ADMIN",
    tag: 20,
    schema: EphAdmin,
    maxLength: SMALL_FRAME_LENGTH,
    quick: PayloadChecks.ephAdmin,
    payload: (frame: EphAdmin) => ({ op: frame.op, tenant: frame.tenant, queue: frame.queue })
  }),
  QueueConfigSet: row({
    name: "QUEUE_CONFIG_SET",
    tag: 10,
    schema: QueueConfigSet,
    maxLength: SMALL_FRAME_LENGTH,
    quick: PayloadChecks.queueConfigSet,
    payload: PayloadChecks.wireRef
  }),
  QueueConfigDelete: row({
    name: "QUEUE_CONFIG_DELETE",
    tag: 11,
    schema: QueueConfigDelete,
    maxLength: SMALL_FRAME_LENGTH,
    quick: PayloadChecks.queueConfigDelete,
    payload: PayloadChecks.wireRef
  }),
  MaintenanceModeSet: row({
    name: "MAINTENANCE_MODE_SET",
    tag: 40,
    schema: MaintenanceModeSet,
    maxLength: SMALL_FRAME_LENGTH,
    quick: PayloadChecks.maintenanceModeSet,
    payload: (frame: MaintenanceModeSet) => ({ enabled: frame.enabled })
  }),
  PopMaintenanceModeSet: row({
    name: "POP_MAINTENANCE_MODE_SET",
    tag: 41,
    schema: PopMaintenanceModeSet,
    maxLength: SMALL_FRAME_LENGTH,
    quick: PayloadChecks.popMaintenanceModeSet,
    payload: (frame: PopMaintenanceModeSet) => ({ enabled: frame.enabled })
  }),
  Challenge: row({
    name: "CHALLENGE",
    tag: 60,
    schema: Challenge,
    maxLength: 1 + MAX_CHALLENGE_PAYLOAD_BYTES,
    // Read once per dial, by a v2 dialer: the Schema alone.
    quick: undefined,
    payload: (frame: Challenge) =>
      frame.label === ""
        ? { server_id: frame.server_id, nonce: frame.nonce }
        : { server_id: frame.server_id, nonce: frame.nonce, label: frame.label }
  })
} as const

type Table = typeof table
type AnyRow = Table[keyof Table]

/**
 * The frame set, by in-memory tag: the one table from which {@link Tag}, the {@link Frame} union,
 * {@link tagOf}, the per-tag caps and the decoders are derived. Tags 1-5, 10, 11, 40 and 41 are the
 * spec's; 20 (`EPH_ADMIN`) is upstream's later ephemeral-queue admin frame; 60 (`CHALLENGE`) is
 * queen-mesh's v2 handshake, a tag upstream does not use.
 *
 * @since 0.1.0
 * @category tags
 */
export const frames: {
  readonly [K in keyof Table]: FrameSpec<
    Table[K]["name"],
    Table[K]["tag"],
    Schema.Schema.Type<Table[K]["schema"]>,
    Schema.Schema.Encoded<Table[K]["schema"]>
  >
} = table

/**
 * Every frame of the table.
 *
 * @since 0.1.0
 * @category models
 */
export type Frame = { readonly [K in keyof Table]: Schema.Schema.Type<Table[K]["schema"]> }[keyof Table]

/**
 * Frame tags, as the spec's table numbers them (and `CHALLENGE`, ours).
 *
 * @since 0.1.0
 * @category tags
 */
export const Tag: { readonly [K in keyof Table as Table[K]["name"]]: Table[K]["tag"] } = {
  MESSAGE_AVAILABLE: table.MessageAvailable.tag,
  MESSAGE_AVAILABLE_BATCH: table.MessageAvailableBatch.tag,
  HEARTBEAT: table.Heartbeat.tag,
  HELLO: table.Hello.tag,
  HOTLIST_DIRTY_BATCH: table.HotlistDirtyBatch.tag,
  EPH_ADMIN: table.EphAdmin.tag,
  QUEUE_CONFIG_SET: table.QueueConfigSet.tag,
  QUEUE_CONFIG_DELETE: table.QueueConfigDelete.tag,
  MAINTENANCE_MODE_SET: table.MaintenanceModeSet.tag,
  POP_MAINTENANCE_MODE_SET: table.PopMaintenanceModeSet.tag,
  CHALLENGE: table.Challenge.tag
}

/**
 * @since 0.1.0
 * @category tags
 */
export type Tag = AnyRow["tag"]

const rows: ReadonlyArray<AnyRow> = Object.values(table)

/**
 * The tagged union of all frames as one Schema, for users who validate frames they build themselves.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Frame = Schema.Union(
  table.MessageAvailable.schema,
  table.MessageAvailableBatch.schema,
  table.Heartbeat.schema,
  table.Hello.schema,
  table.HotlistDirtyBatch.schema,
  table.EphAdmin.schema,
  table.QueueConfigSet.schema,
  table.QueueConfigDelete.schema,
  table.MaintenanceModeSet.schema,
  table.PopMaintenanceModeSet.schema,
  table.Challenge.schema
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
export const tagOf = (frame: Frame): Tag => table[frame._tag].tag

/**
 * The largest frame (tag byte plus payload) accepted with `tag`: small for single items, flags,
 * heartbeats and the HELLO; the 16 MiB cap only for the batch frames.
 *
 * @since 0.1.0
 * @category constants
 */
export const maxLengthOf = (tag: number): number => byTag[tag]?.maxLength ?? UNKNOWN_FRAME_LENGTH

const byTag: Array<AnyRow | undefined> = []
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
  return Option.some(Names.isUuid(given) ? given.toLowerCase() : given)
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
 * Input for a hot-list item: a queue item, and the consumer group whose ring it marks (left out,
 * `null` or `""`: every ring of the queue).
 *
 * @since 0.1.0
 * @category constructors
 */
export interface HotItemInput extends QueueItemInput {
  readonly group?: Option.Option<string> | string | null | undefined
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const hotItem = (input: HotItemInput): HotItem => ({
  ...queueItem(input),
  group: groupInput(input.group)
})

const groupInput = (group: HotItemInput["group"]): Option.Option<string> => {
  const given = typeof group === "object" && group !== null ? Option.getOrUndefined(group) : group
  return given === undefined || given === null || given === "" ? Option.none() : Option.some(given)
}

/**
 * Which tenants a caller may name: `"any"` string, or (`"uuid"`, upstream's rule) a UUID only, since
 * upstream reads any other tenant as absent and wakes every tenant holding the queue name.
 *
 * @since 0.1.0
 * @category constructors
 */
export type TenantRule = "uuid" | "any"

const tenantProblem = (input: QueueRefInput, tenants: TenantRule): string | Option.Option<string> => {
  const tenant = Names.tenantInput(input.tenant)
  if (tenant === undefined) return Names.describeName("tenant", input.tenant)
  if (tenants === "uuid" && Option.isSome(tenant) && !Names.isUuid(tenant.value)) {
    return `tenant ${JSON.stringify(tenant.value)} is not a UUID (the mesh's tenants setting is "uuid": upstream reads any other tenant as absent and would wake every tenant's queue of that name)`
  }
  return tenant
}

/**
 * An item as a caller gave it, checked by the same rules the wire applies: the item, or why not.
 * With `tenants: "uuid"` a tenant must be a UUID.
 *
 * @since 0.1.0
 * @category constructors
 */
export const validItem = (
  input: QueueItemInput,
  tenants: TenantRule = "any"
): Either.Either<QueueItem, string> => {
  const queue = Names.queueName(input.queue)
  if (queue === undefined) return Either.left(Names.describeName("queue", input.queue))
  if (typeof input.partition !== "string" || Names.partition(input.partition) === undefined) {
    return Either.left(Names.describeName("partition", input.partition))
  }
  const tenant = tenantProblem(input, tenants)
  if (typeof tenant === "string") return Either.left(tenant)
  return Either.right({ queue, partition: input.partition, tenant })
}

/**
 * A hot-list item as a caller gave it, checked by the wire's rules: an empty group is absent, a group
 * that is not a string or is over-long is refused.
 *
 * @since 0.1.0
 * @category constructors
 */
export const validHotItem = (
  input: HotItemInput,
  tenants: TenantRule = "any"
): Either.Either<HotItem, string> =>
  Either.flatMap(validItem(input, tenants), (item) => {
    const given =
      typeof input.group === "object" && input.group !== null
        ? Option.getOrUndefined(input.group)
        : input.group
    if (given === undefined || given === null || given === "")
      return Either.right({ ...item, group: Option.none() })
    if (typeof given !== "string" || !Names.fitsName(given)) {
      return Either.left(Names.describeName("group", given))
    }
    return Either.right({ ...item, group: Option.some(given) })
  })

/**
 * A queue reference as a caller gave it, checked by the wire's rules.
 *
 * @since 0.1.0
 * @category constructors
 */
export const validRef = (
  input: QueueRefInput,
  tenants: TenantRule = "any"
): Either.Either<QueueRef, string> => {
  const queue = Names.queueName(input.queue)
  if (queue === undefined) return Either.left(Names.describeName("queue", input.queue))
  const tenant = tenantProblem(input, tenants)
  if (typeof tenant === "string") return Either.left(tenant)
  return Either.right({ queue, tenant })
}

/**
 * An `EPH_ADMIN` verb as a caller gave it, checked by upstream's rules: a known op, a queue name, and
 * a tenant that is a UUID (always: a destructive verb is never broadened to every tenant).
 *
 * @since 0.1.0
 * @category constructors
 */
export const validEphAdmin = (input: {
  readonly op: string
  readonly tenant: string
  readonly queue: string
}): Either.Either<EphAdmin, string> => {
  const frame = PayloadChecks.ephAdmin(input)
  if (frame !== undefined) return Either.right(frame)
  if (input.op !== "reset" && input.op !== "delete" && input.op !== "config_set") {
    return Either.left(`op must be reset, delete or config_set, got ${JSON.stringify(input.op)}`)
  }
  if (Names.queueName(input.queue) === undefined) return Either.left(Names.describeName("queue", input.queue))
  return Either.left(`tenant must be a UUID, got ${JSON.stringify(input.tenant)}`)
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const heartbeat = (serverId?: string): Heartbeat =>
  serverId === undefined
    ? PayloadChecks.heartbeatNoId
    : { _tag: "Heartbeat", server_id: Option.some(serverId) }

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
  const spec = table[frame._tag] as { readonly payload: (frame: Frame) => object | undefined }
  return spec.payload(frame)
}

/**
 * `u32 BE length | u8 tag | JSON` (spec "Framing"): the one way bytes of a frame are laid out, for
 * every encoder of the mesh. `json` is the payload's text (`""` for an empty payload); the caller
 * keeps the length within the cap.
 *
 * @since 0.1.0
 * @category encoding
 */
export const frameBytes = (tag: number, json: string): Uint8Array => {
  const payloadBytes = json === "" ? 0 : Buffer.byteLength(json, "utf8")
  const out = Buffer.allocUnsafe(LENGTH_PREFIX_BYTES + 1 + payloadBytes)
  out.writeUInt32BE(1 + payloadBytes, 0)
  out[LENGTH_PREFIX_BYTES] = tag
  if (payloadBytes > 0) out.write(json, LENGTH_PREFIX_BYTES + 1, "utf8")
  return out
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
  const length = 1 + Buffer.byteLength(json, "utf8")
  if (length > MAX_FRAME_LENGTH) return Either.left(new FrameTooLargeError({ length }))
  return Either.right(frameBytes(tagOf(frame), json))
}

/**
 * The bytes of a `MESSAGE_AVAILABLE` for an item already checked ({@link validItem}), without building
 * the frame value first: the push hot path. Names are bounded, so the frame is far below its cap. The
 * same bytes as {@link encode} (the tests prove it).
 *
 * @since 0.1.0
 * @category encoding
 */
export const encodeMessageAvailable = (item: QueueItem): Uint8Array =>
  frameBytes(table.MessageAvailable.tag, PayloadChecks.messageAvailableJson(item))

/**
 * Encodes a frame as `u32 BE length | u8 tag | JSON`. Every frame but an oversized batch fits the cap;
 * for batches built from untrusted sizes use {@link encodeEither}, which reports the overflow.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, strictEqual } from "node:assert"
 * import { Either, Option } from "effect"
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

const schemaDecoders: ReadonlyArray<((json: unknown) => Either.Either<Frame, string>) | undefined> = (() => {
  const out: Array<((json: unknown) => Either.Either<Frame, string>) | undefined> = []
  for (const r of rows) out[r.tag] = schemaDecoder<Frame, unknown>(r.schema as Schema.Schema<Frame, unknown>)
  return out
})()

const quickDecoders: ReadonlyArray<((json: unknown) => Frame | undefined) | undefined> = (() => {
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
    const quick = quickDecoders[tag]?.(json)
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
  if (payload.length === 0 && tag === Tag.HEARTBEAT) return Either.right(PayloadChecks.heartbeatNoId)
  let json: unknown
  try {
    json = JSON.parse(Buffer.isBuffer(payload) ? payload.toString("utf8") : utf8.decode(payload))
  } catch (error) {
    const detail = `not JSON: ${excerpt(error instanceof Error ? error.message : String(error))}`
    return Either.left(new FrameDecodeError({ tag, detail }))
  }
  return decodeJson(tag, json)
}
