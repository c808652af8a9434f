/**
 * The HELLO handshake (spec "The handshake"): the dialer proves it knows the shared secret with
 * `mac = HMAC-SHA256(secret, nonce)` over the nonce's hex string. An empty secret is open mode: the
 * HELLO still carries the dialer's server id, and any well-formed HELLO is accepted.
 *
 * This is not replay-proof (spec "The security reality"): the listener keeps no nonces. Firewalling the
 * mesh port is what protects a cluster.
 *
 * @since 0.1.0
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto"
import { Effect, Either, Redacted } from "effect"
import type * as Frame from "./Frame.js"
import { HandshakeError } from "./MeshError.js"

/**
 * Lowercase hex HMAC-SHA256 of the nonce's hex string, keyed by the secret.
 *
 * @since 0.1.0
 * @category handshake
 */
export const mac = (secret: string, nonce: string): string =>
  createHmac("sha256", secret).update(nonce, "utf8").digest("hex")

/**
 * 32 lowercase hex characters from 128 random bits.
 *
 * @since 0.1.0
 * @category handshake
 */
export const makeNonce: Effect.Effect<string> = Effect.sync(() => randomBytes(16).toString("hex"))

const secretOf = (secret: Redacted.Redacted<string> | string): string =>
  typeof secret === "string" ? secret : Redacted.value(secret)

/**
 * A HELLO for a given nonce; the `mac` is empty in open mode.
 *
 * @since 0.1.0
 * @category handshake
 */
export const helloWithNonce = (
  serverId: string,
  secret: Redacted.Redacted<string> | string,
  nonce: string
): Frame.Hello => {
  const key = secretOf(secret)
  return { _tag: "Hello", server_id: serverId, nonce, mac: key === "" ? "" : mac(key, nonce) }
}

/**
 * A HELLO with a fresh nonce.
 *
 * @since 0.1.0
 * @category handshake
 */
export const makeHello = (
  serverId: string,
  secret: Redacted.Redacted<string> | string
): Effect.Effect<Frame.Hello> => Effect.map(makeNonce, (nonce) => helloWithNonce(serverId, secret, nonce))

const HEX_MAC = /^[0-9a-f]{64}$/

/**
 * Checks a HELLO: a non-empty `server_id` always; with a secret, a MAC that matches, compared in
 * constant time. A MAC of the wrong length or with non-hex characters fails without throwing. Returns
 * the peer's server id.
 *
 * @since 0.1.0
 * @category handshake
 */
export const verify = (
  hello: Frame.HelloPayload,
  secret: Redacted.Redacted<string> | string
): Either.Either<string, HandshakeError> => {
  if (hello.server_id === "") return Either.left(new HandshakeError({ reason: "MissingServerId" }))
  const key = secretOf(secret)
  if (key === "") return Either.right(hello.server_id)
  const given = hello.mac.toLowerCase()
  if (!HEX_MAC.test(given)) {
    return Either.left(new HandshakeError({ reason: "BadMac", detail: "not 64 hex characters" }))
  }
  const expected = Buffer.from(mac(key, hello.nonce), "hex")
  return timingSafeEqual(expected, Buffer.from(given, "hex"))
    ? Either.right(hello.server_id)
    : Either.left(new HandshakeError({ reason: "BadMac" }))
}
