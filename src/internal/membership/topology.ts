/**
 * What the runtime runs, decided from the configuration and the host's optional services: whether the
 * TCP mesh runs (its listener binds, its dialers dial), and from where its peers come. The TCP mesh runs
 * when sync is enabled and there is a peer to reach: configured peers, a discovery name
 * (`QUEEN_MESH_DISCOVERY`) or a `Discovery` the host provides. A node with a lane and nothing else runs
 * on the lane alone and binds no port. A pure decision: the listener and the peers each take it, and
 * agree.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Discovery from "../../Discovery.js"
import * as MeshConfig from "../../MeshConfig.js"

export interface TopologyShape {
  /** The listener binds and the dialers run. */
  readonly tcp: boolean
  readonly discovery: Option.Option<Discovery.DiscoveryShape>
}

/** The host's `Discovery` if it provided one, else `QUEEN_MESH_DISCOVERY`'s DNS discovery, if set. */
export const decide: Effect.Effect<TopologyShape, never, MeshConfig.MeshConfig> = Effect.gen(function* () {
  const config = yield* MeshConfig.MeshConfig
  const provided = yield* Effect.serviceOption(Discovery.Discovery)
  const discovery = Option.orElse(provided, () =>
    Option.map(config.discovery, (target) => Discovery.dns(target.name, target.port))
  )
  return { tcp: config.enabled && (config.peers.length > 0 || Option.isSome(discovery)), discovery }
})
