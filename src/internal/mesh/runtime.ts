/**
 * The mesh's runtime: its services, each built once in the layer's scope and provided only to the mesh
 * itself (as `Sharding.layer` provides its pieces): the event hub and the self-dial book, inbound
 * liveness and dispatch (the spec's "effect on receipt"), the lane if the host gave one, the listener
 * (the receive side), the peers (one dialer per peer with its bounded queue), the health tracker and
 * the metrics sync. Everything lives in the layer's scope.
 *
 * @internal
 */
import type * as Duration from "effect/Duration"
import * as Layer from "effect/Layer"
import type * as Schedule from "effect/Schedule"
import type * as HotList from "../../HotList.js"
import type * as MaintenanceFlags from "../../MaintenanceFlags.js"
import type * as MeshConfig from "../../MeshConfig.js"
import type { LinkDown, TransportError } from "../../MeshError.js"
import * as MeshEvent from "../../MeshEvent.js"
import type * as QueueConfigCache from "../../QueueConfigCache.js"
import type { Transport } from "../../Transport.js"
import type * as Waker from "../../Waker.js"
import * as RunningLane from "../lane/running.js"
import * as Listener from "../links/listener.js"
import * as Liveness from "../links/liveness.js"
import * as Peers from "../links/peers.js"
import * as SelfDials from "../links/selfDials.js"
import * as HealthTracker from "../membership/healthTracker.js"
import * as MetricsSync from "../metrics/metricsSync.js"
import * as Dispatch from "./dispatch.js"

/** Options of the runtime's services. */
export interface RuntimeOptions {
  readonly peers?: { readonly reconnectSchedule?: Schedule.Schedule<unknown, LinkDown> }
  readonly liveness?: { readonly maxEntries?: number; readonly pruneAfter?: Duration.Input }
  readonly metricsInterval?: Duration.Input
}

/** The host's four services, which dispatch applies received frames to. */
export type HostServices =
  | Waker.Waker
  | QueueConfigCache.QueueConfigCache
  | HotList.HotList
  | MaintenanceFlags.MaintenanceFlags

/** The services the mesh's API runs over. */
export type Services =
  | MeshEvent.MeshEvents
  | SelfDials.SelfDialsService
  | Liveness.Liveness
  | Dispatch.Dispatch
  | RunningLane.RunningLane
  | Listener.Listener
  | Peers.Peers
  | HealthTracker.HealthTracker
  | MetricsSync.MetricsSync

/** The runtime's services over the configuration, a transport and the host's services. */
export const layer = (
  options: RuntimeOptions
): Layer.Layer<Services, TransportError, MeshConfig.MeshConfig | Transport | HostServices> =>
  MetricsSync.layer(options.metricsInterval === undefined ? {} : { interval: options.metricsInterval }).pipe(
    Layer.provideMerge(HealthTracker.layer),
    Layer.provideMerge(Peers.layer(options.peers)),
    Layer.provideMerge(Listener.layer),
    Layer.provideMerge(RunningLane.layer),
    Layer.provideMerge(Layer.merge(Liveness.layer(options.liveness), Dispatch.layer)),
    Layer.provideMerge(Layer.merge(MeshEvent.layer, SelfDials.layer))
  )
