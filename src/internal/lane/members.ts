/**
 * The other nodes heard on the PostgreSQL lane, owned here: their liveness, their epochs, and the
 * `PeerUp` / `PeerDown` / `MemberLeft` events that follow each change.
 *
 * @internal
 */
import type * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type * as Lane from "../../Lane.js"
import type { LaneMember, LaneStatus } from "./running.js"

interface MemberState {
  epoch: string
  lastSeen: number
  alive: boolean
}

const byUtf8 = (a: string, b: string): number =>
  Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"))

/**
 * The other nodes heard on the lane, by the server id of their authenticated notifications. The Map's
 * order is the order of last hearing, so the first entry is the longest silent: the one evicted when
 * the table is full. `alive` changes only here (hearing, the sweep), and each change is one `PeerUp` or
 * `PeerDown` event, so the members the mesh reads agree with the events it has seen.
 *
 * A connection hears the channel from its LISTEN on, a moment before its self-test ends and the lane
 * reports `up`; a node heard in that moment is announced once the lane is up, so health never counts a
 * live member against a lane it still thinks is starting.
 */
export class LaneMembers {
  private readonly table = new Map<string, MemberState>()
  private up = false
  /** Alive, but heard while the lane was not up: not announced yet. */
  private readonly unannounced = new Set<string>()

  constructor(
    private readonly context: Lane.BuildContext,
    private readonly clock: Clock.Clock,
    private readonly deadMillis: number,
    private readonly forgetMillis: number,
    private readonly max: number
  ) {}

  heard(serverId: string, epoch: string): void {
    const now = this.clock.currentTimeMillisUnsafe()
    const known = this.table.get(serverId)
    if (known !== undefined) {
      this.table.delete(serverId)
      known.epoch = epoch
      known.lastSeen = now
      this.table.set(serverId, known)
      if (!known.alive) {
        known.alive = true
        this.announceUp(serverId)
      }
      return
    }
    if (this.table.size >= this.max) {
      const oldest = this.table.entries().next()
      if (oldest.done !== true) {
        this.table.delete(oldest.value[0])
        if (oldest.value[1].alive) this.announceDown(oldest.value[0])
      }
    }
    this.table.set(serverId, { epoch, lastSeen: now, alive: true })
    this.announceUp(serverId)
  }

  /** The lane's status changed: once up, the members heard meanwhile are announced. */
  status(status: LaneStatus): void {
    this.up = status === "up"
    if (!this.up || this.unannounced.size === 0) return
    const waiting = [...this.unannounced]
    this.unannounced.clear()
    for (const serverId of waiting) {
      if (this.table.get(serverId)?.alive === true) this.context.events.emit({ _tag: "PeerUp", serverId })
    }
  }

  private announceUp(serverId: string): void {
    if (this.up) this.context.events.emit({ _tag: "PeerUp", serverId })
    else this.unannounced.add(serverId)
  }

  private announceDown(serverId: string): void {
    if (!this.unannounced.delete(serverId)) this.context.events.emit({ _tag: "PeerDown", serverId })
  }

  /** Members silent past the dead threshold turn dead; past `forgetAfter`, they are forgotten. */
  readonly sweep: Effect.Effect<void> = Effect.sync(() => {
    const now = this.clock.currentTimeMillisUnsafe()
    for (const [serverId, member] of this.table) {
      const silent = now - member.lastSeen
      if (member.alive && silent > this.deadMillis) {
        member.alive = false
        this.announceDown(serverId)
      }
      if (silent > this.forgetMillis) {
        this.table.delete(serverId)
        this.context.events.emit({
          _tag: "MemberLeft",
          peer: serverId,
          foundBy: "lane",
          reason: "silent on the lane long enough to be forgotten"
        })
      }
    }
  })

  readonly list: Effect.Effect<ReadonlyArray<LaneMember>> = Effect.sync(() => {
    const now = this.clock.currentTimeMillisUnsafe()
    const out: Array<LaneMember> = []
    for (const [serverId, member] of this.table) {
      out.push({
        serverId,
        alive: member.alive,
        lastSeenMsAgo: Math.max(0, now - member.lastSeen),
        epoch: member.epoch
      })
    }
    return out.sort((a, b) => byUtf8(a.serverId, b.serverId))
  })

  get alive(): number {
    let n = 0
    for (const member of this.table.values()) if (member.alive) n++
    return n
  }
}
