/**
 * The PostgreSQL lane's send buffer; see {@link SendBuffer}.
 *
 * @internal
 */
/**
 * Frames waiting for the sender, oldest first, each with the (monotonic) time it was offered. A plain
 * array taken whole, as `peerLink` does, because `offer` sits on the broadcast hot path. The sender is
 * called at the end of the tick of the first offer, so the frames of one tick go out together.
 *
 * The bounds (docs/postgres.md, "Bounded") are high-water marks over the frames waiting and those the
 * sender holds until they are sent: a frame is taken while fewer than `maxFrames` frames and fewer than
 * `maxBytes` bytes are buffered, so the buffer holds at most `maxBytes` plus one frame. So a frame larger
 * than `maxBytes` (a batch of the largest size, 16 MiB, against the default 4 MiB) goes out unless the
 * buffer is backed up; with the bound as a ceiling it went out only into an empty buffer, and a
 * heartbeat in flight at that moment dropped it.
 */
export class SendBuffer {
  private frames: Array<Uint8Array> = []
  private times: Array<number> = []
  private bytes = 0
  private heldFrames = 0
  private heldBytes = 0
  /** The current connection's sender, while there is one. */
  private sender: (() => void) | undefined = undefined
  private tickPending = false
  /** How many times frames were taken. */
  takes = 0

  constructor(
    readonly maxFrames: number,
    readonly maxBytes: number
  ) {}

  get length(): number {
    return this.frames.length + this.heldFrames
  }

  get size(): number {
    return this.bytes + this.heldBytes
  }

  /** False when full: `maxFrames` frames or `maxBytes` bytes are buffered already (see the class). */
  push(frame: Uint8Array, now: number): boolean {
    if (this.length >= this.maxFrames || this.size >= this.maxBytes) return false
    this.frames.push(frame)
    this.times.push(now)
    this.bytes += frame.length
    if (!this.tickPending) {
      this.tickPending = true
      process.nextTick(this.endOfTick)
    }
    return true
  }

  private readonly endOfTick = () => {
    this.tickPending = false
    this.sender?.()
  }

  /** Who is called at the end of every tick that offered frames; `undefined` while there is no connection. */
  attach(sender: (() => void) | undefined): void {
    this.sender = sender
  }

  /** Takes every waiting frame; they stay counted until {@link release}. */
  take(): ReadonlyArray<Uint8Array> {
    const taken = this.frames
    this.takes++
    this.heldFrames = taken.length
    this.heldBytes = this.bytes
    this.frames = []
    this.times = []
    this.bytes = 0
    return taken
  }

  /**
   * The frames of take number `take` (see {@link takes}) are sent or lost. A late answer for an older
   * take (a connection that ended while a send was in flight) leaves a newer take's count alone.
   */
  release(take: number = this.takes): void {
    if (take !== this.takes) return
    this.heldFrames = 0
    this.heldBytes = 0
  }

  /** Discards the frames offered before `cutoff`; returns how many. */
  dropOlderThan(cutoff: number): number {
    let count = 0
    while (count < this.times.length && this.times[count]! < cutoff) count++
    if (count === 0) return 0
    for (let i = 0; i < count; i++) this.bytes -= this.frames[i]!.length
    this.frames.splice(0, count)
    this.times.splice(0, count)
    return count
  }
}
