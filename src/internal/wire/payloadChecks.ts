/**
 * The receive hot path's payload checks, one per frame of the table (`frames`) that is read often (the
 * handshake's frames, read once per connection, go through their Schemas alone).
 *
 * Why hand-written: measured here, the leanest Schema decode of a `MESSAGE_AVAILABLE` costs about 40x
 * these checks, which made Schema validation most of the receive path's CPU. Each check accepts
 * exactly what its Schema accepts and builds the same value, or returns `undefined` to let the Schema
 * decide (and word the error). `test/Frame.quick.test.ts` proves the agreement on arbitrary input;
 * keep it when changing either side. The naming rules come from `names`, as the Schemas' do.
 *
 * @internal
 */
import * as Option from "effect/Option"
import * as Rules from "./names.js"
import * as Frame from "./payloads.js"

const NONE: Option.Option<string> = Option.none()

/** The heartbeat without a server id, shared: it is the common case. */
export const heartbeatNoId: Frame.Heartbeat = { _tag: "Heartbeat", server_id: NONE }

const isRecord = (u: unknown): u is { readonly [key: string]: unknown } =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/** One item, or `undefined` when it breaks a rule. */
export const item = (u: unknown): Frame.QueueItem | undefined => {
  if (!isRecord(u)) return undefined
  const queue = Rules.queueName(u.queue)
  if (queue === undefined) return undefined
  const partition = Rules.partition(u.partition)
  if (partition === undefined) return undefined
  return { queue, partition, tenant: Rules.wireTenant(u.tenant) }
}

/** Distinct tenants a batch shares `Option`s for; past this many, each further one gets its own. */
const SHARED_TENANTS = 64

/**
 * One item of a batch: as `item`, but its tenant's `Option` shared with the batch's other items of
 * that tenant. A batch names few tenants, and a 16 MiB one holds some 300,000 items: one `Option`
 * each made the young generation's collections copy them all.
 */
const itemIn = (u: unknown, tenants: Map<string, Option.Option<string>>): Frame.QueueItem | undefined => {
  if (!isRecord(u)) return undefined
  const queue = Rules.queueName(u.queue)
  if (queue === undefined) return undefined
  const partition = Rules.partition(u.partition)
  if (partition === undefined) return undefined
  const raw = u.tenant
  if (typeof raw !== "string" || raw === "") return { queue, partition, tenant: Rules.wireTenant(raw) }
  let tenant = tenants.get(raw)
  if (tenant === undefined) {
    tenant = Rules.wireTenant(raw)
    if (tenants.size < SHARED_TENANTS) tenants.set(raw, tenant)
  }
  return { queue, partition, tenant }
}

/** A hot-list item: a queue item and its consumer group (absent or unusable: every ring). */
export const hotItem = (u: unknown): Frame.HotItem | undefined => {
  if (!isRecord(u)) return undefined
  const one = item(u)
  return one === undefined ? undefined : { ...one, group: Rules.group(u.group) }
}

const hotItemIn = (u: unknown, tenants: Map<string, Option.Option<string>>): Frame.HotItem | undefined => {
  if (!isRecord(u)) return undefined
  const one = itemIn(u, tenants)
  return one === undefined ? undefined : { ...one, group: Rules.group(u.group) }
}

/** A batch envelope, lenient per item: the valid items and how many were skipped. */
const batchOf =
  <A>(each: (u: unknown, tenants: Map<string, Option.Option<string>>) => A | undefined) =>
  (u: unknown): { readonly items: Array<A>; readonly skipped?: number } | undefined => {
    if (!isRecord(u)) return undefined
    const given = u.items
    if (!Array.isArray(given)) return undefined
    const out: Array<A> = []
    const tenants = new Map<string, Option.Option<string>>()
    for (let i = 0; i < given.length; i++) {
      const one = each(given[i], tenants)
      if (one !== undefined) out.push(one)
    }
    const skipped = given.length - out.length
    return skipped === 0 ? { items: out } : { items: out, skipped }
  }

/** The items of a wake batch. */
export const items = batchOf(itemIn)

/** The items of a hot-list batch. */
export const hotItems = batchOf(hotItemIn)

const ref = (u: unknown): Frame.QueueRef | undefined => {
  if (!isRecord(u)) return undefined
  const queue = Rules.queueName(u.queue)
  if (queue === undefined) return undefined
  return { queue, tenant: Rules.wireTenant(u.tenant) }
}

const enabled = (u: unknown): boolean | undefined =>
  isRecord(u) && typeof u.enabled === "boolean" ? u.enabled : undefined

/** As `item`, built as the frame at once: the frame every push sends, so one object, not two. */
export const messageAvailable = (u: unknown): Frame.MessageAvailable | undefined => {
  if (!isRecord(u)) return undefined
  const queue = Rules.queueName(u.queue)
  if (queue === undefined) return undefined
  const partition = Rules.partition(u.partition)
  if (partition === undefined) return undefined
  return { _tag: "MessageAvailable", queue, partition, tenant: Rules.wireTenant(u.tenant) }
}

export const messageAvailableBatch = (u: unknown): Frame.MessageAvailableBatch | undefined => {
  const all = items(u)
  return all === undefined ? undefined : { _tag: "MessageAvailableBatch", ...all }
}

export const hotlistDirtyBatch = (u: unknown): Frame.HotlistDirtyBatch | undefined => {
  const all = hotItems(u)
  return all === undefined ? undefined : { _tag: "HotlistDirtyBatch", ...all }
}

export const heartbeat = (u: unknown): Frame.Heartbeat | undefined => {
  if (!isRecord(u)) return undefined
  const id = u.server_id
  if (id === undefined || id === null) return heartbeatNoId
  return typeof id === "string" ? { _tag: "Heartbeat", server_id: Option.some(id) } : undefined
}

export const queueConfigSet = (u: unknown): Frame.QueueConfigSet | undefined => {
  const one = ref(u)
  return one === undefined ? undefined : { _tag: "QueueConfigSet", ...one }
}

export const queueConfigDelete = (u: unknown): Frame.QueueConfigDelete | undefined => {
  const one = ref(u)
  return one === undefined ? undefined : { _tag: "QueueConfigDelete", ...one }
}

export const maintenanceModeSet = (u: unknown): Frame.MaintenanceModeSet | undefined => {
  const flag = enabled(u)
  return flag === undefined ? undefined : { _tag: "MaintenanceModeSet", enabled: flag }
}

export const ephAdmin = (u: unknown): Frame.EphAdmin | undefined => {
  if (!isRecord(u)) return undefined
  const op = u.op
  if (!Frame.isEphOp(op)) return undefined
  const queue = Rules.queueName(u.queue)
  const tenant = u.tenant
  if (queue === undefined || typeof tenant !== "string" || !Rules.isUuid(tenant)) return undefined
  return { _tag: "EphAdmin", op, tenant: tenant.toLowerCase(), queue }
}

export const popMaintenanceModeSet = (u: unknown): Frame.PopMaintenanceModeSet | undefined => {
  const flag = enabled(u)
  return flag === undefined ? undefined : { _tag: "PopMaintenanceModeSet", enabled: flag }
}
