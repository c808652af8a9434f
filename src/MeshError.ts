/**
 * The typed errors of the mesh. Each one says what went wrong in its `message`; where one class covers
 * several cases it carries a `reason` literal so callers can count or match them.
 *
 * @since 0.1.0
 */
import { Data } from "effect"

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
 * A HELLO that does not authenticate the dialer (spec "The handshake").
 *
 * @since 0.1.0
 * @category errors
 */
export class HandshakeError extends Data.TaggedError("HandshakeError")<{
  readonly reason: HandshakeError.Reason
  readonly detail?: string
}> {
  override get message(): string {
    const base = handshakeReasons[this.reason]
    return this.detail === undefined ? base : `${base}: ${this.detail}`
  }
}

/**
 * @since 0.1.0
 * @category errors
 */
export declare namespace HandshakeError {
  /**
   * Why an inbound connection was refused; each is counted apart in the stats (`rejections`).
   *
   * @since 0.1.0
   * @category errors
   */
  export type Reason = keyof typeof handshakeReasons
}

/**
 * What each handshake refusal means, in the words the logs use.
 *
 * @example
 * ```ts
 * import { MeshError } from "queen-mesh"
 *
 * const error = new MeshError.HandshakeError({ reason: "BadMac" })
 * assert.strictEqual(error._tag, "HandshakeError")
 * assert.strictEqual(error.message, MeshError.handshakeReasons.BadMac)
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export const handshakeReasons = {
  NotHello: "the first frame was not a HELLO",
  InvalidHello: "the HELLO payload is malformed",
  OversizedHello: "the first frame is larger than a HELLO may be",
  MissingServerId: "the HELLO carries no server_id",
  BadMac: "the HELLO MAC does not match the shared secret",
  Timeout: "no HELLO arrived within the handshake timeout",
  Closed: "the connection closed before a HELLO arrived",
  OwnServerId: "the HELLO carries this node's own server id: the peer list names this node",
  TooManyConnections: "too many inbound connections",
  LegacyRefused: "a legacy HELLO was refused (QUEEN_MESH_AUTH=required)",
  BadChallengeAnswer: "the HELLO does not answer this connection's challenge",
  WrongReceiver: "the HELLO was made for another node",
  WrongLabel: "the HELLO carries another cluster label",
  TlsHandshake: "the TLS handshake failed (another secret, or not TLS)"
} as const

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
