/**
 * The peer entries of a running mesh (spec "Topology"): one `PeerLink` per peer, configured or
 * discovered, with how it was found, and the joins and leaves since the start. The book owns the entries;
 * starting and stopping a peer's dialer is the caller's, passed in.
 *
 * The links are an array replaced (never mutated) on every change, so a broadcast iterates a stable
 * array with no lookup per frame.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as MeshConfig from "../../MeshConfig.js"
import type { MeshEventsShape } from "../../MeshEvent.js"
import { writeHistogram } from "../metrics/metricNames.js"
import { PeerLink, type PeerLinkState } from "./peerLink.js"

/** How a peer entry came: configured, or found by a discovery of this kind. */
export type FoundBy = PeerLinkState["foundBy"]

/** Joins or leaves, by how the peer was found. */
export type ByFoundBy = Readonly<Record<FoundBy, number>>

/** A peer's entry: its link, how it was found, and the discovery rounds it has been missing from. */
interface Entry {
  readonly link: PeerLink
  readonly foundBy: FoundBy
  missing: number
}

/** What the book needs from its owner: the link's sizes and how a dialer starts and stops. */
export interface PeerBookOptions {
  readonly serverId: string
  readonly sendQueueCapacity: number
  readonly queueBytes: number
  readonly events: MeshEventsShape
  /** Starts the dialer of a new link. */
  readonly start: (link: PeerLink) => Effect.Effect<void>
  /** Stops the dialer of a link that left. */
  readonly stop: (link: PeerLink) => Effect.Effect<void>
}

/** The book's key of a peer: its host, case-folded, and port. */
export const peerKey = (peer: MeshConfig.Peer): string => `${peer.host.toLowerCase()}\u0000${peer.port}`

const zero = (): Record<FoundBy, number> => ({ config: 0, dns: 0, discovery: 0 })

/** The entries, the stable array of their links, and the joins and leaves. */
export class PeerBook {
  private readonly entries = new Map<string, Entry>()
  private readonly joined = zero()
  private readonly left = zero()
  /** Every peer's link, replaced on every change. */
  links: ReadonlyArray<PeerLink> = []

  constructor(private readonly options: PeerBookOptions) {}

  /** Adds a peer and starts its dialer; a peer already known is marked present. True when it is new. */
  add(peer: MeshConfig.Peer, foundBy: FoundBy): Effect.Effect<boolean> {
    return Effect.suspend(() => {
      const key = peerKey(peer)
      const known = this.entries.get(key)
      if (known !== undefined) {
        known.missing = 0
        return Effect.succeed(false)
      }
      const { options } = this
      const name = MeshConfig.peerName(peer)
      const link = new PeerLink(
        peer,
        name,
        options.sendQueueCapacity,
        options.queueBytes,
        writeHistogram(options.serverId, name),
        foundBy
      )
      this.entries.set(key, { link, foundBy, missing: 0 })
      this.links = [...this.links, link]
      this.joined[foundBy]++
      options.events.emit({ _tag: "MemberJoined", peer: name, foundBy })
      return Effect.as(options.start(link), true)
    })
  }

  /**
   * Counts a discovery round: every discovered peer not in `present` has missed one more round, and
   * those that missed `rounds` in a row leave. Configured peers never do.
   */
  missedRound(present: ReadonlySet<string>, rounds: number): Effect.Effect<void> {
    return Effect.suspend(() => {
      const gone: Array<string> = []
      for (const [key, entry] of this.entries) {
        if (entry.foundBy === "config" || present.has(key)) continue
        entry.missing++
        if (entry.missing >= rounds) gone.push(key)
      }
      return Effect.forEach(gone, (key) => this.remove(key, `missing from ${rounds} discovery rounds`), {
        discard: true
      })
    })
  }

  /** Removes a peer: its dialer stops, which ends its session and discards its queue. */
  private remove(key: string, reason: string): Effect.Effect<void> {
    return Effect.suspend(() => {
      const entry = this.entries.get(key)
      if (entry === undefined) return Effect.void
      this.entries.delete(key)
      this.links = this.links.filter((link) => link !== entry.link)
      this.left[entry.foundBy]++
      return Effect.andThen(
        this.options.stop(entry.link),
        Effect.sync(() => {
          entry.link.down()
          this.options.events.emit({
            _tag: "MemberLeft",
            peer: entry.link.name,
            foundBy: entry.foundBy,
            reason
          })
        })
      ).pipe(
        Effect.andThen(
          Effect.logInfo("mesh peer left: its link is closed").pipe(
            Effect.annotateLogs({ module: "Peers", peer: entry.link.name, reason })
          )
        )
      )
    })
  }

  /** Hands one encoded frame to every link; how many took it. */
  broadcast(bytes: Uint8Array): number {
    const now = this.links
    let taken = 0
    for (let i = 0; i < now.length; i++) if (now[i]!.offer(bytes)) taken++
    return taken
  }

  /** The joins and leaves since the start. */
  counts(): { readonly joined: ByFoundBy; readonly left: ByFoundBy } {
    return { joined: { ...this.joined }, left: { ...this.left } }
  }
}
