/**
 * What the runtime runs, decided once when it starts from the configuration and the host's optional
 * services: whether the TCP mesh runs (its listener binds, its dialers dial), and from where its peers
 * come. The TCP mesh runs when sync is enabled and there is a peer to reach: configured peers, a
 * discovery name (`QUEEN_MESH_DISCOVERY`) or a `Discovery` the host provides. A node with a lane and
 * nothing else runs on the lane alone and binds no port.
 *
 * @internal
 */
import { Context, Effect, Layer, Option } from "effect"
import * as Discovery from "../../Discovery.js"
import * as MeshConfig from "../../MeshConfig.js"

export interface TopologyShape {
  /** The listener binds and the dialers run. */
  readonly tcp: boolean
  readonly discovery: Option.Option<Discovery.DiscoveryShape>
}

export class Topology extends Context.Tag("queen-mesh/internal/Topology")<Topology, TopologyShape>() {}

/** The host's `Discovery` if it provided one, else `QUEEN_MESH_DISCOVERY`'s DNS discovery, if set. */
export const layer: Layer.Layer<Topology, never, MeshConfig.MeshConfig> = Layer.effect(
  Topology,
  Effect.gen(function* () {
    const config = yield* MeshConfig.MeshConfig
    const provided = yield* Effect.serviceOption(Discovery.Discovery)
    const discovery = Option.orElse(provided, () =>
      Option.map(config.discovery, (target) => Discovery.dns(target.name, target.port))
    )
    return {
      tcp: config.enabled && (config.peers.length > 0 || Option.isSome(discovery)),
      discovery
    }
  })
)
