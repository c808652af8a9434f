/**
 * The demo's network: real loopback TCP (`TcpTransport`) behind a switchboard that can cut one node off
 * and put it back. Nodes address each other by name through a `Resolver` registry: each node listens on
 * an ephemeral port and registers its name there, and every dial resolves the name afresh (the library's
 * own way of wiring nodes on ephemeral ports). The switchboard only adds the partition: it refuses dials
 * from or to a cut node. Cutting a node also breaks its live connections, both the ones it dialled and the ones it
 * accepted, which is what a partition looks like to the mesh: its links drop, the heartbeats stop and
 * the peers pass the dead threshold. A dial across the cut hangs, as a SYN into a partition does, and
 * connects once the cut is restored (or fails after `awaitListen`), so recovery is prompt.
 *
 * @since 0.1.0
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { TransportError } from "../MeshError.js"
import * as Resolver from "../Resolver.js"
import * as TcpTransport from "../TcpTransport.js"
import type { Connection, TransportShape } from "../Transport.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Switchboard {
  /** The transport of node `name`. */
  readonly transportFor: (name: string) => TransportShape
  /** Partitions `name` from everyone: breaks its connections and refuses its dials until restored. */
  readonly cut: (name: string) => Effect.Effect<void>
  readonly restore: (name: string) => Effect.Effect<void>
  /** The mesh port each node bound, by name. */
  readonly ports: () => ReadonlyMap<string, number>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface SwitchboardOptions {
  /** Where everything listens and dials. Default `127.0.0.1`. */
  readonly host?: string
  /** How long a dial waits for its target to start listening, or for a cut to heal. Default 5 seconds. */
  readonly awaitListen?: Duration.Input
}

interface Tracked {
  readonly nodes: ReadonlyArray<string>
  readonly broken: Deferred.Deferred<never, TransportError>
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: SwitchboardOptions = {}): Effect.Effect<Switchboard> =>
  Effect.gen(function* () {
    const host = options.host ?? "127.0.0.1"
    const awaitListen = Duration.fromInputUnsafe(options.awaitListen ?? "5 seconds")
    const names = yield* Resolver.makeRegistry()
    const tcp = TcpTransport.make({ resolver: names })
    const listening = new Map<string, Deferred.Deferred<number>>()
    const bound = new Map<string, number>()
    /** Cut nodes, each with the signal of its restoration. */
    const cutOff = new Map<string, Deferred.Deferred<void>>()
    const live = new Set<Tracked>()

    const listenerOf = (name: string) => {
      let deferred = listening.get(name)
      if (deferred === undefined) {
        deferred = Deferred.makeUnsafe<number>()
        listening.set(name, deferred)
      }
      return deferred
    }

    /** A connection that fails (reads and writes) once its node is cut. */
    const track = (nodes: ReadonlyArray<string>, connection: Connection) =>
      Effect.map(Deferred.make<never, TransportError>(), (broken) => {
        const entry: Tracked = { nodes, broken }
        live.add(entry)
        // Connected just as its node was cut: it is on the wrong side of the partition already.
        if (nodes.some((node) => cutOff.has(node)))
          Deferred.doneUnsafe(broken, Effect.fail(linkCut(nodes[0]!)))
        const wrapped: Connection = {
          remoteAddress: connection.remoteAddress,
          read: (onChunk) => Effect.raceFirst(connection.read(onChunk), Deferred.await(broken)),
          write: (bytes) =>
            Effect.flatMap(
              Deferred.poll(broken),
              Option.match({ onNone: () => connection.write(bytes), onSome: (failed) => failed })
            )
        }
        return { wrapped, release: Effect.sync(() => live.delete(entry)) }
      })

    const linkCut = (address: string) =>
      new TransportError({ reason: "Read", address, cause: new Error("link cut") })

    const refused = (address: string, why: string) =>
      new TransportError({ reason: "Dial", address, cause: new Error(why) })

    /** Waits until neither end of a link is cut. */
    const healed = (a: string, b: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        const blocking = cutOff.get(a) ?? cutOff.get(b)
        return blocking === undefined ? Effect.void : Effect.andThen(Deferred.await(blocking), healed(a, b))
      })

    const transportFor = (name: string): TransportShape => ({
      listen: (listenOptions, onConnection) =>
        Effect.gen(function* () {
          const port = yield* tcp.listen({ host, port: listenOptions.port }, (connection) =>
            cutOff.has(name)
              ? Effect.void
              : Effect.flatMap(track([name], connection), ({ wrapped, release }) =>
                  Effect.ensuring(onConnection(wrapped), release)
                )
          )
          bound.set(name, port)
          yield* names.register(name, { host, port })
          yield* Deferred.succeed(listenerOf(name), port)
          return port
        }),
      dial: (target, targetPort) =>
        Effect.gen(function* () {
          yield* healed(name, target).pipe(
            Effect.timeoutOrElse({
              duration: awaitListen,
              orElse: () => Effect.fail(refused(target, "link cut"))
            })
          )
          yield* Deferred.await(listenerOf(target)).pipe(
            Effect.timeoutOrElse({
              duration: awaitListen,
              orElse: () => Effect.fail(refused(target, "not listening"))
            })
          )
          // By name: the registry resolves it to the port the target bound.
          const connection = yield* tcp.dial(target, targetPort)
          const { wrapped, release } = yield* track([name, target], connection)
          yield* Effect.addFinalizer(() => release)
          return wrapped
        })
    })

    const cut = (name: string) =>
      Effect.suspend(() => {
        if (!cutOff.has(name)) cutOff.set(name, Deferred.makeUnsafe<void>())
        const reason = linkCut(name)
        return Effect.forEach(
          [...live].filter((entry) => entry.nodes.includes(name)),
          (entry) => Deferred.fail(entry.broken, reason),
          { discard: true }
        )
      })

    return {
      transportFor,
      cut,
      restore: (name) =>
        Effect.suspend(() => {
          const restored = cutOff.get(name)
          cutOff.delete(name)
          return restored === undefined ? Effect.void : Deferred.succeed(restored, undefined)
        }),
      ports: () => bound
    }
  })
