/**
 * The frames' payloads, each once (spec "The frame set"): the Schema of every payload and of every frame
 * (its payload's fields plus `_tag`), the types derived from them, and the JSON each is written as. The
 * Schemas are the authority on what a peer may send us; the naming rules they apply come from `names`.
 * The frame table (`frames`), the hot path's hand checks (`payloadChecks`) and the codec (`codec`) all
 * build on this module, which builds on nothing of theirs.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as SchemaGetter from "effect/SchemaGetter"
import * as SchemaIssue from "effect/SchemaIssue"
import * as SchemaTransformation from "effect/SchemaTransformation"
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
 * The `_tag` of a frame: added on decode whatever the payload carries under that key (absent, or a
 * peer's stray field), and left out on encode, since the tag byte says it on the wire.
 */
const frameTag = <const Tag extends string>(tag: Tag) =>
  Schema.optionalKey(Schema.Unknown).pipe(
    Schema.decodeTo(Schema.Literal(tag), {
      decode: SchemaGetter.transformOptional(() => Option.some(tag)),
      encode: SchemaGetter.omit()
    })
  )

/**
 * The tenant of a queue-carrying item. Absent, `null` and `""` all decode to `Option.none()`: an
 * absent tenant means a peer that predates tenant scoping and must fan out to every tenant, so it is
 * never turned into the default tenant (spec "The frame set"). So does a tenant that is not a string or
 * is over {@link MAX_NAME_CHARS} characters, as upstream reads it: the hint still reaches every tenant,
 * never none. A UUID is kept lowercased, since upstream compares UUID tenants case-insensitively; any
 * other string is kept as given (the mesh's `tenants` setting then decides). Encoding omits an absent
 * tenant.
 */
export const Tenant = Schema.optionalKey(Schema.Unknown).pipe(
  Schema.decodeTo(Schema.Option(Schema.String), {
    decode: SchemaGetter.transformOptional((given) =>
      Option.some(Names.wireTenant(Option.getOrUndefined(given)))
    ),
    encode: SchemaGetter.transformOptional(Option.flatten)
  })
)

/**
 * A queue name: non-empty, at most {@link MAX_NAME_CHARS} characters. A queue-carrying item without one reaches
 * no handler.
 */
export const QueueName = Schema.String.check(
  Schema.makeFilter((s: string) => Names.queueName(s) !== undefined || Names.describeName("queue", s))
)

const PartitionText = Schema.String.check(
  Schema.makeFilter(
    (s: string) =>
      Names.partition(s) !== undefined || `partition is longer than ${Names.MAX_NAME_CHARS} characters`
  )
)

/**
 * A partition: at most {@link MAX_NAME_CHARS} characters; missing or `null` is `""`, as upstream takes it.
 */
export const Partition = Schema.optional(Schema.NullOr(PartitionText)).pipe(
  Schema.decodeTo(Schema.String, {
    decode: SchemaGetter.transformOptional((given) =>
      Option.some(Option.getOrElse(Option.flatMap(given, Option.fromNullishOr), () => ""))
    ),
    encode: SchemaGetter.passthroughSubtype()
  })
)

/**
 * A server id: non-empty, at most {@link MAX_SERVER_ID_BYTES}.
 */
export const ServerId = Schema.String.check(
  Schema.makeFilter((s: string) => Names.serverId(s) !== undefined || Names.describeName("server_id", s))
)

const queueItemFields = { queue: QueueName, partition: Partition, tenant: Tenant }

/**
 * `{queue, partition, tenant}`: the item of `MESSAGE_AVAILABLE` and of both batch frames.
 */
export const QueueItem = Schema.Struct(queueItemFields)

type QueueItemType = typeof QueueItem.Type
export interface QueueItem extends QueueItemType {}

const queueRefFields = { queue: QueueName, tenant: Tenant }

/**
 * `{queue, tenant}`: the target of the queue-config invalidations.
 */
export const QueueRef = Schema.Struct(queueRefFields)

type QueueRefType = typeof QueueRef.Type
export interface QueueRef extends QueueRefType {}

/**
 * The consumer group of a hot-list item: present and non-empty, the mark is for that group's ring only
 * (a seek or a group-delete repair); absent, empty, not a string or over-long, it is for every ring of
 * the queue (the safe over-mark), as upstream reads it. Encoding omits an absent group.
 */
export const Group = Schema.optionalKey(Schema.Unknown).pipe(
  Schema.decodeTo(Schema.Option(Schema.String), {
    decode: SchemaGetter.transformOptional((given) => Option.some(Names.group(Option.getOrUndefined(given)))),
    encode: SchemaGetter.transformOptional(Option.flatten)
  })
)

/**
 * `{queue, partition, tenant, group?}`: the item of `HOTLIST_DIRTY_BATCH`.
 */
export const HotItem = Schema.Struct({ ...queueItemFields, group: Group })

type HotItemType = typeof HotItem.Type
export interface HotItem extends HotItemType {}

/**
 * The frame `{items: [...]}` of `item`, lenient per item: the valid items kept, the others counted in
 * `skipped` (present only when some were). An envelope that is not an object with an `items` array is
 * invalid.
 */
const itemsOf = <const Tag extends string, S extends Schema.Codec<Schema.Top["Type"], unknown>>(
  tag: Tag,
  item: S,
  wire: (item: S["Type"]) => object
) => {
  const decodeOption = Schema.decodeUnknownOption(item)
  return Schema.Struct({ _tag: frameTag(tag), items: Schema.Array(Schema.Unknown) }).pipe(
    Schema.decodeTo(
      Schema.Struct({
        _tag: Schema.Literal(tag),
        items: Schema.Array(Schema.toType(item)),
        skipped: Schema.optionalKey(Schema.Number)
      }),
      SchemaTransformation.transform({
        decode: ({
          _tag,
          items
        }): { readonly _tag: Tag; readonly items: ReadonlyArray<S["Type"]>; readonly skipped?: number } => {
          const valid: Array<S["Type"]> = []
          for (const one of items) {
            const decoded = decodeOption(one)
            if (Option.isSome(decoded)) valid.push(decoded.value)
          }
          const skipped = items.length - valid.length
          return skipped === 0 ? { _tag, items: valid } : { _tag, items: valid, skipped }
        },
        encode: ({ _tag, items }) => ({ _tag, items: items.map(wire) })
      })
    )
  )
}

const checkedText = (problem: (text: string) => string | undefined) =>
  Schema.String.check(Schema.makeFilter((text: string) => problem(text) ?? true))

/**
 * The v2 fields of a HELLO (a queen-mesh extension, docs/security.md): all four or
 * none. Their lengths are bounded and lone surrogates refused here; their values are judged by the
 * handshake.
 */
const HelloV2Wire = {
  qm2_challenge: Schema.optional(Schema.String.check(Schema.isMaxLength(64))),
  qm2_receiver: Schema.optional(
    checkedText((text) => Names.textProblem("qm2_receiver", text, Names.MAX_SERVER_ID_BYTES))
  ),
  qm2_label: Schema.optional(
    checkedText((text) => Names.textProblem("qm2_label", text, Names.MAX_LABEL_BYTES))
  ),
  qm2_mac: Schema.optional(Schema.String.check(Schema.isMaxLength(128))),
  qm2_key: Schema.optional(Schema.Unknown)
}

/** A HELLO's fields as the handshake reads them: the v2 part decoded, upstream's fields as options. */
const HelloFields = Schema.Struct({
  _tag: Schema.Literal("Hello"),
  server_id: Schema.String,
  nonce: Schema.String,
  mac: Schema.String,
  http_addr: Schema.Option(Schema.String),
  eph_epoch: Schema.Option(Schema.String),
  key_id: Schema.Option(Schema.String),
  v2: Schema.Option(
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
 * `qm2_mac` (all four or none): the HELLO payload, decoded to the `Hello` frame. Its meaning (the
 * MACs, the ids) is judged by the handshake. Other fields (those later upstream revisions add) are
 * ignored.
 */
export const Hello = Schema.Struct({
  _tag: frameTag("Hello"),
  server_id: Schema.String,
  nonce: Schema.String,
  mac: Schema.String,
  ...HelloV2Wire,
  http_addr: Schema.optional(Schema.Unknown),
  eph_epoch: Schema.optional(Schema.Unknown)
}).pipe(
  Schema.decodeTo(HelloFields, {
    decode: SchemaGetter.transformEffect((wire) => {
      const { qm2_challenge, qm2_receiver, qm2_label, qm2_mac } = wire
      // Upstream's HELLO v2 fields: read as strings, anything else as absent (the peer is then not
      // ephemeral-capable, nothing worse).
      const base = {
        _tag: wire._tag,
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
        return Effect.succeed({ ...base, v2: Option.none() })
      }
      if (
        qm2_challenge === undefined ||
        qm2_receiver === undefined ||
        qm2_label === undefined ||
        qm2_mac === undefined
      ) {
        return Effect.fail(new SchemaIssue.InvalidValue({ message: "the v2 fields come all four or none" }))
      }
      return Effect.succeed({
        ...base,
        v2: Option.some({ challenge: qm2_challenge, receiver: qm2_receiver, label: qm2_label, mac: qm2_mac })
      })
    }),
    encode: SchemaGetter.transform((hello) => ({ _tag: hello._tag, ...helloWire(hello) }))
  })
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
const challengeFields = {
  server_id: checkedText((text) => Names.idProblem("server_id", text)),
  nonce: checkedText((text) => Names.nonceProblem("nonce", text)),
  label: Schema.optionalKey(
    Schema.NullOr(checkedText((text) => Names.textProblem("label", text, Names.MAX_LABEL_BYTES)))
  ).pipe(
    Schema.decodeTo(Schema.String, {
      decode: SchemaGetter.transformOptional((label) =>
        Option.some(Option.getOrElse(Option.flatMap(label, Option.fromNullishOr), () => ""))
      ),
      encode: SchemaGetter.transformOptional(Option.filter((label: string) => label !== ""))
    })
  )
}

const heartbeatFields = { server_id: Schema.OptionFromOptionalNullOr(Schema.String) }

const enabledFields = { enabled: Schema.Boolean }

/**
 * The operations of `EPH_ADMIN`: upstream's ephemeral-queue admin verbs.
 */
export const EphOp = Schema.Literals(["reset", "delete", "config_set"])

export type EphOp = typeof EphOp.Type

const EPH_OPS: ReadonlySet<string> = new Set(EphOp.literals)

/** Whether `op` is one of {@link EphOp}'s. */
export const isEphOp = (op: unknown): op is EphOp => typeof op === "string" && EPH_OPS.has(op)

/**
 * The tenant of `EPH_ADMIN`: a UUID, kept lowercased, and never absent. Upstream drops the frame
 * otherwise: a destructive verb is never broadened to every tenant holding the queue name.
 */
export const EphTenant = Schema.String.check(
  Schema.makeFilter((s: string) => Names.isUuid(s) || "tenant must be a UUID")
).pipe(
  Schema.decodeTo(
    Schema.String,
    SchemaTransformation.transform({ decode: (tenant) => tenant.toLowerCase(), encode: (tenant) => tenant })
  )
)

const ephAdminFields = { op: EphOp, tenant: EphTenant, queue: QueueName }

// ---------------------------------------------------------------------------------------------
// frames
// ---------------------------------------------------------------------------------------------

/**
 * One Schema per frame: the decoded side is the in-memory frame (payload fields plus `_tag`), the
 * encoded side is the JSON payload. Unknown extra fields are ignored on decode, so newer peers can add
 * fields.
 */
export const MessageAvailable = Schema.Struct({ _tag: frameTag("MessageAvailable"), ...queueItemFields })
export const MessageAvailableBatch = itemsOf("MessageAvailableBatch", QueueItem, wireItem)
export const Heartbeat = Schema.Struct({ _tag: frameTag("Heartbeat"), ...heartbeatFields })
export const Challenge = Schema.Struct({ _tag: frameTag("Challenge"), ...challengeFields })
export const HotlistDirtyBatch = itemsOf("HotlistDirtyBatch", HotItem, wireHotItem)
export const QueueConfigSet = Schema.Struct({ _tag: frameTag("QueueConfigSet"), ...queueRefFields })
export const QueueConfigDelete = Schema.Struct({ _tag: frameTag("QueueConfigDelete"), ...queueRefFields })
export const MaintenanceModeSet = Schema.Struct({ _tag: frameTag("MaintenanceModeSet"), ...enabledFields })
export const PopMaintenanceModeSet = Schema.Struct({
  _tag: frameTag("PopMaintenanceModeSet"),
  ...enabledFields
})

export const EphAdmin = Schema.Struct({ _tag: frameTag("EphAdmin"), ...ephAdminFields })

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
