/**
 * The codec between the table's frames and the wire (spec "Framing"): `u32 BE length | u8 tag | JSON
 * payload`, written by one function (`frameBytes`) and its length read by one (`readLength`), for every
 * encoder and reader of the mesh (the TCP links' decoder, the lane's envelope, tests and the bench).
 * Decoding takes the hand check first and the Schema for what it does not recognise; it never throws.
 *
 * @internal
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as SchemaIssue from "effect/SchemaIssue"
import { FrameDecodeError, FrameTooLargeError } from "../../MeshError.js"
import { type Frame, rows, Tag, table, tagOf, type UnknownFrame } from "./frames.js"
import { excerpt } from "./names.js"
import * as PayloadChecks from "./payloadChecks.js"
import { LENGTH_PREFIX_BYTES, MAX_FRAME_LENGTH, messageAvailableJson, type QueueItem } from "./payloads.js"

// ---------------------------------------------------------------------------------------------
// encoding
// ---------------------------------------------------------------------------------------------

/**
 * The JSON payload of a frame, or `undefined` for an empty payload (a heartbeat without server id).
 * Written by hand rather than through `Schema.encode` because it sits on the broadcast hot path; the
 * tests prove it agrees with the Schemas.
 */
export const payloadOf = (frame: Frame): object | undefined => {
  // The row for `frame._tag` takes exactly that frame; TypeScript cannot see through the union.
  const spec = table[frame._tag] as { readonly payload: (frame: Frame) => object | undefined }
  return spec.payload(frame)
}

/**
 * `u32 BE length | u8 tag | JSON` (spec "Framing"): the one way bytes of a frame are laid out, for
 * every encoder of the mesh. `json` is the payload's text (`""` for an empty payload); the caller
 * keeps the length within the cap.
 */
export const frameBytes = (tag: number, json: string): Uint8Array => {
  const payloadBytes = json === "" ? 0 : Buffer.byteLength(json, "utf8")
  const out = Buffer.allocUnsafe(LENGTH_PREFIX_BYTES + 1 + payloadBytes)
  out.writeUInt32BE(1 + payloadBytes, 0)
  out[LENGTH_PREFIX_BYTES] = tag
  if (payloadBytes > 0) out.write(json, LENGTH_PREFIX_BYTES + 1, "utf8")
  return out
}

/**
 * Encodes a frame as `u32 BE length | u8 tag | JSON`, or fails when it would exceed the 16 MiB cap.
 */
export const encodeResult = (frame: Frame): Result.Result<Uint8Array, FrameTooLargeError> => {
  const payload = payloadOf(frame)
  const json = payload === undefined ? "" : JSON.stringify(payload)
  const length = 1 + Buffer.byteLength(json, "utf8")
  if (length > MAX_FRAME_LENGTH) return Result.fail(new FrameTooLargeError({ length }))
  return Result.succeed(frameBytes(tagOf(frame), json))
}

/**
 * The bytes of a `MESSAGE_AVAILABLE` for an item already checked ({@link validItem}), without building
 * the frame value first: the push hot path. Names are bounded, so the frame is far below its cap. The
 * same bytes as {@link encode} (the tests prove it).
 */
export const encodeMessageAvailable = (item: QueueItem): Uint8Array =>
  frameBytes(table.MessageAvailable.tag, messageAvailableJson(item))

/**
 * Encodes a frame as `u32 BE length | u8 tag | JSON`. Every frame but an oversized batch fits the cap;
 * for batches built from untrusted sizes use {@link encodeResult}, which reports the overflow.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, strictEqual } from "node:assert"
 * import { Option, Result } from "effect"
 * import { Frame } from "queen-mesh"
 *
 * const item = Frame.queueItem({ queue: "orders", partition: "p1" })
 * const bytes = Frame.encode({ _tag: "MessageAvailable", ...item })
 * // u32 BE length | u8 tag | JSON payload
 * strictEqual(bytes[4], Frame.Tag.MESSAGE_AVAILABLE)
 *
 * const decoded = Frame.decodePayload(bytes[4]!, bytes.subarray(5))
 * deepStrictEqual(
 *   decoded,
 *   Result.succeed({ _tag: "MessageAvailable", queue: "orders", partition: "p1", tenant: Option.none() })
 * )
 * ```
 */
export const encode = (frame: Frame): Uint8Array => {
  const result = encodeResult(frame)
  if (Result.isFailure(result)) throw result.failure
  return result.success
}

// ---------------------------------------------------------------------------------------------
// decoding
// ---------------------------------------------------------------------------------------------

const formatIssue = SchemaIssue.makeFormatterStandardSchemaV1()

/** `path: message` per issue, as a flat list of where and why. */
const describe = (error: Schema.SchemaError): string =>
  formatIssue(error.issue)
    .issues.map((issue) => {
      const path = (issue.path ?? []).map((key) => String(typeof key === "object" ? key.key : key))
      return path.length === 0 ? issue.message : `${path.join(".")}: ${issue.message}`
    })
    .join("; ")

const schemaDecoder = <A>(schema: Schema.Decoder<A>) => {
  const decode = Schema.decodeUnknownResult(schema, { errors: "first", reportInput: true })
  return (json: unknown): Result.Result<A, string> => {
    // Formatting a failure prints the offending value, which may nest deeper than the stack (a hostile
    // `[[[[...]]]]`): a throw here is a refusal with a fixed detail, never an escape.
    try {
      return Result.mapError(decode(json), (error) => excerpt(describe(error)))
    } catch {
      return Result.fail("payload too deeply nested to describe")
    }
  }
}

type SchemaDecoder = (json: unknown) => Result.Result<Frame, string>

/** Each row's Schema by tag; its decoder is compiled on the tag's first use (`schemaDecoderOf`), so
 * importing the codec compiles none, and a node that never reads some frames never compiles theirs. */
const schemas: ReadonlyArray<Schema.Decoder<Frame> | undefined> = (() => {
  const out: Array<Schema.Decoder<Frame> | undefined> = []
  for (const r of rows) out[r.tag] = r.schema
  return out
})()
const schemaDecoders: Array<SchemaDecoder | undefined> = []

const schemaDecoderOf = (tag: number, schema: Schema.Decoder<Frame>): SchemaDecoder => {
  let decoder = schemaDecoders[tag]
  if (decoder === undefined) {
    decoder = schemaDecoder(schema)
    schemaDecoders[tag] = decoder
  }
  return decoder
}

const quickDecoders: ReadonlyArray<((json: unknown) => Frame | undefined) | undefined> = (() => {
  const out: Array<((json: unknown) => Frame | undefined) | undefined> = []
  for (const r of rows) out[r.tag] = r.quick
  return out
})()

const utf8 = new TextDecoder("utf-8")

/**
 * Decodes parsed JSON by its tag: the quick check first, then the Schema, which decides what the quick
 * check does not recognise and words the error. Never throws.
 */
export const decodeJson = (
  tag: number,
  json: unknown
): Result.Result<Frame | UnknownFrame, FrameDecodeError> => {
  const schema = schemas[tag]
  if (schema === undefined) return Result.succeed({ _tag: "Unknown", tag, payload: new Uint8Array(0) })
  try {
    const quick = quickDecoders[tag]?.(json)
    if (quick !== undefined) return Result.succeed(quick)
    return Result.mapError(
      schemaDecoderOf(tag, schema)(json),
      (detail) => new FrameDecodeError({ tag, detail })
    )
  } catch {
    // Total on any input: whatever a peer sends is refused with a reason, never thrown.
    return Result.fail(new FrameDecodeError({ tag, detail: "payload could not be checked" }))
  }
}

/**
 * Decodes one frame's payload by its tag. An unknown tag yields an `UnknownFrame`; a payload that fails
 * its Schema (or is not JSON) yields a `FrameDecodeError` the caller can count and skip. A heartbeat may
 * have an empty payload. Never throws, whatever the bytes.
 */
export const decodePayload = (
  tag: number,
  payload: Uint8Array
): Result.Result<Frame | UnknownFrame, FrameDecodeError> => {
  const decoded = decodeFrame(tag, payload)
  return decoded instanceof FrameDecodeError ? Result.fail(decoded) : Result.succeed(decoded)
}

/**
 * {@link decodePayload} without the `Result` around the verdict, for the receive path (one object less
 * per frame): the frame, or the error. Never throws, whatever the bytes.
 */
export const decodeFrame = (tag: number, payload: Uint8Array): Frame | UnknownFrame | FrameDecodeError => {
  const schema = schemas[tag]
  if (schema === undefined) return { _tag: "Unknown", tag, payload }
  if (payload.length === 0 && tag === Tag.HEARTBEAT) return PayloadChecks.heartbeatNoId
  let json: unknown
  try {
    json = JSON.parse(Buffer.isBuffer(payload) ? payload.toString("utf8") : utf8.decode(payload))
  } catch (error) {
    const detail = `not JSON: ${excerpt(error instanceof Error ? error.message : String(error))}`
    return new FrameDecodeError({ tag, detail })
  }
  try {
    const quick = quickDecoders[tag]?.(json)
    if (quick !== undefined) return quick
    const checked = schemaDecoderOf(tag, schema)(json)
    return Result.isSuccess(checked)
      ? checked.success
      : new FrameDecodeError({ tag, detail: checked.failure })
  } catch {
    // Total on any input: whatever a peer sends is refused with a reason, never thrown.
    return new FrameDecodeError({ tag, detail: "payload could not be checked" })
  }
}

/**
 * The length the prefix at `at` of `bytes` announces (tag byte plus payload): the one reader of the
 * prefix, for the TCP links' decoder and the lane's envelope alike. The caller has made sure four
 * bytes are there (the hot path pays no check twice).
 */
export const readLength = (bytes: Uint8Array, at: number): number =>
  ((bytes[at]! << 24) | (bytes[at + 1]! << 16) | (bytes[at + 2]! << 8) | bytes[at + 3]!) >>> 0
