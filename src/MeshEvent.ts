/**
 * What the mesh observed: the effect of every received frame, peers coming and going, and refused or
 * malformed input; and `MeshEvents`, the hub the runtime publishes them on (`Mesh.events` is its
 * stream; the CLI prints them as JSON lines).
 *
 * Observers never slow the mesh: nothing is built or offered while nobody listens, a stream
 * subscriber more than 4,096 events behind misses the newest, and a synchronous observer is called in
 * place (it must not block).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as PubSub from "effect/PubSub"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { EphOp, HotItem, QueueItem, QueueRef } from "./Frame.js"
import type { Status as MeshHealthStatus } from "./MeshHealth.js"

/**
 * One observation of the mesh, tagged by kind.
 *
 * @since 0.1.0
 * @category models
 */
export type MeshEvent =
  | { readonly _tag: "Wake"; readonly from: string; readonly item: QueueItem }
  /** A hot-list mark; `item.group` present scopes it to one consumer group's ring. */
  | { readonly _tag: "HotlistDirty"; readonly from: string; readonly item: HotItem }
  | {
      readonly _tag: "QueueConfigInvalidated"
      readonly from: string
      readonly op: "set" | "delete"
      readonly ref: QueueRef
    }
  | { readonly _tag: "Maintenance"; readonly from: string; readonly enabled: boolean }
  /** An ephemeral-queue admin verb (`EPH_ADMIN`), applied to the host's `EphemeralAdmin`. */
  | {
      readonly _tag: "EphAdmin"
      readonly from: string
      readonly op: EphOp
      readonly tenant: string
      readonly queue: string
    }
  | { readonly _tag: "PopMaintenance"; readonly from: string; readonly enabled: boolean }
  | { readonly _tag: "PeerUp"; readonly serverId: string }
  | { readonly _tag: "PeerDown"; readonly serverId: string }
  | { readonly _tag: "LinkUp"; readonly peer: string; readonly remote: string | null }
  | { readonly _tag: "LinkDown"; readonly peer: string; readonly reason: string }
  | { readonly _tag: "SelfRecognized"; readonly peer: string }
  /** A peer entry was added: configured at start, or found by discovery. */
  | { readonly _tag: "MemberJoined"; readonly peer: string; readonly foundBy: "config" | "dns" | "discovery" }
  /**
   * A member was removed: a discovered peer entry missing from two discovery rounds (its link is
   * closed), or a node silent on the lane long enough to be forgotten.
   */
  | {
      readonly _tag: "MemberLeft"
      readonly peer: string
      readonly foundBy: "config" | "dns" | "discovery" | "lane"
      readonly reason: string
    }
  /** The node's health changed (see `MeshHealth`). */
  | { readonly _tag: "HealthChanged"; readonly from: MeshHealthStatus; readonly to: MeshHealthStatus }
  /** The lane's status changed (`starting`, `up`, `down`). */
  | {
      readonly _tag: "LaneStatus"
      readonly status: "starting" | "up" | "down"
      readonly detail: string | null
    }
  | { readonly _tag: "HandshakeFailed"; readonly remote: string; readonly reason: string }
  /** A notification on the lane was refused (a forgery, a replay, our own id from another boot, ...). */
  | { readonly _tag: "LaneRefused"; readonly reason: string }
  | { readonly _tag: "InvalidFrame"; readonly from: string; readonly tag: number; readonly detail: string }

/**
 * The kinds of event that change what `Mesh.members` says.
 *
 * @since 0.1.0
 * @category models
 */
export const membershipTags: ReadonlyArray<MeshEvent["_tag"]> = [
  "PeerUp",
  "PeerDown",
  "LinkUp",
  "LinkDown",
  "SelfRecognized",
  "MemberJoined",
  "MemberLeft",
  "LaneStatus"
]

const MEMBERSHIP: ReadonlySet<MeshEvent["_tag"]> = new Set(membershipTags)

/**
 * Whether `event` changes what `Mesh.members` says: a server alive or dead, a link up or down, an entry
 * recognised as this node, a peer joining or leaving, the lane going up or down.
 *
 * @since 0.1.0
 * @category models
 */
export const isMembershipChange = (event: MeshEvent): boolean => MEMBERSHIP.has(event._tag)

/**
 * The event hub: emit, subscribe as a stream, or observe synchronously.
 *
 * @since 0.1.0
 * @category models
 */
export interface MeshEventsShape {
  /**
   * Whether anyone listens (for events of `tag`, when given): the receive path builds no event nobody
   * would see.
   */
  readonly listening: (tag?: MeshEvent["_tag"]) => boolean
  /** Hands an event to every subscriber and observer, at once. */
  readonly emit: (event: MeshEvent) => void
  /** Every event from the moment of subscribing, as a stream (subscribe before it matters). */
  readonly events: Stream.Stream<MeshEvent>
  /**
   * A subscription for the life of the scope: every event from now on, in a `PubSub.Subscription` (of
   * at most 4,096 waiting; the newest are dropped past it). For a stream that must not miss what
   * happens between reading a state and watching its changes.
   */
  readonly subscribe: Effect.Effect<PubSub.Subscription<MeshEvent>, never, Scope.Scope>
  /**
   * Calls `observer` synchronously for every event while the scope lasts: the cheapest way to watch,
   * for an observer that does not block (the CLI writes each event to stdout this way). With `tags`,
   * only events of those kinds are handed to it, and no other kind is built for its sake.
   */
  readonly observe: (
    observer: (event: MeshEvent) => void,
    tags?: ReadonlyArray<MeshEvent["_tag"]>
  ) => Effect.Effect<void, never, Scope.Scope>
}

/**
 * The hub the runtime publishes its events on.
 *
 * @since 0.1.0
 * @category tags
 */
export class MeshEvents extends Context.Service<MeshEvents, MeshEventsShape>()("queen-mesh/MeshEvents") {}

/** Events kept per stream subscriber before the newest are dropped. */
const EVENT_BUFFER = 4096

/**
 * An event hub in the current scope; its PubSub shuts down with the scope.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert"
 * import { Effect } from "effect"
 * import { MeshEvent } from "queen-mesh"
 *
 * const program = Effect.gen(function* () {
 *   const events = yield* MeshEvent.make
 *   const seen: Array<MeshEvent.MeshEvent> = []
 *   yield* events.observe((event) => seen.push(event))
 *   events.emit({ _tag: "PeerUp", serverId: "queen-b" })
 *   deepStrictEqual(seen, [{ _tag: "PeerUp", serverId: "queen-b" }])
 * })
 *
 * Effect.runPromise(Effect.scoped(program))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<MeshEventsShape, never, Scope.Scope> = Effect.gen(function* () {
  const pubsub = yield* Effect.acquireRelease(PubSub.dropping<MeshEvent>(EVENT_BUFFER), PubSub.shutdown)
  let subscribers = 0
  // Observers of every kind, and observers of some kinds only (by kind, with how many want each).
  const observers = new Set<(event: MeshEvent) => void>()
  const byTag = new Map<MeshEvent["_tag"], Set<(event: MeshEvent) => void>>()
  const call = (observer: (event: MeshEvent) => void, event: MeshEvent) => {
    try {
      observer(event)
    } catch {
      // An observer's failure is its own: the receive path that emitted must carry on.
    }
  }
  const emit = (event: MeshEvent): void => {
    if (subscribers > 0) PubSub.publishUnsafe(pubsub, event)
    for (const observer of observers) call(observer, event)
    const some = byTag.get(event._tag)
    if (some !== undefined) for (const observer of some) call(observer, event)
  }
  const subscribe = Effect.acquireRelease(
    Effect.tap(PubSub.subscribe(pubsub), () =>
      Effect.sync(() => {
        subscribers++
      })
    ),
    () =>
      Effect.sync(() => {
        subscribers--
      })
  )
  const events = Stream.unwrap(Effect.map(subscribe, Stream.fromSubscription))
  const observe = (observer: (event: MeshEvent) => void, tags?: ReadonlyArray<MeshEvent["_tag"]>) =>
    Effect.acquireRelease(
      Effect.sync(() => {
        if (tags === undefined) return void observers.add(observer)
        for (const tag of tags) {
          let set = byTag.get(tag)
          if (set === undefined) {
            set = new Set()
            byTag.set(tag, set)
          }
          set.add(observer)
        }
      }),
      () =>
        Effect.sync(() => {
          if (tags === undefined) return void observers.delete(observer)
          for (const tag of tags) {
            const set = byTag.get(tag)
            set?.delete(observer)
            if (set !== undefined && set.size === 0) byTag.delete(tag)
          }
        })
    )
  const listening = (tag?: MeshEvent["_tag"]): boolean =>
    subscribers > 0 || observers.size > 0 || (tag === undefined ? byTag.size > 0 : byTag.has(tag))
  return { listening, emit, events, subscribe, observe }
})

/**
 * {@link make} as a layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<MeshEvents> = Layer.effect(MeshEvents, make)
