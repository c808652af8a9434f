/**
 * The frames' payloads, each once (spec "The frame set"): the Schema of every payload and of every frame
 * (its payload's fields plus `_tag`), the types derived from them, and the JSON each is written as. The
 * Schemas are the authority on what a peer may send us; the naming rules they apply come from `names`.
 * The frame table (`frames`), the hot path's hand checks (`payloadChecks`) and the codec (`codec`) all
 * build on this module, which builds on nothing of theirs.
 *
 * @internal
 */
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as Names from "./names.js"

// ---------------------------------------------------------------------------------------------
// constants
// ---------------------------------------------------------------------------------------------

/**
 * The length prefix cap (spec "Framing"): larger prefixes are rejected before any buffer exists.
 */
export const MAX_FRAME_LENGTH = 16 * 1024 * 1024

/**
 * The cap of every frame that carries one item, a flag, a heartbeat or a HELLO: generous even for four
 * names of {@link MAX_NAME_CHARS} characters each JSON-escaped to twelve bytes a character. Only the
 * batch frames may be larger.
 */
export const SMALL_FRAME_LENGTH = 16 * 1024

/**
 * The cap of a frame whose tag this version does not know: skipped anyway, so never worth megabytes.
 */
export const UNKNOWN_FRAME_LENGTH = 64 * 1024

/**
 * Bytes before the tag byte: the u32 length prefix.
 */
export const LENGTH_PREFIX_BYTES = 4

/**
 * The cap of a CHALLENGE payload: the largest valid one (two 256-byte fields, every byte escaped to six
 * JSON characters) is below it.
 */
export const MAX_CHALLENGE_PAYLOAD_BYTES = 4096

// ---------------------------------------------------------------------------------------------
// writing
// ---------------------------------------------------------------------------------------------

interface WireItem {
  queue: string
  partition: string
  tenant?: string
}

/** An item as JSON: the tenant key only when there is a tenant (an absent one fans out). */
export const wireItem = (one: QueueItem): WireItem =>
  Option.isSome(one.tenant)
    ? { queue: one.queue, partition: one.partition, tenant: one.tenant.value }
    : { queue: one.queue, partition: one.partition }

/**
 * The JSON payload of `MESSAGE_AVAILABLE` straight from a checked item, written out key by key: the
 * same text as `JSON.stringify(wireItem(one))`, without building the object (the push hot path).
 */
export const messageAvailableJson = (one: QueueItem): string =>
  `{"queue":${JSON.stringify(one.queue)},"partition":${JSON.stringify(one.partition)}${
    Option.isSome(one.tenant) ? `,"tenant":${JSON.stringify(one.tenant.value)}}` : "}"
  }`

export const wireItems = (frame: { readonly items: ReadonlyArray<QueueItem> }): object => ({
  items: frame.items.map(wireItem)
})

/** A hot-list item as JSON: `group` only when the mark is scoped, as upstream writes it. */
export const wireHotItem = (one: HotItem): WireItem & { group?: string } =>
  Option.isSome(one.group) ? { ...wireItem(one), group: one.group.value } : wireItem(one)

export const wireHotItems = (frame: { readonly items: ReadonlyArray<HotItem> }): object => ({
  items: frame.items.map(wireHotItem)
})

export const wireRef = (one: QueueRef): { queue: string; tenant?: string } =>
  Option.isSome(one.tenant) ? { queue: one.queue, tenant: one.tenant.value } : { queue: one.queue }
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
 */
export const Tenant = Schema.optionalToRequired(Schema.Unknown, Schema.OptionFromSelf(Schema.String), {
  decode: (given) => Names.wireTenant(Option.getOrUndefined(given)),
  encode: (tenant) => tenant
})

/**
 * A queue name: non-empty, at most {@link MAX_NAME_CHARS} characters. A queue-carrying item without one reaches
 * no handler.
 */
export const QueueName = Schema.String.pipe(
  Schema.filter((s) => Names.queueName(s) !== undefined, {
    message: (issue) => Names.describeName("queue", issue.actual)
  })
)

/**
 * A partition: at most {@link MAX_NAME_CHARS} characters; missing or `null` is `""`, as upstream takes it.
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
 */
export const ServerId = Schema.String.pipe(
  Schema.filter((s) => Names.serverId(s) !== undefined, {
    message: (issue) => Names.describeName("server_id", issue.actual)
  })
)

/**
 * `{queue, partition, tenant}`: the item of `MESSAGE_AVAILABLE` and of both batch frames.
 */
export const QueueItem = Schema.Struct({ queue: QueueName, partition: Partition, tenant: Tenant })

export interface QueueItem extends Schema.Schema.Type<typeof QueueItem> {}

/**
 * `{queue, tenant}`: the target of the queue-config invalidations.
 */
export const QueueRef = Schema.Struct({ queue: QueueName, tenant: Tenant })

export interface QueueRef extends Schema.Schema.Type<typeof QueueRef> {}

/**
 * The consumer group of a hot-list item: present and non-empty, the mark is for that group's ring only
 * (a seek or a group-delete repair); absent, empty, not a string or over-long, it is for every ring of
 * the queue (the safe over-mark), as upstream reads it. Encoding omits an absent group.
 */
export const Group = Schema.optionalToRequired(Schema.Unknown, Schema.OptionFromSelf(Schema.String), {
  decode: (given) => Names.group(Option.getOrUndefined(given)),
  encode: (group) => group
})

/**
 * `{queue, partition, tenant, group?}`: the item of `HOTLIST_DIRTY_BATCH`.
 */
export const HotItem = Schema.Struct({ queue: QueueName, partition: Partition, tenant: Tenant, group: Group })

export interface HotItem extends Schema.Schema.Type<typeof HotItem> {}

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
 */
export const Items = itemsOf(QueueItem, wireItem)

/**
 * The items of `HOTLIST_DIRTY_BATCH`, lenient per item as {@link Items} is.
 */
export const HotItems = itemsOf(HotItem, wireHotItem)

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

/** A HELLO's fields as the handshake reads them: the v2 part decoded, upstream's fields as options. */
const HelloFields = Schema.Struct({
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
})

/**
 * `{server_id, nonce, mac}`, and for a v2 dialer `qm2_challenge`, `qm2_receiver`, `qm2_label`,
 * `qm2_mac` (all four or none): the HELLO payload, decoded to the `Hello` frame's fields. Its meaning
 * (the MACs, the ids) is judged by the handshake. Other fields (those later upstream revisions add)
 * are ignored.
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
  HelloFields,
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

export const helloWire = (hello: typeof HelloFields.Type) => {
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
 */
export const EphOp = Schema.Literal("reset", "delete", "config_set")

export type EphOp = typeof EphOp.Type

const EPH_OPS: ReadonlySet<string> = new Set(EphOp.literals)

/** Whether `op` is one of {@link EphOp}'s. */
export const isEphOp = (op: unknown): op is EphOp => typeof op === "string" && EPH_OPS.has(op)

/**
 * The tenant of `EPH_ADMIN`: a UUID, kept lowercased, and never absent. Upstream drops the frame
 * otherwise: a destructive verb is never broadened to every tenant holding the queue name.
 */
export const EphTenant = Schema.transform(
  Schema.String.pipe(Schema.filter((s) => Names.isUuid(s), { message: () => "tenant must be a UUID" })),
  Schema.String,
  { strict: true, decode: (tenant) => tenant.toLowerCase(), encode: (tenant) => tenant }
)

/**
 * The `EPH_ADMIN` payload (tag 20): `{op, tenant, queue}`, the queue its bare name.
 */
export const EphAdminPayload = Schema.Struct({ op: EphOp, tenant: EphTenant, queue: QueueName })

// ---------------------------------------------------------------------------------------------
// frames
// ---------------------------------------------------------------------------------------------

/**
 * One Schema per frame: the decoded side is the in-memory frame (payload fields plus `_tag`), the
 * encoded side is the JSON payload. Unknown extra fields are ignored on decode, so newer peers can add
 * fields.
 */
export const MessageAvailable = QueueItem.pipe(Schema.attachPropertySignature("_tag", "MessageAvailable"))
export const MessageAvailableBatch = Items.pipe(
  Schema.attachPropertySignature("_tag", "MessageAvailableBatch")
)
export const Heartbeat = HeartbeatPayload.pipe(Schema.attachPropertySignature("_tag", "Heartbeat"))
export const Hello = HelloPayload.pipe(Schema.attachPropertySignature("_tag", "Hello"))
export const Challenge = ChallengePayload.pipe(Schema.attachPropertySignature("_tag", "Challenge"))
export const HotlistDirtyBatch = HotItems.pipe(Schema.attachPropertySignature("_tag", "HotlistDirtyBatch"))
export const QueueConfigSet = QueueRef.pipe(Schema.attachPropertySignature("_tag", "QueueConfigSet"))
export const QueueConfigDelete = QueueRef.pipe(Schema.attachPropertySignature("_tag", "QueueConfigDelete"))
export const MaintenanceModeSet = Enabled.pipe(Schema.attachPropertySignature("_tag", "MaintenanceModeSet"))
export const PopMaintenanceModeSet = Enabled.pipe(
  Schema.attachPropertySignature("_tag", "PopMaintenanceModeSet")
)

export const EphAdmin = EphAdminPayload.pipe(Schema.attachPropertySignature("_tag", "EphAdmin"))

export type Challenge = typeof Challenge.Type
export type EphAdmin = typeof EphAdmin.Type
export type MessageAvailable = typeof MessageAvailable.Type
export type MessageAvailableBatch = typeof MessageAvailableBatch.Type
export type Heartbeat = typeof Heartbeat.Type
export type Hello = typeof Hello.Type
export type HotlistDirtyBatch = typeof HotlistDirtyBatch.Type
export type QueueConfigSet = typeof QueueConfigSet.Type
export type QueueConfigDelete = typeof QueueConfigDelete.Type
export type MaintenanceModeSet = typeof MaintenanceModeSet.Type
export type PopMaintenanceModeSet = typeof PopMaintenanceModeSet.Type
