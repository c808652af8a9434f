/**
 * The hosts of the in-memory network (`MemoryTransport`) and their listeners: where a listener is
 * reached, which listener a dial reaches, and the connections open into each.
 *
 * A listener a named node binds to a wildcard address (`0.0.0.0`, `::`) is reached by that node's
 * name only, as a host's own address would be; one bound to a given host by that host. An unnamed
 * node's wildcard (or loopback) listener is filed under `*` and reached by the loopback names on its
 * port. A listener hands each accepted connection to its handler in a fiber of its own, and closes it
 * when the handler ends or the listener's scope closes.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import * as Latch from "effect/Latch"
import type * as Scope from "effect/Scope"
import { TransportError } from "../../MeshError.js"
import type { Connection, ListenOptions } from "../../Transport.js"
import { type Faults, matches, type Target } from "./faults.js"
import { Wire } from "./pipe.js"

/** Addresses a listener binds to take every address of its host. */
const WILDCARD_HOSTS = new Set(["0.0.0.0", "::", "*"])
/** Names an unnamed node's wildcard listeners are reached by. */
const LOOPBACK_HOSTS = new Set(["127.0.0.1", "localhost", "::1", "0.0.0.0", "::"])

/** The first port `listen` hands out for port 0 (the IANA ephemeral range). */
const FIRST_EPHEMERAL = 49152

/** One listener: where it is reached, its readers' gate, and the connections open into it. */
export class MemoryListener {
  private readonly wires = new Set<Wire>()

  constructor(
    /** The name (or bound host) it is reached by; `*` for an unnamed node's wildcard listener. */
    readonly host: string,
    readonly port: number,
    /** Open while its connections' readers read (`stopReading` closes it). */
    private readonly readers: Latch.Latch,
    private readonly faults: Faults,
    private readonly onConnection: (connection: Connection) => Effect.Effect<void>,
    private readonly runFork: (effect: Effect.Effect<void>) => unknown
  ) {}

  /** How many connections into it are open. */
  get openConnections(): number {
    return this.wires.size
  }

  /**
   * A dial from `origin` reaches it as `remote`: a new connection, handed to the handler in a fiber of
   * its own; the dialer's end closes with the dialer's scope.
   */
  connect(origin: string | undefined, remote: string): Effect.Effect<Connection, never, Scope.Scope> {
    return Effect.gen({ self: this }, function* () {
      const wire = yield* Wire.make(origin, this.host)
      this.wires.add(wire)
      yield* Effect.addFinalizer(() => this.release(wire))
      // The accepted end closes when its handler ends, or when the listener's scope closes.
      this.runFork(
        Effect.ensuring(this.onConnection(wire.listenerEnd(this.readers, this.faults)), this.release(wire))
      )
      return wire.dialerEnd(remote, this.faults)
    })
  }

  /** Stops (or resumes) the readers of every connection into it, current and future. */
  reading(on: boolean): Effect.Effect<void> {
    return on ? this.readers.open : this.readers.close
  }

  /** Resets every connection into it that `cut` says to, naming `why`. */
  cutWhere(cut: (wire: Wire) => boolean, why: string): Effect.Effect<void> {
    return Effect.forEach([...this.wires].filter(cut), (wire) => wire.cut(why), { discard: true })
  }

  /** Closes every connection into it (its scope is closing). */
  releaseAll(): Effect.Effect<void> {
    return Effect.forEach([...this.wires], (wire) => this.release(wire), { discard: true })
  }

  private release(wire: Wire): Effect.Effect<void> {
    return Effect.andThen(
      wire.close(),
      Effect.sync(() => this.wires.delete(wire))
    )
  }
}

/** Every listener of one network, by `host:port`. */
export class Hosts {
  private readonly listeners = new Map<string, MemoryListener>()
  private nextEphemeral = FIRST_EPHEMERAL

  constructor(private readonly faults: Faults) {}

  /** Listens for the node `origin` (undefined: an unnamed node) until the scope closes. */
  listen(
    origin: string | undefined,
    options: ListenOptions,
    onConnection: (connection: Connection) => Effect.Effect<void>
  ): Effect.Effect<number, TransportError, Scope.Scope> {
    return Effect.gen({ self: this }, function* () {
      const port = options.port === 0 ? this.nextEphemeral++ : options.port
      const host = reachedAs(options.host, origin)
      const key = `${host}:${port}`
      if (this.listeners.has(key)) {
        return yield* new TransportError({
          reason: "Listen",
          address: `${options.host}:${port}`,
          cause: new Error("address in use")
        })
      }
      const fibers = yield* FiberSet.make()
      const runFork = yield* FiberSet.runtime(fibers)()
      const readers = yield* Latch.make(!this.faults.isStopped(host, port))
      const listener = new MemoryListener(host, port, readers, this.faults, onConnection, runFork)
      this.listeners.set(key, listener)
      yield* Effect.addFinalizer(() =>
        Effect.suspend(() => {
          this.listeners.delete(key)
          return listener.releaseAll()
        })
      )
      return port
    })
  }

  /** The listener a dial from `origin` to `host:port` reaches; none when nothing listens or it is refused. */
  route(origin: string | undefined, host: string, port: number): MemoryListener | undefined {
    const listener =
      this.listeners.get(`${host}:${port}`) ??
      (LOOPBACK_HOSTS.has(host) ? this.listeners.get(`*:${port}`) : undefined)
    if (
      listener === undefined ||
      this.faults.isRefused(host, port) ||
      this.faults.blocked(origin, listener.host)
    ) {
      return undefined
    }
    return listener
  }

  /** The listeners `target` names. */
  matching(target: Target): Array<MemoryListener> {
    return [...this.listeners.values()].filter((listener) => matches(target, listener.host, listener.port))
  }

  /** Resets every open connection a partition now separates. */
  cutPartitioned(): Effect.Effect<void> {
    return Effect.suspend(() =>
      Effect.forEach(
        [...this.listeners.values()],
        (listener) => listener.cutWhere((wire) => this.faults.blocked(wire.from, wire.to), "partition"),
        { discard: true }
      )
    )
  }
}

/** Where a listener bound to `host` by the node `origin` is reached. */
const reachedAs = (host: string, origin: string | undefined): string =>
  WILDCARD_HOSTS.has(host) || (origin === undefined && LOOPBACK_HOSTS.has(host)) ? (origin ?? "*") : host
