/**
 * Splits a byte stream into lines of at most `maxBytes`, keeping the partial line between chunks (a
 * small state machine, as nats.js `parser.ts` does): a chunk may end anywhere, even inside a UTF-8
 * sequence. A longer line is refused once and skipped up to its newline, never buffered without bound.
 *
 * @since 0.1.0
 */

/**
 * What a chunk yielded: a complete line (without its `\n` or `\r\n`), or the report of one that was too
 * long (its bytes are discarded).
 *
 * @since 0.1.0
 * @category models
 */
export type Piece =
  | { readonly _tag: "Line"; readonly text: string }
  | { readonly _tag: "TooLong"; readonly maxBytes: number }

/**
 * The default limit of one stdin command line: 1 MiB.
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_LINE_BYTES = 1024 * 1024

const NEWLINE = 0x0a

/**
 * @since 0.1.0
 * @category splitting
 */
export class LineSplitter {
  private parts: Array<Uint8Array> = []
  private pending = 0
  /** Inside a line already reported too long: skip to its newline. */
  private skipping = false
  private readonly decoder = new TextDecoder("utf-8")

  constructor(private readonly maxBytes: number = MAX_LINE_BYTES) {}

  /** The pieces completed by `chunk`. */
  push(chunk: Uint8Array): Array<Piece> {
    const out: Array<Piece> = []
    let start = 0
    while (start < chunk.length) {
      const end = chunk.indexOf(NEWLINE, start)
      const stop = end < 0 ? chunk.length : end
      if (!this.skipping) {
        const size = this.pending + (stop - start)
        if (size > this.maxBytes) {
          this.parts = []
          this.pending = 0
          this.skipping = true
          out.push({ _tag: "TooLong", maxBytes: this.maxBytes })
        } else if (stop > start) {
          // A copy: the stream may reuse the chunk's buffer.
          this.parts.push(chunk.slice(start, stop))
          this.pending = size
        }
      }
      if (end < 0) break
      if (this.skipping) this.skipping = false
      else out.push({ _tag: "Line", text: this.take() })
      start = end + 1
    }
    return out
  }

  /** The last line when the stream ends without a newline. */
  end(): Array<Piece> {
    if (this.skipping || this.pending === 0) {
      this.skipping = false
      return []
    }
    return [{ _tag: "Line", text: this.take() }]
  }

  private take(): string {
    const bytes = new Uint8Array(this.pending)
    let at = 0
    for (const part of this.parts) {
      bytes.set(part, at)
      at += part.length
    }
    this.parts = []
    this.pending = 0
    const text = this.decoder.decode(bytes)
    return text.endsWith("\r") ? text.slice(0, -1) : text
  }
}
