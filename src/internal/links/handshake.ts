/**
 * The HELLO handshake (spec "The handshake"): the dialer proves it knows the shared secret with
 * `mac = HMAC-SHA256(secret, nonce)` over the nonce's hex string. An empty secret is open mode: the
 * HELLO still carries the dialer's server id, and any well-formed HELLO is accepted.
 *
 * This is not replay-proof (spec "The security reality"): the listener keeps no nonces. Firewalling the
 * mesh port is what protects a cluster.
 *
 * The second half is the pure core of the v2 challenge-response HELLO: the listener sends a fresh nonce
 * first (the CHALLENGE frame, tag 60) and the dialer's HELLO answers it, so a captured HELLO is worth
 * nothing on any other connection. It is a queen-mesh extension, not in the spec; the legacy fields
 * and MAC stay, so either side may be a legacy node.
 *
 * The HELLO is judged here whole (`judge`): the frame, its fields, both MACs, the receiver, the label,
 * our own id and the TLS identity, with one `HandshakeError` whose reason the stats, metrics, logs and
 * HTTP Schema all read from `MeshError.handshakeReasons`.
 *
 * @internal
 */

import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from "node:crypto"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Result from "effect/Result"
import type { AuthMode } from "../../MeshConfig.js"
import { HandshakeError } from "../../MeshError.js"
import * as Keyring from "../keyring.js"
import * as Codec from "../wire/codec.js"
import * as Frames from "../wire/frames.js"
import * as Names from "../wire/names.js"
import * as Payloads from "../wire/payloads.js"

/**
 * Lowercase hex HMAC-SHA256 of the nonce's hex string, keyed by the secret.
 */
export const mac = (secret: string, nonce: string): string =>
  createHmac("sha256", secret).update(nonce, "utf8").digest("hex")

/**
 * 32 lowercase hex characters from 128 random bits.
 */
export const makeNonce: Effect.Effect<string> = Effect.sync(() => randomBytes(16).toString("hex"))

const secretOf = (secret: Redacted.Redacted<string> | string): string =>
  typeof secret === "string" ? secret : Redacted.value(secret)

/**
 * Upstream's HELLO v2 fields this node advertises: where peers forward its ephemeral traffic
 * (`http://host:port`) and its boot incarnation (a u64 in hex). Both ride in the legacy HELLO and in
 * the challenge-response one alike; MACs do not cover them, as upstream's do not.
 */
export interface Advert {
  readonly http_addr: Option.Option<string>
  readonly eph_epoch: Option.Option<string>
}

/** No advertisement: a HELLO as the spec draws it. */
export const NO_ADVERT: Advert = { http_addr: Option.none(), eph_epoch: Option.none() }

/** A HELLO for a given nonce; the `mac` is empty in open mode. */
export const helloWithNonce = (
  serverId: string,
  secret: Redacted.Redacted<string> | string,
  nonce: string,
  advert: Advert = NO_ADVERT
): Payloads.Hello => {
  const key = secretOf(secret)
  return {
    _tag: "Hello",
    server_id: serverId,
    nonce,
    mac: key === "" ? "" : mac(key, nonce),
    http_addr: advert.http_addr,
    eph_epoch: advert.eph_epoch,
    key_id: Option.none(),
    v2: Option.none()
  }
}

/** A legacy HELLO with a fresh nonce. */
export const makeHello = (
  serverId: string,
  secret: Redacted.Redacted<string> | string,
  advert: Advert = NO_ADVERT
): Effect.Effect<Payloads.Hello> =>
  Effect.map(makeNonce, (nonce) => helloWithNonce(serverId, secret, nonce, advert))

const HEX_MAC = /^[0-9a-f]{64}$/

const refuse = (reason: HandshakeError.Reason, detail?: string): Result.Result<never, HandshakeError> =>
  Result.fail(new HandshakeError(detail === undefined ? { reason } : { reason, detail }))

/**
 * The spec's check of a HELLO: a non-empty `server_id` always; with a secret, a MAC that matches,
 * compared in constant time. A MAC of the wrong length or with non-hex characters fails without
 * throwing. Returns the peer's server id.
 */
export const verify = (
  hello: { readonly server_id: string; readonly nonce: string; readonly mac: string },
  secret: Redacted.Redacted<string> | string
): Result.Result<string, HandshakeError> => {
  if (hello.server_id === "") return refuse("MissingServerId")
  const key = secretOf(secret)
  if (key === "") return Result.succeed(hello.server_id)
  const given = hello.mac.toLowerCase()
  if (!HEX_MAC.test(given)) return refuse("BadMac", "not 64 hex characters")
  const expected = Buffer.from(mac(key, hello.nonce), "hex")
  return timingSafeEqual(expected, Buffer.from(given, "hex"))
    ? Result.succeed(hello.server_id)
    : refuse("BadMac")
}

// ---------------------------------------------------------------------------------------------
// v2: challenge-response HELLO
// ---------------------------------------------------------------------------------------------
//
// The legacy HELLO is replayable because the only nonce is the dialer's (spec "The security
// reality"). v2 adds, as Erlang distribution does, a nonce chosen by the listener: a v2 listener
// writes one CHALLENGE frame as soon as it accepts, and a v2 dialer answers it with a HELLO whose
// extra `qm2_` fields bind that nonce, both server ids and the cluster label under a key derived from
// the secret. The legacy fields stay, with the legacy MAC, so a legacy listener still accepts a v2
// HELLO; a legacy dialer never reads its outbound socket, so the CHALLENGE costs it nothing.

/** The domain string, first field of every v2 MAC input, so the MAC cannot serve any other use. */
export const HELLO_V2_DOMAIN = "queen-mesh/hello/v2"

/** The HKDF-SHA256 salt and info that derive the v2 key from the secret. */
export const HELLO_V2_HKDF = { salt: "queen-mesh hello v2", info: "mac", length: 32 } as const

/**
 * How a listener treats HELLOs: `legacy` is the spec's `verify` (v2 fields ignored); `permissive`
 * verifies v2 fields when present and accepts a legacy HELLO otherwise (a rolling-upgrade mode, still
 * replayable by stripping the v2 fields); `required` accepts only a v2 HELLO, the only mode that closes
 * the replay. With an empty secret (open mode) no MAC is checked in any mode, and v2 fields still must
 * match (they catch misrouted and cross-cluster connections); the configuration refuses `required`
 * without a secret.
 */
export type HandshakeMode = AuthMode

/** A fresh challenge for one accepted connection. */
export const makeChallenge = (serverId: string, label: string): Effect.Effect<Payloads.Challenge> =>
  Effect.map(makeNonce, (nonce) => ({ _tag: "Challenge", server_id: serverId, nonce, label }))

/**
 * The first frame a v2 dialer read: its challenge, or why not (any other tag, or a payload its Schema
 * refuses). Total on any input.
 */
export const readChallenge = (
  tag: number,
  payload: Uint8Array
): Result.Result<Payloads.Challenge, string> => {
  if (tag !== Frames.Tag.CHALLENGE) return Result.fail("not a challenge")
  if (payload.length > Payloads.MAX_CHALLENGE_PAYLOAD_BYTES) {
    return Result.fail(
      `challenge payload of ${payload.length} bytes exceeds ${Payloads.MAX_CHALLENGE_PAYLOAD_BYTES}`
    )
  }
  return Result.match(Codec.decodePayload(tag, payload), {
    onFailure: (error): Result.Result<Payloads.Challenge, string> =>
      Result.fail(`invalid challenge: ${error.detail}`),
    onSuccess: (frame) =>
      frame._tag === "Challenge" ? Result.succeed(frame) : Result.fail("not a challenge")
  })
}

const u32 = (n: number): Buffer => {
  const out = Buffer.alloc(4)
  out.writeUInt32BE(n, 0)
  return out
}

/** The inputs of the v2 MAC. */
export interface MacV2Input {
  readonly dialerNonce: string
  readonly listenerNonce: string
  readonly sender: string
  readonly receiver: string
  readonly label: string
}

/**
 * The v2 MAC: lowercase hex `HMAC-SHA256(K, M)` where
 * `K = HKDF-SHA256(ikm = UTF-8(secret), salt = "queen-mesh hello v2", info = "mac", 32 bytes)` and
 * `M` is, for each of `HELLO_V2_DOMAIN`, dialer nonce, listener nonce, sender id, receiver id, label
 * in that order, `u32 BE byte length | UTF-8 bytes`. The separate key means a legacy MAC is never a
 * valid v2 MAC; the length prefixes mean no two field tuples share an input. Callers keep lone
 * surrogates out (the HELLO Schema refuses them), since UTF-8 would fold them into U+FFFD.
 */
export const macV2 = (secret: string, input: MacV2Input): string => {
  const key = Buffer.from(
    hkdfSync(
      "sha256",
      Buffer.from(secret, "utf8"),
      HELLO_V2_HKDF.salt,
      HELLO_V2_HKDF.info,
      HELLO_V2_HKDF.length
    )
  )
  const hmac = createHmac("sha256", key)
  for (const field of [
    HELLO_V2_DOMAIN,
    input.dialerNonce,
    input.listenerNonce,
    input.sender,
    input.receiver,
    input.label
  ]) {
    const bytes = Buffer.from(field, "utf8")
    hmac.update(u32(bytes.length))
    hmac.update(bytes)
  }
  return hmac.digest("hex")
}

/** Constant time once the shapes match; the shapes (length, hex) are public. */
const hexMacEqual = (expected: string, given: string): boolean => {
  const lower = given.toLowerCase()
  if (!HEX_MAC.test(lower)) return false
  return timingSafeEqual(Buffer.from(expected, "hex"), Buffer.from(lower, "hex"))
}

/** The listener's nonce is public, but comparing it in constant time costs nothing. */
const textEqual = (a: string, b: string): boolean => {
  const left = Buffer.from(a, "utf8")
  const right = Buffer.from(b, "utf8")
  return left.length === right.length && timingSafeEqual(left, right)
}

/**
 * A v2 answer to a challenge: a fresh dialer nonce, the legacy MAC (so a legacy listener accepts it)
 * and the v2 fields. `label` is the dialer's own cluster label, so the listener can refuse a
 * cross-cluster dial (when omitted, the challenge's label is echoed). In open mode both MACs are `""`.
 */
export const helloV2 = (
  serverId: string,
  secret: Redacted.Redacted<string> | string,
  challenge: Payloads.Challenge,
  label: string = challenge.label,
  advert: Advert = NO_ADVERT
): Effect.Effect<Payloads.Hello> =>
  Effect.map(makeNonce, (nonce) => {
    const key = secretOf(secret)
    const v2Mac =
      key === ""
        ? ""
        : macV2(key, {
            dialerNonce: nonce,
            listenerNonce: challenge.nonce,
            sender: serverId,
            receiver: challenge.server_id,
            label
          })
    return {
      // The legacy HELLO, so a legacy listener accepts it, with the v2 fields.
      ...helloWithNonce(serverId, key, nonce, advert),
      key_id: key === "" ? Option.none() : Option.some(Keyring.keyIdOf(key)),
      v2: Option.some({ challenge: challenge.nonce, receiver: challenge.server_id, label, mac: v2Mac })
    }
  })

// ---------------------------------------------------------------------------------------------
// judging
// ---------------------------------------------------------------------------------------------

/**
 * What a listener judges a HELLO by: the secret, the mode, the challenge it wrote on this connection
 * (`none` if it wrote none), its own server id and cluster label (`""` when none), and the identity
 * the transport authenticated the dialer as (the TLS-PSK identity), when it did.
 */
export interface JudgeOptions {
  /** The primary key; empty is open mode. */
  readonly secret: Redacted.Redacted<string> | string
  /** Keys accepted besides the primary (a rotation under way). */
  readonly accepted?: ReadonlyArray<Redacted.Redacted<string> | string> | undefined
  readonly mode: HandshakeMode
  readonly challenge: Option.Option<Payloads.Challenge>
  readonly selfId: string
  readonly label: string
  readonly identity?: string | undefined
}

/**
 * An accepted HELLO: the peer's server id, the version it authenticated with, its nonce, and what it
 * advertised of upstream's HELLO v2 (unchecked here: {@link ephemeralCapable} reads it).
 */
export interface VerifiedHello {
  readonly serverId: string
  readonly version: 1 | 2
  readonly nonce: string
  readonly advert: Advert
  /** The id of the installed key the HELLO proved; none in open mode. */
  readonly keyId: Option.Option<string>
}

const HEX_DIGITS = /^\+?([0-9a-fA-F]+)$/

/**
 * Whether an advertisement makes its sender ephemeral-capable, as upstream judges it: both fields
 * present, the address non-empty and the epoch a u64 in hex (an optional `+`, any number of leading
 * zeros, at most 16 significant digits).
 */
export const ephemeralCapable = (advert: Advert): boolean => {
  if (Option.isNone(advert.http_addr) || advert.http_addr.value === "") return false
  if (Option.isNone(advert.eph_epoch)) return false
  const digits = HEX_DIGITS.exec(advert.eph_epoch.value)
  return digits !== null && digits[1]!.replace(/^0+/, "").length <= 16
}

const v2Problem = (
  hello: Payloads.Hello,
  v2: Payloads.Hello["v2"] extends Option.Option<infer A> ? A : never
) =>
  Names.idProblem("server_id", hello.server_id) ??
  Names.nonceProblem("nonce", hello.nonce) ??
  Names.textProblem("qm2_receiver", v2.receiver, Names.MAX_SERVER_ID_BYTES) ??
  Names.textProblem("qm2_label", v2.label, Names.MAX_LABEL_BYTES)

/**
 * Checks a decoded HELLO as a listener in `mode`. Never throws. The checks run in this order, so the
 * reason names the first thing wrong:
 *
 * - `legacy`: exactly `verify` (`MissingServerId`, `BadMac`); v2 fields are ignored.
 * - `MissingServerId`; in `required` mode, `BadMac` without a secret, `LegacyRefused` (no v2 fields).
 * - legacy HELLO in `permissive` mode: `BadMac`; accepted as version 1.
 * - v2 HELLO: `InvalidHello` (an empty or over-long id, a nonce not 32 lowercase hex); `WrongReceiver`
 *   (`qm2_receiver` is not `selfId`: meant for another node); `WrongLabel`; `BadChallengeAnswer` (no
 *   challenge on this connection, or `qm2_challenge` is not its nonce: a replay); with a secret,
 *   `BadMac` (legacy MAC) and `BadChallengeAnswer` (`qm2_mac`, which also binds the sender's id).
 *   Accepted as version 2.
 * - in every mode, last: `OwnServerId` (the HELLO carries our own id: our own dial, or a node sharing
 *   our id, which the caller tells apart) and `WrongIdentity` (a TLS link keyed for another id).
 *
 * The MAC is recomputed from this listener's own values (its nonce, `selfId`, label), never from the
 * peer's copies. With an empty secret no MAC is checked. With several keys installed (`accepted`), a
 * legacy MAC is checked against each of them (each comparison in constant time) and the one that
 * matched names the key; a v2 HELLO names its key (`qm2_key`), and one naming a key this node does not
 * hold is refused as `UnknownKey`.
 */
export const verifyHello = (
  hello: Payloads.Hello,
  options: JudgeOptions
): Result.Result<VerifiedHello, HandshakeError> => {
  const verdict = verifyFields(hello, options)
  if (Result.isFailure(verdict)) return verdict
  if (hello.server_id === options.selfId) return refuse("OwnServerId")
  if (options.identity !== undefined && options.identity !== hello.server_id) {
    return refuse("WrongIdentity", "the TLS identity and the HELLO's server_id differ")
  }
  return verdict
}

/** The installed key whose legacy MAC the HELLO carries: each key tried, each comparison in constant time. */
const legacyKey = (
  hello: { readonly nonce: string; readonly mac: string },
  keys: ReadonlyArray<Keyring.Key>
): Result.Result<Keyring.Key, HandshakeError> => {
  const given = hello.mac.toLowerCase()
  if (!HEX_MAC.test(given)) return refuse("BadMac", "not 64 hex characters")
  const bytes = Buffer.from(given, "hex")
  let found: Keyring.Key | undefined
  for (const k of keys) {
    if (timingSafeEqual(Buffer.from(mac(k.secret, hello.nonce), "hex"), bytes) && found === undefined)
      found = k
  }
  return found === undefined ? refuse("BadMac") : Result.succeed(found)
}

const verifyFields = (
  hello: Payloads.Hello,
  options: JudgeOptions
): Result.Result<VerifiedHello, HandshakeError> => {
  const accepted = (version: 1 | 2, key: Keyring.Key | undefined) =>
    Result.succeed<VerifiedHello>({
      serverId: hello.server_id,
      version,
      nonce: hello.nonce,
      advert: { http_addr: hello.http_addr, eph_epoch: hello.eph_epoch },
      keyId: key === undefined ? Option.none() : Option.some(key.id)
    })
  if (hello.server_id === "") return refuse("MissingServerId")
  const ring = Keyring.fromSecrets(options.secret, options.accepted ?? [])
  // The keys a legacy MAC is checked against: all of them, or the one a v2 HELLO names.
  const candidates = (): Result.Result<ReadonlyArray<Keyring.Key>, HandshakeError> => {
    if (ring === "open") return Result.succeed([])
    if (options.mode === "legacy" || Option.isNone(hello.v2) || Option.isNone(hello.key_id)) {
      return Result.succeed(Keyring.all(ring))
    }
    const named = Keyring.byId(ring, hello.key_id.value)
    return named === undefined
      ? refuse(
          "UnknownKey",
          `qm2_key ${JSON.stringify(Names.excerpt(hello.key_id.value))} names no installed key`
        )
      : Result.succeed([named])
  }
  const proven = (): Result.Result<Keyring.Key | undefined, HandshakeError> =>
    Result.flatMap(candidates(), (keys) =>
      keys.length === 0 ? Result.succeed(undefined) : legacyKey(hello, keys)
    )
  if (options.mode === "legacy") return Result.flatMap(proven(), (key) => accepted(1, key))
  // The configuration refuses it; should it slip through, nothing can be proven without a secret.
  if (options.mode === "required" && ring === "open") return refuse("BadMac", "required mode has no secret")
  if (Option.isNone(hello.v2)) {
    if (options.mode === "required") return refuse("LegacyRefused")
    return Result.flatMap(proven(), (key) => accepted(1, key))
  }
  const v2 = hello.v2.value
  const problem = v2Problem(hello, v2)
  if (problem !== undefined) return refuse("InvalidHello", problem)
  if (!textEqual(v2.receiver, options.selfId)) return refuse("WrongReceiver")
  if (!textEqual(v2.label, options.label)) return refuse("WrongLabel")
  if (Option.isNone(options.challenge)) {
    return refuse("BadChallengeAnswer", "no challenge was sent on this connection")
  }
  const challenge = options.challenge.value
  if (!textEqual(v2.challenge, challenge.nonce)) {
    return refuse("BadChallengeAnswer", "qm2_challenge is not this connection's nonce")
  }
  return Result.flatMap(proven(), (key) => {
    if (key === undefined) return accepted(2, undefined)
    const expected = macV2(key.secret, {
      dialerNonce: hello.nonce,
      listenerNonce: challenge.nonce,
      sender: hello.server_id,
      receiver: options.selfId,
      label: options.label
    })
    return hexMacEqual(expected, v2.mac)
      ? accepted(2, key)
      : refuse("BadChallengeAnswer", "qm2_mac does not match")
  })
}

const V2_FIELDS = ["qm2_challenge", "qm2_receiver", "qm2_label", "qm2_mac", "qm2_key"]

const isRecord = (u: unknown): u is Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * The first frame of an inbound connection, judged whole: `NotHello` for any other tag,
 * `InvalidHello` for a payload that is not a HELLO (not JSON, a field missing or of the wrong type, an
 * over-long server id, v2 fields that are malformed or not all four), then {@link verifyHello}. A
 * legacy listener ignores the v2 fields altogether, as a legacy node would.
 */
export const judge = (
  tag: number,
  payload: Uint8Array,
  options: JudgeOptions
): Result.Result<VerifiedHello, HandshakeError> => {
  if (tag !== Frames.Tag.HELLO) return refuse("NotHello")
  let json: unknown
  try {
    json = JSON.parse(Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength).toString("utf8"))
  } catch {
    return refuse("InvalidHello", "not JSON")
  }
  if (!isRecord(json)) return refuse("InvalidHello", "not an object")
  if (options.mode === "legacy") {
    const legacy: Record<string, unknown> = {}
    for (const [field, value] of Object.entries(json)) if (!V2_FIELDS.includes(field)) legacy[field] = value
    json = legacy
  }
  const decoded = Codec.decodeJson(tag, json)
  if (Result.isFailure(decoded)) return refuse("InvalidHello", decoded.failure.detail)
  const hello = decoded.success
  if (hello._tag !== "Hello") return refuse("InvalidHello")
  if (!Names.fitsBytes(hello.server_id, Names.MAX_SERVER_ID_BYTES)) {
    return refuse("InvalidHello", "server_id too long")
  }
  return verifyHello(hello, options)
}
