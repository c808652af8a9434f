/**
 * A `node:net` (or `node:tls`) server bound for the life of the current scope, shared by the TCP and
 * the TLS listeners: the bind's failure is a `TransportError`, a later server error is logged (an
 * accept failure must not crash the process), and closing the scope stops accepting first, then ends
 * the connections' fibers and sockets still open, then waits for the server to close.
 *
 * @internal
 */
import type * as Net from "node:net"
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import type * as Scope from "effect/Scope"
import { TransportError } from "../../MeshError.js"
import type { ListenOptions } from "../../Transport.js"

export interface ServerScopeOptions<S extends Net.Server> {
  /** The server, its connection handlers attached. */
  readonly create: () => S
  readonly listen: ListenOptions
  /** Where later server errors are logged: the log's message and `module` annotation. */
  readonly logAs: { readonly message: string; readonly module: string }
  /** The fibers serving the connections, ended when the scope closes. */
  readonly fibers: FiberSet.FiberSet<void, never>
  /** The accepted sockets still open, destroyed when the scope closes. */
  readonly sockets: ReadonlySet<Net.Socket>
  /** Called first when the scope closes: from then on a new connection is refused. */
  readonly onClosing: () => void
}

/** Binds the server in the current scope; the port bound. */
export const bind = <S extends Net.Server>(
  options: ServerScopeOptions<S>
): Effect.Effect<number, TransportError, Scope.Scope> =>
  Effect.gen(function* () {
    const { host, port } = options.listen
    const address = `${host}:${port}`
    const context = yield* Effect.context<never>()
    const server = yield* Effect.acquireRelease(
      Effect.callback<S, TransportError>((resume) => {
        const server = options.create()
        const onListenError = (cause: Error) => {
          server.close()
          resume(Effect.fail(new TransportError({ reason: "Listen", address, cause })))
        }
        server.once("error", onListenError)
        server.listen({ host, port }, () => {
          server.off("error", onListenError)
          server.on("error", (cause) => {
            Effect.runForkWith(context)(
              Effect.logWarning(options.logAs.message).pipe(
                Effect.annotateLogs({ module: options.logAs.module, address, reason: cause.message })
              )
            )
          })
          resume(Effect.succeed(server))
        })
        return Effect.sync(() => server.close())
      }),
      (server) =>
        Effect.gen(function* () {
          options.onClosing()
          let closed = false
          let wake: (() => void) | undefined
          server.close(() => {
            closed = true
            wake?.()
          })
          yield* FiberSet.clear(options.fibers)
          for (const socket of options.sockets) socket.destroy()
          yield* Effect.callback<void>((resume) => {
            if (closed) resume(Effect.void)
            else wake = () => resume(Effect.void)
          })
        })
    )
    const bound = server.address()
    return typeof bound === "object" && bound !== null ? bound.port : port
  })
