/**
 * The listening side of TLS-PSK links: a `node:tls` server that accepts only an identity it can key
 * (`PskKeys.offered`), hands every finished handshake to the mesh as a `Connection` carrying that
 * identity, and counts every failed one through `onFailure`. Closing its scope stops accepting first,
 * then ends the connections and the handshakes still in flight.
 *
 * @internal
 */
import type * as Net from "node:net"
import * as Tls from "node:tls"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import type * as Scope from "effect/Scope"
import type { TransportError } from "../../MeshError.js"
import type { Connection, ListenOptions } from "../../Transport.js"
import { connectionOf, destroy, KEEPALIVE_MS } from "./nodeSocket.js"
import * as ServerScope from "./serverScope.js"
import { CIPHERS, type PskKeys } from "./tlsPsk.js"

const noop = () => {}

const errorCode = (error: Error): string => {
  const code: unknown = Reflect.get(error, "code")
  return typeof code === "string" ? code : error.message
}

const remoteOf = (socket: Net.Socket): string =>
  socket.remoteAddress === undefined ? "unknown" : `${socket.remoteAddress}:${socket.remotePort ?? "?"}`

/** What the listener needs besides the address and the handler. */
export interface TlsListenerOptions {
  readonly keys: PskKeys
  readonly handshakeTimeoutMs: number
  /** Called for every accepted socket whose handshake fails, with the reason and the remote. */
  readonly onFailure: (reason: string, remote: string) => void
}

/** Binds a TLS-PSK listener in the current scope; the port bound. */
export const listen = (
  options: TlsListenerOptions,
  listenOptions: ListenOptions,
  onConnection: (connection: Connection) => Effect.Effect<void>
): Effect.Effect<number, TransportError, Scope.Scope> =>
  Effect.gen(function* () {
    const fibers = yield* FiberSet.make<void, never>()
    const run = yield* FiberSet.runtime(fibers)<never>()
    // Every accepted TCP socket until it closes, so the scope can end handshakes still in flight.
    const sockets = new Set<Net.Socket>()
    const accepted = new WeakMap<Tls.TLSSocket, string>()
    const refused = new WeakSet<Tls.TLSSocket>()
    let closing = false

    const onSecureConnection = (socket: Tls.TLSSocket) => {
      socket.on("error", noop)
      if (closing) return void socket.destroy()
      socket.setNoDelay(true)
      socket.setKeepAlive(true, KEEPALIVE_MS)
      const connection = { ...connectionOf(socket, remoteOf(socket)), identity: accepted.get(socket) }
      run(
        onConnection(connection).pipe(
          Effect.catchCause((cause) =>
            Cause.hasInterruptsOnly(cause)
              ? Effect.void
              : Effect.logError("mesh TLS connection failed", cause).pipe(
                  Effect.annotateLogs({ module: "TlsTransport", remote: remoteOf(socket) })
                )
          ),
          Effect.ensuring(destroy(socket))
        )
      )
    }
    const onClientError = (error: Error, socket: Tls.TLSSocket) => {
      socket.destroy()
      if (closing) return
      options.onFailure(refused.has(socket) ? "InvalidIdentity" : errorCode(error), remoteOf(socket))
    }
    const onRawConnection = (raw: Net.Socket) => {
      raw.on("error", noop)
      sockets.add(raw)
      raw.once("close", () => sockets.delete(raw))
    }
    const pskCallback = (socket: Tls.TLSSocket, identity: string): Buffer | null => {
      const offered = options.keys.offered(identity)
      if (offered._tag === "Refused") {
        refused.add(socket)
        return null
      }
      accepted.set(socket, offered.serverId)
      return offered.psk
    }

    return yield* ServerScope.bind({
      create: () => {
        const server = Tls.createServer({
          ciphers: CIPHERS,
          minVersion: "TLSv1.3",
          maxVersion: "TLSv1.3",
          handshakeTimeout: options.handshakeTimeoutMs,
          pskCallback
        })
        server.on("connection", onRawConnection)
        server.on("secureConnection", onSecureConnection)
        server.on("tlsClientError", onClientError)
        return server
      },
      listen: listenOptions,
      logAs: { message: "mesh TLS listener error", module: "TlsTransport" },
      fibers,
      sockets,
      // Stop accepting first, then end the connections and the handshakes in flight.
      onClosing: () => {
        closing = true
      }
    })
  })
