/**
 * The typed errors of the mesh. Each one says what went wrong in its `message`; where one class covers
 * several cases it carries a `reason` literal so callers can count or match them.
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import { MAX_SERVER_ID_BYTES } from "./internal/wire/names.js"

/**
 * The byte stream is not a valid frame sequence (spec "Framing"): a length prefix of 0, a length above
 * the 16 MiB cap, or the stream ending inside a frame. The connection it came from cannot be resynced
 * and must be closed.
 *
 * @since 0.1.0
 * @category errors
 */
export class FramingError extends Data.TaggedError("FramingError")<{
  readonly reason: "EmptyFrame" | "FrameTooLarge" | "Truncated"
  readonly length: number
}> {
  override get message(): string {
    if (this.reason === "EmptyFrame") return "frame length prefix is 0 (a frame holds at least its tag byte)"
    if (this.reason === "FrameTooLarge") return `frame length prefix ${this.length} exceeds the cap`
    return `stream ended inside a frame (${this.length} bytes of it buffered)`
  }
}

/**
 * A frame's payload does not match its Schema (spec "The frame set"). The frame is skipped and counted;
 * the connection stays open, since the framing itself is intact.
 *
 * @since 0.1.0
 * @category errors
 */
export class FrameDecodeError extends Data.TaggedError("FrameDecodeError")<{
  readonly tag: number
  readonly detail: string
}> {
  override get message(): string {
    return `invalid payload for frame tag ${this.tag}: ${this.detail}`
  }
}

/**
 * A frame that would exceed the 16 MiB cap once encoded. The sender splits batches to avoid it.
 *
 * @since 0.1.0
 * @category errors
 */
export class FrameTooLargeError extends Data.TaggedError("FrameTooLargeError")<{
  readonly length: number
}> {
  override get message(): string {
    return `encoded frame of ${this.length} bytes exceeds the 16 MiB cap`
  }
}

/**
 * Why an inbound connection was refused: one list, the single source of the log wording (`message`),
 * the stats body's `rejections` keys (`stat`), the metrics' `reason` label and the HTTP Schema. Each
 * reason is counted apart; their sum is `handshake_failures` (spec "Observing it").
 *
 * @example
 * ```ts
 * import { strictEqual } from "node:assert"
 * import { MeshError } from "queen-mesh"
 *
 * const error = new MeshError.HandshakeError({ reason: "BadMac" })
 * strictEqual(error._tag, "HandshakeError")
 * strictEqual(error.message, MeshError.handshakeReasons.BadMac.message)
 * strictEqual(MeshError.handshakeReasons.BadMac.stat, "bad_mac")
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export const handshakeReasons = {
  BadMac: { stat: "bad_mac", message: "the HELLO MAC does not match the shared secret" },
  NotHello: { stat: "not_hello", message: "the first frame was not a HELLO" },
  InvalidHello: { stat: "invalid_hello", message: "the HELLO payload is malformed" },
  OversizedHello: { stat: "oversized_hello", message: "the first frame is larger than a HELLO may be" },
  MissingServerId: { stat: "missing_server_id", message: "the HELLO carries no server_id" },
  Timeout: { stat: "timeout", message: "no HELLO arrived within the handshake timeout" },
  Closed: { stat: "closed", message: "the connection closed before a HELLO arrived" },
  BadChallengeAnswer: {
    stat: "bad_challenge_answer",
    message: "the HELLO does not answer this connection's challenge"
  },
  WrongReceiver: { stat: "wrong_receiver", message: "the HELLO was made for another node" },
  WrongLabel: { stat: "wrong_label", message: "the HELLO carries another cluster label" },
  LegacyRefused: {
    stat: "legacy_refused",
    message: "a legacy HELLO was refused (QUEEN_MESH_AUTH=required)"
  },
  TooManyConnections: { stat: "too_many_connections", message: "too many inbound connections" },
  OwnServerId: {
    stat: "own_server_id",
    message: "the HELLO carries this node's own server id, from another node"
  },
  TlsHandshake: {
    stat: "tls_handshake",
    message: "the TLS handshake failed (another secret, or not TLS)"
  },
  WrongIdentity: {
    stat: "wrong_identity",
    message: "the HELLO's server id is not the identity the TLS link was keyed for"
  },
  UnknownKey: {
    stat: "unknown_key",
    message: "the HELLO names a key this node does not hold (a rotation step missed?)"
  }
} as const satisfies Record<string, { readonly stat: string; readonly message: string }>

/**
 * A HELLO that does not authenticate the dialer (spec "The handshake"), or a connection refused before
 * one could: the one error of every handshake refusal, legacy or v2.
 *
 * @since 0.1.0
 * @category errors
 */
export class HandshakeError extends Data.TaggedError("HandshakeError")<{
  readonly reason: HandshakeError.Reason
  readonly detail?: string
}> {
  override get message(): string {
    const base = handshakeReasons[this.reason].message
    return this.detail === undefined ? base : `${base}: ${this.detail}`
  }
}

/**
 * @since 0.1.0
 * @category errors
 */
export declare namespace HandshakeError {
  /**
   * Why an inbound connection was refused.
   *
   * @since 0.1.0
   * @category errors
   */
  export type Reason = keyof typeof handshakeReasons
  /**
   * The stats body's key of a reason (`bad_mac`, ...).
   *
   * @since 0.1.0
   * @category errors
   */
  export type Stat = (typeof handshakeReasons)[Reason]["stat"]
}

/**
 * Every refusal reason, in the order of {@link handshakeReasons}.
 *
 * @since 0.1.0
 * @category errors
 */
export const handshakeReasonList: ReadonlyArray<HandshakeError.Reason> = Object.keys(handshakeReasons).filter(
  (key): key is HandshakeError.Reason => Object.hasOwn(handshakeReasons, key)
)

/**
 * A transport failure: a refused or failed dial, a bind failure, a write or read on a broken connection.
 *
 * @since 0.1.0
 * @category errors
 */
export class TransportError extends Data.TaggedError("TransportError")<{
  readonly reason: "Dial" | "Resolve" | "Timeout" | "Listen" | "Read" | "Write" | "Closed"
  readonly address: string
  readonly cause?: unknown
}> {
  override get message(): string {
    const why = this.cause instanceof Error ? `: ${this.cause.message}` : ""
    return `${this.reason.toLowerCase()} failed on ${this.address}${why}`
  }
}

/**
 * A call of the `Mesh` API with input that no peer would accept, such as an empty queue name. Nothing
 * is sent.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidInputError extends Data.TaggedError("InvalidInputError")<{
  readonly detail: string
}> {
  override get message(): string {
    return `invalid mesh input: ${this.detail}`
  }
}

/**
 * A call of the `Mesh` API after the mesh's scope closed: nothing is sent. A broker draining for
 * shutdown stops calling the mesh before closing it; a straggler gets this rather than silence.
 *
 * @since 0.1.0
 * @category errors
 */
export class MeshClosedError extends Data.TaggedError("MeshClosedError")<{
  readonly operation: string
}> {
  override get message(): string {
    return `the mesh is closed: ${this.operation} was not sent`
  }
}

/**
 * Options that cannot make a TLS-PSK transport: an empty secret (the link key would be public), or an
 * identity that is empty, too long or holds control characters.
 *
 * @since 0.1.0
 * @category errors
 */
export class TlsConfigError extends Data.TaggedError("TlsConfigError")<{
  readonly reason: "EmptySecret" | "InvalidIdentity"
}> {
  override get message(): string {
    return this.reason === "EmptySecret"
      ? "QUEEN_MESH_TLS=psk needs a non-empty QUEEN_SYNC_SECRET"
      : `the TLS-PSK identity must be 1 to ${MAX_SERVER_ID_BYTES} UTF-8 bytes with no control characters`
  }
}

/**
 * A discovery round that could not say which peers exist (the name did not resolve, the resolver
 * failed). A failed round changes nothing: no member is dropped for it.
 *
 * @since 0.1.0
 * @category errors
 */
export class DiscoveryError extends Data.TaggedError("DiscoveryError")<{
  readonly source: string
  readonly detail: string
  readonly cause?: unknown
}> {
  override get message(): string {
    return `discovery ${this.source}: ${this.detail}`
  }
}

/**
 * An error of the test kit: a condition that never held.
 *
 * @since 0.1.0
 * @category errors
 */
export class NotReached extends Data.TaggedError("NotReached")<{
  readonly detail: string
}> {
  override get message(): string {
    return this.detail
  }
}

/**
 * Why a dialer's session to one peer ended, as its reconnect `Schedule` sees it: `connected`, it got as
 * far as a connection and a HELLO written; `established`, the link then stayed up for at least a
 * heartbeat interval past the listener's auth-failure delay (what resets the default backoff).
 *
 * @since 0.1.0
 * @category errors
 */
export class LinkDown extends Data.TaggedError("LinkDown")<{
  readonly connected: boolean
  readonly established: boolean
  readonly cause:
    | TransportError
    | "closed by peer"
    | "no challenge"
    | `invalid challenge (${string})`
    | "peer silent"
    | "write stalled"
}> {}

/**
 * A configuration that would mislead, from any way in (code, the environment, a `ConfigProvider`):
 * `fields` are the `MeshConfig` fields at fault, `variables` the environment variables that set them.
 *
 * @since 0.1.0
 * @category errors
 */
export class MeshConfigError extends Data.TaggedError("MeshConfigError")<{
  readonly fields: ReadonlyArray<string>
  readonly variables: ReadonlyArray<string>
  readonly detail: string
}> {
  override get message(): string {
    return `${this.variables.join(", ")} (${this.fields.join(", ")}): ${this.detail}`
  }
}
