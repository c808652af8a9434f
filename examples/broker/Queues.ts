/**
 * What the broker does with a request, between PostgreSQL (the `Store`) and the mesh: pushes commit
 * and then say so, pops claim or park on the shipped `LocalWaker` until a wake or their own re-poll,
 * maintenance goes through the mesh's flags, and queue settings through the mesh's queue-config cache.
 * Everything the mesh is told is a hint: when one is lost, a pop's re-poll finds the message anyway.
 */
import type { SqlError } from "@effect/sql"
import {
  Clock,
  Context,
  Data,
  Duration,
  Effect,
  Layer,
  Metric,
  Option,
  Schedule,
  Stream,
  SubscriptionRef
} from "effect"
import { LocalWaker, MaintenanceFlags, Mesh, QueueConfigCache } from "queen-mesh"
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
 * How a pop's last wait ended before it answered: `none` (it found messages without waiting), `woken`
 * (a wake named its queue: a push here, or through the mesh), `timeout` (its own re-poll, or the end of
 * its wait), `shutdown` (the broker is draining, or pop maintenance began).
 */
export type WaitOutcome = "none" | LocalWaker.WakeOutcome

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

export class Queues extends Context.Tag("broker/Queues")<Queues, QueuesShape>() {}

/** The broker's counters: Effect metrics, so `/metrics` (the mesh's route) serves them too. */
export const metrics = {
  pushed: Metric.counter("broker_messages_pushed_total", { incremental: true }),
  popped: Metric.counter("broker_messages_popped_total", { incremental: true }),
  acked: Metric.counter("broker_messages_acked_total", { incremental: true }),
  released: Metric.counter("broker_leases_released_total", { incremental: true }),
  claims: Metric.counter("broker_claims_total", { incremental: true }),
  waits: Metric.frequency("broker_pop_waits")
}

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
    return Effect.catchAll(told, (error) => Effect.logDebug("push not announced", error))
  }

  const push: QueuesShape["push"] = (tenant, queue, messages) =>
    Effect.gen(function* () {
      if (yield* SubscriptionRef.get(flags.maintenance)) return yield* new MaintenanceError()
      yield* stages.mark("insert")
      const ids = yield* store.push(tenant, queue, messages)
      yield* stages.mark("committed")
      yield* announce(
        tenant,
        queue,
        messages.map((message) => message.partition)
      )
      yield* stages.mark("hinted")
      yield* Metric.incrementBy(metrics.pushed, ids.length)
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

  const pop: QueuesShape["pop"] = (tenant, queue, options) =>
    Effect.gen(function* () {
      const empty = (wake: WaitOutcome): PopResult => ({ lease: null, messages: [], wake })
      if (yield* SubscriptionRef.get(flags.popMaintenance)) return empty("shutdown")
      const settings = yield* settingsOf(tenant, queue)
      const target = { queue, tenant }
      const deadline = (yield* Clock.currentTimeMillis) + Duration.toMillis(options.wait)
      let wake: WaitOutcome = "none"
      while (true) {
        // Wakes from here on leave a partition hint: one that lands while the claim runs (its rows
        // committed after the claim's snapshot) is seen below, so the pop claims again instead of
        // parking past it.
        yield* waker.takePartitionHints(target)
        yield* stages.mark("claim")
        const claimed = yield* store.claim(tenant, queue, options.batch, settings.leaseTimeSeconds)
        yield* stages.mark("claimed")
        yield* Metric.increment(metrics.claims)
        if (claimed.messages.length > 0) {
          yield* Metric.incrementBy(metrics.popped, claimed.messages.length)
          return { ...claimed, wake }
        }
        const left = deadline - (yield* Clock.currentTimeMillis)
        if (left <= 0) return empty(wake)
        if ((yield* waker.takePartitionHints(target)).length > 0) continue
        // Parked until a wake names the queue, or the re-poll: long while the mesh wakes this replica's
        // pops, short while it cannot (the waker shortens it by itself, see `Broker.ts`).
        wake = yield* waker.awaitWake(target, { maxWait: Duration.min(Duration.millis(left), config.repoll) })
        yield* stages.mark("woke")
        yield* Metric.update(metrics.waits, wake)
        if (wake === "shutdown" || (yield* SubscriptionRef.get(flags.popMaintenance)))
          return empty("shutdown")
      }
    })

  const ack: QueuesShape["ack"] = (tenant, queue, lease, ids) =>
    store.ack(tenant, queue, lease, ids).pipe(Effect.tap((n) => Metric.incrementBy(metrics.acked, n)))

  /** Committed first; then this replica's cache is set and the peers drop theirs (they re-read it). */
  const configure: QueuesShape["configure"] = (tenant, queue, settings) =>
    Effect.gen(function* () {
      yield* store.configure(tenant, queue, settings)
      yield* cache.set({ queue, tenant }, settings)
      yield* mesh
        .queueConfigSet({ queue, tenant })
        .pipe(Effect.catchAll((error) => Effect.logDebug("configuration not announced", error)))
    })

  const quietly = <E>(set: Effect.Effect<void, E>) =>
    Effect.catchAll(set, (error) => Effect.logDebug("maintenance not announced", error))

  // Pop maintenance flipped on, here or on a peer: the parked pops answer now instead of at their
  // timeout. The flags are `SubscriptionRef`s, so their changes are a stream.
  yield* flags.popMaintenance.changes.pipe(
    Stream.filter((on) => on),
    Stream.runForEach(() => waker.releaseAll),
    Effect.forkScoped
  )

  // Leases that ran out (a consumer died, or never acked): their messages are claimable again, which is
  // news for every replica's pops, like a push.
  yield* store.releaseExpired(1000).pipe(
    Effect.tap((released) => Metric.incrementBy(metrics.released, released.length)),
    Effect.flatMap((released) =>
      released.length === 0
        ? Effect.void
        : mesh.messageAvailableBatch(
            released.map(({ tenant, queue, partition }) => ({ queue, partition, tenant }))
          )
    ),
    Effect.catchAllCause((cause) => Effect.logWarning("lease sweep failed; retrying", cause)),
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

export const layer = Layer.scoped(Queues, make)
