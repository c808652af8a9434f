/**
 * The send side of the mesh (spec "Topology"): one `PeerLink` (the bounded send queue and its
 * accounting) and one `OutboundLink` (the dialer) per configured peer, the dialers in a `FiberMap`,
 * owned by this service for the life of its scope. Nothing is dialled when the mesh is not active.
 *
 * @internal
 */
import { Context, Effect, FiberMap, Layer, Option, type Schedule, type Scope } from "effect"
import * as MeshConfig from "../MeshConfig.js"
import type { LinkDown } from "../MeshError.js"
import { MeshEvents } from "../MeshEvent.js"
import { Transport } from "../Transport.js"
import type * as Handshake from "./handshake.js"
import { writeHistogram } from "./metricNames.js"
import { OutboundLink, reconnectSchedule } from "./outboundLink.js"
import { PeerLink, type PeerLinkState } from "./peerLink.js"
import { SelfDialsService } from "./selfDials.js"

/** The send side of a running mesh: one link per configured peer. */
export interface PeersShape {
  /**
   * Hands one encoded frame to every peer's link, synchronously: never blocks, never fails; a link
   * that cannot take it drops it and counts why. Returns how many links took it.
   */
  readonly broadcast: (bytes: Uint8Array) => number
  /** How many peers are configured (0 when the mesh is not active). */
  readonly size: number
  /** Every configured peer's link, now. */
  readonly links: Effect.Effect<ReadonlyArray<PeerLinkState>>
}

export class Peers extends Context.Tag("queen-mesh/internal/Peers")<Peers, PeersShape>() {}

/** Options of the dialers. */
export interface PeersOptions {
  /** The delays between dials of one peer. Default: 250 ms doubling to 5 s, afresh once established. */
  readonly reconnectSchedule?: Schedule.Schedule<unknown, LinkDown>
}

/** Bytes a peer's send queue holds at most, whatever its frame capacity. */
const QUEUE_BYTES = 32 * 1024 * 1024

/** Starts a dialer per configured peer (none when the mesh is not active) in the current scope. */
export const make = (
  options: PeersOptions = {}
): Effect.Effect<
  PeersShape,
  never,
  Scope.Scope | MeshConfig.MeshConfig | Transport | SelfDialsService | MeshEvents
> =>
  Effect.gen(function* () {
    const config = yield* MeshConfig.MeshConfig
    const transport = yield* Transport
    const selfDials = yield* SelfDialsService
    const events = yield* MeshEvents
    const active = MeshConfig.isActive(config)
    const queueBytes = Math.max(QUEUE_BYTES, config.sendQueueCapacity * 64)
    // A peer listed twice would get every frame twice: merged, with a warning.
    const { peers: distinct, duplicates } = MeshConfig.dedupePeers(config.peers)
    if (active && duplicates.length > 0) {
      yield* Effect.logWarning("the peer list names a peer more than once; dialling it once").pipe(
        Effect.annotateLogs({ module: "Peers", duplicates: duplicates.map(MeshConfig.peerName).join(",") })
      )
    }
    const links = active
      ? distinct.map((peer) => {
          const name = MeshConfig.peerName(peer)
          return new PeerLink(
            peer,
            name,
            config.sendQueueCapacity,
            queueBytes,
            writeHistogram(config.serverId, name)
          )
        })
      : []
    const dialers = yield* FiberMap.make<string>()
    const httpAddr = MeshConfig.httpAddress(config)
    const advert: Handshake.Advert = {
      http_addr: httpAddr,
      eph_epoch: Option.isSome(httpAddr) ? Option.some(config.ephEpoch) : Option.none()
    }
    for (const link of links) {
      const outbound = new OutboundLink(link, transport, {
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
        startGrace: config.deadThreshold
      })
      yield* FiberMap.run(dialers, link.name, outbound.run)
    }

    const broadcast = (bytes: Uint8Array): number => {
      let taken = 0
      for (let i = 0; i < links.length; i++) if (links[i]!.offer(bytes)) taken++
      return taken
    }
    return { broadcast, size: links.length, links: Effect.sync(() => links.map((link) => link.snapshot())) }
  })

/** The peers configured in `MeshConfig`, over the `Transport` provided. */
export const layer = (
  options: PeersOptions = {}
): Layer.Layer<Peers, never, MeshConfig.MeshConfig | Transport | SelfDialsService | MeshEvents> =>
  Layer.scoped(Peers, make(options))
