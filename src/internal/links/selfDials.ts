/**
 * Recognising this node in its own peer list. Upstream Queen's Kubernetes recipe gives every replica
 * the same `QUEEN_MESH_PEERS`, its own name included, so one entry of the list dials this node's own
 * listener. Fighting that (refusing our own HELLO as `own_server_id`, redialling, warning) only makes
 * noise and a link that flaps in the stats and in `/readyz`.
 *
 * The test is the HELLO's nonce: 128 random bits a dialer of this node just put in its HELLO. The
 * listener consults it only for a HELLO that already verified and carries this node's server id; a
 * peer that merely shares our id (a misconfiguration) cannot produce one of our nonces, so it is still
 * refused as `own_server_id`. Works on every transport and in every auth mode: the v2 HELLO carries the
 * same dialer nonce.
 *
 * A nonce is known for a short window after its HELLO was written (the time a link needs to count as
 * established): long enough for our listener to judge it, short enough that a HELLO captured on the
 * way to a real peer is worth nothing here later.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

export class SelfDials {
  /** nonce -> what to do if it reaches our own listener, and until when it counts. */
  private readonly issued = new Map<string, { readonly onSelf: () => void; readonly until: number }>()

  constructor(private readonly now: () => number) {}

  /**
   * A dialer of this node wrote a HELLO with `nonce`; `onSelf` runs if it reaches our own listener
   * within `windowMillis`. Returns the function that forgets it (the session ended).
   */
  helloSent(nonce: string, windowMillis: number, onSelf: () => void): () => void {
    const now = this.now()
    // One outstanding nonce per link at most, so the map stays as small as the peer list; expired
    // entries go as new ones come.
    for (const [key, entry] of this.issued) if (entry.until < now) this.issued.delete(key)
    this.issued.set(nonce, { onSelf, until: now + windowMillis })
    return () => {
      this.issued.delete(nonce)
    }
  }

  /**
   * A verified HELLO carrying this node's own server id arrived with `nonce`: true (and the dialing
   * link told) when one of our dialers wrote it just now.
   */
  isOwnHello(nonce: string): boolean {
    const entry = this.issued.get(nonce)
    if (entry === undefined) return false
    this.issued.delete(nonce)
    if (entry.until < this.now()) return false
    entry.onSelf()
    return true
  }
}

/** The one `SelfDials` of a node, shared by its dialers and its listener. */
export class SelfDialsService extends Context.Service<SelfDialsService, SelfDials>()(
  "queen-mesh/internal/SelfDials"
) {}

export const layer: Layer.Layer<SelfDialsService> = Layer.effect(
  SelfDialsService,
  Clock.clockWith((clock) => Effect.succeed(new SelfDials(() => clock.currentTimeMillisUnsafe())))
)
