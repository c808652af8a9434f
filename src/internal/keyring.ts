/**
 * The mesh's keys (issue "membership, keys and health that change without a restart"): one primary key
 * this node proves when it dials and MACs what it sends on the lane, and older or newer keys it still
 * accepts, so a secret is rotated one restart at a time. Each key is named by an id derived from it
 * (never the key itself), which the challenge-response HELLO, the TLS-PSK identity and the lane's
 * envelope carry, and which the stats show per peer.
 *
 * @internal
 */
import { createHmac } from "node:crypto"
import * as Redacted from "effect/Redacted"

const KEY_ID_LABEL = "queen-mesh/key-id"

/** A shared secret and the id it goes by. */
export interface Key {
  readonly id: string
  readonly secret: string
}

/** The primary key (sent) and every key accepted besides it. */
export interface Keyring {
  readonly primary: Key
  readonly accepted: ReadonlyArray<Key>
}

/** Keys, or `"open"`: nothing is proven or checked. */
export type Auth = Keyring | "open"

/**
 * The id of a secret: lowercase hex of the first 8 bytes of `HMAC-SHA256(secret, "queen-mesh/key-id")`.
 * Derived from the key, so it names the key without revealing it.
 */
export const keyIdOf = (secret: string): string =>
  createHmac("sha256", Buffer.from(secret, "utf8")).update(KEY_ID_LABEL, "utf8").digest("hex").slice(0, 16)

/** A key named by its derived id. */
export const key = (secret: string): Key => ({ id: keyIdOf(secret), secret })

/** The keys of a configuration: open mode when the primary is empty. */
export const fromSecrets = (
  primary: Redacted.Redacted<string> | string,
  accepted: ReadonlyArray<Redacted.Redacted<string> | string> = []
): Auth => {
  const text = (k: Redacted.Redacted<string> | string) => (typeof k === "string" ? k : Redacted.value(k))
  const first = text(primary)
  if (first === "") return "open"
  return { primary: key(first), accepted: accepted.map((k) => key(text(k))) }
}

/** Every key, the primary first. */
export const all = (ring: Keyring): ReadonlyArray<Key> => [ring.primary, ...ring.accepted]

/** The installed key with this id, if any. */
export const byId = (ring: Keyring, id: string): Key | undefined =>
  ring.primary.id === id ? ring.primary : ring.accepted.find((k) => k.id === id)
