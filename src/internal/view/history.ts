/**
 * The cluster page's recent events, kept from the start for each mesh: the page's event list shows
 * what the node observed while it is open, and a page first opened after a fault would otherwise show
 * none of it (the `PeerDown` of a peer killed a minute before). The last 64 events of the kinds the
 * page lists are kept (`Mesh.observe`, those kinds only: no wake is ever built for it), and a new
 * event stream begins with them.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { MeshShape } from "../../Mesh.js"
import type { MeshEvent } from "../../MeshEvent.js"

/**
 * The kinds of event the page lists: peers and links coming and going, health changes, members
 * joining and leaving, refusals, the lane, maintenance flips (`ClusterView.eventTags`).
 */
export const tags = [
  "PeerUp",
  "PeerDown",
  "LinkUp",
  "LinkDown",
  "HealthChanged",
  "MemberJoined",
  "MemberLeft",
  "HandshakeFailed",
  "InvalidFrame",
  "LaneStatus",
  "SelfRecognized",
  "Maintenance",
  "PopMaintenance"
] as const satisfies ReadonlyArray<MeshEvent["_tag"]>

/** Events kept: as many as one message of the stream carries. */
export const MAX_RECENT = 64

/** The last `MAX_RECENT` events, oldest first, each with the time it was observed. */
export class History {
  private readonly events: Array<readonly [MeshEvent, number]> = []
  private recording = 0

  push(event: MeshEvent, at: number): void {
    this.events.push([event, at])
    if (this.events.length > MAX_RECENT) this.events.shift()
  }

  recent(): ReadonlyArray<readonly [MeshEvent, number]> {
    return [...this.events]
  }

  /** Records `mesh`'s events while the scope lasts (once per mesh, however many callers). */
  record(mesh: MeshShape): Effect.Effect<void, never, Scope.Scope> {
    return Effect.gen({ self: this }, function* () {
      yield* Effect.acquireRelease(
        Effect.sync(() => ++this.recording),
        () =>
          Effect.sync(() => {
            this.recording--
          })
      )
      if (this.recording > 1) return
      yield* mesh.observe((event) => this.push(event, Date.now()), tags)
    })
  }
}

const histories = new WeakMap<MeshShape, History>()

export const historyOf = (mesh: MeshShape): History => {
  let history = histories.get(mesh)
  if (history === undefined) {
    history = new History()
    histories.set(mesh, history)
  }
  return history
}
