/**
 * Whether a host is an IP literal, as `net.isIP` answers it, without its cost on names.
 *
 * `net.isIP` tries IPv6 whenever a text is not IPv4, and Node's IPv6 pattern is large: its first use
 * compiles it, ~10 ms of a node's start (the default advertise host, a host name, is checked as the
 * configuration loads). Every IPv6 literal has a colon, so a text without one is IPv4 or nothing.
 *
 * @internal
 */
import { isIPv4, isIPv6 } from "node:net"

/** `4` or `6` for an IPv4 or IPv6 literal, else `0`: `net.isIP`'s answer. */
export const ipVersion = (text: string): 0 | 4 | 6 =>
  text.includes(":") ? (isIPv6(text) ? 6 : 0) : isIPv4(text) ? 4 : 0
