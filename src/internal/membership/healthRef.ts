/**
 * The node's health value, one per runtime: the host's shared `MeshHealth` when it provides one (so the
 * shipped waker reads the same value), else the runtime's own. The mesh writes it; the metrics and the
 * stats read it.
 *
 * @internal
 */
import { Context, Layer, type SubscriptionRef } from "effect"
import * as MeshHealth from "../../MeshHealth.js"

export class HealthRef extends Context.Tag("queen-mesh/internal/HealthRef")<
  HealthRef,
  SubscriptionRef.SubscriptionRef<MeshHealth.Health>
>() {}

export const layer: Layer.Layer<HealthRef> = Layer.effect(HealthRef, MeshHealth.shared)
