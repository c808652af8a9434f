/**
 * A `node:net` socket (or a TLS socket, which is one) as the mesh's `Connection`: reads straight from
 * the socket's 'data' event, pausing it while an effect returned for a chunk runs; writes with
 * back-pressure; and, on an idle link, frames of one tick gathered into one write. Shared by the TCP
 * and the TLS transports.
 *
 * @internal
 */
import type * as Net from "node:net"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import { TransportError } from "../../MeshError.js"
import type { Connection } from "../../Transport.js"

/** TCP keep-alive's first probe on every mesh socket, TCP or TLS (`TcpTransport.KEEPALIVE_MS`). */
export const KEEPALIVE_MS = 10_000

/** A connected socket as the mesh's `Connection`, `address` naming the other end in errors. */
export const connectionOf = (socket: Net.Socket, address: string): Connection => {
  // A lone frame is written at once: a wake leaves before the caller's fiber finishes its turn. The
  // frames that follow it in the same turn of the event loop (every I/O callback of one poll, say the
  // acknowledgements of many commits arriving together) are gathered and leave as one buffer, in one
  // write, when the turn ends (`setImmediate`): one system call per turn, not per frame. Once a turn
  // carries more than one frame the link is busy, and the next turn gathers from its first frame, until
  // a turn carries a single frame again.
  let pending: Array<Uint8Array> = []
  let scheduled = false
  let wroteAtOnce = false
  let busy = false
  const flush = () => {
    if (pending.length === 0) return
    const frames = pending
    pending = []
    if (socket.destroyed || !socket.writable) return
    socket.write(frames.length === 1 ? frames[0]! : Buffer.concat(frames))
  }
  const endTurn = () => {
    scheduled = false
    busy = pending.length + (wroteAtOnce ? 1 : 0) > 1
    wroteAtOnce = false
    flush()
  }
  return {
    unsafeTryWrite: (bytes) => {
      if (socket.destroyed || !socket.writable || socket.writableNeedDrain) return false
      if (!scheduled) {
        scheduled = true
        setImmediate(endTurn)
        if (!busy) {
          wroteAtOnce = true
          socket.write(bytes)
          return true
        }
      }
      pending.push(bytes)
      return true
    },
    remoteAddress: Option.fromNullishOr(socket.remoteAddress),
    read: <E>(onChunk: (chunk: Uint8Array) => Effect.Effect<void, E> | undefined) =>
      Effect.flatMap(Effect.context<never>(), (context) =>
        Effect.callback<void, TransportError | E>((resume) => {
          // Chunks are handed on from the socket's 'data' event, with no fiber in between; an effect
          // returned for a chunk pauses the socket until it completes.
          const backlog: Array<Uint8Array> = []
          let running: Fiber.Fiber<void, E> | undefined
          let ended = false
          let finished = false
          const finish = (result: Effect.Effect<void, TransportError | E>) => {
            if (finished) return
            finished = true
            cleanup()
            resume(result)
          }
          const pump = () => {
            while (running === undefined && backlog.length > 0 && !finished) {
              let effect: Effect.Effect<void, E> | undefined
              try {
                effect = onChunk(backlog.shift()!)
              } catch (defect) {
                // A throw from the reader must end this connection, never escape the socket's event
                // handler (that would take the whole process down).
                return finish(Effect.die(defect))
              }
              if (effect === undefined) continue
              socket.pause()
              const fiber = Effect.runForkWith(context)(effect)
              running = fiber
              fiber.addObserver((exit) => {
                running = undefined
                if (Exit.isFailure(exit)) return finish(Effect.failCause(exit.cause))
                pump()
                if (running === undefined && !finished) {
                  if (ended) finish(Effect.void)
                  else socket.resume()
                }
              })
            }
          }
          const onData = (chunk: Buffer) => {
            backlog.push(chunk)
            pump()
          }
          const onEnd = () => {
            ended = true
            if (running === undefined) finish(Effect.void)
          }
          const onClose = () => {
            // After 'end' a close is the normal ending; before it, the connection broke.
            if (!ended) finish(Effect.fail(new TransportError({ reason: "Read", address })))
            else if (running === undefined) finish(Effect.void)
          }
          const onError = (cause: Error) =>
            finish(Effect.fail(new TransportError({ reason: "Read", address, cause })))
          const cleanup = () => {
            socket.off("data", onData)
            socket.off("end", onEnd)
            socket.off("close", onClose)
            socket.off("error", onError)
          }
          socket.on("data", onData)
          socket.on("end", onEnd)
          socket.on("close", onClose)
          socket.on("error", onError)
          if (socket.isPaused()) socket.resume()
          return Effect.suspend(() => {
            cleanup()
            finished = true
            return running === undefined ? Effect.void : Fiber.interrupt(running)
          })
        })
      ),
    write: (bytes) =>
      Effect.callback<void, TransportError>((resume) => {
        if (socket.destroyed || !socket.writable) {
          resume(Effect.fail(new TransportError({ reason: "Closed", address })))
          return
        }
        // Frames gathered this turn went first: they were handed first.
        flush()
        if (socket.write(bytes)) {
          resume(Effect.void)
          return
        }
        // The socket's buffer is over its high-water mark: wait for it to drain, or for the end.
        const cleanup = () => {
          socket.off("drain", onDrain)
          socket.off("close", onClose)
        }
        const onDrain = () => {
          cleanup()
          resume(Effect.void)
        }
        const onClose = () => {
          cleanup()
          resume(Effect.fail(new TransportError({ reason: "Write", address })))
        }
        socket.on("drain", onDrain)
        socket.on("close", onClose)
        return Effect.sync(cleanup)
      })
  }
}

/** Destroys a socket unless it already is. */
export const destroy = (socket: Net.Socket) =>
  Effect.sync(() => {
    if (!socket.destroyed) socket.destroy()
  })
