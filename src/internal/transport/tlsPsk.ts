/**
 * The TLS-PSK link keys (`TlsTransport`'s module comment gives the derivation): the identities a
 * dialer presents and a listener accepts, and the key each side derives for them, with a keyring's
 * `qmk1:<key id>:<server id>` identities naming the key.
 *
 * @internal
 */
import { hkdfSync } from "node:crypto"
import type * as Redacted from "effect/Redacted"
import * as Keyring from "../keyring.js"
import * as Names from "../wire/names.js"

/** The HKDF salt of the link key; the version suffix lets a later derivation coexist in an upgrade. */
export const PSK_SALT = "queen-mesh tls-psk v1"

/** The length of a link key in bytes (the output size of SHA-256). */
export const PSK_BYTES = 32

/** The TLS 1.3 suites offered and accepted: both SHA-256, which an external PSK needs on Node 20. */
export const CIPHERS = "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256"

/** The longest PSK identity, in UTF-8 bytes: Node's own limit, and the mesh's server-id limit. */
export const MAX_IDENTITY_BYTES = Names.MAX_SERVER_ID_BYTES

const PRINTABLE = /^[^\p{Cc}\p{Cs}]+$/u

/** The prefix of an identity that names its key: `qmk1:<16 hex key id>:<server id>`. */
const KEYED_IDENTITY = "qmk1:"
const KEYED = /^qmk1:([0-9a-f]{16}):(.+)$/s

/** 1 to `MAX_IDENTITY_BYTES` UTF-8 bytes, no control characters and no lone surrogates. */
export const isValidIdentity = (identity: string): boolean =>
  identity !== "" && Names.fitsBytes(identity, MAX_IDENTITY_BYTES) && PRINTABLE.test(identity)

/** HKDF-SHA256 of `secret` with `PSK_SALT`, the identity as info, `PSK_BYTES` long. */
export const derivePsk = (secret: string, identity: string): Buffer =>
  Buffer.from(hkdfSync("sha256", secret, PSK_SALT, identity, PSK_BYTES))

/** What a listener makes of an offered identity: the key to check the binder with, and who it names. */
export type Offered =
  | { readonly _tag: "Accepted"; readonly psk: Buffer; readonly serverId: string }
  | { readonly _tag: "Refused" }

const refused: Offered = { _tag: "Refused" }

/** A node's keys: the identity and key it dials with, and the keys it accepts identities under. */
export class PskKeys {
  /** The identity this node presents when it dials. */
  readonly identity: string
  /** The key of that identity. */
  readonly ownKey: Buffer
  private readonly ring: Keyring.Keyring

  constructor(secret: string, accepted: ReadonlyArray<Redacted.Redacted<string> | string>, serverId: string) {
    const keys = Keyring.fromSecrets(secret, accepted)
    this.ring = keys === "open" ? { primary: Keyring.key(secret), accepted: [] } : keys
    // With a keyring the identity names the key, when it still fits; a lone key keeps the bare id.
    const named = `${KEYED_IDENTITY}${this.ring.primary.id}:${serverId}`
    this.identity = this.ring.accepted.length > 0 && isValidIdentity(named) ? named : serverId
    this.ownKey = derivePsk(secret, this.identity)
  }

  /**
   * The key of an offered identity: a bare server id under the primary, a `qmk1:` one under the key it
   * names if this node holds it. Anything else is refused before a key is derived.
   */
  offered(identity: string): Offered {
    if (!isValidIdentity(identity)) return refused
    const match = KEYED.exec(identity)
    if (match === null)
      return { _tag: "Accepted", psk: derivePsk(this.ring.primary.secret, identity), serverId: identity }
    const key = Keyring.byId(this.ring, match[1]!)
    if (key === undefined) return refused
    return { _tag: "Accepted", psk: derivePsk(key.secret, identity), serverId: match[2]! }
  }
}
