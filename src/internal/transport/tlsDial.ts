/**
 * The dialing side of a TLS-PSK link: a TLS 1.3 connection keyed by this node's link key, refused
 * when the listener answers with a certificate (it did not use the key: not a mesh peer), bounded by
 * the connect timeout, TCP connect and handshake together.
 *
 * @internal
 */
import * as Tls from "node:tls"
import * as Effect from "effect/Effect"
import { TransportError } from "../../MeshError.js"
import { KEEPALIVE_MS } from "./nodeSocket.js"
import { CIPHERS, type PskKeys } from "./tlsPsk.js"

const noop = () => {}

/** Opens one TLS-PSK connection to `host:port`, named `address` in its errors. */
export const connect = (
  keys: PskKeys,
  host: string,
  port: number,
  address: string,
  timeoutMs: number
): Effect.Effect<Tls.TLSSocket, TransportError> =>
  Effect.callback<Tls.TLSSocket, TransportError>((resume) => {
    const socket = Tls.connect({
      host,
      port,
      ciphers: CIPHERS,
      minVersion: "TLSv1.3",
      maxVersion: "TLSv1.3",
      pskCallback: () => ({ psk: keys.ownKey, identity: keys.identity }),
      // There is no certificate to check the host name against; a certificate is refused below.
      checkServerIdentity: () => undefined
    })
    socket.setNoDelay(true)
    socket.setKeepAlive(true, KEEPALIVE_MS)
    // A permanent listener: an 'error' with none would crash the process.
    socket.on("error", noop)
    let settled = false
    const settle = (result: Effect.Effect<Tls.TLSSocket, TransportError>) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      socket.off("secureConnect", onSecure)
      socket.off("error", onError)
      socket.off("close", onClose)
      resume(result)
    }
    const fail = (cause: Error) => {
      socket.destroy()
      settle(Effect.fail(new TransportError({ reason: "Dial", address, cause })))
    }
    const onSecure = () => {
      if (Object.keys(socket.getPeerCertificate()).length > 0) {
        return fail(new Error("the listener presented a certificate instead of accepting the PSK"))
      }
      settle(Effect.succeed(socket))
    }
    const onError = (cause: Error) => fail(cause)
    const onClose = () => fail(new Error("closed during the TLS handshake"))
    const timer = setTimeout(() => {
      socket.destroy()
      settle(
        Effect.fail(new TransportError({ reason: "Timeout", address, cause: new Error("connect timed out") }))
      )
    }, timeoutMs)
    socket.once("secureConnect", onSecure)
    socket.once("error", onError)
    socket.once("close", onClose)
    return Effect.sync(() => {
      settled = true
      clearTimeout(timer)
      socket.destroy()
    })
  })
