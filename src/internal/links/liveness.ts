/**
 * Inbound liveness (spec "Topology"): the last time any frame came from each peer, keyed by the server
 * id it announced in its HELLO. A peer silent for the dead threshold is dead; a peer never heard from
 * is absent, not dead. Liveness is a protocol matter: heartbeats keep it fresh on an idle cluster, and
 * the socket is never trusted to report a dead peer.
 *
 * The map is a plain `Map` owned by this service and changed only by its methods. The receive path
 * refreshes an entry synchronously (`register` once after the HELLO, then the returned `Refresh` on
 * every chunk), so liveness costs no effect per frame. A monitor fiber turns silent peers dead.
 *
 * The map is bounded, since a replayed HELLO can announce any server id: at most `maxEntries` servers
 * (the longest silent is evicted first), and a server silent for `pruneAfter` is forgotten.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as MeshConfig from "../../MeshConfig.js"
import { MeshEvents } from "../../MeshEvent.js"
import { loop } from "../loop.js"
import * as Stall from "../stall.js"
import { printable } from "../wire/peerText.js"
import { type Advert, ephemeralCapable } from "./handshake.js"

/**
 * One server as liveness knows it now.
 */
export interface ServerState {
  readonly serverId: string
  readonly alive: boolean
  /** Milliseconds since the last frame from it. */
  readonly silentFor: number
  /** The handshake version its latest connection authenticated with. */
  readonly authVersion: 1 | 2
  /** What its latest HELLO advertised of upstream's HELLO v2. */
  readonly advert: Advert
  /** Its latest HELLO made it ephemeral-capable (`Handshake.ephemeralCapable`). */
  readonly ephemeralCapable: boolean
  /** The id of the key its latest HELLO proved. */
  readonly keyId: Option.Option<string>
}

/** How a server's connection authenticated and what it advertised, recorded at its HELLO (each HELLO
 * overwrites the last, as upstream keeps it). */
export interface HelloInfo {
  readonly authVersion: 1 | 2
  readonly advert: Advert
  /** The id of the key its HELLO proved; none in open mode. */
  readonly keyId: Option.Option<string>
  /** The address its connection came from, without the port (`undefined` when unknown). */
  readonly remoteHost?: string | undefined
}

/**
 * Refreshes one server's entry now, synchronously.
 */
export type Refresh = () => void

/**
 * The inbound-liveness map of a running mesh.
 */
export interface LivenessShape {
  /**
   * The synchronous refresher of `serverId`'s entry, for a connection to call on every chunk once its
   * HELLO verified. Registering counts as hearing from it.
   */
  readonly register: (serverId: string, hello: HelloInfo) => Refresh
  /** Every server heard so far with its state now, sorted by server id. */
  readonly servers: Effect.Effect<ReadonlyArray<ServerState>>
  /** Alive and dead counts now. */
  readonly counts: Effect.Effect<{ readonly alive: number; readonly dead: number }>
  /** Milliseconds since the last frame from `serverId`, or `undefined` if it was never heard (or forgotten). */
  readonly silentFor: (serverId: string) => number | undefined
  /**
   * The same for the one server whose latest connection came from `host`, or `undefined` when none or
   * more than one did (then the host says nothing about which server it is).
   */
  readonly silentForHost: (host: string) => number | undefined
}

/**
 * Inbound liveness, as the listener and the stats see it.
 */
export class Liveness extends Context.Service<Liveness, LivenessShape>()("queen-mesh/internal/Liveness") {}

/**
 * The silence after which a peer is dead, and the bounds of the map.
 */
export interface LivenessOptions {
  readonly deadThreshold: Duration.Input
  /** Servers kept at most; the longest silent is evicted first. Default 256. */
  readonly maxEntries?: number
  /** A server silent this long is forgotten. Default 10 minutes (at least 10 dead thresholds). */
  readonly pruneAfter?: Duration.Input
}

interface Entry {
  readonly serverId: string
  lastSeen: number
  alive: boolean
  present: boolean
  hello: HelloInfo
  capable: boolean
}

/**
 * Starts the map and its monitor in the current scope. Transitions (a first HELLO, a dead peer heard
 * again, a peer passing the dead threshold) are published as `PeerUp` / `PeerDown` and logged.
 */
export const make = (
  options: LivenessOptions
): Effect.Effect<LivenessShape, never, Scope.Scope | MeshEvents> =>
  Effect.gen(function* () {
    const events = yield* MeshEvents
    const threshold = Duration.toMillis(options.deadThreshold)
    const maxEntries = options.maxEntries ?? 256
    const pruneAfter = Math.max(Duration.toMillis(options.pruneAfter ?? Duration.minutes(10)), 10 * threshold)
    const clock = yield* Clock.Clock
    const runFork = Effect.runForkWith(yield* Effect.context<never>())
    const entries = new Map<string, Entry>()

    const announce = (entry: Entry, alive: boolean) => {
      events.emit(
        alive ? { _tag: "PeerUp", serverId: entry.serverId } : { _tag: "PeerDown", serverId: entry.serverId }
      )
      const peer = printable(entry.serverId)
      runFork(
        alive
          ? Effect.logInfo("mesh peer alive").pipe(Effect.annotateLogs({ module: "Liveness", peer }))
          : Effect.logWarning("mesh peer dead").pipe(
              Effect.annotateLogs({ module: "Liveness", peer, dead_threshold_ms: threshold })
            )
      )
    }

    const evictOne = () => {
      let oldest: Entry | undefined
      for (const entry of entries.values())
        if (oldest === undefined || entry.lastSeen < oldest.lastSeen) oldest = entry
      if (oldest === undefined) return
      entries.delete(oldest.serverId)
      oldest.present = false
    }

    const insert = (entry: Entry) => {
      if (entries.size >= maxEntries) evictOne()
      entries.set(entry.serverId, entry)
      entry.present = true
    }

    const register = (serverId: string, hello: HelloInfo): Refresh => {
      let entry = entries.get(serverId)
      if (entry === undefined) {
        entry = {
          serverId,
          lastSeen: clock.currentTimeMillisUnsafe(),
          alive: false,
          present: false,
          hello,
          capable: ephemeralCapable(hello.advert)
        }
        insert(entry)
      } else {
        entry.hello = hello
        entry.capable = ephemeralCapable(hello.advert)
      }
      const own = entry
      const refresh = () => {
        own.lastSeen = clock.currentTimeMillisUnsafe()
        // Evicted while its connection lives on: it is back (the connection proves it talks to us).
        if (!own.present) {
          const other = entries.get(serverId)
          if (other !== undefined && other !== own) {
            other.lastSeen = own.lastSeen
            if (!other.alive) {
              other.alive = true
              announce(other, true)
            }
            return
          }
          insert(own)
        }
        if (!own.alive) {
          own.alive = true
          announce(own, true)
        }
      }
      refresh()
      return refresh
    }

    // Waits until the earliest moment an alive peer can turn dead (or a silent one is to be forgotten),
    // then marks the overdue ones and forgets the long silent. A peer heard meanwhile only moves its
    // deadline later, which the wait reads again without waking the monitor (`Stall.until`). Woken late
    // (this process was held up), it reads what arrived meanwhile before it judges.
    const untilDue = (now: number) => {
      let due = now + threshold
      for (const entry of entries.values()) {
        if (entry.lastSeen + pruneAfter < due) due = entry.lastSeen + pruneAfter
        if (entry.alive && entry.lastSeen + threshold < due) due = entry.lastSeen + threshold
      }
      return due - now
    }
    const judge = Effect.sync(() => {
      const now = clock.currentTimeMillisUnsafe()
      for (const entry of [...entries.values()]) {
        if (now - entry.lastSeen >= pruneAfter) {
          entries.delete(entry.serverId)
          entry.present = false
          continue
        }
        if (entry.alive && now - entry.lastSeen >= threshold) {
          entry.alive = false
          announce(entry, false)
        }
      }
    })
    yield* loop("Liveness", Effect.andThen(Stall.until(untilDue), judge))

    const snapshot = Effect.sync(() => {
      const now = clock.currentTimeMillisUnsafe()
      return [...entries.values()]
        .map((entry) => ({
          serverId: entry.serverId,
          alive: now - entry.lastSeen < threshold,
          silentFor: now - entry.lastSeen,
          authVersion: entry.hello.authVersion,
          advert: entry.hello.advert,
          ephemeralCapable: entry.capable,
          keyId: entry.hello.keyId
        }))
        .sort((a, b) => (a.serverId < b.serverId ? -1 : a.serverId > b.serverId ? 1 : 0))
    })

    const silentFor = (serverId: string): number | undefined => {
      const entry = entries.get(serverId)
      return entry === undefined ? undefined : clock.currentTimeMillisUnsafe() - entry.lastSeen
    }
    const silentForHost = (host: string): number | undefined => {
      let found: Entry | undefined
      for (const entry of entries.values()) {
        if (entry.hello.remoteHost !== host) continue
        if (found !== undefined) return undefined
        found = entry
      }
      return found === undefined ? undefined : clock.currentTimeMillisUnsafe() - found.lastSeen
    }

    return {
      register,
      silentFor,
      silentForHost,
      servers: snapshot,
      counts: Effect.map(snapshot, (servers) => {
        const alive = servers.filter((s) => s.alive).length
        return { alive, dead: servers.length - alive }
      })
    }
  })

/**
 * Liveness configured from `MeshConfig` (its dead threshold).
 */
export const layer = (
  options: Omit<LivenessOptions, "deadThreshold"> = {}
): Layer.Layer<Liveness, never, MeshConfig.MeshConfig | MeshEvents> =>
  Layer.effect(
    Liveness,
    Effect.flatMap(Effect.service(MeshConfig.MeshConfig), (config) =>
      make({ ...options, deadThreshold: config.deadThreshold })
    )
  )
