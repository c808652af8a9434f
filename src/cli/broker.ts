/**
 * The demo's simulated broker: producers pushing to a few queues and tenants, consumers parked with
 * `awaitWake` and a fallback backoff, and a ledger standing in for the shared PostgreSQL (spec "The
 * mesh": the database is the truth, the mesh only makes a parked pop notice sooner).
 *
 * Every time a parked pop polls, each message from another replica that it sees for the first time
 * yields a sample: how long after the push the pop saw it, and how long the same pop would have waited
 * for its own backoff timer had no hint arrived ("backoff only", what a cut mesh costs).
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import type * as Scope from "effect/Scope"
import type { LocalWakerShape } from "../LocalWaker.js"
import type { MeshShape } from "../Mesh.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Push {
  readonly seq: number
  /** Milliseconds since the demo started. */
  readonly at: number
  readonly origin: string
}

/** Pushes kept per queue: far more than a consumer can fall behind in a demo. */
const LEDGER_KEEP = 1_000

/**
 * The shared database as the replicas see it: every push, by queue and tenant, in order.
 *
 * @since 0.1.0
 * @category models
 */
export class Ledger {
  private seq = 0
  private readonly byKey = new Map<string, Array<Push>>()

  append(key: string, origin: string, at: number): Push {
    const push: Push = { seq: ++this.seq, at, origin }
    let pushes = this.byKey.get(key)
    if (pushes === undefined) {
      pushes = []
      this.byKey.set(key, pushes)
    }
    pushes.push(push)
    if (pushes.length > LEDGER_KEEP) pushes.splice(0, pushes.length - LEDGER_KEEP)
    return push
  }

  /** Pushes to `key` after sequence number `cursor`. */
  since(key: string, cursor: number): ReadonlyArray<Push> {
    const pushes = this.byKey.get(key) ?? []
    let i = pushes.length
    while (i > 0 && pushes[i - 1]!.seq > cursor) i--
    return pushes.slice(i)
  }

  get latest(): number {
    return this.seq
  }
}

/**
 * One message from another replica, seen by a parked pop.
 *
 * @since 0.1.0
 * @category models
 */
export interface WakeSample {
  /** The replica the pop is parked on. */
  readonly node: string
  /** The replica the message was pushed on. */
  readonly origin: string
  /** When it was pushed, in milliseconds since the demo started. */
  readonly pushedAt: number
  /** When the pop saw the message, in milliseconds since the demo started. */
  readonly at: number
  /** Push to seen. */
  readonly latency: number
  /** Push to the pop's own backoff timer: what it would have waited without the hint. */
  readonly backoffOnly: number
  /** Whether the pop was woken early (by a hint) rather than by its timer. */
  readonly woken: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface BrokerOptions {
  readonly queues: ReadonlyArray<string>
  readonly tenants: ReadonlyArray<string>
  readonly partitions: number
  /** Each replica's producer pushes once every `min..max` milliseconds. */
  readonly pushEvery: readonly [min: number, max: number]
  /** A parked pop's backoff: starts at `initial`, doubles while it finds nothing, capped at `max`. */
  readonly backoff: { readonly initial: number; readonly max: number }
}

/**
 * Sparse enough per queue that backoffs grow, as they do on a real, mostly idle queue.
 *
 * @since 0.1.0
 * @category defaults
 */
export const defaults: BrokerOptions = {
  queues: ["orders", "payments", "emails"],
  // Tenants are UUIDs, as upstream Queen stores them (the mesh refuses any other by default).
  tenants: ["ac3e0000-0000-4000-8000-00000000ac3e", "910be000-0000-4000-8000-0000000910be"],
  partitions: 4,
  pushEvery: [250, 750],
  backoff: { initial: 250, max: 2000 }
}

/**
 * What the broker reports back to the demo.
 *
 * @since 0.1.0
 * @category models
 */
export interface BrokerObserver {
  /** Milliseconds since the demo started. */
  readonly now: Effect.Effect<number>
  readonly onPush: (node: string, push: Push) => void
  readonly onSample: (sample: WakeSample) => void
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const elapsedSince = (startNanos: bigint): Effect.Effect<number> =>
  Effect.map(Clock.currentTimeNanos, (nanos) => Number(nanos - startNanos) / 1e6)

const keyOf = (queue: string, tenant: string) => `${tenant}/${queue}`

const pick = <A>(items: ReadonlyArray<A>): Effect.Effect<A> =>
  Effect.map(Random.nextIntBetween(0, items.length), (i) => items[i]!)

/**
 * A replica's producer: a push commits (the ledger), then the mesh is told, as the broker does after a
 * push transaction. It also marks the partition hot, as a push does.
 *
 * @since 0.1.0
 * @category running
 */
export const producer = (
  node: string,
  mesh: MeshShape,
  ledger: Ledger,
  options: BrokerOptions,
  observer: BrokerObserver
): Effect.Effect<never> =>
  Effect.gen(function* () {
    yield* Effect.sleep(
      Duration.millis(yield* Random.nextIntBetween(options.pushEvery[0], options.pushEvery[1]))
    )
    const queue = yield* pick(options.queues)
    const tenant = yield* pick(options.tenants)
    const partition = `p${yield* Random.nextIntBetween(0, options.partitions)}`
    const push = ledger.append(keyOf(queue, tenant), node, yield* observer.now)
    observer.onPush(node, push)
    yield* mesh.messageAvailable({ queue, partition, tenant })
    yield* mesh.hotlistDirty({ queue, partition, tenant })
  }).pipe(
    Effect.catchCause((cause) => Effect.logError("demo producer failed a push", cause)),
    Effect.forever
  )

/**
 * A long-poll consumer on one queue and tenant: park until woken or until the backoff elapses, then
 * poll the ledger.
 *
 * @since 0.1.0
 * @category running
 */
export const consumer = (
  node: string,
  waker: LocalWakerShape,
  target: { readonly queue: string; readonly tenant: string },
  ledger: Ledger,
  options: BrokerOptions,
  observer: BrokerObserver
): Effect.Effect<never> =>
  Effect.suspend(() => {
    const key = keyOf(target.queue, target.tenant)
    const waitTarget = { queue: target.queue, tenant: Option.some(target.tenant) }
    let cursor = ledger.latest
    let wait = options.backoff.initial
    return Effect.gen(function* () {
      const parkedAt = yield* observer.now
      const outcome = yield* waker.awaitWake(waitTarget, { maxWait: Duration.millis(wait) })
      const now = yield* observer.now
      const pushes = ledger.since(key, cursor)
      const timerAt = parkedAt + wait
      for (const push of pushes) {
        cursor = Math.max(cursor, push.seq)
        if (push.origin === node) continue
        observer.onSample({
          node,
          origin: push.origin,
          pushedAt: push.at,
          at: now,
          latency: Math.max(0, now - push.at),
          backoffOnly: Math.max(0, timerAt - push.at),
          woken: outcome === "woken"
        })
      }
      wait = pushes.length > 0 ? options.backoff.initial : Math.min(wait * 2, options.backoff.max)
    }).pipe(Effect.forever)
  })

/**
 * Starts one replica's producer and a consumer per queue and tenant, in the current scope.
 *
 * @since 0.1.0
 * @category running
 */
export const start = (
  node: string,
  mesh: MeshShape,
  waker: LocalWakerShape,
  ledger: Ledger,
  options: BrokerOptions,
  observer: BrokerObserver
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    for (const queue of options.queues) {
      for (const tenant of options.tenants) {
        yield* Effect.forkScoped(consumer(node, waker, { queue, tenant }, ledger, options, observer))
      }
    }
    yield* Effect.forkScoped(producer(node, mesh, ledger, options, observer))
  })

/**
 * The `p`-th percentile (0..100) of `values`, nearest-rank; none when there are no values.
 *
 * @since 0.1.0
 * @category statistics
 */
export const percentile = (values: ReadonlyArray<number>, p: number): Option.Option<number> => {
  if (values.length === 0) return Option.none()
  const sorted = [...values].sort((a, b) => a - b)
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)))
  return Option.some(sorted[rank - 1]!)
}
