/**
 * The typed membership model (`Membership.Member`) built from what the runtime owns: the peers'
 * links and inbound liveness. A configured peer and a server heard from are one member when the link
 * learned that server's id from its v2 challenge; otherwise they are two.
 *
 * @internal
 */
import { Option } from "effect"
import type * as Membership from "../Membership.js"
import type { ServerState } from "./liveness.js"
import type { PeerLinkState } from "./peerLink.js"

const heardOf = (server: ServerState): Membership.Heard => ({
  alive: server.alive,
  lastSeenMsAgo: server.silentFor,
  authVersion: server.authVersion,
  httpAddr: server.advert.http_addr,
  ephEpoch: server.advert.eph_epoch,
  ephemeralCapable: server.ephemeralCapable
})

/** Configured entries first, in the order given; then the servers heard that no entry is known to be. */
export const membersOf = (
  links: ReadonlyArray<PeerLinkState>,
  servers: ReadonlyArray<ServerState>
): ReadonlyArray<Membership.Member> => {
  const byId = new Map(servers.map((server) => [server.serverId, server]))
  const claimed = new Set<string>()
  const members: Array<Membership.Member> = []
  for (const link of links) {
    const server = Option.flatMap(link.learnedId, (id) => Option.fromNullable(byId.get(id)))
    if (Option.isSome(server)) claimed.add(server.value.serverId)
    members.push({
      serverId: link.learnedId,
      address: Option.some({ host: link.host, port: link.port, name: link.name }),
      foundBy: "config",
      self: link.self,
      link: link.self ? Option.none() : Option.some<Membership.Link>(link),
      heard: Option.map(server, heardOf)
    })
  }
  for (const server of servers) {
    if (claimed.has(server.serverId)) continue
    members.push({
      serverId: Option.some(server.serverId),
      address: Option.none(),
      foundBy: "inbound",
      self: false,
      link: Option.none(),
      heard: Option.some(heardOf(server))
    })
  }
  return members
}
