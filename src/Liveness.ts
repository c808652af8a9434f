/**
 * Inbound liveness (spec "Topology"): the last time any frame came from each peer, keyed by the server
 * id it announced in its HELLO. A peer silent for the dead threshold is dead; a peer never heard from
 * is absent, not dead. Liveness is a protocol matter: heartbeats keep it fresh on an idle cluster, and
 * the socket is never trusted to report a dead peer.
 *
 * @since 0.1.0
 */
import { Clock, Duration, Effect, HashMap, Option, Ref, type Scope } from "effect"

/**
 * @since 0.1.0
 * @category models
 */
export interface PeerLiveness {
  /** `Clock` time of the last frame from the peer, in milliseconds. */
  readonly lastSeen: number
  readonly alive: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Liveness {
  /** Records a frame from `serverId` now. */
  readonly heard: (serverId: string) => Effect.Effect<void>
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
    const state = yield* Ref.make(HashMap.empty<string, PeerLiveness>())

    const heard = (serverId: string) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.flatMap(
          Ref.modify(state, (map) => {
            const before = HashMap.get(map, serverId)
            const revived = Option.isNone(before) || !before.value.alive
            return [revived, HashMap.set(map, serverId, { lastSeen: now, alive: true })]
          }),
          (revived) => (revived ? options.onTransition({ serverId, alive: true }) : Effect.void)
        )
      )

    // Sleeps until the earliest moment an alive peer can turn dead, then marks the overdue ones.
    const monitor = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const died = yield* Ref.modify(state, (map) => {
        const ids: Array<string> = []
        const next = HashMap.map(map, (peer, id) => {
          if (!peer.alive || now - peer.lastSeen < threshold) return peer
          ids.push(id)
          return { lastSeen: peer.lastSeen, alive: false }
        })
        return [ids, ids.length === 0 ? map : next]
      })
      yield* Effect.forEach(died, (serverId) => options.onTransition({ serverId, alive: false }), {
        discard: true
      })
      let wakeAt = now + threshold
      for (const peer of HashMap.values(yield* Ref.get(state))) {
        if (peer.alive) wakeAt = Math.min(wakeAt, peer.lastSeen + threshold)
      }
      yield* Effect.sleep(Duration.millis(Math.max(1, wakeAt - now)))
    }).pipe(Effect.forever, Effect.annotateLogs({ module: "Liveness" }))
    yield* Effect.forkScoped(monitor)

    return {
      heard,
      peers: Ref.get(state),
      servers: Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.map(Ref.get(state), (map) =>
          [...map]
            .map(([serverId, peer]) => ({
              serverId,
              alive: now - peer.lastSeen < threshold,
              silentFor: now - peer.lastSeen
            }))
            .sort((a, b) => (a.serverId < b.serverId ? -1 : a.serverId > b.serverId ? 1 : 0))
        )
      ),
      counts: Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.map(Ref.get(state), (map) => {
          let alive = 0
          let dead = 0
          for (const peer of HashMap.values(map)) {
            if (now - peer.lastSeen < threshold) alive++
            else dead++
          }
          return { alive, dead }
        })
      )
    }
  })
