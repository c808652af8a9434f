/**
 * What every `queen-mesh` subcommand shares: stdout for data only, logs on stderr, and failures that
 * end the process with one readable line and a chosen exit code instead of a stack trace.
 *
 * @since 0.1.0
 */
import { type ConfigError, Data, Effect, Logger } from "effect"

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

/**
 * Writes one line to stdout. Synchronous on pipes and files, so lines never interleave.
 *
 * @since 0.1.0
 * @category output
 */
export const printLine = (line: string): Effect.Effect<void> =>
  Effect.sync(() => {
    process.stdout.write(`${line}\n`)
  })

/**
 * Writes text to stdout as is.
 *
 * @since 0.1.0
 * @category output
 */
export const print = (text: string): Effect.Effect<void> =>
  Effect.sync(() => {
    process.stdout.write(text)
  })

/**
 * Structured logs (logfmt) on stderr, so that stdout carries nothing but data.
 *
 * @since 0.1.0
 * @category logging
 */
export const stderrLogger: Logger.Logger<unknown, void> = Logger.make((options) => {
  process.stderr.write(`${Logger.logfmtLogger.log(options)}\n`)
})

/**
 * Replaces the default logger with {@link stderrLogger}.
 *
 * @since 0.1.0
 * @category logging
 */
export const loggerLayer = Logger.replace(Logger.defaultLogger, stderrLogger)

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
