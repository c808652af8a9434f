/**
 * Frames counted by tag byte, on the hot paths: one plain array slot per tag, read as the tags that
 * have a count.
 *
 * @internal
 */
export class TagCounts {
  private readonly counts = new Float64Array(256)

  add(tag: number): void {
    this.counts[tag]!++
  }

  /** `[tag, count]` of every tag counted at least once, by tag. */
  entries(): ReadonlyArray<readonly [tag: number, count: number]> {
    const out: Array<readonly [number, number]> = []
    for (let tag = 0; tag < this.counts.length; tag++)
      if (this.counts[tag]! > 0) out.push([tag, this.counts[tag]!])
    return out
  }
}
