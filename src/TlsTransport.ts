/**
 * TLS-PSK links (`QUEEN_MESH_TLS=psk`): every mesh connection runs over `node:tls`, keyed by a
 * pre-shared key derived from the shared secret, with no certificates. It answers the holes that spec
 * "The security reality" names: a TLS 1.3 handshake cannot be replayed (both sides contribute fresh
 * randomness and an ephemeral key share), and every byte after it is AEAD-protected, so a frame injected
 * into the stream breaks the link instead of being applied.
 *
 * The key for a link is derived per dialer: `psk = HKDF-SHA256(ikm = secret, salt = PSK_SALT,
 * info = identity, 32 bytes)`, all strings as UTF-8, where the identity is the dialer's server id, sent
 * in clear as the TLS-PSK identity. The listener derives the same key from the identity it is offered
 * and the handshake only completes if the dialer proved it holds that key (the binder). Anyone holding
 * the secret can derive the key of any identity, so the identity says "a holder of the secret claiming
 * to be X", no more; the mesh HELLO still runs inside the link, and the listener refuses a HELLO whose
 * server id is not that identity (`wrong_identity`): an accepted connection carries it as `identity`.
 *
 * With a keyring (`QUEEN_SYNC_SECRETS`: a primary key and keys still accepted), a dialer derives its
 * link key from its primary and presents `qmk1:<key id>:<server id>`, the key id derived from the key
 * (never the key); a listener derives from the key that id names, if it holds it, and from its own
 * primary for a bare server id. A rotation in three rolling steps (add the new key second, make it
 * primary, remove the old) keeps every link up throughout (docs/security.md).
 *
 * TLS 1.3 only, with the SHA-256 suites (`CIPHERS`): on Node 20 an external PSK with a SHA-384 suite
 * alone fails to negotiate. The Connection behaves exactly like `TcpTransport`'s: reads straight from
 * the socket's 'data' event, pause while a returned effect runs, writes with back-pressure, and the
 * corked `unsafeTryWrite` fast path, so the mesh runs over it unchanged.
 *
 * @since 0.1.0
 */
import { hkdfSync } from "node:crypto"
import type * as Net from "node:net"
import * as Tls from "node:tls"
import { Cause, Duration, Effect, FiberSet, Layer, Redacted, Runtime } from "effect"
import * as Keyring from "./internal/keyring.js"
import { connectionOf, destroy } from "./internal/links/socket.js"
import * as Names from "./internal/wire/names.js"
import { TlsConfigError as ConfigError, TransportError } from "./MeshError.js"
import * as Resolver from "./Resolver.js"
import { Transport, type TransportShape } from "./Transport.js"

/**
 * The HKDF salt of the link key. The version suffix lets a later derivation coexist during a rolling
 * upgrade.
 *
 * @since 0.1.0
 * @category constants
 */
export const PSK_SALT = "queen-mesh tls-psk v1"

/**
 * The length of a link key in bytes (the output size of SHA-256, the hash of both suites).
 *
 * @since 0.1.0
 * @category constants
 */
export const PSK_BYTES = 32

/**
 * The TLS 1.3 suites offered and accepted. Both use SHA-256, which an external PSK needs on Node 20.
 *
 * @since 0.1.0
 * @category constants
 */
export const CIPHERS = "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256"

/**
 * The longest PSK identity, in UTF-8 bytes: Node's own limit, and the mesh's server-id limit.
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_IDENTITY_BYTES = Names.MAX_SERVER_ID_BYTES

/**
 * @since 0.1.0
 * @category models
 */
export interface TlsOptions {
  /** The shared secret (`QUEEN_SYNC_SECRET`). Must not be empty: there is no open mode over TLS-PSK. */
  readonly secret: Redacted.Redacted<string> | string
  /**
   * Keys a listener accepts besides `secret` (the rest of `QUEEN_SYNC_SECRETS`, a rotation under way).
   * With any, a dialer presents `qmk1:<key id>:<server id>` as its identity, so the listener knows which
   * key to derive the link's key from; the HELLO's server id must still be the part after the key id.
   */
  readonly accepted?: ReadonlyArray<Redacted.Redacted<string> | string>
  /** This node's server id, presented as the PSK identity when it dials. See `isValidIdentity`. */
  readonly identity: string
  /** How long a dial may take, TCP connect and TLS handshake together. Default 5 seconds. */
  readonly connectTimeout?: Duration.DurationInput
  /**
   * How long an accepted socket may take to finish the TLS handshake before it is dropped (and counted
   * as a handshake failure). Default 5 seconds.
   */
  readonly handshakeTimeout?: Duration.DurationInput
  /**
   * Maps a peer's `host:port` before each dial; `Resolver.ResolverShape["resolve"]` fits. Default: the
   * host as given, looked up by `node:tls` on every dial.
   */
  readonly resolve?: (
    host: string,
    port: number
  ) => Effect.Effect<{ host: string; port: number }, TransportError>
  /**
   * Called, synchronously, for every accepted socket whose TLS handshake fails: a wrong key
   * (`ERR_SSL_BINDER_DOES_NOT_VERIFY`), a plaintext client (`ERR_SSL_WRONG_VERSION_NUMBER`), a refused
   * identity (`InvalidIdentity`), a deadline (`ERR_TLS_HANDSHAKE_TIMEOUT`), a hang-up (`ECONNRESET`).
   * `reason` is that code; `remote` is `ip:port`, or `unknown` when the socket was already gone. The
   * transport counts these itself (its `handshakeFailures`), which the mesh reports as
   * `rejections.tls_handshake`. A throw from it is ignored.
   */
  readonly onHandshakeFailure?: (reason: string, remote: string) => void
}

/** TCP keep-alive's first probe, as on plain TCP links. */
const KEEPALIVE_MS = 10_000

const PRINTABLE = /^[^\p{Cc}\p{Cs}]+$/u

/** The prefix of an identity that names its key: `qmk1:<16 hex key id>:<server id>`. */
const KEYED_IDENTITY = "qmk1:"
const KEYED = /^qmk1:([0-9a-f]{16}):(.+)$/s

/** The key id and server id of an identity that names its key, or `undefined` for a bare server id. */
const keyedIdentity = (
  identity: string
): { readonly keyId: string; readonly serverId: string } | undefined => {
  const match = KEYED.exec(identity)
  return match === null ? undefined : { keyId: match[1]!, serverId: match[2]! }
}

/**
 * Whether a string can be a PSK identity: 1 to `MAX_IDENTITY_BYTES` UTF-8 bytes, no control characters
 * and no lone surrogates. The listener refuses any other identity before deriving a key.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isValidIdentity = (identity: string): boolean =>
  identity !== "" && Names.fitsBytes(identity, MAX_IDENTITY_BYTES) && PRINTABLE.test(identity)

/**
 * The link key of `identity` under `secret` (see the module comment for the exact derivation).
 *
 * @example
 * ```ts
 * import { notDeepStrictEqual, strictEqual } from "node:assert"
 * import { TlsTransport } from "queen-mesh"
 *
 * // Each node's link key is derived from the shared secret and its server id.
 * const key = TlsTransport.derivePsk("s3cr3t", "queen-a")
 * strictEqual(key.length, TlsTransport.PSK_BYTES)
 * notDeepStrictEqual(key, TlsTransport.derivePsk("s3cr3t", "queen-b"))
 * strictEqual(TlsTransport.isValidIdentity("queen-a"), true)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const derivePsk = (secret: string, identity: string): Buffer =>
  Buffer.from(hkdfSync("sha256", secret, PSK_SALT, identity, PSK_BYTES))

const noop = () => {}

const errorCode = (error: Error): string => {
  const code: unknown = Reflect.get(error, "code")
  return typeof code === "string" ? code : error.message
}

const remoteOf = (socket: Net.Socket): string =>
  socket.remoteAddress === undefined ? "unknown" : `${socket.remoteAddress}:${socket.remotePort ?? "?"}`

/**
 * A TLS-PSK transport. Fails with `TlsConfigError` on an empty secret or an unusable identity, so a
 * node configured for TLS never falls back to an open link.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: TlsOptions): Effect.Effect<TransportShape, ConfigError> =>
  Effect.suspend(() => {
    const secret = Redacted.isRedacted(options.secret) ? Redacted.value(options.secret) : options.secret
    if (secret === "") return Effect.fail(new ConfigError({ reason: "EmptySecret" }))
    if (!isValidIdentity(options.identity)) return Effect.fail(new ConfigError({ reason: "InvalidIdentity" }))
    const keys = Keyring.fromSecrets(secret, options.accepted ?? [])
    const ring: Keyring.Keyring = keys === "open" ? { primary: Keyring.key(secret), accepted: [] } : keys
    // With a keyring the identity names the key, when it still fits; a lone key keeps the bare id.
    const named = `${KEYED_IDENTITY}${ring.primary.id}:${options.identity}`
    const identity = ring.accepted.length > 0 && isValidIdentity(named) ? named : options.identity
    const ownKey = derivePsk(secret, identity)
    const connectTimeoutMs = Duration.toMillis(Duration.decode(options.connectTimeout ?? "5 seconds"))
    const handshakeTimeoutMs = Duration.toMillis(Duration.decode(options.handshakeTimeout ?? "5 seconds"))
    let failures = 0
    const handshakeFailed = (reason: string, remote: string) => {
      failures++
      try {
        options.onHandshakeFailure?.(reason, remote)
      } catch {
        // The counter is the caller's; its failure must not reach the socket's event handler.
      }
    }

    const connect = (host: string, port: number, address: string) =>
      Effect.async<Tls.TLSSocket, TransportError>((resume) => {
        const socket = Tls.connect({
          host,
          port,
          ciphers: CIPHERS,
          minVersion: "TLSv1.3",
          maxVersion: "TLSv1.3",
          pskCallback: () => ({ psk: ownKey, identity }),
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
          // A listener that answered with a certificate did not use our key: not a mesh peer.
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
            Effect.fail(
              new TransportError({ reason: "Timeout", address, cause: new Error("connect timed out") })
            )
          )
        }, connectTimeoutMs)
        socket.once("secureConnect", onSecure)
        socket.once("error", onError)
        socket.once("close", onClose)
        return Effect.sync(() => {
          settled = true
          clearTimeout(timer)
          socket.destroy()
        })
      })

    const dial: TransportShape["dial"] = (host, port) =>
      Effect.flatMap(
        options.resolve === undefined ? Effect.succeed({ host, port }) : options.resolve(host, port),
        (to) => {
          const address = `${to.host}:${to.port}`
          return Effect.acquireRelease(connect(to.host, to.port, address), destroy).pipe(
            Effect.map((socket) => connectionOf(socket, address))
          )
        }
      )

    const listen: TransportShape["listen"] = (listenOptions, onConnection) =>
      Effect.gen(function* () {
        const address = `${listenOptions.host}:${listenOptions.port}`
        const runtime = yield* Effect.runtime<never>()
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
              Effect.catchAllCause((cause) =>
                Cause.isInterruptedOnly(cause)
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
          handshakeFailed(refused.has(socket) ? "InvalidIdentity" : errorCode(error), remoteOf(socket))
        }
        const onRawConnection = (raw: Net.Socket) => {
          raw.on("error", noop)
          sockets.add(raw)
          raw.once("close", () => sockets.delete(raw))
        }

        const server = yield* Effect.acquireRelease(
          Effect.async<Tls.Server, TransportError>((resume) => {
            const server = Tls.createServer({
              ciphers: CIPHERS,
              minVersion: "TLSv1.3",
              maxVersion: "TLSv1.3",
              handshakeTimeout: handshakeTimeoutMs,
              pskCallback: (socket, offered) => {
                if (!isValidIdentity(offered)) {
                  refused.add(socket)
                  return null
                }
                const keyed = keyedIdentity(offered)
                if (keyed === undefined) {
                  accepted.set(socket, offered)
                  return derivePsk(ring.primary.secret, offered)
                }
                const key = Keyring.byId(ring, keyed.keyId)
                if (key === undefined) {
                  refused.add(socket)
                  return null
                }
                accepted.set(socket, keyed.serverId)
                return derivePsk(key.secret, offered)
              }
            })
            server.on("connection", onRawConnection)
            server.on("secureConnection", onSecureConnection)
            server.on("tlsClientError", onClientError)
            const onListenError = (cause: Error) => {
              server.close()
              resume(Effect.fail(new TransportError({ reason: "Listen", address, cause })))
            }
            server.once("error", onListenError)
            server.listen({ host: listenOptions.host, port: listenOptions.port }, () => {
              server.off("error", onListenError)
              // Later server errors (an accept failure) are logged; they must not crash the process.
              server.on("error", (cause) => {
                Runtime.runFork(runtime)(
                  Effect.logWarning("mesh TLS listener error").pipe(
                    Effect.annotateLogs({ module: "TlsTransport", address, reason: cause.message })
                  )
                )
              })
              resume(Effect.succeed(server))
            })
            return Effect.sync(() => server.close())
          }),
          (server) =>
            Effect.gen(function* () {
              // Stop accepting first, then end the connections and the handshakes in flight.
              closing = true
              let closed = false
              let wake: (() => void) | undefined
              server.close(() => {
                closed = true
                wake?.()
              })
              yield* FiberSet.clear(fibers)
              for (const socket of sockets) socket.destroy()
              yield* Effect.async<void>((resume) => {
                if (closed) resume(Effect.void)
                else wake = () => resume(Effect.void)
              })
            })
        )
        const bound = server.address()
        return typeof bound === "object" && bound !== null ? bound.port : listenOptions.port
      })

    return Effect.succeed<TransportShape>({ dial, listen, handshakeFailures: () => failures })
  })

/**
 * TLS-PSK over `node:tls`. Fails to build with `TlsConfigError` on an empty secret or a bad identity.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: TlsOptions): Layer.Layer<Transport, ConfigError> =>
  Layer.effect(Transport, make(options))

/**
 * TLS-PSK over `node:tls`, resolving peers with the `Resolver` in context.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerResolved = (
  options: Omit<TlsOptions, "resolve">
): Layer.Layer<Transport, ConfigError, Resolver.Resolver> =>
  Layer.effect(
    Transport,
    Effect.flatMap(Resolver.Resolver, (resolver) => make({ ...options, resolve: resolver.resolve }))
  )
