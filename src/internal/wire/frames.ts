/**
 * The frame set as one table (spec "The frame set"): per frame its tag, the spec's name, its Schema,
 * its cap, its hand-written check and its JSON writer. `Tag`, the `Frame` union, the per-tag caps and
 * the codec's decoders derive from it; adding a frame is adding a row (and its Schema in `payloads`).
 * Beside it, the frames' constructors and the checks a caller's input goes through (the same rules the
 * wire applies).
 *
 * @internal
 */
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Names from "./names.js"
import * as PayloadChecks from "./payloadChecks.js"
import {
  Challenge,
  EphAdmin,
  EphOp,
  Heartbeat,
  Hello,
  type HotItem,
  HotlistDirtyBatch,
  helloWire,
  isEphOp,
  MAX_CHALLENGE_PAYLOAD_BYTES,
  MAX_FRAME_LENGTH,
  MaintenanceModeSet,
  MessageAvailable,
  MessageAvailableBatch,
  PopMaintenanceModeSet,
  QueueConfigDelete,
  QueueConfigSet,
  type QueueItem,
  type QueueRef,
  SMALL_FRAME_LENGTH,
  UNKNOWN_FRAME_LENGTH,
  wireHotItems,
  wireItem,
  wireItems,
  wireRef
} from "./payloads.js"

// ---------------------------------------------------------------------------------------------
// the frame table
// ---------------------------------------------------------------------------------------------

/**
 * One row of the frame set: what the spec's table says of a frame, plus the Schema of its payload and
 * the largest frame accepted with its tag. Adding a frame is adding a row (and its Schema).
 */
export interface FrameSpec<Name extends string, T extends number, A extends { readonly _tag: string }, I> {
  /** The spec's name, e.g. `MESSAGE_AVAILABLE`. */
  readonly name: Name
  readonly tag: T
  readonly schema: Schema.Codec<A, I>
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

export const table = {
  MessageAvailable: row({
    name: "MESSAGE_AVAILABLE",
    tag: 1,
    schema: MessageAvailable,
    maxLength: SMALL_FRAME_LENGTH,
    quick: PayloadChecks.messageAvailable,
    payload: wireItem
  }),
  MessageAvailableBatch: row({
    name: "MESSAGE_AVAILABLE_BATCH",
    tag: 2,
    schema: MessageAvailableBatch,
    maxLength: MAX_FRAME_LENGTH,
    quick: PayloadChecks.messageAvailableBatch,
    payload: wireItems
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
    payload: wireHotItems
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
    payload: wireRef
  }),
  QueueConfigDelete: row({
    name: "QUEUE_CONFIG_DELETE",
    tag: 11,
    schema: QueueConfigDelete,
    maxLength: SMALL_FRAME_LENGTH,
    quick: PayloadChecks.queueConfigDelete,
    payload: wireRef
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
 */
export const frames: {
  readonly [K in keyof Table]: FrameSpec<
    Table[K]["name"],
    Table[K]["tag"],
    Table[K]["schema"]["Type"],
    Table[K]["schema"]["Encoded"]
  >
} = table

/**
 * Every frame of the table.
 */
export type Frame = { readonly [K in keyof Table]: Table[K]["schema"]["Type"] }[keyof Table]

/**
 * Frame tags, as the spec's table numbers them (and `CHALLENGE`, ours).
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

export type Tag = AnyRow["tag"]

export const rows: ReadonlyArray<AnyRow> = Object.values(table)

/**
 * The tagged union of all frames as one Schema, for users who validate frames they build themselves.
 */
export const Frame = Schema.Union([
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
])

// Fails to compile when a row is missing from the union above.
const _unionCoversTable = (frame: Frame): typeof Frame.Type => frame
void _unionCoversTable

/**
 * A frame whose tag this version does not know. It is skipped, never an error that closes the link,
 * so a newer peer can add frames.
 */
export interface UnknownFrame {
  readonly _tag: "Unknown"
  readonly tag: number
  readonly payload: Uint8Array
}

/**
 * The tag byte of each frame.
 */
export const tagOf = (frame: Frame): Tag => table[frame._tag].tag

/**
 * The largest frame (tag byte plus payload) accepted with `tag`: small for single items, flags,
 * heartbeats and the HELLO; the 16 MiB cap only for the batch frames.
 */
export const maxLengthOf = (tag: number): number => byTag[tag]?.maxLength ?? UNKNOWN_FRAME_LENGTH

const byTag: Array<AnyRow | undefined> = []
for (const r of rows) byTag[r.tag] = r

/**
 * The spec's name of a tag (`MESSAGE_AVAILABLE`), or `tag <n>` for one this version does not know.
 */
export const nameOf = (tag: number): string => byTag[tag]?.name ?? `tag ${tag}`

// ---------------------------------------------------------------------------------------------
// constructors
// ---------------------------------------------------------------------------------------------

/**
 * Input for a queue-carrying item: the tenant may be given as an `Option`, a string, or left out.
 */
export interface QueueItemInput {
  readonly queue: string
  readonly partition: string
  readonly tenant?: Option.Option<string> | string | null | undefined
}

export interface QueueRefInput {
  readonly queue: string
  readonly tenant?: Option.Option<string> | string | null | undefined
}

/**
 * Normalises a tenant the way the wire does: `undefined`, `null` and `""` are absent; a UUID is
 * lowercased. Does not check the length (see {@link validItem}).
 */
export const tenantOf = (
  tenant: Option.Option<string> | string | null | undefined
): Option.Option<string> => {
  const given = typeof tenant === "object" && tenant !== null ? Option.getOrUndefined(tenant) : tenant
  if (given === undefined || given === null || given === "") return Option.none()
  return Option.some(Names.isUuid(given) ? given.toLowerCase() : given)
}

export const queueItem = (input: QueueItemInput): QueueItem => ({
  queue: input.queue,
  partition: input.partition,
  tenant: tenantOf(input.tenant)
})

export const queueRef = (input: QueueRefInput): QueueRef => ({
  queue: input.queue,
  tenant: tenantOf(input.tenant)
})

/**
 * Input for a hot-list item: a queue item, and the consumer group whose ring it marks (left out,
 * `null` or `""`: every ring of the queue).
 */
export interface HotItemInput extends QueueItemInput {
  readonly group?: Option.Option<string> | string | null | undefined
}

export const hotItem = (input: HotItemInput): HotItem => ({
  ...queueItem(input),
  group: groupInput(input.group)
})

const groupInput = (group: HotItemInput["group"]): Option.Option<string> => {
  const given = typeof group === "object" && group !== null ? Option.getOrUndefined(group) : group
  return given === undefined || given === null || given === "" ? Option.none() : Option.some(given)
}

export type TenantRule = Names.TenantRule

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
 */
export const validItem = (
  input: QueueItemInput,
  tenants: TenantRule = "any"
): Result.Result<QueueItem, string> => {
  const queue = Names.queueName(input.queue)
  if (queue === undefined) return Result.fail(Names.describeName("queue", input.queue))
  if (typeof input.partition !== "string" || Names.partition(input.partition) === undefined) {
    return Result.fail(Names.describeName("partition", input.partition))
  }
  const tenant = tenantProblem(input, tenants)
  if (typeof tenant === "string") return Result.fail(tenant)
  return Result.succeed({ queue, partition: input.partition, tenant })
}

/**
 * A hot-list item as a caller gave it, checked by the wire's rules: an empty group is absent, a group
 * that is not a string or is over-long is refused.
 */
export const validHotItem = (
  input: HotItemInput,
  tenants: TenantRule = "any"
): Result.Result<HotItem, string> =>
  Result.flatMap(validItem(input, tenants), (item) => {
    const given =
      typeof input.group === "object" && input.group !== null
        ? Option.getOrUndefined(input.group)
        : input.group
    if (given === undefined || given === null || given === "")
      return Result.succeed({ ...item, group: Option.none() })
    if (typeof given !== "string" || !Names.fitsName(given)) {
      return Result.fail(Names.describeName("group", given))
    }
    return Result.succeed({ ...item, group: Option.some(given) })
  })

/**
 * A queue reference as a caller gave it, checked by the wire's rules.
 */
export const validRef = (
  input: QueueRefInput,
  tenants: TenantRule = "any"
): Result.Result<QueueRef, string> => {
  const queue = Names.queueName(input.queue)
  if (queue === undefined) return Result.fail(Names.describeName("queue", input.queue))
  const tenant = tenantProblem(input, tenants)
  if (typeof tenant === "string") return Result.fail(tenant)
  return Result.succeed({ queue, tenant })
}

/**
 * An `EPH_ADMIN` verb as a caller gave it, checked by upstream's rules: a known op, a queue name, and
 * a tenant that is a UUID (always: a destructive verb is never broadened to every tenant).
 */
export const validEphAdmin = (input: {
  readonly op: string
  readonly tenant: string
  readonly queue: string
}): Result.Result<EphAdmin, string> => {
  const frame = PayloadChecks.ephAdmin(input)
  if (frame !== undefined) return Result.succeed(frame)
  if (!isEphOp(input.op)) {
    return Result.fail(`op must be ${Names.alternatives(EphOp.literals)}, got ${JSON.stringify(input.op)}`)
  }
  if (Names.queueName(input.queue) === undefined) return Result.fail(Names.describeName("queue", input.queue))
  return Result.fail(`tenant must be a UUID, got ${JSON.stringify(input.tenant)}`)
}

export const heartbeat = (serverId?: string): Heartbeat =>
  serverId === undefined
    ? PayloadChecks.heartbeatNoId
    : { _tag: "Heartbeat", server_id: Option.some(serverId) }
