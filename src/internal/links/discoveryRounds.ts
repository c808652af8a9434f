/**
 * Discovery's rounds (spec "Topology", discovered peers): every interval a round asks the `Discovery`
 * for the peers that exist now; a new one joins the book at once, and one missing from two rounds in a
 * row leaves. A failed round drops nothing, and is warned about at most once a minute. This unit owns
 * what discovery did since the start, which the stats and the health read.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import type { DiscoveryShape } from "../../Discovery.js"
import * as MeshConfig from "../../MeshConfig.js"
import { type PeerBook, peerKey } from "./peerBook.js"

/** What discovery did since the start. */
export interface DiscoveryCounts {
  readonly source: string
  readonly rounds: number
  readonly failedRounds: number
  readonly lastError: Option.Option<string>
  /** A round has found at least one peer (this node's own address counts): the source works. */
  readonly found: boolean
}

/** Rounds a discovered peer may be missing before its link is closed: one round is a blip. */
const MISSING_ROUNDS = 2

/** A discovery that keeps failing is warned about at most this often. */
const DISCOVERY_WARNING_MS = 60_000

/** The rounds of one discovery over one peer book. */
export class DiscoveryRounds {
  private rounds = 0
  private failedRounds = 0
  private lastError: Option.Option<string> = Option.none()
  private lastWarning = Number.NEGATIVE_INFINITY
  private found = false

  constructor(
    private readonly discovery: DiscoveryShape,
    private readonly book: PeerBook
  ) {}

  /** What discovery did since the start. */
  counts(): DiscoveryCounts {
    return {
      source: this.discovery.source,
      rounds: this.rounds,
      failedRounds: this.failedRounds,
      lastError: this.lastError,
      found: this.found
    }
  }

  /** One round: ask, add what is new, count what is missing. */
  readonly round: Effect.Effect<void> = Effect.suspend(() => {
    this.rounds++
    return Effect.flatMap(Effect.result(this.discovery.peers), (found) =>
      Result.isFailure(found) ? this.failed(found.failure.message) : this.apply(found.success)
    )
  })

  private failed(message: string): Effect.Effect<void> {
    this.failedRounds++
    this.lastError = Option.some(message)
    return Effect.flatMap(Clock.currentTimeMillis, (now) => {
      if (now - this.lastWarning < DISCOVERY_WARNING_MS) return Effect.void
      this.lastWarning = now
      return Effect.logWarning("discovery round failed: the peers stay as they are").pipe(
        Effect.annotateLogs({ module: "Peers", source: this.discovery.source, reason: message })
      )
    })
  }

  private apply(peers: ReadonlyArray<MeshConfig.Peer>): Effect.Effect<void> {
    this.lastError = Option.none()
    const present = new Set<string>()
    const valid = peers.filter((peer) => MeshConfig.isPort(peer.port) && MeshConfig.isValidHost(peer.host))
    for (const peer of valid) present.add(peerKey(peer))
    if (valid.length > 0) this.found = true
    return Effect.andThen(
      Effect.forEach(valid, (peer) => this.book.add(peer, this.discovery.kind), { discard: true }),
      this.book.missedRound(present, MISSING_ROUNDS)
    )
  }
}
