/**
 * What every `queen-mesh` subcommand shares: stdout for data only, bounded so that a slow reader costs
 * dropped lines rather than memory; failures that end the process with one readable line and a chosen
 * exit code instead of a stack trace.
 *
 * @since 0.1.0
 */
import { type ConfigError, Data, Effect } from "effect"

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

/**
 * Writes lines to a stream without ever holding more than `maxPending` bytes for it: a line that would
 * go over is dropped and counted (the mesh's events are hints, and a stalled reader must not grow the
 * node's memory). A stream error (EPIPE, ENOBUFS, anything) stops the writing instead of crashing the
 * process; later lines are counted as dropped.
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

  /** Whether a stream error stopped the writing. */
  get isClosed(): boolean {
    return this.closed
  }

  /** Lines gathered this turn, written together when it ends (one write per turn, not per line). */
  private batch: Array<string> = []
  private batchBytes = 0

  /** Writes `line` and a newline; false when it was dropped. */
  writeLine(line: string): boolean {
    const size = line.length + 1
    if (this.closed || this.stream.writableLength + this.batchBytes + size > this.options.maxPending) {
      this.drop()
      return false
    }
    if (this.batch.length === 0) process.nextTick(() => this.flush())
    this.batch.push(line)
    this.batchBytes += size
    return true
  }

  /** Writes what this turn gathered now (it happens by itself when the turn ends). */
  flush(): void {
    const lines = this.batch
    this.batch = []
    this.batchBytes = 0
    if (this.closed || lines.length === 0) return
    try {
      this.stream.write(`${lines.join("\n")}\n`)
    } catch (error) {
      this.close(error instanceof Error ? error : new Error(String(error)))
    }
  }

  private close(error: Error): void {
    if (this.closed) return
    this.closed = true
    this.options.onClosed(error)
  }

  private drop(): void {
    this.total++
    // After a close there is nobody to be slow: the close was reported once.
    if (this.closed) return
    this.unreported++
    this.report()
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
 * Lines dropped from stdout so far because the reader was slow or gone (the stats body's
 * `stdout_events_dropped`).
 *
 * @since 0.1.0
 * @category output
 */
export const stdoutDropped = (): number => stdout.dropped

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
export const describeConfigError = (error: ConfigError.ConfigError): string => {
  const reasons: Array<string> = []
  const walk = (e: ConfigError.ConfigError): void => {
    switch (e._op) {
      case "And":
      case "Or":
        walk(e.left)
        walk(e.right)
        return
      default: {
        const name = e.path.join(".")
        // MeshConfig's messages already start with the variable's name; others do not.
        reasons.push(name === "" || e.message.startsWith(name) ? e.message : `${name}: ${e.message}`)
      }
    }
  }
  walk(error)
  return [...new Set(reasons)].join("; ")
}

/**
 * Turns a configuration error into the CLI's one-line usage failure.
 *
 * @since 0.1.0
 * @category errors
 */
export const configFailure = (error: ConfigError.ConfigError): CliFailure =>
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
