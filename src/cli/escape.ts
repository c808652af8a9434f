/**
 * Control characters out of everything the CLI prints. Peer-supplied strings (a server id in a HELLO,
 * a queue name in a frame) reach the logs, the stats table and stdout; a raw ESC or C1 byte there would
 * let a peer drive the operator's terminal, and a raw newline would forge a log line.
 *
 * @since 0.1.0
 */

/** C0 controls, DEL and C1 controls. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching them is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g

const hex2 = (code: number) => code.toString(16).padStart(2, "0")

const SHORT: Readonly<Record<string, string>> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" }

/**
 * `s` with every C0 control, DEL and C1 control written as an escape: `\n`, `\r`, `\t`, else `\xHH`
 * (ESC is `\x1b`). Backslashes are left alone: the result is for eyes, not for parsing back.
 *
 * @since 0.1.0
 * @category escaping
 */
export const escapeControl = (s: string): string =>
  s.replace(CONTROL, (c) => SHORT[c] ?? `\\x${hex2(c.charCodeAt(0))}`)

/** What `JSON.stringify` leaves raw: DEL and C1 (it escapes C0 itself). */
const JSON_RAW = /[\u007f-\u009f]/g

/**
 * `JSON.stringify(value)` with DEL and C1 controls also escaped (`\u009b`), so a JSON line is safe on a
 * terminal and still the same JSON.
 *
 * @since 0.1.0
 * @category escaping
 */
export const safeJson = (value: unknown): string =>
  (JSON.stringify(value) ?? "null").replace(JSON_RAW, (c) => `\\u00${hex2(c.charCodeAt(0))}`)

const JSON_RAW_TEST = /[\u007f-\u009f]/

/**
 * What `safeJsonString` must escape or leave to `JSON.stringify`: quotes, backslashes, controls, DEL,
 * C1, and any surrogate (`JSON.stringify` escapes a lone one).
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching them is the point
const NEEDS_ESCAPE = /["\\\u0000-\u001f\u007f-\u009f\ud800-\udfff]/

/**
 * `safeJson(s)` for a string, without the replace when there is nothing to replace (the common case,
 * on the path of every printed wake).
 *
 * @since 0.1.0
 * @category escaping
 */
export const safeJsonString = (s: string): string => {
  // Nothing to escape (the common case): the string between quotes, with no stringify at all.
  if (!NEEDS_ESCAPE.test(s)) return `"${s}"`
  const json = JSON.stringify(s)
  return JSON_RAW_TEST.test(json) ? json.replace(JSON_RAW, (c) => `\\u00${hex2(c.charCodeAt(0))}`) : json
}
