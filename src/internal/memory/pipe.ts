/**
 * A connection of the in-memory network (`MemoryTransport`): a pair of bounded pipes, one each way,
 * between a dialer and a listener. A pipe holds 64 chunks (the in-memory "socket buffer") before its
 * writer suspends; each chunk carries the `Clock` time it may be read at, so the network's delay
 * applies to bytes in flight. Either end closing closes both directions gracefully (the readers drain,
 * then end), as a TCP close does; a cut fails both ends at once, as a reset does.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Latch from "effect/Latch"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import { TransportError } from "../../MeshError.js"
import type { Connection } from "../../Transport.js"

/** Chunks a pipe holds before its writer suspends. */
const PIPE_CAPACITY = 64

/** One chunk in flight, and when it may be read. */
interface Chunk {
  readonly bytes: Uint8Array
  readonly at: number
}

/** Where a pipe's writer reads the network's delay (the faults the test set). */
export interface Delay {
  readonly delayMillis: number
}

/** One direction of a connection. */
export class Pipe {
  private constructor(
    private readonly queue: Queue.Queue<Chunk>,
    /** Succeeds on a graceful close (the reader drains, then ends); fails on a cut. */
    private readonly closed: Deferred.Deferred<void, TransportError>
  ) {}

  static make: Effect.Effect<Pipe> = Effect.zipWith(
    Queue.bounded<Chunk>(PIPE_CAPACITY),
    Deferred.make<void, TransportError>(),
    (queue, closed) => new Pipe(queue, closed)
  )

  /** Writes a copy of `bytes`, readable `delay` from now; fails once the pipe closed. */
  write(bytes: Uint8Array, address: string, delay: Delay): Effect.Effect<void, TransportError> {
    return Effect.gen({ self: this }, function* () {
      if (yield* Deferred.isDone(this.closed)) {
        return yield* new TransportError({ reason: "Closed", address })
      }
      const at = (yield* Clock.currentTimeMillis) + delay.delayMillis
      // Copy: the writer may reuse its buffer once the write completes, as with a socket.
      yield* Effect.raceFirst(
        Queue.offer(this.queue, { bytes: Uint8Array.from(bytes), at }),
        Effect.flatMap(Deferred.await(this.closed), () => new TransportError({ reason: "Closed", address }))
      )
    })
  }

  /**
   * Reads until the pipe closes (success, once drained) or is cut (failure), each chunk no earlier
   * than its time. While `gate` is closed the reader holds still, and holds on to what it took, as a
   * process that stops reading would.
   */
  read<E>(
    gate: Latch.Latch | undefined,
    onChunk: (chunk: Uint8Array) => Effect.Effect<void, E> | undefined
  ): Effect.Effect<void, TransportError | E> {
    return Effect.gen({ self: this }, function* () {
      while (true) {
        if (gate !== undefined) yield* gate.await
        const next = yield* this.next()
        if (Option.isNone(next)) return
        if (gate !== undefined) yield* gate.await
        const now = yield* Clock.currentTimeMillis
        if (next.value.at > now) yield* Effect.sleep(Duration.millis(next.value.at - now))
        const effect = onChunk(next.value.bytes)
        if (effect !== undefined) yield* effect
      }
    })
  }

  /** The next chunk; none once the pipe closed and is drained; fails once it was cut. */
  private next(): Effect.Effect<Option.Option<Chunk>, TransportError> {
    return Effect.flatMap(Queue.poll(this.queue), (ready) =>
      Option.isSome(ready)
        ? Effect.succeed(ready)
        : Effect.raceFirst(
            Effect.map(Queue.take(this.queue), Option.some),
            // Closed: drain what is left, then end (or fail, on a cut).
            Effect.andThen(Deferred.await(this.closed), Queue.poll(this.queue))
          )
    )
  }

  /** A graceful close: the reader drains what is in flight, then ends. */
  close(): Effect.Effect<boolean> {
    return Deferred.succeed(this.closed, undefined)
  }

  /** A reset: both the reader and the writer fail with `error`. */
  cut(error: TransportError): Effect.Effect<boolean> {
    return Deferred.fail(this.closed, error)
  }
}

/** A connection: the pipes both ways between a dialer and a listener, and who they are. */
export class Wire {
  private constructor(
    private readonly toListener: Pipe,
    private readonly toDialer: Pipe,
    /** The dialing node's name, if it has one. */
    readonly from: string | undefined,
    /** The listening node's name (or bound host). */
    readonly to: string
  ) {}

  static make(from: string | undefined, to: string): Effect.Effect<Wire> {
    return Effect.zipWith(
      Pipe.make,
      Pipe.make,
      (toListener, toDialer) => new Wire(toListener, toDialer, from, to)
    )
  }

  /** The dialer's end, reaching `remote`. */
  dialerEnd(remote: string, delay: Delay): Connection {
    return endpoint(remote, this.toDialer, this.toListener, undefined, delay)
  }

  /** The listener's end: it sees the dialer's name (loopback for an unnamed one); `gate` stops its reader. */
  listenerEnd(gate: Latch.Latch, delay: Delay): Connection {
    return endpoint(this.from ?? "127.0.0.1", this.toListener, this.toDialer, gate, delay)
  }

  /** Either end closing is a graceful close of both directions, as with a TCP close. */
  close(): Effect.Effect<void> {
    return Effect.asVoid(Effect.all([this.toListener.close(), this.toDialer.close()]))
  }

  /** Breaks the connection: both ends fail, as on a reset; `why` names the cause in the error. */
  cut(why: string): Effect.Effect<void> {
    const error = new TransportError({
      reason: "Read",
      address: `memory:${why}`,
      cause: new Error("connection reset")
    })
    return Effect.asVoid(Effect.all([this.toListener.cut(error), this.toDialer.cut(error)]))
  }
}

const endpoint = (
  remote: string,
  inbound: Pipe,
  outbound: Pipe,
  gate: Latch.Latch | undefined,
  delay: Delay
): Connection => ({
  remoteAddress: Option.some(remote),
  read: (onChunk) => inbound.read(gate, onChunk),
  write: (bytes) => outbound.write(bytes, remote, delay)
})
