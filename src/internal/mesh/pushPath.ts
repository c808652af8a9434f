/**
 * The hot path of a push (spec "The frame set", tag 1): validate the item by the wire's rules, encode
 * it once, hand the bytes to every link, wake the local pops. A push to a partition is usually followed
 * by more pushes to it, so the validated item, its encoded frame and (with a synchronous waker) the very
 * effect that sends it are built once and kept: a repeated push allocates nothing but its lookup.
 * Bounded: the table of kept pushes is dropped whole when full.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import { InvalidInputError, MeshClosedError } from "../../MeshError.js"
import type * as Waker from "../../Waker.js"
import { syncWakeOf } from "../../Waker.js"
import * as Codec from "../wire/codec.js"
import * as Frames from "../wire/frames.js"
import type { TenantRule } from "../wire/names.js"
import type { QueueItem } from "../wire/payloads.js"
import type { Broadcaster } from "./broadcaster.js"

/** Pushes kept at most: partitions pushed to lately. */
const PUSHES_KEPT = 1024

/** Whether the mesh's scope has closed: set once, read on every call. */
export interface Lifecycle {
  closed: boolean
}

/** A push, built once for every push to the same partition. */
interface Push {
  readonly item: QueueItem
  readonly bytes: Uint8Array
  readonly effect: Effect.Effect<void>
}

/**
 * Pushes by queue, partition and tenant (absent: `undefined`), in nested maps keyed by the caller's own
 * strings, so a lookup builds nothing. Only string names are kept (anything else takes the slow path
 * and its error); the table is dropped whole when it holds `PUSHES_KEPT`.
 */
class PushTable {
  private readonly byQueue = new Map<string, Map<string, Map<string | undefined, Push>>>()
  private size = 0

  /** The tenant of an input as a key: `undefined` for none, `null` for one that is not a string. */
  private static tenantKey(input: Frames.QueueItemInput): string | undefined | null {
    let tenant = input.tenant
    if (typeof tenant === "object" && tenant !== null) tenant = Option.getOrUndefined(tenant)
    if (tenant === undefined || tenant === null || tenant === "") return undefined
    return typeof tenant === "string" ? tenant : null
  }

  get(input: Frames.QueueItemInput): Push | undefined {
    const { queue, partition } = input
    if (typeof queue !== "string" || typeof partition !== "string") return undefined
    const tenant = PushTable.tenantKey(input)
    if (tenant === null) return undefined
    return this.byQueue.get(queue)?.get(partition)?.get(tenant)
  }

  set(input: Frames.QueueItemInput, push: Push): void {
    const { queue, partition } = input
    if (typeof queue !== "string" || typeof partition !== "string") return
    const tenant = PushTable.tenantKey(input)
    if (tenant === null) return
    if (this.size >= PUSHES_KEPT) {
      this.byQueue.clear()
      this.size = 0
    }
    let byPartition = this.byQueue.get(queue)
    if (byPartition === undefined) {
      byPartition = new Map()
      this.byQueue.set(queue, byPartition)
    }
    let byTenant = byPartition.get(partition)
    if (byTenant === undefined) {
      byTenant = new Map()
      byPartition.set(partition, byTenant)
    }
    byTenant.set(tenant, push)
    this.size++
  }
}

const closedError = () => new MeshClosedError({ operation: "messageAvailable" })

export class PushPath {
  private readonly pushes = new PushTable()
  private readonly wakeNow: ((item: QueueItem) => void) | undefined

  constructor(
    private readonly tenants: TenantRule,
    private readonly waker: Waker.WakerShape,
    private readonly out: Broadcaster,
    private readonly lifecycle: Lifecycle
  ) {
    this.wakeNow = syncWakeOf(waker)
  }

  /**
   * `messageAvailable`: validation is pure, so it happens as the effect is built; the effect itself is
   * one `sync` step, the same object for every push to the same partition.
   */
  effect(input: Frames.QueueItemInput): Effect.Effect<void, InvalidInputError | MeshClosedError> {
    if (this.lifecycle.closed) return Effect.fail(closedError())
    const push = this.pushOf(input)
    return push instanceof InvalidInputError ? Effect.fail(push) : push.effect
  }

  /** `unsafeMessageAvailable`: the same, called outside any fiber; throws what the effect would fail with. */
  unsafe(input: Frames.QueueItemInput): void {
    if (this.lifecycle.closed) throw closedError()
    const push = this.pushOf(input)
    if (push instanceof InvalidInputError) throw push
    // Peers first: their frames leave now, and a local pop woken here runs only after this call anyway.
    if (this.out.hasReceivers()) this.out.send(push.bytes)
    if (this.wakeNow !== undefined) this.wakeNow(push.item)
    else Effect.runFork(this.waker.wake(push.item))
  }

  private pushOf(input: Frames.QueueItemInput): Push | InvalidInputError {
    const known = this.pushes.get(input)
    if (known !== undefined) return known
    const item = Frames.validItem(input, this.tenants)
    if (Result.isFailure(item)) return new InvalidInputError({ detail: item.failure })
    const valid = item.success
    const bytes = Codec.encodeMessageAvailable(valid)
    const { out, lifecycle, waker } = this
    const wakeNow = this.wakeNow
    const push: Push = {
      item: valid,
      bytes,
      effect:
        wakeNow === undefined
          ? Effect.suspend(() =>
              lifecycle.closed
                ? Effect.void
                : Effect.andThen(
                    Effect.sync(() => {
                      if (out.hasReceivers()) out.send(bytes)
                    }),
                    waker.wake(valid)
                  )
            )
          : Effect.sync(() => {
              if (lifecycle.closed) return
              if (out.hasReceivers()) out.send(bytes)
              wakeNow(valid)
            })
    }
    this.pushes.set(input, push)
    return push
  }
}
