/**
 * What the broker does with a request, between PostgreSQL (the `Store`) and the mesh: pushes commit
 * and then say so, pops wait in the shipped waker's grouped pops (one claim in flight per queue, its
 * rows handed to the waiting pops in the order they came) until a wake or the group's re-poll,
 * maintenance goes through the mesh's flags, and queue settings through the mesh's queue-config cache.
 * Everything the mesh is told is a hint: when one is lost, the group's re-poll finds the message anyway.
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import type * as SqlError from "effect/sql/SqlError"
import type * as GroupedPops from "queen-mesh/GroupedPops"
import * as LocalWaker from "queen-mesh/LocalWaker"
import * as MaintenanceFlags from "queen-mesh/MaintenanceFlags"
import * as Mesh from "queen-mesh/Mesh"
import * as QueueConfigCache from "queen-mesh/QueueConfigCache"
import { BrokerConfig } from "./BrokerConfig.js"
import { Stages } from "./Stages.js"
import { type Claimed, type Outgoing, type QueueSettings, Store } from "./Store.js"

/** A push refused because the cluster is in maintenance mode. */
export class MaintenanceError extends Data.TaggedError("MaintenanceError")<{}> {
  override get message() {
    return "the broker is in maintenance mode: pushes are refused"
  }
}

/**
 * How a pop's wait ended before it answered: `none` (the claim made for its arrival found messages),
 * `woken` (a later claim, after a wake: a push here, or through the mesh), `timeout` (the end of its
 * wait, or the group's re-poll found them), `shutdown` (the broker is draining, or pop maintenance began).
 */
export type WaitOutcome = GroupedPops.Wake

export interface PopResult {
  readonly lease: string | null
  readonly messages: ReadonlyArray<Claimed>
  readonly wake: WaitOutcome
}

export interface QueuesShape {
  readonly push: (
    tenant: string,
    queue: string,
    messages: ReadonlyArray<Outgoing>
  ) => Effect.Effect<ReadonlyArray<string>, SqlError.SqlError | MaintenanceError>
  readonly pop: (
    tenant: string,
    queue: string,
    options: { readonly batch: number; readonly wait: Duration.Duration }
  ) => Effect.Effect<PopResult, SqlError.SqlError>
  readonly ack: (
    tenant: string,
    queue: string,
    lease: string,
    ids: ReadonlyArray<string>
  ) => Effect.Effect<number, SqlError.SqlError>
  readonly configure: (
    tenant: string,
    queue: string,
    settings: QueueSettings
  ) => Effect.Effect<void, SqlError.SqlError>
  /** A queue's settings as this replica uses them: from its cache, read from PostgreSQL on a miss. */
  readonly settings: (tenant: string, queue: string) => Effect.Effect<QueueSettings, SqlError.SqlError>
  readonly setMaintenance: (enabled: boolean) => Effect.Effect<void>
  readonly setPopMaintenance: (enabled: boolean) => Effect.Effect<void>
  readonly maintenance: Effect.Effect<{ readonly maintenance: boolean; readonly popMaintenance: boolean }>
}

export class Queues extends Context.Service<Queues, QueuesShape>()("broker/Queues") {}

/** The broker's counters: Effect metrics, so `/metrics` (the mesh's route) serves them too. */
export const metrics = {
  pushed: Metric.counter("broker_messages_pushed_total", { incremental: true }),
  popped: Metric.counter("broker_messages_popped_total", { incremental: true }),
  acked: Metric.counter("broker_messages_acked_total", { incremental: true }),
  released: Metric.counter("broker_leases_released_total", { incremental: true }),
  claims: Metric.counter("broker_claims_total", { incremental: true }),
  returned: Metric.counter("broker_messages_returned_total", { incremental: true }),
  waits: Metric.frequency("broker_pop_waits")
}

/** A claimed message as the grouped pops hand it out: all of one pop's share one claim's lease. */
interface Held {
  readonly lease: string
  readonly message: Claimed
  /** When its claim ran, on the stage tracer's clock (only while tracing). */
  readonly ran: readonly [string, string] | undefined
}

/** The largest claim the groups make: the API's largest batch. */
const MAX_CLAIM = 1000

export const make = Effect.gen(function* () {
  const config = yield* BrokerConfig
  const store = yield* Store
  const mesh = yield* Mesh.Mesh
  const waker = yield* LocalWaker.LocalWaker
  const flags = yield* MaintenanceFlags.MaintenanceFlags
  const cache = yield* QueueConfigCache.MemoryQueueConfigCache
  const stages = yield* Stages

  /**
   * After the commit, never before: a pop woken before the rows are visible finds nothing and parks
   * again, and the wake is spent. The mesh never blocks and never fails a push: it drops rather than
   * queues, and only an input no peer would accept (which the API's Schemas keep out) or a mesh already
   * closed (shutting down) fails, and the message is committed either way.
   */
  const announce = (tenant: string, queue: string, partitions: ReadonlyArray<string>) => {
    const distinct = [...new Set(partitions)]
    const told =
      distinct.length === 1
        ? mesh.messageAvailable({ queue, partition: distinct[0]!, tenant })
        : mesh.messageAvailableBatch(distinct.map((partition) => ({ queue, partition, tenant })))
    return Effect.catch(told, (error) => Effect.logDebug("push not announced", error))
  }

  const push: QueuesShape["push"] = (tenant, queue, messages) =>
    Effect.gen(function* () {
      if (yield* SubscriptionRef.get(flags.maintenance)) return yield* new MaintenanceError()
      yield* stages.mark("insert")
      const ids = yield* store.push(tenant, queue, messages)
      yield* stages.mark("committed")
      // This replica's waiting pops claim first. When their claim, begun after the commit, left
      // nothing to claim, no peer has news: the push is not announced (its claim would find nothing).
      const drained = yield* groups.offer({ queue, tenant })
      if (!drained) {
        yield* announce(
          tenant,
          queue,
          messages.map((message) => message.partition)
        )
      }
      yield* stages.mark("hinted")
      yield* Metric.update(metrics.pushed, ids.length)
      return ids
    })

  /** A queue's settings, from the cache the mesh invalidates, read from PostgreSQL on a miss. */
  const settingsOf = (tenant: string, queue: string) =>
    Effect.gen(function* () {
      const ref = { queue, tenant }
      const cached = yield* cache.get(ref)
      if (Option.isSome(cached)) return cached.value
      const read = yield* store.queueSettings(tenant, queue)
      const settings = Option.getOrElse(read, () => ({
        leaseTimeSeconds: config.defaultLeaseSeconds,
        encrypted: false
      }))
      yield* cache.set(ref, settings)
      return settings
    })

  const empty = (wake: WaitOutcome): PopResult => ({ lease: null, messages: [], wake })

  /**
   * One claim for the pops waiting on a queue: as many messages as they asked for, under one lease.
   * Runs in the groups' own fiber, never a request's: a client that goes away cannot strand its rows.
   */
  const claim = ({ queue, tenant, limit }: GroupedPops.ClaimRequest) =>
    Effect.gen(function* () {
      const settings = yield* settingsOf(tenant, queue)
      const started = stages.enabled ? stages.now() : undefined
      const claimed = yield* store.claim(tenant, queue, limit, settings.leaseTimeSeconds)
      yield* Metric.update(metrics.claims, 1)
      const ran = started === undefined ? undefined : ([started, stages.now()] as const)
      return {
        rows: claimed.messages.map((message): Held => ({ lease: claimed.lease, message, ran })),
        more: claimed.more
      }
    })

  /**
   * Messages claimed for pops that went away (no other pop waits here): claimable again now, not when
   * their lease runs out, and news for the peers' pops, like a push.
   */
  const release = ({ queue, tenant }: GroupedPops.GroupKey, rows: ReadonlyArray<Held>) => {
    const byLease = new Map<string, Array<string>>()
    for (const held of rows) {
      const ids = byLease.get(held.lease) ?? []
      ids.push(held.message.id)
      byLease.set(held.lease, ids)
    }
    return Effect.forEach(byLease, ([lease, ids]) => store.release(tenant, queue, lease, ids), {
      discard: true
    }).pipe(
      Effect.andThen(Metric.update(metrics.returned, rows.length)),
      Effect.andThen(
        announce(
          tenant,
          queue,
          rows.map((held) => held.message.partition)
        )
      )
    )
  }

  const groups = yield* waker.grouped({ claim, release, repoll: config.repoll, maxClaim: MAX_CLAIM })

  const pop: QueuesShape["pop"] = (tenant, queue, options) =>
    Effect.gen(function* () {
      if (yield* SubscriptionRef.get(flags.popMaintenance)) return empty("shutdown")
      // Only the wait may be interrupted (the client went away): once the rows are out of the group,
      // the answer is built without a gap in which they could be dropped.
      return yield* Effect.uninterruptibleMask((restore) =>
        restore(groups.pop({ queue, tenant }, { batch: options.batch, maxWait: options.wait })).pipe(
          Effect.flatMap(answer)
        )
      )
    })

  const answer = (result: GroupedPops.PopResult<Held>): Effect.Effect<PopResult> =>
    Effect.gen(function* () {
      yield* Metric.update(metrics.waits, result.wake)
      const first = result.rows[0]
      if (first === undefined) return empty(result.wake)
      if (first.ran !== undefined) {
        if (result.wake !== "none") yield* stages.markAt("woke", first.ran[0])
        yield* stages.markAt("claim", first.ran[0])
        yield* stages.markAt("claimed", first.ran[1])
      }
      yield* Metric.update(metrics.popped, result.rows.length)
      return { lease: first.lease, messages: result.rows.map((held) => held.message), wake: result.wake }
    })

  const ack: QueuesShape["ack"] = (tenant, queue, lease, ids) =>
    store.ack(tenant, queue, lease, ids).pipe(Effect.tap((n) => Metric.update(metrics.acked, n)))

  /** Committed first; then this replica's cache is set and the peers drop theirs (they re-read it). */
  const configure: QueuesShape["configure"] = (tenant, queue, settings) =>
    Effect.gen(function* () {
      yield* store.configure(tenant, queue, settings)
      yield* cache.set({ queue, tenant }, settings)
      yield* mesh
        .queueConfigSet({ queue, tenant })
        .pipe(Effect.catch((error) => Effect.logDebug("configuration not announced", error)))
    })

  const quietly = <E>(set: Effect.Effect<void, E>) =>
    Effect.catch(set, (error) => Effect.logDebug("maintenance not announced", error))

  // Pop maintenance flipped on, here or on a peer: the parked pops answer now instead of at their
  // timeout. The flags are `SubscriptionRef`s, so their changes are a stream.
  yield* SubscriptionRef.changes(flags.popMaintenance).pipe(
    Stream.filter((on) => on),
    Stream.runForEach(() => waker.releaseAll),
    Effect.forkScoped
  )

  // Leases that ran out (a consumer died, or never acked): their messages are claimable again, which is
  // news for every replica's pops, like a push.
  yield* store.releaseExpired(1000).pipe(
    Effect.tap((released) => Metric.update(metrics.released, released.length)),
    Effect.flatMap((released) =>
      released.length === 0
        ? Effect.void
        : mesh.messageAvailableBatch(
            released.map(({ tenant, queue, partition }) => ({ queue, partition, tenant }))
          )
    ),
    Effect.catchCause((cause) => Effect.logWarning("lease sweep failed; retrying", cause)),
    Effect.repeat(Schedule.spaced(config.leaseSweep)),
    Effect.annotateLogs({ module: "Queues", fiber: "lease-sweep" }),
    Effect.forkScoped
  )

  return {
    push,
    pop,
    ack,
    configure,
    settings: settingsOf,
    setMaintenance: (enabled) => quietly(mesh.setMaintenance(enabled)),
    setPopMaintenance: (enabled) => quietly(mesh.setPopMaintenance(enabled)),
    maintenance: Effect.all({
      maintenance: SubscriptionRef.get(flags.maintenance),
      popMaintenance: SubscriptionRef.get(flags.popMaintenance)
    })
  } satisfies QueuesShape
})

export const layer = Layer.effect(Queues, make)
