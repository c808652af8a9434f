/**
 * The send side of the mesh (spec "Topology"): one `PeerLink` (the bounded send queue and its
 * accounting) and one `OutboundLink` (the dialer) per peer, the dialers in a `FiberMap`, owned by this
 * service for the life of its scope. The peers are the configured ones (static seeds) and, with a
 * `Discovery`, the ones it finds: every interval a round asks it for the peers that exist now, a new one
 * is dialled at once, and one missing from two rounds in a row has its link closed (a failed round,
 * or one missing round, drops nothing). Nothing is dialled when the TCP mesh does not run.
 *
 * The links are an array replaced (never mutated) on every change, so a broadcast iterates a stable
 * array with no lookup per frame.
 *
 * @internal
 */
import { Clock, Context, Effect, Either, FiberMap, Layer, Option, type Schedule, type Scope } from "effect"
import type { DiscoveryShape } from "../../Discovery.js"
import * as MeshConfig from "../../MeshConfig.js"
import type { LinkDown } from "../../MeshError.js"
import { MeshEvents } from "../../MeshEvent.js"
import { Transport } from "../../Transport.js"
import { loop } from "../loop.js"
import * as Topology from "../membership/topology.js"
import { writeHistogram } from "../metrics/metricNames.js"
import type * as Handshake from "./handshake.js"
import { Liveness } from "./liveness.js"
import { OutboundLink, reconnectSchedule } from "./outboundLink.js"
import { PeerLink, type PeerLinkState } from "./peerLink.js"
import { SelfDialsService } from "./selfDials.js"

/** How a peer entry came: configured, or found by a discovery of this kind. */
export type FoundBy = PeerLinkState["foundBy"]

/** What discovery did since the start. */
export interface DiscoveryCounts {
  readonly source: string
  readonly rounds: number
  readonly failedRounds: number
  readonly lastError: Option.Option<string>
  /** A round has found at least one peer (this node's own address counts): the source works. */
  readonly found: boolean
}

/** The send side of a running mesh: one link per peer, configured or discovered. */
export interface PeersShape {
  /**
   * Hands one encoded frame to every peer's link, synchronously: never blocks, never fails; a link
   * that cannot take it drops it and counts why. Returns how many links took it.
   */
  readonly broadcast: (bytes: Uint8Array) => number
  /** How many peer entries there are now (0 when the TCP mesh does not run). */
  readonly size: number
  /** Every peer's link, now. */
  readonly links: Effect.Effect<ReadonlyArray<PeerLinkState>>
  /** Members that joined and left (by how they were found), since the start. */
  readonly membershipCounts: Effect.Effect<{
    readonly joined: Readonly<Record<FoundBy, number>>
    readonly left: Readonly<Record<FoundBy, number>>
  }>
  /** What discovery did, when there is one. */
  readonly discovery: Effect.Effect<Option.Option<DiscoveryCounts>>
}

export class Peers extends Context.Tag("queen-mesh/internal/Peers")<Peers, PeersShape>() {}

/** Options of the dialers. */
export interface PeersOptions {
  /** The delays between dials of one peer. Default: 250 ms doubling to 5 s, afresh once established. */
  readonly reconnectSchedule?: Schedule.Schedule<unknown, LinkDown>
}

/** Bytes a peer's send queue holds at most, whatever its frame capacity. */
const QUEUE_BYTES = 32 * 1024 * 1024

/** Rounds a discovered peer may be missing before its link is closed: one round is a blip. */
const MISSING_ROUNDS = 2

/** A discovery that keeps failing is warned about at most this often. */
const DISCOVERY_WARNING_MS = 60_000

const keyOf = (peer: MeshConfig.Peer): string => `${peer.host.toLowerCase()}\u0000${peer.port}`

interface Entry {
  readonly link: PeerLink
  readonly foundBy: FoundBy
  /** Consecutive discovery rounds it was missing from. */
  missing: number
}

const zero = (): Record<FoundBy, number> => ({ config: 0, dns: 0, discovery: 0 })

/** Starts a dialer per configured peer and the discovery loop (none when the TCP mesh does not run). */
export const make = (
  options: PeersOptions = {}
): Effect.Effect<
  PeersShape,
  never,
  Scope.Scope | MeshConfig.MeshConfig | Transport | SelfDialsService | MeshEvents | Liveness
> =>
  Effect.gen(function* () {
    const config = yield* MeshConfig.MeshConfig
    const transport = yield* Transport
    const selfDials = yield* SelfDialsService
    const events = yield* MeshEvents
    const liveness = yield* Liveness
    const topology = yield* Topology.decide
    const active = topology.tcp
    const queueBytes = Math.max(QUEUE_BYTES, config.sendQueueCapacity * 64)
    const dialers = yield* FiberMap.make<string>()
    const httpAddr = MeshConfig.httpAddress(config)
    const advert: Handshake.Advert = {
      http_addr: httpAddr,
      eph_epoch: Option.isSome(httpAddr) ? Option.some(config.ephEpoch) : Option.none()
    }
    const outboundOptions = {
      serverId: config.serverId,
      secret: config.secret,
      heartbeatInterval: config.heartbeatInterval,
      authFailureDelay: config.authFailureDelay,
      schedule: options.reconnectSchedule ?? reconnectSchedule,
      auth: config.auth,
      challengeWait: config.challengeWait,
      handshakeTimeout: config.handshakeTimeout,
      label: config.clusterLabel,
      advert,
      selfDials,
      events,
      startGrace: config.deadThreshold,
      deadThreshold: config.deadThreshold,
      // The server a link reaches: by the id its challenge gave, else by its address when one server
      // alone dialled in from there.
      peerSilence: (link: PeerLink): number | undefined => {
        const state = link.identity
        if (state.learnedId !== undefined) return liveness.silentFor(state.learnedId)
        return state.host === undefined ? undefined : liveness.silentForHost(state.host)
      }
    }

    const entries = new Map<string, Entry>()
    let links: ReadonlyArray<PeerLink> = []
    const joined = zero()
    const left = zero()

    const add = (peer: MeshConfig.Peer, foundBy: FoundBy): Effect.Effect<boolean> =>
      Effect.suspend(() => {
        const key = keyOf(peer)
        const known = entries.get(key)
        if (known !== undefined) {
          known.missing = 0
          return Effect.succeed(false)
        }
        const name = MeshConfig.peerName(peer)
        const link = new PeerLink(
          peer,
          name,
          config.sendQueueCapacity,
          queueBytes,
          writeHistogram(config.serverId, name),
          foundBy
        )
        entries.set(key, { link, foundBy, missing: 0 })
        links = [...links, link]
        joined[foundBy]++
        events.emit({ _tag: "MemberJoined", peer: name, foundBy })
        const outbound = new OutboundLink(link, transport, outboundOptions)
        return Effect.as(FiberMap.run(dialers, name, outbound.run), true)
      })

    const remove = (key: string, reason: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        const entry = entries.get(key)
        if (entry === undefined) return Effect.void
        entries.delete(key)
        links = links.filter((link) => link !== entry.link)
        left[entry.foundBy]++
        // Interrupting the dialer ends its session, which takes the link down and discards its queue.
        return Effect.zipRight(
          FiberMap.remove(dialers, entry.link.name),
          Effect.sync(() => {
            entry.link.down()
            events.emit({ _tag: "MemberLeft", peer: entry.link.name, foundBy: entry.foundBy, reason })
          })
        ).pipe(
          Effect.zipRight(
            Effect.logInfo("mesh peer left: its link is closed").pipe(
              Effect.annotateLogs({ module: "Peers", peer: entry.link.name, reason })
            )
          )
        )
      })

    if (active) {
      // A peer listed twice would get every frame twice: merged, with a warning.
      const { peers: distinct, duplicates } = MeshConfig.dedupePeers(config.peers)
      if (duplicates.length > 0) {
        yield* Effect.logWarning("the peer list names a peer more than once; dialling it once").pipe(
          Effect.annotateLogs({ module: "Peers", duplicates: duplicates.map(MeshConfig.peerName).join(",") })
        )
      }
      for (const peer of distinct) yield* add(peer, "config")
    }

    let discoveryCounts: Option.Option<DiscoveryCounts> = Option.none()
    if (active && Option.isSome(topology.discovery)) {
      const discovery: DiscoveryShape = topology.discovery.value
      let rounds = 0
      let failedRounds = 0
      let lastError: Option.Option<string> = Option.none()
      let lastWarning = Number.NEGATIVE_INFINITY
      let foundAny = false
      const counts = () => {
        discoveryCounts = Option.some({
          source: discovery.source,
          rounds,
          failedRounds,
          lastError,
          found: foundAny
        })
      }
      counts()
      const round = Effect.gen(function* () {
        rounds++
        const found = yield* Effect.either(discovery.peers)
        if (Either.isLeft(found)) {
          failedRounds++
          lastError = Option.some(found.left.message)
          counts()
          const now = yield* Clock.currentTimeMillis
          if (now - lastWarning >= DISCOVERY_WARNING_MS) {
            lastWarning = now
            yield* Effect.logWarning("discovery round failed: the peers stay as they are").pipe(
              Effect.annotateLogs({ module: "Peers", source: discovery.source, reason: found.left.message })
            )
          }
          return
        }
        lastError = Option.none()
        counts()
        const present = new Set<string>()
        for (const peer of found.right) {
          if (!MeshConfig.isPort(peer.port)) continue
          if (!MeshConfig.isValidHost(peer.host)) continue
          present.add(keyOf(peer))
          foundAny = true
          yield* add(peer, discovery.kind)
        }
        counts()
        for (const [key, entry] of [...entries]) {
          if (entry.foundBy === "config" || present.has(key)) continue
          entry.missing++
          if (entry.missing >= MISSING_ROUNDS)
            yield* remove(key, `missing from ${MISSING_ROUNDS} discovery rounds`)
        }
      })
      yield* loop("Discovery", round, { sleep: config.discoveryInterval })
    }

    const broadcast = (bytes: Uint8Array): number => {
      const now = links
      let taken = 0
      for (let i = 0; i < now.length; i++) if (now[i]!.offer(bytes)) taken++
      return taken
    }
    return {
      broadcast,
      get size() {
        return links.length
      },
      links: Effect.sync(() => links.map((link) => link.snapshot())),
      membershipCounts: Effect.sync(() => ({ joined: { ...joined }, left: { ...left } })),
      discovery: Effect.sync(() => discoveryCounts)
    }
  })

/** The peers of `MeshConfig` and the `Discovery`, over the `Transport` provided. */
export const layer = (
  options: PeersOptions = {}
): Layer.Layer<Peers, never, MeshConfig.MeshConfig | Transport | SelfDialsService | MeshEvents | Liveness> =>
  Layer.scoped(Peers, make(options))
