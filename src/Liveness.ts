/**
 * Inbound liveness (spec "Topology"): the last time any frame came from each peer, keyed by the server
 * id it announced in its HELLO. A peer silent for the dead threshold is dead; a peer never heard from
 * is absent, not dead. Liveness is a protocol matter: heartbeats keep it fresh on an idle cluster, and
 * the socket is never trusted to report a dead peer.
 *
 * The map is a `Ref` from server id to a small mutable cell. A connection looks its cell up once, after
 * the HELLO, and then refreshes it on every chunk with a plain write (`touch`), so the receive path
 * pays no effect for liveness; only a transition (a dead or new peer heard) returns one.
 *
 * @since 0.1.0
 */
import { Duration, Effect, HashMap, Option, Ref, type Scope } from "effect"

/**
 * @since 0.1.0
 * @category models
 */
export interface PeerLiveness {
  /** `Clock` time of the last frame from the peer, in milliseconds. */
  readonly lastSeen: number
  readonly alive: boolean
}

/** The mutable cell behind a `PeerLiveness`. */
interface Cell {
  lastSeen: number
  alive: boolean
}

/**
 * Refreshes one peer's cell now. Returns the effect announcing its coming alive when it was dead (or
 * never heard), else `undefined`.
 *
 * @since 0.1.0
 * @category models
 */
export type Touch = () => Effect.Effect<void> | undefined

/**
 * @since 0.1.0
 * @category models
 */
export interface Liveness {
  /** Records a frame from `serverId` now. */
  readonly heard: (serverId: string) => Effect.Effect<void>
  /** The synchronous refresher of `serverId`'s cell, for a connection to call on every chunk. */
  readonly touch: (serverId: string) => Effect.Effect<Touch>
  /** Every peer heard so far, by server id. */
  readonly peers: Effect.Effect<HashMap.HashMap<string, PeerLiveness>>
  /** Alive and dead counts, judged against the threshold at the current time. */
  readonly counts: Effect.Effect<{ readonly alive: number; readonly dead: number }>
  /** Every peer heard so far with its state now, sorted by server id. */
  readonly servers: Effect.Effect<
    ReadonlyArray<{ readonly serverId: string; readonly alive: boolean; readonly silentFor: number }>
  >
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Transition {
  readonly serverId: string
  readonly alive: boolean
}

/**
 * Starts the liveness map and its monitor, which runs in the current scope. `onTransition` is called
 * once per alive-to-dead and dead-to-alive change (a first HELLO counts as coming alive).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: {
  readonly deadThreshold: Duration.DurationInput
  readonly onTransition: (transition: Transition) => Effect.Effect<void>
}): Effect.Effect<Liveness, never, Scope.Scope> =>
  Effect.gen(function* () {
    const threshold = Duration.toMillis(Duration.decode(options.deadThreshold))
    const clock = yield* Effect.clock
    const state = yield* Ref.make(HashMap.empty<string, Cell>())

    const cellOf = (serverId: string): Effect.Effect<Cell> =>
      Ref.modify(state, (map) => {
        const existing = HashMap.get(map, serverId)
        if (Option.isSome(existing)) return [existing.value, map]
        // Registered dead, so that the first touch announces it.
        const cell: Cell = { lastSeen: clock.unsafeCurrentTimeMillis(), alive: false }
        return [cell, HashMap.set(map, serverId, cell)]
      })

    const touch = (serverId: string): Effect.Effect<Touch> =>
      Effect.map(cellOf(serverId), (cell) => () => {
        cell.lastSeen = clock.unsafeCurrentTimeMillis()
        if (cell.alive) return undefined
        cell.alive = true
        return options.onTransition({ serverId, alive: true })
      })

    const heard = (serverId: string): Effect.Effect<void> =>
      Effect.flatMap(touch(serverId), (refresh) => refresh() ?? Effect.void)

    // Sleeps until the earliest moment an alive peer can turn dead, then marks the overdue ones. A
    // peer heard meanwhile only moves its deadline later, so waking early is the worst that happens.
    const monitor = Effect.gen(function* () {
      const now = clock.unsafeCurrentTimeMillis()
      const cells = [...(yield* Ref.get(state))]
      let wakeAt = now + threshold
      for (const [serverId, cell] of cells) {
        if (!cell.alive) continue
        if (now - cell.lastSeen >= threshold) {
          cell.alive = false
          yield* options.onTransition({ serverId, alive: false })
        } else {
          wakeAt = Math.min(wakeAt, cell.lastSeen + threshold)
        }
      }
      yield* Effect.sleep(Duration.millis(Math.max(1, wakeAt - now)))
    }).pipe(Effect.forever, Effect.annotateLogs({ module: "Liveness" }))
    yield* Effect.forkScoped(monitor)

    const snapshot = Effect.map(Ref.get(state), (map) => [...map])

    return {
      heard,
      touch,
      peers: Effect.map(
        Ref.get(state),
        HashMap.map((cell): PeerLiveness => ({ ...cell }))
      ),
      counts: Effect.map(snapshot, (cells) => {
        const now = clock.unsafeCurrentTimeMillis()
        let alive = 0
        for (const [, cell] of cells) if (now - cell.lastSeen < threshold) alive++
        return { alive, dead: cells.length - alive }
      }),
      servers: Effect.map(snapshot, (cells) => {
        const now = clock.unsafeCurrentTimeMillis()
        return cells
          .map(([serverId, cell]) => ({
            serverId,
            alive: now - cell.lastSeen < threshold,
            silentFor: now - cell.lastSeen
          }))
          .sort((a, b) => (a.serverId < b.serverId ? -1 : a.serverId > b.serverId ? 1 : 0))
      })
    }
  })
