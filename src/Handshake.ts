/**
 * The HELLO handshake (spec "The handshake"): the dialer proves it knows the shared secret with
 * `mac = HMAC-SHA256(secret, nonce)` over the nonce's hex string. An empty secret is open mode: the
 * HELLO still carries the dialer's server id, and any well-formed HELLO is accepted.
 *
 * This is not replay-proof (spec "The security reality"): the listener keeps no nonces. Firewalling the
 * mesh port is what protects a cluster.
 *
 * The second half is the pure core of the v2 challenge-response HELLO (`CHALLENGE_TAG` onwards): the
 * listener sends a fresh nonce first and the dialer's HELLO answers it, so a captured HELLO is worth
 * nothing on any other connection. It is a queen-mesh extension, not in the spec; the legacy fields
 * and MAC stay, so either side may be a legacy node.
 *
 * @since 0.1.0
 */
import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from "node:crypto"
import { Data, Effect, Either, Option, ParseResult, Redacted, Schema } from "effect"
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
 * @example
 * ```ts
 * import { Effect, Either } from "effect"
 * import { Handshake } from "queen-mesh"
 *
 * const hello = Effect.runSync(Handshake.makeHello("queen-a", "s3cr3t"))
 * assert.deepStrictEqual(Handshake.verify(hello, "s3cr3t"), Either.right("queen-a"))
 * assert.strictEqual(Either.isLeft(Handshake.verify(hello, "another secret")), true)
 * ```
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

/**
 * The frame tag of CHALLENGE. Upstream uses 1-5, 10, 11, 20, 40 and 41; 60 is none of them.
 *
 * @since 0.1.0
 * @category v2
 */
export const CHALLENGE_TAG = 60

/**
 * Cap on a CHALLENGE payload. The largest valid one (two 256-byte fields, every byte JSON-escaped to
 * six characters) is below it; a dialer should refuse a longer frame before buffering it.
 *
 * @since 0.1.0
 * @category v2
 */
export const MAX_CHALLENGE_PAYLOAD_BYTES = 4096

/**
 * Cap on the UTF-8 length of a server id or a cluster label in v2.
 *
 * @since 0.1.0
 * @category v2
 */
export const MAX_ID_BYTES = 256

/**
 * The domain string, first field of every v2 MAC input, so the MAC cannot be confused with any other
 * use of the key.
 *
 * @since 0.1.0
 * @category v2
 */
export const HELLO_V2_DOMAIN = "queen-mesh/hello/v2"

/**
 * The HKDF-SHA256 salt and info that derive the v2 key from the secret.
 *
 * @since 0.1.0
 * @category v2
 */
export const HELLO_V2_HKDF = { salt: "queen-mesh hello v2", info: "mac", length: 32 } as const

/**
 * How a listener treats HELLOs: `legacy` is today's `verify` (v2 fields ignored); `permissive`
 * verifies v2 fields when present and accepts a legacy HELLO otherwise (a rolling-upgrade mode, still
 * replayable by stripping the v2 fields); `required` accepts only a v2 HELLO, and is the only mode
 * that closes the replay. With an empty secret (open mode) no MAC is checked in any mode, v2 fields
 * still must match (they catch misrouted and cross-cluster connections), and `required` refuses
 * everything: check it at startup with `checkMode`.
 *
 * @since 0.1.0
 * @category v2
 */
export type HandshakeMode = "legacy" | "permissive" | "required"

/**
 * What a v2 listener writes on accept: its server id, a fresh nonce for this connection, and its
 * cluster label (`""` when none).
 *
 * @since 0.1.0
 * @category v2
 */
export interface Challenge {
  readonly server_id: string
  readonly nonce: string
  readonly label: string
}

/**
 * The v2 part of a HELLO, on the wire as `qm2_challenge`, `qm2_receiver`, `qm2_label`, `qm2_mac`.
 *
 * @since 0.1.0
 * @category v2
 */
export interface HelloV2Fields {
  /** The listener's nonce, echoed. */
  readonly challenge: string
  /** The listener's server id as the dialer understood it. */
  readonly receiver: string
  /** The dialer's cluster label, `""` when none. */
  readonly label: string
  /** `macV2` over the fields above, or `""` in open mode. */
  readonly mac: string
}

/**
 * A HELLO as `verifyHello` sees it: the legacy fields and, for a v2 dialer, the v2 fields.
 *
 * @since 0.1.0
 * @category v2
 */
export interface HelloMessage {
  readonly server_id: string
  readonly nonce: string
  readonly mac: string
  readonly v2: Option.Option<HelloV2Fields>
}

/**
 * An accepted HELLO: the peer's server id and the handshake version it authenticated with.
 *
 * @since 0.1.0
 * @category v2
 */
export interface VerifiedHello {
  readonly serverId: string
  readonly version: 1 | 2
}

/**
 * Why `verifyHello` refused a HELLO (or `checkMode` a configuration).
 *
 * @since 0.1.0
 * @category v2
 */
export type HandshakeV2Reason =
  | "MissingServerId"
  | "BadMac"
  | "LegacyRefused"
  | "BadChallengeAnswer"
  | "WrongReceiver"
  | "WrongLabel"
  | "OwnServerId"
  | "InvalidHello"
  | "NoSecret"

/**
 * A HELLO refused by `verifyHello`. To be merged into `MeshError`.
 *
 * @since 0.1.0
 * @category v2
 */
export class HandshakeV2Error extends Data.TaggedError("HandshakeV2Error")<{
  readonly reason: HandshakeV2Reason
  readonly detail?: string
}> {
  override get message(): string {
    const base = {
      MissingServerId: "the HELLO carries no server_id",
      BadMac: "the HELLO MAC does not match the shared secret",
      LegacyRefused: "a legacy HELLO was refused: this listener requires the v2 handshake",
      BadChallengeAnswer: "the HELLO does not answer this connection's challenge",
      WrongReceiver: "the HELLO is addressed to another node",
      WrongLabel: "the HELLO names another cluster label",
      OwnServerId: "the HELLO carries this node's own server id",
      InvalidHello: "the HELLO payload is malformed",
      NoSecret: "the v2 handshake needs a secret: required mode cannot run with an empty secret"
    }[this.reason]
    return this.detail === undefined ? base : `${base}: ${this.detail}`
  }
}

const refuse = (reason: HandshakeV2Reason, detail?: string): Either.Either<never, HandshakeV2Error> =>
  Either.left(new HandshakeV2Error(detail === undefined ? { reason } : { reason, detail }))

/**
 * Refuses `required` mode with an empty secret (there is no key for the v2 MAC). Call it at startup.
 *
 * @since 0.1.0
 * @category v2
 */
export const checkMode = (
  mode: HandshakeMode,
  secret: Redacted.Redacted<string> | string
): Either.Either<HandshakeMode, HandshakeV2Error> =>
  mode === "required" && secretOf(secret) === "" ? refuse("NoSecret") : Either.right(mode)

// --- wire checks, shared by the Schemas and verifyHello ---

const HEX_NONCE = /^[0-9a-f]{32}$/
/** In `u` mode a paired surrogate is one code point, so this matches lone surrogates only. */
const LONE_SURROGATE = /\p{Cs}/u

/** UTF-8 cannot encode a lone surrogate (it becomes U+FFFD), which would make the MAC input ambiguous. */
const textProblem = (what: string, text: string, maxBytes: number): string | undefined => {
  if (Buffer.byteLength(text, "utf8") > maxBytes) return `${what} is longer than ${maxBytes} bytes`
  if (LONE_SURROGATE.test(text)) return `${what} holds a lone surrogate`
  return undefined
}

const idProblem = (what: string, text: string): string | undefined =>
  text === "" ? `${what} is empty` : textProblem(what, text, MAX_ID_BYTES)

const nonceProblem = (what: string, text: string): string | undefined =>
  HEX_NONCE.test(text) ? undefined : `${what} is not 32 lowercase hex characters`

const checked = (problem: (text: string) => string | undefined) =>
  Schema.String.pipe(Schema.filter((text) => problem(text) ?? true))

/**
 * The CHALLENGE payload: `{server_id, nonce, label?}`. The server id is non-empty and at most 256
 * UTF-8 bytes, the nonce 32 lowercase hex characters, the label (absent or `null` read as `""`) at
 * most 256 bytes; no lone surrogates. Unknown fields are ignored, for later revisions.
 *
 * @since 0.1.0
 * @category v2
 */
export const ChallengePayload = Schema.Struct({
  server_id: checked((text) => idProblem("server_id", text)),
  nonce: checked((text) => nonceProblem("nonce", text)),
  label: Schema.optionalWith(
    checked((text) => textProblem("label", text, MAX_ID_BYTES)),
    { default: () => "", nullable: true }
  )
})

const decodeChallengeJson = Schema.decodeUnknownEither(Schema.parseJson(ChallengePayload))

const MAX_ERROR_TEXT = 200

const bounded = (text: string): string =>
  text.length <= MAX_ERROR_TEXT ? text : `${text.slice(0, MAX_ERROR_TEXT)}…`

/**
 * A fresh challenge for one accepted connection.
 *
 * @since 0.1.0
 * @category v2
 */
export const makeChallenge = (serverId: string, label: string): Effect.Effect<Challenge> =>
  Effect.map(makeNonce, (nonce) => ({ server_id: serverId, nonce, label }))

/**
 * The whole CHALLENGE frame, `u32 BE length | u8 tag 60 | JSON`, ready to write. An empty label is
 * omitted from the JSON.
 *
 * @since 0.1.0
 * @category v2
 */
export const encodeChallengeFrame = (challenge: Challenge): Uint8Array => {
  const json = JSON.stringify(
    challenge.label === ""
      ? { server_id: challenge.server_id, nonce: challenge.nonce }
      : { server_id: challenge.server_id, nonce: challenge.nonce, label: challenge.label }
  )
  const payload = Buffer.from(json, "utf8")
  const frame = new Uint8Array(5 + payload.length)
  new DataView(frame.buffer).setUint32(0, 1 + payload.length, false)
  frame[4] = CHALLENGE_TAG
  frame.set(payload, 5)
  return frame
}

/**
 * Decodes a CHALLENGE payload (the bytes after the tag). Total: any input gives a `Challenge` or a
 * description of at most about 200 characters.
 *
 * @since 0.1.0
 * @category v2
 */
export const decodeChallenge = (payload: Uint8Array): Either.Either<Challenge, string> => {
  if (payload.length > MAX_CHALLENGE_PAYLOAD_BYTES) {
    return Either.left(`challenge payload of ${payload.length} bytes exceeds ${MAX_CHALLENGE_PAYLOAD_BYTES}`)
  }
  const text = new TextDecoder("utf-8", { fatal: false }).decode(payload)
  return Either.mapLeft(decodeChallengeJson(text), (error) => {
    const first = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
    if (first === undefined) return "invalid challenge"
    const at = first.path.length === 0 ? "" : `${first.path.map(String).join(".")}: `
    return bounded(`invalid challenge: ${at}${first.message}`)
  })
}

// --- the v2 MAC ---

const u32 = (n: number): Buffer => {
  const out = Buffer.alloc(4)
  out.writeUInt32BE(n, 0)
  return out
}

/**
 * The inputs of the v2 MAC.
 *
 * @since 0.1.0
 * @category v2
 */
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
 * surrogates out (`verifyHello` refuses them), since UTF-8 would fold them into U+FFFD.
 *
 * @since 0.1.0
 * @category v2
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

// --- the v2 HELLO on the wire ---

/**
 * A v2 answer to a challenge: a fresh dialer nonce, the legacy MAC (so a legacy listener accepts it)
 * and the v2 fields. `label` is the dialer's own cluster label; pass it, so the listener can refuse a
 * cross-cluster dial (when omitted, the challenge's label is echoed). In open mode both MACs are `""`.
 *
 * @since 0.1.0
 * @category v2
 */
export const helloV2 = (
  serverId: string,
  secret: Redacted.Redacted<string> | string,
  challenge: Challenge,
  label: string = challenge.label
): Effect.Effect<HelloMessage> =>
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
      server_id: serverId,
      nonce,
      mac: key === "" ? "" : mac(key, nonce),
      v2: Option.some({ challenge: challenge.nonce, receiver: challenge.server_id, label, mac: v2Mac })
    }
  })

/**
 * The HELLO's JSON object: `server_id`, `nonce`, `mac`, then, for v2, `qm2_challenge`,
 * `qm2_receiver`, `qm2_label`, `qm2_mac`. The `qm2_` prefix keeps clear of fields upstream adds to its
 * HELLO (`http_addr`, `eph_epoch`).
 *
 * @since 0.1.0
 * @category v2
 */
export const helloV2Payload = (hello: HelloMessage): { readonly [field: string]: string } =>
  Option.match(hello.v2, {
    onNone: () => ({ server_id: hello.server_id, nonce: hello.nonce, mac: hello.mac }),
    onSome: (v2) => ({
      server_id: hello.server_id,
      nonce: hello.nonce,
      mac: hello.mac,
      qm2_challenge: v2.challenge,
      qm2_receiver: v2.receiver,
      qm2_label: v2.label,
      qm2_mac: v2.mac
    })
  })

const V2_FIELDS = ["qm2_challenge", "qm2_receiver", "qm2_label", "qm2_mac"] as const

const HelloV2Wire = Schema.Struct({
  qm2_challenge: Schema.String.pipe(Schema.maxLength(64)),
  qm2_receiver: checked((text) => textProblem("qm2_receiver", text, MAX_ID_BYTES)),
  qm2_label: checked((text) => textProblem("qm2_label", text, MAX_ID_BYTES)),
  qm2_mac: Schema.String.pipe(Schema.maxLength(128))
})

const decodeHelloV2Wire = Schema.decodeUnknownEither(HelloV2Wire)

/**
 * The v2 fields of a decoded HELLO JSON object: `none` when there are no `qm2_` fields (a legacy
 * dialer), `undefined` when they are malformed (some missing, not strings, over-long, lone
 * surrogates): map that to `InvalidHello`. Values are judged by `verifyHello`, not here.
 *
 * @since 0.1.0
 * @category v2
 */
export const readHelloV2Fields = (
  json: Readonly<Record<string, unknown>>
): Option.Option<HelloV2Fields> | undefined => {
  const present = V2_FIELDS.filter((field) => Object.hasOwn(json, field)).length
  if (present === 0) return Option.none()
  if (present !== V2_FIELDS.length) return undefined
  const decoded = decodeHelloV2Wire(json)
  if (Either.isLeft(decoded)) return undefined
  const wire = decoded.right
  return Option.some({
    challenge: wire.qm2_challenge,
    receiver: wire.qm2_receiver,
    label: wire.qm2_label,
    mac: wire.qm2_mac
  })
}

// --- verification ---

/**
 * Options of `verifyHello`: the secret, the mode, the challenge this listener wrote on this
 * connection (`none` if it wrote none), its own server id and its cluster label (`""` when none).
 *
 * @since 0.1.0
 * @category v2
 */
export interface VerifyOptions {
  readonly secret: Redacted.Redacted<string> | string
  readonly mode: HandshakeMode
  readonly challenge: Option.Option<Challenge>
  readonly selfId: string
  readonly label: string
}

const fromLegacy = (
  result: Either.Either<string, HandshakeError>
): Either.Either<VerifiedHello, HandshakeV2Error> =>
  Either.match(result, {
    onLeft: (error) =>
      refuse(error.reason === "MissingServerId" ? "MissingServerId" : "BadMac", error.detail),
    onRight: (serverId) => Either.right({ serverId, version: 1 as const })
  })

const v2Problem = (hello: HelloMessage, v2: HelloV2Fields): string | undefined =>
  idProblem("server_id", hello.server_id) ??
  nonceProblem("nonce", hello.nonce) ??
  textProblem("qm2_receiver", v2.receiver, MAX_ID_BYTES) ??
  textProblem("qm2_label", v2.label, MAX_ID_BYTES)

/**
 * Checks a HELLO as a listener in `mode` (see `HandshakeMode`). Never throws. The checks run in this
 * order, so the reason names the first thing wrong:
 *
 * - `legacy`: exactly `verify` (`MissingServerId`, `BadMac`); v2 fields are ignored.
 * - `MissingServerId`; in `required` mode, `NoSecret` (empty secret) and `LegacyRefused` (no v2 fields).
 * - legacy HELLO in `permissive` mode: `BadMac`, then `OwnServerId`; accepted as version 1.
 * - v2 HELLO: `InvalidHello` (over-long ids, a nonce not 32 lowercase hex, lone surrogates);
 *   `WrongReceiver` (`qm2_receiver` is not `selfId`: meant for another node); `WrongLabel`;
 *   `BadChallengeAnswer` (no challenge on this connection, or `qm2_challenge` is not its nonce: a
 *   replay); with a secret, `BadMac` (legacy MAC) and `BadChallengeAnswer` (`qm2_mac`, which also
 *   binds the sender's id); finally `OwnServerId` (the peer list names this node). Accepted as
 *   version 2.
 *
 * The MAC is recomputed from this listener's own values (its nonce, `selfId`, label), never from the
 * peer's copies. With an empty secret no MAC is checked.
 *
 * @since 0.1.0
 * @category v2
 */
export const verifyHello = (
  hello: HelloMessage,
  options: VerifyOptions
): Either.Either<VerifiedHello, HandshakeV2Error> => {
  if (options.mode === "legacy") return fromLegacy(verify(hello, options.secret))
  if (hello.server_id === "") return refuse("MissingServerId")
  const key = secretOf(options.secret)
  if (options.mode === "required" && key === "") return refuse("NoSecret")
  if (Option.isNone(hello.v2)) {
    if (options.mode === "required") return refuse("LegacyRefused")
    const legacy = fromLegacy(verify(hello, key))
    if (Either.isLeft(legacy)) return legacy
    return hello.server_id === options.selfId ? refuse("OwnServerId") : legacy
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
  if (key !== "") {
    const legacy = verify(hello, key)
    if (Either.isLeft(legacy)) return fromLegacy(legacy)
    const expected = macV2(key, {
      dialerNonce: hello.nonce,
      listenerNonce: challenge.nonce,
      sender: hello.server_id,
      receiver: options.selfId,
      label: options.label
    })
    if (!hexMacEqual(expected, v2.mac)) return refuse("BadChallengeAnswer", "qm2_mac does not match")
  }
  if (hello.server_id === options.selfId) return refuse("OwnServerId")
  return Either.right({ serverId: hello.server_id, version: 2 })
}
