/**
 * Which replicas a node knows, how, and in what state: a typed model a host reads with `Mesh.members`
 * and watches with `Mesh.memberChanges`, and from which the stats body is derived.
 *
 * A member is a configured peer entry (the node dials it: its outbound `link`), a server heard from
 * (a verified HELLO on an inbound connection: `heard`, its liveness), or both at once when the node
 * knows they are the same replica: a v2 challenge tells a dialer the server id of the node it dialled.
 * In legacy auth a dialer never learns it, so a configured peer and the server heard from it are two
 * members. The entry that names this node itself (a uniform peer list) is a member with `self: true`
 * and no link (spec "Topology": each node dials every configured peer and keeps liveness inbound).
 *
 * @since 0.1.0
 */
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"

/**
 * A configured peer entry: where the node dials.
 *
 * @since 0.1.0
 * @category models
 */
export interface Address {
  readonly host: string
  readonly port: number
  /** `host:port`, an IPv6 literal in brackets: the peer's name in logs and metric labels. */
  readonly name: string
}

/**
 * The counters of an outbound link, each under the one name it has in the stats body (`peers[]`), the
 * metrics (`queen_mesh_drops_total{cause}`, `queen_mesh_liveness_closes_total{reason}`) and the
 * `queen-mesh stats` table. Accounting: handed = written + dropped_full + dropped_down + discarded +
 * queued.
 *
 * @since 0.1.0
 * @category schemas
 */
export const LinkCounters = Schema.Struct({
  /** Frames waiting in the send queue (the writer's included). */
  queued: Schema.Number,
  queued_bytes: Schema.Number,
  /** Frames handed to this link. */
  handed: Schema.Number,
  written: Schema.Number,
  /** Dropped because the send queue was full (the peer is slow). */
  dropped_full: Schema.Number,
  /** Dropped because the link was down. */
  dropped_down: Schema.Number,
  /** Queued when the link broke, discarded then (a stale hint is worse than none). */
  discarded: Schema.Number,
  /** Links that were up and went down. */
  reconnects: Schema.Number,
  /** Links closed because the peer went silent inbound past the dead threshold (a black hole). */
  silent_closes: Schema.Number,
  /** Links closed because their writes stopped draining for the dead threshold. */
  stalled_closes: Schema.Number
})

/**
 * @since 0.1.0
 * @category models
 */
export interface LinkCounters extends Schema.Schema.Type<typeof LinkCounters> {}

/**
 * The node's outbound link to a configured peer, with its send queue's accounting.
 *
 * @since 0.1.0
 * @category models
 */
export interface Link {
  readonly connected: boolean
  /** The remote address of the established link; none while it is down. */
  readonly resolvedIp: Option.Option<string>
  /** The address the last established link used, kept while it is down. */
  readonly lastResolvedIp: Option.Option<string>
  /** Why the last dial or link failed, if one did. */
  readonly lastError: Option.Option<string>
  readonly counters: LinkCounters
}

/**
 * What inbound liveness knows of a server: heard within the dead threshold or not, how its last
 * connection authenticated, and what its last HELLO advertised of upstream's HELLO v2.
 *
 * @since 0.1.0
 * @category models
 */
export interface Heard {
  readonly alive: boolean
  /** Milliseconds since the last frame from it. */
  readonly lastSeenMsAgo: number
  /** The handshake version its connection authenticated with (2: the challenge-response HELLO). */
  readonly authVersion: 1 | 2
  /** The `http_addr` of its last HELLO: where it takes ephemeral traffic. */
  readonly httpAddr: Option.Option<string>
  /** The `eph_epoch` of its last HELLO, as sent: its boot incarnation, a u64 in hex. */
  readonly ephEpoch: Option.Option<string>
  /** Its last HELLO carried both, and the epoch parsed: upstream counts it as ephemeral-capable. */
  readonly ephemeralCapable: boolean
  /** The id of the key its last HELLO proved (none in open mode): which key each peer holds. */
  readonly keyId: Option.Option<string>
}

/**
 * One entry of upstream's ephemeral member list: a server alive and ephemeral-capable.
 *
 * @since 0.1.0
 * @category models
 */
export interface EphemeralMember {
  readonly serverId: string
  readonly httpAddr: string
  /** The epoch in lowercase hex without leading zeros, as upstream prints it. */
  readonly epoch: string
}

/**
 * Upstream's `eph_members`: the servers heard within the dead threshold whose last HELLO made them
 * ephemeral-capable, this node excluded, sorted by server id. Its length is the stats body's
 * `eph_members`.
 *
 * @since 0.1.0
 * @category models
 */
export const ephemeralMembers = (members: ReadonlyArray<Member>): ReadonlyArray<EphemeralMember> => {
  const out: Array<EphemeralMember> = []
  for (const member of members) {
    if (member.self || Option.isNone(member.serverId) || Option.isNone(member.heard)) continue
    const heard = member.heard.value
    if (!heard.alive || !heard.ephemeralCapable) continue
    if (Option.isNone(heard.httpAddr) || Option.isNone(heard.ephEpoch)) continue
    out.push({
      serverId: member.serverId.value,
      httpAddr: heard.httpAddr.value,
      epoch: normalEpoch(heard.ephEpoch.value)
    })
  }
  // Upstream sorts Rust strings, by their UTF-8 bytes (not by UTF-16 code units, as `<` does).
  return out.sort((a, b) => Buffer.compare(Buffer.from(a.serverId, "utf8"), Buffer.from(b.serverId, "utf8")))
}

/** `+00ABC` as upstream prints the u64 it parsed: `abc`. */
const normalEpoch = (epoch: string): string => {
  const digits = epoch.replace(/^\+/, "").replace(/^0+/, "").toLowerCase()
  return digits === "" ? "0" : digits
}

/**
 * How the node came to know a member: the configured peer list, DNS discovery, another `Discovery`, a
 * server that dialled in, or a node heard on the lane.
 *
 * @since 0.1.0
 * @category schemas
 */
export const FoundBy = Schema.Literals(["config", "dns", "discovery", "inbound", "lane"])

/**
 * @since 0.1.0
 * @category models
 */
export type FoundBy = typeof FoundBy.Type

/**
 * One replica as this node knows it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Member {
  /** The server id it announced, where the node knows it. */
  readonly serverId: Option.Option<string>
  /** The configured entry the node dials it at, if any. */
  readonly address: Option.Option<Address>
  readonly foundBy: FoundBy
  /** The entry names this node itself: not dialled, not a link, not counted for readiness. */
  readonly self: boolean
  /** The node's outbound link to it (configured entries other than self). */
  readonly link: Option.Option<Link>
  /** Inbound liveness (servers that sent a verified HELLO). */
  readonly heard: Option.Option<Heard>
  /** What the lane knows of it (a node heard on the lane, by its server id). */
  readonly lane: Option.Option<LaneMember>
}

/**
 * A node as the lane knows it: heard within the dead threshold or not, and its boot epoch.
 *
 * @since 0.1.0
 * @category models
 */
export interface LaneMember {
  readonly alive: boolean
  readonly lastSeenMsAgo: number
  readonly epoch: string
}
