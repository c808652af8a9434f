/**
 * Upstream Queen's ephemeral-queue admin verbs as they cross the mesh (`EPH_ADMIN`, tag 20): a peer
 * reset, deleted or reconfigured an ephemeral queue, and every replica drops what it holds of it. The
 * frame's rules are upstream's: `op` and `queue` required, the tenant a UUID and never absent, since
 * a destructive verb is never broadened to every tenant that has a queue of that name.
 *
 * A broker that keeps ephemeral queues provides its own `EphemeralAdmin` beside the host services; the
 * mesh looks it up when it starts. Without one, a received verb is published as an `EphAdmin` event
 * (and printed by the CLI) and applied to nothing, which is right for a broker with no ephemeral
 * queues. Either way it is counted per operation in the stats (`eph_admin`) and the metrics.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { EphOp } from "./Frame.js"

/**
 * One ephemeral-queue admin verb: what to do, to which queue of which tenant.
 *
 * @since 0.1.0
 * @category models
 */
export interface Command {
  readonly op: EphOp
  /** A UUID, lowercased. */
  readonly tenant: string
  /** The queue's bare name. */
  readonly queue: string
}

/**
 * What the mesh calls for every received `EPH_ADMIN`.
 *
 * @since 0.1.0
 * @category models
 */
export interface EphemeralAdminShape {
  /** Apply a peer's verb to this replica's ephemeral state. `from` is the peer's server id. */
  readonly apply: (command: Command, from: string) => Effect.Effect<void>
}

/**
 * The host's ephemeral-queue admin, as the mesh sees it. Optional: see the module's comment.
 *
 * @since 0.1.0
 * @category tags
 */
export class EphemeralAdmin extends Context.Service<EphemeralAdmin, EphemeralAdminShape>()(
  "queen-mesh/EphemeralAdmin"
) {}

/**
 * Applies nothing: the received verb is still published as an event and counted.
 *
 * @since 0.1.0
 * @category constructors
 */
export const noop: EphemeralAdminShape = { apply: () => Effect.void }

/**
 * An `EphemeralAdmin` from one function.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert"
 * import { Effect } from "effect"
 * import { EphemeralAdmin } from "queen-mesh"
 *
 * const dropped: Array<string> = []
 * const admin = EphemeralAdmin.make((command) =>
 *   Effect.sync(() => dropped.push(`${command.op} ${command.queue}`))
 * )
 * Effect.runSync(
 *   admin.apply({ op: "delete", tenant: "7f9c24e8-3b12-4fef-91e0-66ca3c8b3a4f", queue: "tmp" }, "queen-b")
 * )
 * deepStrictEqual(dropped, ["delete tmp"])
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (apply: EphemeralAdminShape["apply"]): EphemeralAdminShape => ({ apply })

/**
 * `EphemeralAdmin` as a layer, to provide beside the host services.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (apply: EphemeralAdminShape["apply"]): Layer.Layer<EphemeralAdmin> =>
  Layer.succeed(EphemeralAdmin, make(apply))
