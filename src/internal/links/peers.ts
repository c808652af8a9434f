/**
 * The send side of the mesh (spec "Topology"): one `PeerLink` (the bounded send queue and its
 * accounting) and one `OutboundLink` (the dialer) per peer, the dialers in a `FiberMap`, owned by this
 * service for the life of its scope. The entries live in a `PeerBook`; with a `Discovery`, its
 * `DiscoveryRounds` add the peers it finds and drop the ones that went. Nothing is dialled when the TCP
 * mesh does not run.
 *
 * @internal
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberMap from "effect/FiberMap"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as MeshConfig from "../../MeshConfig.js"
import type { LinkDown } from "../../MeshError.js"
import { MeshEvents } from "../../MeshEvent.js"
import { Transport } from "../../Transport.js"
import { loop } from "../loop.js"
import * as Topology from "../membership/topology.js"
import { type DiscoveryCounts, DiscoveryRounds } from "./discoveryRounds.js"
import type * as Handshake from "./handshake.js"
import * as Heartbeats from "./heartbeats.js"
import { Liveness } from "./liveness.js"
import { OutboundLink, reconnectSchedule } from "./outboundLink.js"
import { type FoundBy, PeerBook } from "./peerBook.js"
import type { PeerLink, PeerLinkState } from "./peerLink.js"
import { SelfDialsService } from "./selfDials.js"

export type { DiscoveryCounts } from "./discoveryRounds.js"
export type { FoundBy } from "./peerBook.js"

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

export class Peers extends Context.Service<Peers, PeersShape>()("queen-mesh/internal/Peers") {}

/** Options of the dialers. */
export interface PeersOptions {
  /** The delays between dials of one peer. Default: 250 ms doubling to 5 s, afresh once established. */
  readonly reconnectSchedule?: Schedule.Schedule<unknown, LinkDown>
}

/** Bytes a peer's send queue holds at most, whatever its frame capacity. */
const QUEUE_BYTES = 32 * 1024 * 1024

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
      heartbeats: yield* Heartbeats.make(config.heartbeatInterval),
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
      // A link busy since the last tick skips its heartbeat: it then goes at most two intervals without
      // a frame, so only where that stays within the dead threshold and the idle timeout (the peers
      // share them: the spec's settings are cluster-wide). Upstream counts any frame as liveness too.
      skipBusyHeartbeats:
        2 * Duration.toMillis(config.heartbeatInterval) <=
        Math.min(Duration.toMillis(config.deadThreshold), Duration.toMillis(config.idleTimeout)),
      // The server a link reaches: by the id its challenge gave, else by its address when one server
      // alone dialled in from there.
      peerSilence: (link: PeerLink): number | undefined => {
        const learnedId = link.learnedServerId
        if (learnedId !== undefined) return liveness.silentFor(learnedId)
        const host = link.host
        return host === undefined ? undefined : liveness.silentForHost(host)
      }
    }

    const book = new PeerBook({
      serverId: config.serverId,
      sendQueueCapacity: config.sendQueueCapacity,
      queueBytes,
      events,
      start: (link) =>
        FiberMap.run(dialers, link.name, new OutboundLink(link, transport, outboundOptions).run),
      // Interrupting the dialer ends its session, which takes the link down and discards its queue.
      stop: (link) => FiberMap.remove(dialers, link.name)
    })

    if (active) {
      // A peer listed twice would get every frame twice: merged, with a warning.
      const { peers: distinct, duplicates } = MeshConfig.dedupePeers(config.peers)
      if (duplicates.length > 0) {
        yield* Effect.logWarning("the peer list names a peer more than once; dialling it once").pipe(
          Effect.annotateLogs({ module: "Peers", duplicates: duplicates.map(MeshConfig.peerName).join(",") })
        )
      }
      for (const peer of distinct) yield* book.add(peer, "config")
    }

    const rounds =
      active && Option.isSome(topology.discovery)
        ? new DiscoveryRounds(topology.discovery.value, book)
        : undefined
    if (rounds !== undefined) yield* loop("Discovery", rounds.round, { sleep: config.discoveryInterval })

    return {
      broadcast: (bytes) => book.broadcast(bytes),
      get size() {
        return book.links.length
      },
      links: Effect.sync(() => book.links.map((link) => link.snapshot())),
      membershipCounts: Effect.sync(() => book.counts()),
      discovery: Effect.sync(() => (rounds === undefined ? Option.none() : Option.some(rounds.counts())))
    }
  })

/** The peers of `MeshConfig` and the `Discovery`, over the `Transport` provided. */
export const layer = (
  options: PeersOptions = {}
): Layer.Layer<Peers, never, MeshConfig.MeshConfig | Transport | SelfDialsService | MeshEvents | Liveness> =>
  Layer.effect(Peers, make(options))
