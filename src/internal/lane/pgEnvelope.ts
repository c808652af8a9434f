/**
 * The PostgreSQL lane's envelope: how the mesh frames of one tick become `pg_notify` payloads and back,
 * with no I/O. Packing fits frames under PostgreSQL's payload limit (splitting batches by item), sealing
 * adds the sender, its boot epoch, the backend it sends from, the database time, a sequence number and
 * a MAC, and `open` checks all of it on receipt.
 *
 * Why a MAC per notification: anyone who can connect to the database can NOTIFY any channel, so the
 * lane cannot lean on a network boundary the way the TCP mesh does (spec "The security reality").
 *
 * Why more than a MAC: anyone who can LISTEN can record a notification and NOTIFY it again, MAC and
 * all. A notification therefore names the backend that sends it (`p`, its `pg_backend_pid()`), and
 * PostgreSQL tells the receiver which backend really did (the notification's process id): a recording
 * sent again comes from another backend and is refused, whatever the receiver remembers of its sender
 * (a receiver that has just started remembers nothing). The sealing time (`t`, database time) closes
 * the last gap, a backend id reused after the sender's connection ended: PostgreSQL delivers to a
 * connection only what is committed after its LISTEN, so nothing sealed well before that is live.
 * Per sender, the newest epoch and the highest sequence number seen keep the rest in order.
 *
 * The format, versioned by its prefix (`qm2`):
 *
 * ```text
 * qm2.<key id | ->.<mac hex | ->.<body>
 * body = {"s":<sender id>,"e":"<epoch>","p":<backend pid>,"t":<ms>,"q":<seq>,"f":[[<tag>,<payload JSON | null>],...]}
 * ```
 *
 * - Text, never NUL (a `text` payload cannot hold one); dots split the three header fields and the body
 *   is everything after the third dot, so the body may hold dots.
 * - The payload JSON of each frame is embedded raw rather than as an escaped string: a frame costs its
 *   payload plus `[t,` `]` and a comma, no more than its 5-byte TCP header.
 * - ASCII only: every non-ASCII character is written as a JSON `\uXXXX` escape. `pg_notify` converts a
 *   payload to the database encoding, and ASCII survives every encoding (a LATIN1 database would refuse
 *   an emoji, and the whole notification with it); it also makes bytes equal to string length, so the
 *   size check is exact without encoding. Queue names are ASCII in practice, so this costs nothing there.
 * - `null` stands for an empty payload (a heartbeat without a server id).
 *
 * Probes (the lane's self-test that its LISTEN works) are `qmp1.<32 hex nonce>`, unauthenticated on
 * purpose: only the connection that sent a nonce waits for it, and a forged echo cannot reach a
 * connection that is deaf.
 *
 * @internal
 */

import { createHash, type Hash, hkdfSync, timingSafeEqual } from "node:crypto"
import * as Result from "effect/Result"
import type { Auth, Keyring } from "../keyring.js"
import { readLength } from "../wire/codec.js"
import { Tag } from "../wire/frames.js"
import * as Names from "../wire/names.js"
import { LENGTH_PREFIX_BYTES, MAX_FRAME_LENGTH } from "../wire/payloads.js"
import { EnvelopeRefusal } from "./refusals.js"
import { trace } from "./trace.js"

// ---------------------------------------------------------------------------------------------
// constants
// ---------------------------------------------------------------------------------------------

/** The version prefix of an envelope. */
export const VERSION = "qm2"

/** PostgreSQL refuses payloads of 8000 bytes or more; this is the most one notification may carry. */
export const DEFAULT_PAYLOAD_LIMIT = 7999

/** The longest payload `open` looks at. Larger than any real one (8000 bytes at the default block size). */
export const MAX_OPEN_LENGTH = 64 * 1024

/** The replay state remembers at most this many senders; the longest silent is forgotten first. */
export const MAX_SENDERS = 256

/** The digits a sequence number or a time may take in an envelope: `Number.MAX_SAFE_INTEGER` has 16. */
const MAX_SEQ_DIGITS = 16

/** The digits a backend pid may take: PostgreSQL's are 32-bit. */
const MAX_PID_DIGITS = 10

/**
 * How much earlier than a connection's LISTEN a notification may have been sealed and still be live:
 * the error of two clock offsets measured against the database, and the time between sealing and
 * commit, with room to spare.
 */
export const SEAL_TOLERANCE_MS = 5000

const MAC_DOMAIN = "queen-mesh/pg/v1"
const HKDF_SALT = "queen-mesh pg lane v1"
const PROBE_PREFIX = "qmp1."
const NO_FIELD = "-"

/** What a key id may be on the wire: short, and free of the dots that separate the header fields. */
const KEY_ID = /^[0-9A-Za-z_-]{1,64}$/
const MAC_HEX = /^[0-9a-f]{64}$/
const EPOCH = /^[0-9a-f]{16}$/
const NONCE = /^[0-9a-f]{32}$/

// ---------------------------------------------------------------------------------------------
// keys
// ---------------------------------------------------------------------------------------------

export type { Auth, Key, Keyring } from "../keyring.js"
export { key, keyIdOf } from "../keyring.js"

/** Why `auth` cannot be used, or `undefined` when it can: ids must fit the wire, secrets be non-empty. */
export const checkAuth = (auth: Auth): string | undefined => {
  if (auth === "open") return undefined
  for (const k of [auth.primary, ...auth.accepted]) {
    if (!KEY_ID.test(k.id) || k.id === NO_FIELD) {
      return `key id ${JSON.stringify(k.id)} is not 1 to 64 of [0-9A-Za-z_-] (and not "-")`
    }
    if (k.secret === "") return `key ${k.id} has an empty secret`
  }
  return undefined
}

/** `HKDF-SHA256(ikm = secret, salt = "queen-mesh pg lane v1", info = channel, 32 bytes)`. */
const laneKeyOf = (secret: string, channel: string): Buffer =>
  Buffer.from(
    hkdfSync(
      "sha256",
      Buffer.from(secret, "utf8"),
      Buffer.from(HKDF_SALT, "utf8"),
      Buffer.from(channel, "utf8"),
      32
    )
  )

interface Prepared {
  readonly primaryId: string
  readonly primary: LaneMac
  readonly byId: ReadonlyMap<string, LaneMac>
}

/** Lane keys per keyring and channel: HKDF once, not per notification. */
const preparedKeys = new WeakMap<Keyring, Map<string, Prepared>>()

const prepare = (ring: Keyring, channel: string): Prepared => {
  let byChannel = preparedKeys.get(ring)
  if (byChannel === undefined) {
    byChannel = new Map()
    preparedKeys.set(ring, byChannel)
  }
  const cached = byChannel.get(channel)
  if (cached !== undefined) return cached
  const byId = new Map<string, LaneMac>()
  for (const k of [ring.primary, ...ring.accepted]) {
    if (!byId.has(k.id)) byId.set(k.id, new LaneMac(laneKeyOf(k.secret, channel), channel))
  }
  const prepared = { primaryId: ring.primary.id, primary: byId.get(ring.primary.id)!, byId }
  byChannel.set(channel, prepared)
  return prepared
}

const u32 = (n: number): Buffer => {
  const out = Buffer.allocUnsafe(4)
  out.writeUInt32BE(n, 0)
  return out
}

const SHA256_BLOCK = 64

/**
 * `HMAC-SHA256(laneKey, M)` on one channel, `M` = for each of the domain, the channel and the body,
 * `u32 BE byte length | UTF-8 bytes`: the length prefixes mean no two (channel, body) pairs share an
 * input.
 *
 * Written out by HMAC's definition (RFC 2104: `H((K ^ opad) | H((K ^ ipad) | M))`) so that the two
 * padded key blocks, and the part of `M` that is the same for every body, are hashed once, and each MAC
 * copies the two hash states instead of setting up an HMAC: on a wake's path, with the process's caches
 * cold from waiting, `createHmac` cost about 60 us p50 against 35 for the copies (2 ms apart, this
 * machine). The same bytes as `createHmac` (a property test holds them equal).
 */
export class LaneMac {
  /** SHA-256 over `K ^ ipad` and the MAC input up to the body. */
  private readonly inner: Hash
  /** SHA-256 over `K ^ opad`. */
  private readonly outer: Hash

  constructor(laneKey: Uint8Array, channel: string) {
    const key = laneKey.length > SHA256_BLOCK ? createHash("sha256").update(laneKey).digest() : laneKey
    const ipad = Buffer.alloc(SHA256_BLOCK, 0x36)
    const opad = Buffer.alloc(SHA256_BLOCK, 0x5c)
    for (let i = 0; i < key.length; i++) {
      ipad[i]! ^= key[i]!
      opad[i]! ^= key[i]!
    }
    this.inner = createHash("sha256").update(ipad).update(macPrefixOf(channel))
    this.outer = createHash("sha256").update(opad)
  }

  /** The MAC of `body`. */
  of(body: string): Buffer {
    const inner = this.inner.copy()
    inner.update(u32(Buffer.byteLength(body, "utf8")))
    inner.update(body, "utf8")
    return this.outer.copy().update(inner.digest()).digest()
  }
}

/** The MAC's input up to the body, which is the same for every notification on a channel. */
const macPrefixes = new Map<string, Buffer>()

const macPrefixOf = (channel: string): Buffer => {
  let prefix = macPrefixes.get(channel)
  if (prefix === undefined) {
    const parts: Array<Buffer> = []
    for (const field of [MAC_DOMAIN, channel]) {
      const bytes = Buffer.from(field, "utf8")
      parts.push(u32(bytes.length), bytes)
    }
    prefix = Buffer.concat(parts)
    // Channels are few (one per lane); the bound only keeps a misuse from growing it.
    if (macPrefixes.size >= 64) macPrefixes.clear()
    macPrefixes.set(channel, prefix)
  }
  return prefix
}

// ---------------------------------------------------------------------------------------------
// epoch
// ---------------------------------------------------------------------------------------------

/**
 * A boot epoch: 12 hex digits of the boot time in ms, then 4 of `random` (0 to 65535), lowercase. Two
 * epochs compare as strings, since they have the same length; the random part keeps two boots in the
 * same millisecond apart.
 */
export const makeEpoch = (bootMillis: number, random: number): string =>
  Math.max(0, Math.floor(bootMillis)).toString(16).padStart(12, "0").slice(-12) +
  (Math.floor(random) & 0xffff).toString(16).padStart(4, "0")

/** Whether `text` has the shape of an epoch. */
export const isEpoch = (text: string): boolean => EPOCH.test(text)

// ---------------------------------------------------------------------------------------------
// packing
// ---------------------------------------------------------------------------------------------

const NON_ASCII_TEST = /[\u0080-\uffff]/
const NON_ASCII = /[\u0080-\uffff]/g
const escapeChar = (c: string): string => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`

/** JSON text with every non-ASCII character escaped. Safe on any JSON text: outside strings it is ASCII. */
export const asciiJson = (json: string): string =>
  NON_ASCII_TEST.test(json) ? json.replace(NON_ASCII, escapeChar) : json

/** Why a frame (or some items of a batch) did not go out. */
export type DropReason = "too_large" | "invalid"

/**
 * A frame `pack` could not carry whole: `items` is 0 when the whole frame was dropped, else the number of
 * a batch's items that could not fit even alone (the rest of the batch went out).
 */
export interface Dropped {
  readonly index: number
  readonly reason: DropReason
  readonly items: number
}

/** The frame lists of the notifications to send, each the text inside `"f":[...]`. */
export interface Packed {
  readonly groups: ReadonlyArray<string>
  /** Frames in `groups`: a split batch counts once per piece. */
  readonly frames: number
  readonly dropped: ReadonlyArray<Dropped>
}

const utf8 = new TextDecoder("utf-8", { fatal: true })

const isBatchTag = (tag: number): boolean =>
  tag === Tag.MESSAGE_AVAILABLE_BATCH || tag === Tag.HOTLIST_DIRTY_BATCH

interface Entry {
  readonly tag: number
  /** The payload as ASCII JSON text, `null` for an empty payload. */
  readonly text: string
  /** The parsed payload; `undefined` for an empty one. */
  readonly value: unknown
}

/**
 * One encoded frame as an entry, or `undefined` when it is not a frame: a wrong length prefix, a payload
 * that is not UTF-8 JSON. Embedding raw JSON needs it valid, or one bad frame would spoil its neighbours.
 */
const entryOf = (frame: Uint8Array): Entry | undefined => {
  if (frame.length <= LENGTH_PREFIX_BYTES || frame.length > LENGTH_PREFIX_BYTES + MAX_FRAME_LENGTH) {
    return undefined
  }
  const length = readLength(frame, 0)
  if (length !== frame.length - LENGTH_PREFIX_BYTES) return undefined
  const tag = frame[LENGTH_PREFIX_BYTES]!
  if (frame.length === LENGTH_PREFIX_BYTES + 1) return { tag, text: "null", value: undefined }
  try {
    const text = utf8.decode(frame.subarray(LENGTH_PREFIX_BYTES + 1))
    const value: unknown = JSON.parse(text)
    return { tag, text: asciiJson(text), value }
  } catch {
    return undefined
  }
}

const isRecord = (u: unknown): u is Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * Packs the frames of one tick into as few groups as fit `room` bytes each, in order. A frame that does
 * not fit what is left of the current group starts the next one; a batch (tag 2 or 5, `{"items":[...]}`)
 * is split by items instead, its first piece filling the current group, every piece keeping the batch's
 * other top-level fields. Order-preserving packing is optimal greedily: each group is filled as far as
 * the next frame or item allows. Never throws; what cannot go out is reported in `dropped`.
 */
export const pack = (frames: ReadonlyArray<Uint8Array>, room: number): Packed => {
  const groups: Array<string> = []
  const dropped: Array<Dropped> = []
  let current: Array<string> = []
  let used = 0
  let count = 0

  const left = (): number => (current.length === 0 ? room : room - used - 1)
  const flush = () => {
    if (current.length === 0) return
    groups.push(current.join(","))
    current = []
    used = 0
  }
  const add = (entry: string) => {
    used += current.length === 0 ? entry.length : entry.length + 1
    current.push(entry)
    count++
  }

  for (let index = 0; index < frames.length; index++) {
    const entry = entryOf(frames[index]!)
    if (entry === undefined) {
      dropped.push({ index, reason: "invalid", items: 0 })
      continue
    }
    const whole = `[${entry.tag},${entry.text}]`
    if (whole.length <= left()) {
      add(whole)
      continue
    }
    const items = isBatchTag(entry.tag) && isRecord(entry.value) ? entry.value.items : undefined
    if (!Array.isArray(items) || items.length === 0 || !isRecord(entry.value)) {
      if (whole.length <= room) {
        flush()
        add(whole)
      } else dropped.push({ index, reason: "too_large", items: 0 })
      continue
    }
    // A batch: pieces of `[tag,{"items":[...]<other fields>}]`.
    let others = ""
    for (const [name, value] of Object.entries(entry.value)) {
      if (name !== "items")
        others += `,${asciiJson(JSON.stringify(name))}:${asciiJson(JSON.stringify(value))}`
    }
    const head = `[${entry.tag},{"items":[`
    const tail = `]${others}}]`
    const fixed = head.length + tail.length
    if (fixed > room) {
      // Not splittable under this limit (its other fields alone are too large).
      if (whole.length <= room) {
        flush()
        add(whole)
      } else dropped.push({ index, reason: "too_large", items: 0 })
      continue
    }
    let piece: Array<string> = []
    let pieceLength = fixed
    let tooLarge = 0
    const closePiece = () => {
      if (piece.length === 0) return
      add(head + piece.join(",") + tail)
      piece = []
      pieceLength = fixed
    }
    for (const item of items) {
      const text = asciiJson(JSON.stringify(item) ?? "null")
      if (fixed + text.length > room) {
        tooLarge++
        continue
      }
      const grown = piece.length === 0 ? pieceLength + text.length : pieceLength + 1 + text.length
      if (grown > left()) {
        closePiece()
        flush()
        piece.push(text)
        pieceLength = fixed + text.length
        continue
      }
      piece.push(text)
      pieceLength = grown
    }
    closePiece()
    if (tooLarge > 0) dropped.push({ index, reason: "too_large", items: tooLarge })
  }
  flush()
  return { groups, frames: count, dropped }
}

// ---------------------------------------------------------------------------------------------
// sealing
// ---------------------------------------------------------------------------------------------

/**
 * One process's sending side on one channel: its id, boot epoch, key, the backend it sends from and its
 * clock (see {@link bind}), and the sequence number of its last notification (1 is the first of an
 * epoch; the sequence runs on across connections).
 */
export class Sender {
  seq = 0
  /** The backend that carries this sender's notifications (`pg_backend_pid()`); 0 before {@link bind}. */
  pid = 0
  private head: string
  private readonly keyId: string
  private readonly key: LaneMac | undefined
  /** Milliseconds to add to `Date.now()` for the database's time. */
  private clockOffset = 0
  /** Bytes of an envelope with an empty frame list and the widest pid, time and sequence number. */
  readonly overhead: number
  /** How each of our envelopes begins, up to its MAC; where its body begins; how the body begins. */
  private readonly sealHead: string
  private readonly bodyAt: number
  private readonly ownBody: string

  constructor(
    readonly serverId: string,
    readonly epoch: string,
    readonly channel: string,
    auth: Auth
  ) {
    this.head = sessionPrefix({ serverId, epoch }, 0)
    if (auth === "open") {
      this.keyId = NO_FIELD
      this.key = undefined
    } else {
      const prepared = prepare(auth, channel)
      this.keyId = prepared.primaryId
      this.key = prepared.primary
    }
    const macLength = this.key === undefined ? NO_FIELD.length : 64
    this.sealHead = `${VERSION}.${this.keyId}.`
    this.bodyAt = this.sealHead.length + macLength + 1
    this.ownBody = ownPrefix({ serverId, epoch })
    this.overhead =
      VERSION.length +
      1 +
      this.keyId.length +
      1 +
      macLength +
      1 +
      ownPrefix({ serverId, epoch }).length +
      MAX_PID_DIGITS +
      ',"t":'.length +
      MAX_SEQ_DIGITS +
      ',"q":'.length +
      MAX_SEQ_DIGITS +
      ',"f":[]}'.length
  }

  /**
   * The connection this sender's notifications go out on now: its backend pid and the database clock's
   * offset from ours (`Date.now() + clockOffset` is the database's time). Called for every connection,
   * and again whenever the offset is measured anew.
   */
  bind(pid: number, clockOffset: number): void {
    if (pid !== this.pid) this.head = sessionPrefix({ serverId: this.serverId, epoch: this.epoch }, pid)
    this.pid = pid
    this.clockOffset = clockOffset
  }

  /**
   * Whether `payload`, come from our own backend, is what `open` calls `own`: one of our envelopes, come
   * back to us. Every notification we send comes back so; this answers without parsing the header.
   */
  isEcho(payload: string): boolean {
    return (
      payload.length <= MAX_OPEN_LENGTH &&
      payload.startsWith(this.sealHead) &&
      payload.indexOf(".", this.sealHead.length) === this.bodyAt - 1 &&
      payload.startsWith(this.ownBody, this.bodyAt)
    )
  }

  /** The envelope of one group from {@link pack}, with the next sequence number. */
  envelope(group: string): string {
    this.seq++
    const time = Math.max(0, Math.round(Date.now() + this.clockOffset))
    const body = `${this.head}${time},"q":${this.seq},"f":[${group}]}`
    const mac = this.key === undefined ? NO_FIELD : this.key.of(body).toString("hex")
    return `${VERSION}.${this.keyId}.${mac}.${body}`
  }
}

/** The notifications for the frames of one tick. */
export interface Sealed {
  readonly payloads: ReadonlyArray<string>
  readonly frames: number
  readonly dropped: ReadonlyArray<Dropped>
}

/** Packs `frames` and seals each group: every payload is at most `limit` bytes (ASCII). */
export const seal = (
  sender: Sender,
  frames: ReadonlyArray<Uint8Array>,
  limit: number = DEFAULT_PAYLOAD_LIMIT
): Sealed => {
  const packed = pack(frames, limit - sender.overhead)
  trace.tracer?.stamp("packed")
  return {
    payloads: packed.groups.map((group) => sender.envelope(group)),
    frames: packed.frames,
    dropped: packed.dropped
  }
}

// ---------------------------------------------------------------------------------------------
// receiving
// ---------------------------------------------------------------------------------------------

/**
 * Why `open` refused a notification. `own` is not an error: our own notification, come back to us.
 *
 * - `malformed`: not the format; `unknown_key`, `bad_mac`, `unauthenticated`: the MAC (a key we do not
 *   hold, one that does not verify, none while keys are installed);
 * - `own_server_id`: it verifies and carries this node's server id with another boot epoch: our own
 *   previous boot replayed, or another process configured with our id;
 * - `old_epoch`, `replayed`: an epoch older than the newest seen from its sender, or a sequence number
 *   not above the highest seen in its epoch (a recording of ours of this boot is `replayed` too);
 * - `wrong_backend`: sent from another backend than the one it names: a recording sent again;
 * - `stale`: sealed before this connection began to LISTEN, so not a live delivery.
 */
export const refusalReasons: ReadonlyArray<RefusalReason> = [...EnvelopeRefusal.literals, "own"]

export type RefusalReason = EnvelopeRefusal | "own"

/** One frame of an accepted notification: its tag and parsed payload (`null` for an empty one). */
export interface ReceivedFrame {
  readonly tag: number
  readonly json: unknown
}

export interface Opened {
  readonly from: string
  readonly epoch: string
  readonly seq: number
  readonly frames: ReadonlyArray<ReceivedFrame>
  /** The key that verified it; `undefined` in open mode. */
  readonly keyId: string | undefined
}

/** Who we are, to recognise our own notifications. */
export interface Self {
  readonly serverId: string
  readonly epoch: string
}

/**
 * What PostgreSQL says of a notification and of the connection it reached: the backend that sent it
 * (the notification's process id), our own backend, and the database time at which our connection
 * began to LISTEN.
 */
export interface Receipt {
  readonly processId: number
  readonly ownPid: number
  readonly listenedAt: number
}

/** How the body of every notification `self` seals begins: `{"s":<id>,"e":"<epoch>","p":`. */
export const ownPrefix = (self: Self): string =>
  `{"s":${asciiJson(JSON.stringify(self.serverId))},"e":"${self.epoch}","p":`

/** How the body of every notification `self` seals from backend `pid` begins, up to its time. */
const sessionPrefix = (self: Self, pid: number): string => `${ownPrefix(self)}${pid},"t":`

/**
 * The newest epoch and the highest sequence number accepted from each sender, for at most
 * {@link MAX_SENDERS} senders (the Map's order is the order of last acceptance, so the first is the
 * longest silent). Changed only by accepted notifications, after their MAC verified.
 */
export class ReplayState {
  private readonly senders = new Map<string, { readonly epoch: string; readonly seq: number }>()

  constructor(readonly maxSenders: number = MAX_SENDERS) {}

  get size(): number {
    return this.senders.size
  }

  /** The refusal for `(from, epoch, seq)`, or `undefined` when it is new. */
  check(from: string, epoch: string, seq: number): "old_epoch" | "replayed" | undefined {
    const seen = this.senders.get(from)
    if (seen === undefined) return undefined
    if (epoch < seen.epoch) return "old_epoch"
    if (epoch === seen.epoch && seq <= seen.seq) return "replayed"
    return undefined
  }

  accept(from: string, epoch: string, seq: number): void {
    this.senders.delete(from)
    this.senders.set(from, { epoch, seq })
    if (this.senders.size > this.maxSenders) {
      const oldest = this.senders.keys().next()
      if (oldest.done !== true) this.senders.delete(oldest.value)
    }
  }

  /** What is remembered of `from` (tests and diagnostics). */
  get(from: string): { readonly epoch: string; readonly seq: number } | undefined {
    return this.senders.get(from)
  }
}

interface Body {
  readonly from: string
  readonly epoch: string
  readonly pid: number
  readonly time: number
  readonly seq: number
  readonly frames: ReadonlyArray<ReceivedFrame>
}

const isCount = (u: unknown): u is number => typeof u === "number" && Number.isSafeInteger(u) && u >= 0

/** The body's fields, checked by hand: anything not of the format is `undefined`. */
const parseBody = (text: string): Body | undefined => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    return undefined
  }
  if (!isRecord(json)) return undefined
  const from = Names.serverId(json.s)
  const epoch = json.e
  const pid = json.p
  const time = json.t
  const seq = json.q
  const list = json.f
  if (from === undefined || typeof epoch !== "string" || !EPOCH.test(epoch)) return undefined
  if (!isCount(pid) || pid > 0xffffffff || !isCount(time)) return undefined
  if (!isCount(seq) || seq < 1 || !Array.isArray(list)) return undefined
  const frames: Array<ReceivedFrame> = []
  for (const item of list) {
    if (!Array.isArray(item) || item.length !== 2) return undefined
    const tag: unknown = item[0]
    if (typeof tag !== "number" || !Number.isInteger(tag) || tag < 0 || tag > 255) return undefined
    frames.push({ tag, json: item[1] })
  }
  return { from, epoch, pid, time, seq, frames }
}

/**
 * Checks a notification and returns its frames, or why it was refused (see {@link refusalReasons}), in
 * this order: the format, the MAC (compared in constant time), our own server id, the sender's epoch
 * and sequence, the backend, the time. Only a notification from our own backend that begins as ours do
 * is `own` without its MAC being checked: nobody else can send from our backend. A newer epoch resets
 * the sender's sequence; the replay state changes only when a notification is accepted. Never throws,
 * whatever the input.
 */
export const open = (
  payload: string | undefined,
  channel: string,
  auth: Auth,
  self: Self,
  state: ReplayState,
  receipt: Receipt,
  own: string = ownPrefix(self)
): Result.Result<Opened, RefusalReason> => {
  try {
    if (typeof payload !== "string" || payload.length > MAX_OPEN_LENGTH) return Result.fail("malformed")
    if (!payload.startsWith(`${VERSION}.`)) return Result.fail("malformed")
    const keyEnd = payload.indexOf(".", VERSION.length + 1)
    const macEnd = keyEnd < 0 ? -1 : payload.indexOf(".", keyEnd + 1)
    if (macEnd < 0) return Result.fail("malformed")
    const keyId = payload.slice(VERSION.length + 1, keyEnd)
    const mac = payload.slice(keyEnd + 1, macEnd)
    const body = payload.slice(macEnd + 1)
    if (receipt.processId === receipt.ownPid && body.startsWith(own)) return Result.fail("own")
    const unsigned = keyId === NO_FIELD && mac === NO_FIELD
    if (!unsigned && (!KEY_ID.test(keyId) || keyId === NO_FIELD || !MAC_HEX.test(mac))) {
      return Result.fail("malformed")
    }
    let verifiedBy: string | undefined
    if (auth !== "open") {
      if (unsigned) return Result.fail("unauthenticated")
      const laneMac = prepare(auth, channel).byId.get(keyId)
      if (laneMac === undefined) return Result.fail("unknown_key")
      if (!timingSafeEqual(laneMac.of(body), Buffer.from(mac, "hex"))) {
        return Result.fail("bad_mac")
      }
      verifiedBy = keyId
    }
    trace.tracer?.stamp("verified")
    const parsed = parseBody(body)
    if (parsed === undefined) return Result.fail("malformed")
    // Ours, yet not from our backend: a recording of this boot, or another boot (or process) of our id.
    if (parsed.from === self.serverId) {
      return Result.fail(parsed.epoch === self.epoch ? "replayed" : "own_server_id")
    }
    const replay = state.check(parsed.from, parsed.epoch, parsed.seq)
    if (replay !== undefined) return Result.fail(replay)
    if (parsed.pid !== receipt.processId) return Result.fail("wrong_backend")
    if (parsed.time < receipt.listenedAt - SEAL_TOLERANCE_MS) return Result.fail("stale")
    state.accept(parsed.from, parsed.epoch, parsed.seq)
    trace.tracer?.stamp("checked")
    return Result.succeed({
      from: parsed.from,
      epoch: parsed.epoch,
      seq: parsed.seq,
      frames: parsed.frames,
      keyId: verifiedBy
    })
  } catch {
    // Total by construction; this is the belt to those braces (a hostile input must never escape).
    return Result.fail("malformed")
  }
}

// ---------------------------------------------------------------------------------------------
// probes
// ---------------------------------------------------------------------------------------------

/** The payload of a self-probe carrying `nonce` (32 lowercase hex). */
export const probe = (nonce: string): string => `${PROBE_PREFIX}${nonce}`

/** The nonce of a probe payload, or `undefined` when `payload` is not a probe. */
export const probeNonce = (payload: string | undefined): string | undefined => {
  if (payload === undefined || payload.length !== PROBE_PREFIX.length + 32) return undefined
  if (!payload.startsWith(PROBE_PREFIX)) return undefined
  const nonce = payload.slice(PROBE_PREFIX.length)
  return NONCE.test(nonce) ? nonce : undefined
}
