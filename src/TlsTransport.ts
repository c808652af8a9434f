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
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import { connectionOf, destroy } from "./internal/transport/nodeSocket.js"
import * as TlsDial from "./internal/transport/tlsDial.js"
import * as TlsListener from "./internal/transport/tlsListener.js"
import * as Psk from "./internal/transport/tlsPsk.js"
import { TlsConfigError as ConfigError, type TransportError } from "./MeshError.js"
import * as Resolver from "./Resolver.js"
import { Transport, type TransportShape } from "./Transport.js"

/**
 * The HKDF salt of the link key. The version suffix lets a later derivation coexist during a rolling
 * upgrade.
 *
 * @since 0.1.0
 * @category constants
 */
export const PSK_SALT = Psk.PSK_SALT

/**
 * The length of a link key in bytes (the output size of SHA-256, the hash of both suites).
 *
 * @since 0.1.0
 * @category constants
 */
export const PSK_BYTES = Psk.PSK_BYTES

/**
 * The TLS 1.3 suites offered and accepted. Both use SHA-256, which an external PSK needs on Node 20.
 *
 * @since 0.1.0
 * @category constants
 */
export const CIPHERS = Psk.CIPHERS

/**
 * The longest PSK identity, in UTF-8 bytes: Node's own limit, and the mesh's server-id limit.
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_IDENTITY_BYTES = Psk.MAX_IDENTITY_BYTES

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
  readonly connectTimeout?: Duration.Input
  /**
   * How long an accepted socket may take to finish the TLS handshake before it is dropped (and counted
   * as a handshake failure). Default 5 seconds.
   */
  readonly handshakeTimeout?: Duration.Input
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

/**
 * Whether a string can be a PSK identity: 1 to `MAX_IDENTITY_BYTES` UTF-8 bytes, no control characters
 * and no lone surrogates. The listener refuses any other identity before deriving a key.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isValidIdentity: (identity: string) => boolean = Psk.isValidIdentity

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
export const derivePsk: (secret: string, identity: string) => Buffer = Psk.derivePsk

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
    const keys = new Psk.PskKeys(secret, options.accepted ?? [], options.identity)
    const connectTimeoutMs = Duration.toMillis(options.connectTimeout ?? "5 seconds")
    const handshakeTimeoutMs = Duration.toMillis(options.handshakeTimeout ?? "5 seconds")
    let failures = 0
    const onFailure = (reason: string, remote: string) => {
      failures++
      try {
        options.onHandshakeFailure?.(reason, remote)
      } catch {
        // The counter is the caller's; its failure must not reach the socket's event handler.
      }
    }

    const dial: TransportShape["dial"] = (host, port) =>
      Effect.flatMap(
        options.resolve === undefined ? Effect.succeed({ host, port }) : options.resolve(host, port),
        (to) => {
          const address = `${to.host}:${to.port}`
          return Effect.acquireRelease(
            TlsDial.connect(keys, to.host, to.port, address, connectTimeoutMs),
            destroy
          ).pipe(Effect.map((socket) => connectionOf(socket, address)))
        }
      )
    const listen: TransportShape["listen"] = (listenOptions, onConnection) =>
      TlsListener.listen({ keys, handshakeTimeoutMs, onFailure }, listenOptions, onConnection)

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
