/**
 * How a dialer turns a configured peer (`host:port`) into the address it connects to. The spec's dial
 * loop re-resolves the name on every attempt ("Topology"), so a peer whose address moved is picked up
 * without a refresh loop; the default does that with the system's DNS. A host can provide its own,
 * and a map-backed registry lets nodes on ephemeral ports find each other by name (the demo and the
 * tests use it), or a test move a peer to a new address, or make names fail for a while.
 *
 * @since 0.1.0
 */
import * as Dns from "node:dns"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { ipVersion } from "./internal/ipLiteral.js"
import { TransportError } from "./MeshError.js"

/**
 * Where to connect.
 *
 * @since 0.1.0
 * @category models
 */
export interface Endpoint {
  readonly host: string
  readonly port: number
}

/**
 * Turns a configured `host:port` into the endpoint to dial.
 *
 * @since 0.1.0
 * @category models
 */
export interface ResolverShape {
  /** The endpoint to dial for the configured `host:port`, or a `TransportError` with reason `Resolve`. */
  readonly resolve: (host: string, port: number) => Effect.Effect<Endpoint, TransportError>
}

/**
 * The resolver, for a transport that takes it from the context (`layerResolved`).
 *
 * @since 0.1.0
 * @category tags
 */
export class Resolver extends Context.Service<Resolver, ResolverShape>()("queen-mesh/Resolver") {}

const notResolved = (host: string, port: number, why: string, cause?: unknown) =>
  new TransportError({ reason: "Resolve", address: `${host}:${port}`, cause: cause ?? new Error(why) })

/**
 * The system's resolver (`dns.lookup`, as `net.connect` uses), asked afresh on every call; IP literals
 * are returned as they are.
 *
 * @since 0.1.0
 * @category constructors
 */
export const system: ResolverShape = {
  resolve: (host, port) =>
    ipVersion(host) !== 0
      ? Effect.succeed({ host, port })
      : Effect.callback<Endpoint, TransportError>((resume) => {
          Dns.lookup(host, (error, address) => {
            if (error !== null || address === undefined || address === "") {
              resume(Effect.fail(notResolved(host, port, "lookup failed", error ?? undefined)))
            } else {
              resume(Effect.succeed({ host: address, port }))
            }
          })
        })
}

/**
 * The system's resolver as the `Resolver`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSystem: Layer.Layer<Resolver> = Layer.succeed(Resolver, system)

/**
 * A registry of names, changeable at any time: what a name resolves to now, or that it fails.
 *
 * @since 0.1.0
 * @category models
 */
export interface RegistryShape extends ResolverShape {
  /** `name` (any port) resolves to `endpoint` from now on. */
  readonly register: (name: string, endpoint: Endpoint) => Effect.Effect<void>
  /** `name` stops resolving (dials fail as "not resolved") until registered again. */
  readonly unregister: (name: string) => Effect.Effect<void>
  /** What `name` resolves to now. */
  readonly lookup: (name: string) => Effect.Effect<Option.Option<Endpoint>>
}

/**
 * A map-backed resolver. Names not in it fall through to `fallback` (default: fail as not resolved).
 *
 * @example
 * ```ts
 * import { deepStrictEqual, strictEqual } from "node:assert"
 * import { Effect, Result } from "effect"
 * import { Resolver } from "queen-mesh"
 *
 * const program = Effect.gen(function* () {
 *   const registry = yield* Resolver.makeRegistry()
 *   yield* registry.register("queen-b", { host: "127.0.0.1", port: 40001 })
 *   deepStrictEqual(yield* registry.resolve("queen-b", 6633), { host: "127.0.0.1", port: 40001 })
 *   yield* registry.unregister("queen-b")
 *   const gone = yield* Effect.result(registry.resolve("queen-b", 6633))
 *   strictEqual(Result.isFailure(gone) && gone.failure.reason, "Resolve")
 * })
 *
 * Effect.runPromise(program)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeRegistry = (
  options: {
    readonly fallback?: ResolverShape
    readonly initial?: Iterable<readonly [string, Endpoint]>
  } = {}
): Effect.Effect<RegistryShape> =>
  Effect.sync(() => {
    const names = new Map<string, Endpoint>(options.initial ?? [])
    return {
      register: (name, endpoint) => Effect.sync(() => void names.set(name, endpoint)),
      unregister: (name) => Effect.sync(() => void names.delete(name)),
      lookup: (name) => Effect.sync(() => Option.fromUndefinedOr(names.get(name))),
      resolve: (host, port) =>
        Effect.suspend(() => {
          const found = names.get(host)
          if (found !== undefined) return Effect.succeed(found)
          return options.fallback === undefined
            ? Effect.fail(notResolved(host, port, "name not registered"))
            : options.fallback.resolve(host, port)
        })
    }
  })

/**
 * A registry as the `Resolver`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerRegistry = (registry: RegistryShape): Layer.Layer<Resolver> =>
  Layer.succeed(Resolver, registry)
