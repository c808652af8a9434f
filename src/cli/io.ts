/**
 * What every `queen-mesh` subcommand shares: stdout for data only, bounded so that a slow reader costs
 * dropped lines rather than memory; failures that end the process with one readable line and a chosen
 * exit code instead of a stack trace.
 *
 * @since 0.1.0
 */
import type * as Config from "effect/Config"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as SchemaIssue from "effect/SchemaIssue"

/**
 * A failure the CLI reports as one line on stderr (none when `message` is empty, because it was already
 * printed) before exiting with `code`.
 *
 * @since 0.1.0
 * @category errors
 */
export class CliFailure extends Data.TaggedError("CliFailure")<{
  readonly code: number
  readonly message: string
}> {}

/**
 * Exit code of a configuration or usage error.
 *
 * @since 0.1.0
 * @category constants
 */
export const EXIT_USAGE = 2

/**
 * Exit code of a runtime failure (a port in use, an unreachable node).
 *
 * @since 0.1.0
 * @category constants
 */
export const EXIT_FAILURE = 1

// ---------------------------------------------------------------------------------------------
// bounded stdout
// ---------------------------------------------------------------------------------------------

/**
 * What the bounded writer needs of a stream: `process.stdout` is one, and so is a test double.
 *
 * @since 0.1.0
 * @category models
 */
export interface WritableLike {
  readonly write: (chunk: string) => boolean
  /** Bytes accepted but not yet handed to the OS. */
  readonly writableLength: number
  readonly on: (event: "error", listener: (error: Error) => void) => unknown
}

/**
 * @since 0.1.0
 * @category models
 */
export interface BoundedWriterOptions {
  /** Pending bytes beyond which a new line is dropped. */
  readonly maxPending: number
  /** Called with the lines dropped since the last call, at most once every `reportEvery` ms. */
  readonly onDropped: (dropped: number, total: number) => void
  /** Called once when the stream fails (EPIPE: the reader went away); nothing is written after. */
  readonly onClosed: (error: Error) => void
  readonly reportEvery?: number
  readonly now?: () => number
}

/**
 * The default pending-bytes cap of stdout (`QUEEN_MESH_STDOUT_BUFFER`).
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_MAX_PENDING = 4 * 1024 * 1024

/** Sources counted apart; past this many (server ids come from peers) they share one row. */
const MAX_SOURCES = 64

/**
 * Writes lines to a stream with a bounded budget of pending bytes (`maxPending`), shared fairly
 * between the lines' sources (the peer a wake came from; `""` for the node's own lines): once the
 * budget is spent, a source still under its even share of it gets its line in anyway (up to twice the
 * budget in all), so one flooding peer cannot crowd another's lines out. Any other line is dropped and
 * counted for its source: the mesh's events are hints, and a stalled reader must not grow the node's memory. A
 * stream error (EPIPE, ENOBUFS, anything) stops the writing instead of crashing the process; later
 * lines are counted as dropped.
 *
 * @since 0.1.0
 * @category output
 */
export class BoundedWriter {
  private total = 0
  private unreported = 0
  private lastReport = Number.NEGATIVE_INFINITY
  private timer: ReturnType<typeof setTimeout> | undefined
  private closed = false
  private readonly reportEvery: number
  private readonly now: () => number
  /** Bytes each source has pending: in this turn's batch, or written and not yet drained. */
  private readonly pending = new Map<string, number>()
  private readonly droppedBy = new Map<string, number>()
  /** What was handed to the stream, in order, by source: drained from the front as the stream drains. */
  private readonly written: Array<{ source: string; bytes: number }> = []
  private handed = 0
  private drained = 0

  constructor(
    private readonly stream: WritableLike,
    private options: BoundedWriterOptions
  ) {
    this.reportEvery = options.reportEvery ?? 10_000
    this.now = options.now ?? Date.now
    stream.on("error", (error) => this.close(error))
  }

  /** Replaces the callbacks and the cap (the node sets them once its logger and config are known). */
  configure(options: Partial<BoundedWriterOptions>): void {
    this.options = { ...this.options, ...options }
  }

  /** Lines dropped so far. */
  get dropped(): number {
    return this.total
  }

  /** Lines dropped so far, by source (at most 64 sources apart, the rest under `_other`). */
  get droppedBySource(): ReadonlyMap<string, number> {
    return this.droppedBy
  }

  /** Whether a stream error stopped the writing. */
  get isClosed(): boolean {
    return this.closed
  }

  /** Lines gathered this turn, written together when it ends (one write per turn, not per line). */
  private batch: Array<string> = []
  private batchBytes = 0
  /** The batch's bytes by source, as runs: consecutive lines of one source (the common case) are one run. */
  private runs: Array<{ readonly source: string; bytes: number }> = []

  /** The row a source is counted under in `rows` (at most `MAX_SOURCES` apart). */
  private static rowOf(rows: ReadonlyMap<string, number>, source: string): string {
    return rows.has(source) || rows.size < MAX_SOURCES ? source : "_other"
  }

  /** Moves what the stream has drained off the sources' pending bytes. */
  private settle(): void {
    let freed = this.handed - this.stream.writableLength - this.drained
    while (freed > 0 && this.written.length > 0) {
      const front = this.written[0]!
      const taken = Math.min(front.bytes, freed)
      front.bytes -= taken
      freed -= taken
      this.drained += taken
      const left = (this.pending.get(front.source) ?? taken) - taken
      if (left <= 0) this.pending.delete(front.source)
      else this.pending.set(front.source, left)
      if (front.bytes === 0) this.written.shift()
    }
  }

  /**
   * Whether `source` may have another line of `size` bytes once the budget is spent: while several
   * sources have lines pending, one still under its even share of the budget may.
   */
  private underShare(source: string, size: number): boolean {
    this.settle()
    const sources = new Set(this.pending.keys())
    let mine = this.pending.get(BoundedWriter.rowOf(this.pending, source)) ?? 0
    for (const run of this.runs) {
      sources.add(BoundedWriter.rowOf(this.pending, run.source))
      if (run.source === source) mine += run.bytes
    }
    sources.add(BoundedWriter.rowOf(this.pending, source))
    return sources.size > 1 && mine + size <= this.options.maxPending / sources.size
  }

  /** Writes `line` and a newline on behalf of `source`; false when it was dropped. */
  writeLine(line: string, source = ""): boolean {
    if (this.closed) return this.drop(source)
    const size = line.length + 1
    const all = this.stream.writableLength + this.batchBytes + size
    if (
      all > this.options.maxPending &&
      (all > 2 * this.options.maxPending || !this.underShare(source, size))
    ) {
      return this.drop(source)
    }
    if (this.batch.length === 0) process.nextTick(() => this.flush())
    this.batch.push(line)
    this.batchBytes += size
    const last = this.runs[this.runs.length - 1]
    if (last !== undefined && last.source === source) last.bytes += size
    else this.runs.push({ source, bytes: size })
    return true
  }

  /** Writes what this turn gathered now (it happens by itself when the turn ends). */
  flush(): void {
    const lines = this.batch
    const runs = this.runs
    this.batch = []
    this.runs = []
    this.batchBytes = 0
    if (this.closed || lines.length === 0) return
    for (const run of runs) {
      const row = BoundedWriter.rowOf(this.pending, run.source)
      this.written.push({ source: row, bytes: run.bytes })
      this.pending.set(row, (this.pending.get(row) ?? 0) + run.bytes)
      this.handed += run.bytes
    }
    try {
      this.stream.write(`${lines.join("\n")}\n`)
    } catch (error) {
      this.close(error instanceof Error ? error : new Error(String(error)))
    }
  }

  private close(error: Error): void {
    if (this.closed) return
    this.closed = true
    this.pending.clear()
    this.written.length = 0
    this.options.onClosed(error)
  }

  private drop(source: string): false {
    this.total++
    const row = BoundedWriter.rowOf(this.droppedBy, source)
    this.droppedBy.set(row, (this.droppedBy.get(row) ?? 0) + 1)
    // After a close there is nobody to be slow: the close was reported once.
    if (this.closed) return false
    this.unreported++
    this.report()
    return false
  }

  private report(): void {
    if (this.unreported === 0) return
    const wait = this.lastReport + this.reportEvery - this.now()
    if (wait <= 0) {
      this.lastReport = this.now()
      const count = this.unreported
      this.unreported = 0
      this.options.onDropped(count, this.total)
    } else if (this.timer === undefined) {
      // Drops that stop before the next report are still reported, once the period is over.
      this.timer = setTimeout(() => {
        this.timer = undefined
        this.report()
      }, wait)
      this.timer.unref?.()
    }
  }
}

const defaultOnDropped = (dropped: number) => {
  process.stderr.write(`queen-mesh: dropped ${dropped} stdout events: the reader is slow\n`)
}

/**
 * The process's stdout as a {@link BoundedWriter}. `node` replaces its callbacks with log lines.
 *
 * @since 0.1.0
 * @category output
 */
export const stdout = new BoundedWriter(process.stdout, {
  maxPending: DEFAULT_MAX_PENDING,
  onDropped: defaultOnDropped,
  onClosed: () => {}
})

/**
 * Writes one line to stdout through the bounded writer.
 *
 * @since 0.1.0
 * @category output
 */
export const printLine = (line: string): Effect.Effect<void> =>
  Effect.sync(() => {
    stdout.writeLine(line)
  })

/**
 * Writes text to stdout as is (the live views: a frame is one write, and a dropped frame is redrawn by
 * the next one).
 *
 * @since 0.1.0
 * @category output
 */
export const print = (text: string): Effect.Effect<void> =>
  Effect.sync(() => {
    if (stdout.isClosed) return
    try {
      process.stdout.write(text)
    } catch {
      // The error handler of the bounded writer has it.
    }
  })

/**
 * Whether to paint `stream`: a terminal, and no `NO_COLOR` (https://no-color.org).
 *
 * @since 0.1.0
 * @category output
 */
export const useColor = (stream: { readonly isTTY?: boolean }): boolean => {
  const noColor = process.env.NO_COLOR
  return stream.isTTY === true && (noColor === undefined || noColor === "")
}

/**
 * The terminal width of `stream`, or `fallback` when it is not a terminal or reports 0 columns.
 *
 * @since 0.1.0
 * @category output
 */
export const columnsOf = (stream: { readonly columns?: number | undefined }, fallback = 100): number => {
  const columns = stream.columns
  return columns === undefined || !Number.isFinite(columns) || columns <= 0 ? fallback : columns
}

// ---------------------------------------------------------------------------------------------
// configuration errors
// ---------------------------------------------------------------------------------------------

/**
 * One line naming every variable at fault, e.g. `QUEEN_MESH_PORT: expected a port number, got "abc"`.
 *
 * @since 0.1.0
 * @category errors
 */
export const describeConfigError = (error: Config.ConfigError): string => {
  const cause = error.cause
  if (cause._tag === "SourceError") return cause.message
  const reasons: Array<string> = []
  // Each issue of the schema's error with the path it was found at (effect 4's Config reads through a
  // Schema: what effect 3 listed as `And`/`Or` of path errors).
  for (const issue of SchemaIssue.makeFormatterStandardSchemaV1()(cause.issue).issues) {
    const name = (issue.path ?? []).map((key) => String(typeof key === "object" ? key.key : key)).join(".")
    // MeshConfig's messages already start with the variable's name; others do not.
    reasons.push(name === "" || issue.message.startsWith(name) ? issue.message : `${name}: ${issue.message}`)
  }
  return [...new Set(reasons)].join("; ")
}

/**
 * Turns a configuration error into the CLI's one-line usage failure.
 *
 * @since 0.1.0
 * @category errors
 */
export const configFailure = (error: Config.ConfigError): CliFailure =>
  new CliFailure({
    code: EXIT_USAGE,
    message: `queen-mesh: invalid environment: ${describeConfigError(error)}`
  })

/**
 * A usage failure: exit 2 with `queen-mesh: <message>`.
 *
 * @since 0.1.0
 * @category errors
 */
export const usageFailure = (message: string): CliFailure =>
  new CliFailure({ code: EXIT_USAGE, message: `queen-mesh: ${message}` })

/**
 * What `queen-mesh node` adds to the stats body: its stdout's dropped event lines, in all and by the
 * peer that sent them.
 *
 * @since 0.1.0
 * @category schemas
 */
export const StatsExtras = Schema.Struct({
  stdout_events_dropped: Schema.Number,
  stdout_events_dropped_by_source: Schema.Record(Schema.String, Schema.Number)
})
