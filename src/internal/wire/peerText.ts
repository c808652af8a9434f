/**
 * Peer-supplied strings on their way into logs: control characters escaped (a server id carrying ESC,
 * NUL, BEL or BS must not drive an operator's terminal) and the length bounded.
 *
 * @internal
 */
import { MAX_DETAIL_LENGTH } from "./names.js"

const isControl = (code: number): boolean => code < 0x20 || (code >= 0x7f && code <= 0x9f)

/** `text` with every C0/C1 control and DEL as `\xNN`, cut to `max` characters. */
export const printable = (text: string, max = MAX_DETAIL_LENGTH): string => {
  const cut = text.length > max ? `${text.slice(0, max)}...` : text
  let out = ""
  for (let i = 0; i < cut.length; i++) {
    const code = cut.charCodeAt(i)
    out += isControl(code) ? `\\x${code.toString(16).padStart(2, "0")}` : cut[i]
  }
  return out
}
