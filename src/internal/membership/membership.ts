/**
 * The typed membership model (`Membership.Member`) built from what the runtime owns: the peers' links,
 * inbound liveness and the lane's members. A configured or discovered peer and a server heard from are
 * one member when the link learned that server's id from its v2 challenge; otherwise they are two. A
 * node heard on the lane joins the member of its server id, or is a member of its own.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Membership from "../../Membership.js"
import { type LaneMember, RunningLane } from "../lane/running.js"
import { Liveness, type ServerState } from "../links/liveness.js"
import type { PeerLinkState } from "../links/peerLink.js"
import { Peers } from "../links/peers.js"

const heardOf = (server: ServerState): Membership.Heard => ({
  alive: server.alive,
  lastSeenMsAgo: server.silentFor,
  authVersion: server.authVersion,
  httpAddr: server.advert.http_addr,
  ephEpoch: server.advert.eph_epoch,
  ephemeralCapable: server.ephemeralCapable,
  keyId: server.keyId
})

const laneOf = (member: LaneMember): Membership.LaneMember => ({
  alive: member.alive,
  lastSeenMsAgo: member.lastSeenMsAgo,
  epoch: member.epoch
})

/**
 * Configured and discovered entries first, in the order they came; then the servers heard that no
 * entry is known to be; then the lane's nodes that are neither.
 */
export const membersOf = (
  links: ReadonlyArray<PeerLinkState>,
  servers: ReadonlyArray<ServerState>,
  lane: ReadonlyArray<LaneMember> = []
): ReadonlyArray<Membership.Member> => {
  const byId = new Map(servers.map((server) => [server.serverId, server]))
  const onLane = new Map(lane.map((member) => [member.serverId, member]))
  const laneById = (id: Option.Option<string>) =>
    Option.map(
      Option.flatMap(id, (serverId) => Option.fromNullishOr(onLane.get(serverId))),
      laneOf
    )
  const claimed = new Set<string>()
  const members: Array<Membership.Member> = []
  for (const link of links) {
    const server = Option.flatMap(link.learnedId, (id) => Option.fromNullishOr(byId.get(id)))
    if (Option.isSome(server)) claimed.add(server.value.serverId)
    if (Option.isSome(link.learnedId)) claimed.add(link.learnedId.value)
    members.push({
      serverId: link.learnedId,
      address: Option.some({ host: link.host, port: link.port, name: link.name }),
      foundBy: link.foundBy,
      self: link.self,
      link: link.self ? Option.none() : Option.some<Membership.Link>(link),
      heard: Option.map(server, heardOf),
      lane: laneById(link.learnedId)
    })
  }
  for (const server of servers) {
    if (claimed.has(server.serverId)) continue
    claimed.add(server.serverId)
    members.push({
      serverId: Option.some(server.serverId),
      address: Option.none(),
      foundBy: "inbound",
      self: false,
      link: Option.none(),
      heard: Option.some(heardOf(server)),
      lane: laneById(Option.some(server.serverId))
    })
  }
  for (const member of lane) {
    if (claimed.has(member.serverId)) continue
    members.push({
      serverId: Option.some(member.serverId),
      address: Option.none(),
      foundBy: "lane",
      self: false,
      link: Option.none(),
      heard: Option.none(),
      lane: Option.some(laneOf(member))
    })
  }
  return members
}

/** The members now, from the running peers, inbound liveness and the lane: an effect to run each time. */
export const current: Effect.Effect<
  Effect.Effect<ReadonlyArray<Membership.Member>>,
  never,
  Peers | Liveness | RunningLane
> = Effect.gen(function* () {
  const peers = yield* Peers
  const liveness = yield* Liveness
  const lane = Option.getOrUndefined(yield* RunningLane)
  const onLane: Effect.Effect<ReadonlyArray<LaneMember>> =
    lane === undefined ? Effect.succeed([]) : lane.members
  return Effect.zipWith(Effect.zip(peers.links, liveness.servers), onLane, ([links, servers], laneMembers) =>
    membersOf(links, servers, laneMembers)
  )
})
