/**
 * The receive side of the mesh (spec "Topology"): binds the transport's listener when the mesh is
 * active, admits each accepted connection against the caps, writes the v2 challenge where the auth
 * mode asks for one, and runs an `InboundLink` for it. The counters live in `ListenerState`.
 *
 * Defences, each with a default, a variable and a counter (`MeshConfig`): the HELLO deadline; the
 * first frame capped at a few KiB; a cap on concurrent inbound connections and on unauthenticated ones
 * per address; a short pause before closing a refused connection, holding no buffer; an idle deadline
 * for an authenticated link gone silent; per-tag frame caps after the HELLO.
 *
 * @internal
 */

import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import * as MeshConfig from "../../MeshConfig.js"
import type { TransportError } from "../../MeshError.js"
import { MeshEvents } from "../../MeshEvent.js"
import { type Connection, Transport } from "../../Transport.js"
import * as Topology from "../membership/topology.js"
import { Dispatch } from "../mesh/dispatch.js"
import * as Codec from "../wire/codec.js"
import { challengeFor, type InboundDeps, InboundLink } from "./inboundLink.js"
import { type ListenerCounts, ListenerState } from "./listenerState.js"
import { Liveness } from "./liveness.js"
import { SelfDialsService } from "./selfDials.js"

/** The running listener: its bound port and its counters. */
export interface ListenerShape {
  /** The bound port; none when the mesh is not active (nothing binds). */
  readonly port: Option.Option<number>
  readonly counts: Effect.Effect<ListenerCounts>
}

export class Listener extends Context.Service<Listener, ListenerShape>()("queen-mesh/internal/Listener") {}

/** Binds the listener (when the mesh is active) for the life of the scope. */
export const make: Effect.Effect<
  ListenerShape,
  TransportError,
  Scope.Scope | MeshConfig.MeshConfig | Transport | Liveness | Dispatch | MeshEvents | SelfDialsService
> = Effect.gen(function* () {
  const config = yield* MeshConfig.MeshConfig
  const transport = yield* Transport
  const events = yield* MeshEvents
  const state = new ListenerState(
    config.serverId,
    { maxInbound: config.maxInbound, maxUnauthenticatedPerAddress: config.maxUnauthenticatedPerAddress },
    events,
    () => transport.handshakeFailures?.() ?? 0,
    config.auth
  )
  const deps: InboundDeps = {
    state,
    liveness: yield* Liveness,
    dispatch: yield* Dispatch,
    events,
    selfDials: yield* SelfDialsService,
    clock: yield* Clock.Clock,
    judge: {
      secret: config.secret,
      accepted: config.acceptedSecrets,
      mode: config.auth,
      selfId: config.serverId,
      label: config.clusterLabel
    },
    helloMaxBytes: config.helloMaxBytes,
    handshakeTimeout: config.handshakeTimeout,
    idleTimeout: config.idleTimeout,
    authFailureDelay: config.authFailureDelay
  }

  const accept = (connection: Connection): Effect.Effect<void> =>
    Effect.gen(function* () {
      const remote = Option.getOrElse(connection.remoteAddress, () => "unknown")
      if (!state.admit(remote)) {
        return yield* Effect.logDebug("mesh connection refused: too many connections").pipe(
          Effect.annotateLogs({ remote })
        )
      }
      let link: InboundLink | undefined
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => state.closed(remote, link?.isAuthenticated ?? false))
      )
      const challenge = yield* challengeFor(config.auth, config.serverId, config.clusterLabel)
      link = new InboundLink(deps, connection, remote, challenge)
      // The only bytes a listener ever writes on an inbound link.
      if (Option.isSome(challenge)) {
        const written = yield* Effect.result(connection.write(Codec.encode(challenge.value)))
        if (Result.isFailure(written)) return
      }
      yield* link.run
    }).pipe(
      Effect.scoped,
      // No stack trace on the span: its failures are the peer's, and reading one costs a formatted trace
      // per refused connection.
      Effect.withSpan("queen-mesh.inbound", undefined, { captureStackTrace: false }),
      Effect.annotateLogs({ module: "Listener" })
    )

  const port = (yield* Topology.decide).tcp
    ? Option.some(yield* transport.listen({ host: config.bindHost, port: config.port }, accept))
    : Option.none<number>()
  return { port, counts: Effect.sync(() => state.counts()) }
})

/** The listener, bound in the layer's scope; nothing binds when the TCP mesh does not run. */
export const layer: Layer.Layer<
  Listener,
  TransportError,
  MeshConfig.MeshConfig | Transport | Liveness | Dispatch | MeshEvents | SelfDialsService
> = Layer.effect(Listener, make)
