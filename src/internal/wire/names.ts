/**
 * The naming rules of the wire, each with one home (spec "The frame set"): what a queue name, a
 * partition, a tenant and a server id may be. The payload Schemas, the quick payload checks, the `Mesh`
 * API's validation and the CLI's stdin commands all use these, so they cannot drift apart.
 *
 * Bounds are by UTF-8 bytes: a hint names a queue, it never needs kilobytes, and a peer that sends an
 * 8 MB tenant must not make every host service hold 8 MB (hostile-input hardening).
 *
 * @internal
 */
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"

/**
 * The longest queue name, partition, tenant or consumer group accepted, in characters (code points):
 * upstream Queen stores them as `VARCHAR(255)`, so any script is fine up to 255 characters.
 */
export const MAX_NAME_CHARS = 255

/** The most UTF-8 bytes a name can take: four per code point. */
export const MAX_NAME_BYTES = MAX_NAME_CHARS * 4

/** The longest server id accepted in a HELLO or a heartbeat, in UTF-8 bytes. */
export const MAX_SERVER_ID_BYTES = 256

/**
 * Upstream Queen's default tenant. Upstream always sends a tenant, and a queue of the default tenant
 * goes out with this one; the shipped host services file the default tenant under it.
 */
export const DEFAULT_TENANT = "00000000-0000-0000-0000-000000000001"

/** Whether `text` is at most {@link MAX_NAME_CHARS} code points, counted only when it could be more. */
export const fitsName = (text: string): boolean => {
  if (text.length <= MAX_NAME_CHARS) return true
  if (text.length > 2 * MAX_NAME_CHARS) return false
  let points = 0
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i)
    // A high surrogate followed by a low one is one code point.
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1)
      if (next >= 0xdc00 && next <= 0xdfff) i++
    }
    if (++points > MAX_NAME_CHARS) return false
  }
  return true
}

/** Whether a string fits `max` UTF-8 bytes, without encoding it when it obviously does. */
export const fitsBytes = (text: string, max: number): boolean =>
  text.length * 3 <= max || (text.length <= max && Buffer.byteLength(text, "utf8") <= max)

/**
 * How `text` reads as a UUID in the 8-4-4-4-12 hex form: `0` not one, `1` one in lowercase, `2` one
 * with an uppercase digit. A loop over the char codes, not a regular expression: every wake frame's
 * tenant goes through it on receive, and the expression cost several times the loop there.
 */
const uuidShape = (text: string): 0 | 1 | 2 => {
  if (text.length !== 36) return 0
  let upper = false
  for (let i = 0; i < 36; i++) {
    const c = text.charCodeAt(i)
    if (i === 8 || i === 13 || i === 18 || i === 23) {
      if (c !== 45) return 0
    } else if ((c >= 48 && c <= 57) || (c >= 97 && c <= 102)) {
    } else if (c >= 65 && c <= 70) {
      upper = true
    } else {
      return 0
    }
  }
  return upper ? 2 : 1
}

/**
 * Whether `text` is a UUID in the 8-4-4-4-12 hex form, in any case. The last answer is kept: the
 * receive path asks again for the tenant it has just read.
 */
export const isUuid = (text: string): boolean => {
  if (text === lastUuidText) return lastUuidAnswer
  const answer = uuidShape(text) !== 0
  lastUuidText = text
  lastUuidAnswer = answer
  return answer
}

let lastUuidText: string | undefined
let lastUuidAnswer = false

const NONE: Option.Option<string> = Option.none()

/** The last tenant {@link tenant} read and its value: a one-entry memo of a pure function. */
let lastTenant: string | undefined
let lastTenantOption: Option.Option<string> = NONE

/**
 * The tenant rule. Absent, `null` and `""` are **absent** (`Option.none()`): a peer that predates tenant
 * scoping, which the receiver fans out to every tenant; never the default tenant. A UUID is compared
 * case-insensitively, as upstream does, so it is kept lowercased. Any other string is kept as given.
 * Returns `undefined` for anything else (a non-string, or longer than {@link MAX_NAME_CHARS}).
 */
export const tenant = (u: unknown): Option.Option<string> | undefined => {
  if (u === undefined || u === null || u === "") return NONE
  if (typeof u !== "string") return undefined
  // Most frames name the tenant the previous one named: its `Option` is shared (it is immutable).
  if (u === lastTenant) return lastTenantOption
  if (!fitsName(u)) return undefined
  const shape = uuidShape(u)
  const read = Option.some(shape === 2 ? u.toLowerCase() : u)
  lastTenant = u
  lastTenantOption = read
  return read
}

/**
 * The tenant rule of the wire, upstream's reading: what {@link tenant} refuses (a non-string, or longer
 * than {@link MAX_NAME_CHARS}) is **absent**, not an error, so the hint still reaches every tenant
 * holding the queue name (more wakes than needed, never fewer).
 */
export const wireTenant = (u: unknown): Option.Option<string> => tenant(u) ?? NONE

/** The tenant rule for values already typed (API input): `undefined` when not acceptable. */
export const tenantInput = (
  given: Option.Option<string> | string | null | undefined
): Option.Option<string> | undefined => {
  if (given === undefined || given === null || typeof given === "string") return tenant(given)
  return Option.isSome(given) ? tenant(given.value) : NONE
}

/** The queue-name rule: a non-empty string of at most {@link MAX_NAME_CHARS}; `undefined` otherwise. */
export const queueName = (u: unknown): string | undefined =>
  typeof u === "string" && u !== "" && fitsName(u) ? u : undefined

/**
 * The partition rule: a string of at most {@link MAX_NAME_CHARS}. A missing (or `null`) partition is
 * `""`, as upstream takes it: a wake without a partition hint still wakes.
 */
export const partition = (u: unknown): string | undefined => {
  if (u === undefined || u === null) return ""
  return typeof u === "string" && fitsName(u) ? u : undefined
}

/** The server-id rule: a non-empty string of at most {@link MAX_SERVER_ID_BYTES}. */
export const serverId = (u: unknown): string | undefined =>
  typeof u === "string" && u !== "" && fitsBytes(u, MAX_SERVER_ID_BYTES) ? u : undefined

/** Why a name was refused, in words for an error message. */
export const describeName = (
  what: "queue" | "partition" | "tenant" | "group" | "server_id",
  u: unknown
): string => {
  if (typeof u !== "string") return `${what} must be a string`
  if (u === "" && (what === "queue" || what === "server_id")) return `${what} must be a non-empty string`
  return what === "server_id"
    ? `${what} is longer than ${MAX_SERVER_ID_BYTES} bytes`
    : `${what} is longer than ${MAX_NAME_CHARS} characters`
}

/** The longest cluster label (`QUEEN_MESH_CLUSTER_LABEL`), in UTF-8 bytes. */
export const MAX_LABEL_BYTES = 256

/** The longest detail built from wire data (an error's excerpt of it), in characters. */
export const MAX_DETAIL_LENGTH = 200

/** Cuts a detail built from wire data to {@link MAX_DETAIL_LENGTH} characters. */
export const excerpt = (text: string): string =>
  text.length <= MAX_DETAIL_LENGTH ? text : `${text.slice(0, MAX_DETAIL_LENGTH)}... (${text.length} chars)`

const HEX_NONCE = /^[0-9a-f]{32}$/
/** In `u` mode a paired surrogate is one code point, so this matches lone surrogates only. */
const LONE_SURROGATE = /\p{Cs}/u

/**
 * What is wrong with a text field that goes into a MAC, if anything: over `maxBytes`, or a lone
 * surrogate (UTF-8 cannot encode one, it becomes U+FFFD, which would make the MAC input ambiguous).
 */
export const textProblem = (what: string, text: string, maxBytes: number): string | undefined => {
  if (!fitsBytes(text, maxBytes)) return `${what} is longer than ${maxBytes} bytes`
  if (LONE_SURROGATE.test(text)) return `${what} holds a lone surrogate`
  return undefined
}

/** A server id in a MAC: non-empty, at most {@link MAX_SERVER_ID_BYTES}, no lone surrogate. */
export const idProblem = (what: string, text: string): string | undefined =>
  text === "" ? `${what} is empty` : textProblem(what, text, MAX_SERVER_ID_BYTES)

/** A nonce: 32 lowercase hex characters (128 random bits). */
export const nonceProblem = (what: string, text: string): string | undefined =>
  HEX_NONCE.test(text) ? undefined : `${what} is not 32 lowercase hex characters`

/**
 * The consumer-group rule of a hot-list item: present and non-empty, it scopes the mark to that
 * group's ring; absent, empty, not a string or over-long, the mark is for every ring of the queue (the
 * safe over-mark), as upstream reads it.
 */
export const group = (u: unknown): Option.Option<string> =>
  typeof u === "string" && u !== "" && fitsName(u) ? Option.some(u) : NONE

/** The tenant rule of upstream: a UUID (lowercased), anything else absent. */
export const uuidTenant = (tenant: Option.Option<string>): Option.Option<string> =>
  Option.isSome(tenant) && !isUuid(tenant.value) ? NONE : tenant

/**
 * Which tenants a caller may name: `any` string, or (`uuid`, upstream's rule) a UUID only, since upstream
 * reads any other tenant as absent and wakes every tenant holding the queue name.
 */
export const TenantRule = Schema.Literals(["uuid", "any"])

export type TenantRule = typeof TenantRule.Type

/** `a, b or c`: a literal list as an error message names its choices. */
export const alternatives = (words: ReadonlyArray<string>): string =>
  words.length <= 1 ? (words[0] ?? "") : `${words.slice(0, -1).join(", ")} or ${words[words.length - 1]}`
