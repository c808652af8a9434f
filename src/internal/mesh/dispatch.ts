/**
 * The receive side's "effect on receipt" (spec "The frame set", its last column), in one place: what
 * each received frame does to the host's services. A wake wakes local pops and records the partition
 * hint, a batch does so per item, a dirty batch marks the hot-list, a config frame invalidates the
 * cache, a maintenance frame flips its flag; heartbeats and HELLOs do nothing here. Nothing is ever
 * re-broadcast.
 *
 * In `tenants: "uuid"` mode (the default, upstream's reading) a tenant that is not a UUID is read as
 * absent before anything is applied; `EPH_ADMIN` always requires one (its Schema does).
 *
 * Where the host service has a synchronous twin (built with `Waker.sync`, `HotList.sync`) a frame is
 * applied at once, straight from the socket's data event, and `apply` returns `undefined`; otherwise it
 * returns the effect that applies it, and the listener keeps the order.
 *
 * @internal
 */

import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as EphemeralAdmin from "../../EphemeralAdmin.js"
import * as HotList from "../../HotList.js"
import * as MaintenanceFlags from "../../MaintenanceFlags.js"
import * as MeshConfig from "../../MeshConfig.js"
import { type MeshEvent, MeshEvents } from "../../MeshEvent.js"
import * as QueueConfigCache from "../../QueueConfigCache.js"
import * as Waker from "../../Waker.js"
import type * as Frames from "../wire/frames.js"
import * as Names from "../wire/names.js"
import { EphAdminAccount } from "./ephAdminAccount.js"

/**
 * What the listener hands every received frame to.
 */
export interface DispatchShape {
  /**
   * Applies one frame received from the peer `from`: at once, returning `undefined`, or by returning
   * the effect that applies it.
   */
  readonly apply: (from: string, frame: Frames.Frame) => Effect.Effect<void> | undefined
  /** The `EPH_ADMIN` verbs received here, and those the mesh's API sent. */
  readonly ephAdmin: EphAdminAccount
}

/**
 * The receive side's dispatch, as the listener sees it.
 */
export class Dispatch extends Context.Service<Dispatch, DispatchShape>()("queen-mesh/internal/Dispatch") {}

/**
 * What the dispatch applies frames to: the host's four services, and the event hub. The host's
 * `EphemeralAdmin` is used when present.
 */
export type Requirements =
  | Waker.Waker
  | QueueConfigCache.QueueConfigCache
  | HotList.HotList
  | MaintenanceFlags.MaintenanceFlags
  | MeshEvents
  | MeshConfig.MeshConfig

/** `item` with a tenant that is not a UUID read as absent; the same object when nothing changes. */
const uuidOnly = <A extends { readonly tenant: Option.Option<string> }>(item: A): A =>
  Option.isSome(item.tenant) && !Names.isUuid(item.tenant.value) ? { ...item, tenant: Option.none() } : item

const uuidOnlyAll = <A extends { readonly tenant: Option.Option<string> }>(
  items: ReadonlyArray<A>
): ReadonlyArray<A> => {
  for (let i = 0; i < items.length; i++) {
    if (uuidOnly(items[i]!) !== items[i]) return items.map(uuidOnly)
  }
  return items
}

/**
 * The dispatch over the host's four services; they are looked up once, here, never per frame.
 */
export const make: Effect.Effect<DispatchShape, never, Requirements> = Effect.gen(function* () {
  const config = yield* MeshConfig.MeshConfig
  const ephAdmin = new EphAdminAccount()
  const admin = Option.getOrElse(
    yield* Effect.serviceOption(EphemeralAdmin.EphemeralAdmin),
    () => EphemeralAdmin.noop
  )
  const waker = yield* Waker.Waker
  const cache = yield* QueueConfigCache.QueueConfigCache
  const hotList = yield* HotList.HotList
  const flags = yield* MaintenanceFlags.MaintenanceFlags
  const events = yield* MeshEvents
  const wakeNow = Waker.syncWakeOf(waker)
  const markNow = HotList.syncMarkOf(hotList)
  const publish = (event: MeshEvent) => Effect.sync(() => events.emit(event))

  const apply =
    config.tenants === "uuid"
      ? (from: string, frame: Frames.Frame) => applyAs(from, uuidFrame(frame))
      : (from: string, frame: Frames.Frame) => applyAs(from, frame)

  /** The frame as upstream reads it: every tenant that is not a UUID absent. */
  const uuidFrame = (frame: Frames.Frame): Frames.Frame => {
    switch (frame._tag) {
      case "MessageAvailable":
      case "QueueConfigSet":
      case "QueueConfigDelete":
        return uuidOnly(frame)
      case "MessageAvailableBatch": {
        const items = uuidOnlyAll(frame.items)
        return items === frame.items ? frame : { ...frame, items }
      }
      case "HotlistDirtyBatch": {
        const items = uuidOnlyAll(frame.items)
        return items === frame.items ? frame : { ...frame, items }
      }
      default:
        return frame
    }
  }

  const applyAs = (from: string, frame: Frames.Frame): Effect.Effect<void> | undefined => {
    switch (frame._tag) {
      case "MessageAvailable": {
        if (wakeNow === undefined) {
          return Effect.andThen(waker.wake(frame), publish({ _tag: "Wake", from, item: frame }))
        }
        wakeNow(frame)
        if (events.listening("Wake")) events.emit({ _tag: "Wake", from, item: frame })
        return undefined
      }
      case "MessageAvailableBatch": {
        if (wakeNow === undefined) {
          return Effect.forEach(
            frame.items,
            (item) => Effect.andThen(waker.wake(item), publish({ _tag: "Wake", from, item })),
            { discard: true }
          )
        }
        const listening = events.listening("Wake")
        for (const item of frame.items) {
          wakeNow(item)
          if (listening) events.emit({ _tag: "Wake", from, item })
        }
        return undefined
      }
      case "HotlistDirtyBatch": {
        const announce = () => {
          if (!events.listening("HotlistDirty")) return
          for (const item of frame.items) events.emit({ _tag: "HotlistDirty", from, item })
        }
        if (markNow === undefined)
          return Effect.andThen(hotList.markDirty(frame.items), Effect.sync(announce))
        markNow(frame.items)
        announce()
        return undefined
      }
      case "QueueConfigSet":
      case "QueueConfigDelete":
        return Effect.andThen(
          cache.invalidate(frame),
          publish({
            _tag: "QueueConfigInvalidated",
            from,
            op: frame._tag === "QueueConfigSet" ? "set" : "delete",
            ref: { queue: frame.queue, tenant: frame.tenant }
          })
        )
      case "MaintenanceModeSet":
        return Effect.andThen(
          SubscriptionRef.set(flags.maintenance, frame.enabled),
          publish({ _tag: "Maintenance", from, enabled: frame.enabled })
        )
      case "PopMaintenanceModeSet":
        return Effect.andThen(
          SubscriptionRef.set(flags.popMaintenance, frame.enabled),
          publish({ _tag: "PopMaintenance", from, enabled: frame.enabled })
        )
      case "EphAdmin": {
        ephAdmin.received(frame.op)
        const command = { op: frame.op, tenant: frame.tenant, queue: frame.queue }
        return Effect.andThen(admin.apply(command, from), publish({ _tag: "EphAdmin", from, ...command }))
      }
      case "Heartbeat":
      case "Hello":
      case "Challenge":
        return undefined
    }
  }
  return { apply, ephAdmin }
})

/**
 * {@link make} as a layer, over the host's four services and the event hub.
 */
export const layer: Layer.Layer<Dispatch, never, Requirements> = Layer.effect(Dispatch, make)
