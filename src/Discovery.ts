/**
 * Where the peer list comes from when it is not fixed at boot: every interval the mesh asks its
 * `Discovery` for the peers that exist now, dials the new ones, and closes the link of one that has
 * been missing for two rounds in a row (a DNS blip must not drop a link). The configured
 * `QUEEN_MESH_PEERS` stay beside it as static seeds, and the node's own address, which a headless
 * Service lists too, is recognised as this node by its own HELLO and never dialled again.
 *
 * Shipped: {@link dns} (`QUEEN_MESH_DISCOVERY=dns:<name>[:<port>]`: A and AAAA records through the
 * system resolver, so `/etc/hosts` counts; SRV records for a name that starts with `_`), {@link fixed}
 * and {@link makeProgrammable} (for tests, with `TestClock`). A host provides its own by providing the
 * `Discovery` tag beside the host services; the mesh looks it up when it starts.
 *
 * @since 0.1.0
 */
import * as Dns from "node:dns"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import type { Peer } from "./MeshConfig.js"
import { DiscoveryError } from "./MeshError.js"

/**
 * How the peers of a round were found: `dns` for the shipped DNS discovery, `discovery` for any other.
 *
 * @since 0.1.0
 * @category models
 */
export type Kind = "dns" | "discovery"

/**
 * A source of peers, asked once per round.
 *
 * @since 0.1.0
 * @category models
 */
export interface DiscoveryShape {
  readonly kind: Kind
  /** What it asks, for logs and errors: `dns:queen-headless.queen.svc`. */
  readonly source: string
  /** The peers that exist now. A failure is a round without news, never an empty set. */
  readonly peers: Effect.Effect<ReadonlyArray<Peer>, DiscoveryError>
}

/**
 * The host's discovery, as the mesh sees it. Optional: without one, `QUEEN_MESH_DISCOVERY` decides.
 *
 * @since 0.1.0
 * @category tags
 */
export class Discovery extends Context.Service<Discovery, DiscoveryShape>()("queen-mesh/Discovery") {}

/**
 * The system's answers for a name: every address (`dns.lookup` with `all`, which reads the hosts file
 * as a connect would) or, for an SRV name, every target and port.
 *
 * @since 0.1.0
 * @category models
 */
export interface DnsLookup {
  readonly addresses: (name: string) => Effect.Effect<ReadonlyArray<string>, Error>
  readonly srv: (
    name: string
  ) => Effect.Effect<ReadonlyArray<{ readonly name: string; readonly port: number }>, Error>
}

/**
 * The system resolver.
 *
 * @since 0.1.0
 * @category constructors
 */
export const systemLookup: DnsLookup = {
  addresses: (name) =>
    Effect.callback<ReadonlyArray<string>, Error>((resume) => {
      Dns.lookup(name, { all: true }, (error, addresses) => {
        if (error !== null) resume(Effect.fail(error))
        else resume(Effect.succeed(addresses.map((entry) => entry.address)))
      })
    }),
  srv: (name) =>
    Effect.callback<ReadonlyArray<{ name: string; port: number }>, Error>((resume) => {
      Dns.resolveSrv(name, (error, records) => {
        if (error !== null) resume(Effect.fail(error))
        else resume(Effect.succeed(records.map((record) => ({ name: record.name, port: record.port }))))
      })
    })
}

/**
 * DNS discovery: `name` resolved to all its addresses, each a peer on `port`; a name that starts with
 * `_` is an SRV name, whose records give each target and its port. Each round asks afresh.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert"
 * import { Effect } from "effect"
 * import { Discovery } from "queen-mesh"
 *
 * const discovery = Discovery.dns("queen-headless", 6633, {
 *   addresses: () => Effect.succeed(["10.0.0.2", "10.0.0.3"]),
 *   srv: () => Effect.succeed([])
 * })
 * deepStrictEqual(Effect.runSync(discovery.peers), [
 *   { host: "10.0.0.2", port: 6633 },
 *   { host: "10.0.0.3", port: 6633 }
 * ])
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const dns = (name: string, port: number, lookup: DnsLookup = systemLookup): DiscoveryShape => {
  const source = `dns:${name}`
  const failed = (cause: Error) => new DiscoveryError({ source, detail: cause.message, cause })
  const peers: Effect.Effect<ReadonlyArray<Peer>, DiscoveryError> = name.startsWith("_")
    ? Effect.map(Effect.mapError(lookup.srv(name), failed), (records) =>
        records.map((record) => ({ host: record.name, port: record.port }))
      )
    : Effect.map(Effect.mapError(lookup.addresses(name), failed), (addresses) =>
        [...new Set(addresses)].map((host) => ({ host, port }))
      )
  return { kind: "dns", source, peers }
}

/**
 * The same peers every round.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fixed = (peers: ReadonlyArray<Peer>): DiscoveryShape => ({
  kind: "discovery",
  source: "fixed",
  peers: Effect.succeed(peers)
})

/**
 * A discovery a test drives: `set` the peers the next rounds return, or make them `fail`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Programmable {
  readonly discovery: DiscoveryShape
  readonly set: (peers: ReadonlyArray<Peer>) => Effect.Effect<void>
  /** Rounds fail (no news) until the next `set`. */
  readonly fail: (detail: string) => Effect.Effect<void>
}

/**
 * A programmable discovery, starting with `initial`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeProgrammable = (initial: ReadonlyArray<Peer> = []): Effect.Effect<Programmable> =>
  Effect.map(
    Ref.make<{ readonly peers: ReadonlyArray<Peer> } | { readonly failure: string }>({ peers: initial }),
    (state) => ({
      discovery: {
        kind: "discovery",
        source: "programmable",
        peers: Effect.flatMap(Ref.get(state), (now) =>
          "peers" in now
            ? Effect.succeed(now.peers)
            : Effect.fail(new DiscoveryError({ source: "programmable", detail: now.failure }))
        )
      },
      set: (peers) => Ref.set(state, { peers }),
      fail: (detail) => Ref.set(state, { failure: detail })
    })
  )

/**
 * `discovery` as a layer, to provide beside the host services.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (discovery: DiscoveryShape): Layer.Layer<Discovery> =>
  Layer.succeed(Discovery, discovery)
