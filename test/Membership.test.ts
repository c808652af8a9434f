/**
 * The typed membership model's pure helpers: upstream's ephemeral member list.
 */
import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import type * as Membership from "../src/Membership.js"
import { ephemeralMembers } from "../src/Membership.js"

const heard = (serverId: string, fields: Partial<Membership.Heard> = {}): Membership.Member => ({
  serverId: Option.some(serverId),
  address: Option.none(),
  foundBy: "inbound",
  self: false,
  link: Option.none(),
  heard: Option.some({
    alive: true,
    lastSeenMsAgo: 0,
    authVersion: 1,
    httpAddr: Option.some(`http://${serverId}:6632`),
    ephEpoch: Option.some("+00AB"),
    ephemeralCapable: true,
    keyId: Option.none(),
    ...fields
  }),
  lane: Option.none()
})

describe("Membership.ephemeralMembers", () => {
  it("lists the alive, capable servers, the epoch as upstream prints it, sorted by UTF-8 bytes", () => {
    const members = [
      heard("a😀"),
      heard("aＡ"),
      heard("dead", { alive: false }),
      heard("legacy", { ephemeralCapable: false }),
      { ...heard("self"), self: true },
      heard("b", { ephEpoch: Option.some("0") })
    ]
    assert.deepStrictEqual(ephemeralMembers(members), [
      // U+FF21 is 0xEF 0xBC 0xA1 in UTF-8, U+1F600 0xF0 ...: upstream (Rust) sorts bytes, not UTF-16 units.
      { serverId: "aＡ", httpAddr: "http://aＡ:6632", epoch: "ab" },
      { serverId: "a😀", httpAddr: "http://a😀:6632", epoch: "ab" },
      { serverId: "b", httpAddr: "http://b:6632", epoch: "0" }
    ])
  })
})
