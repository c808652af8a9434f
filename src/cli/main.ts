/**
 * The `queen-mesh` command line as an `@effect/cli` Command: `node`, `stats` and `demo` (docs/cli.md).
 * `main` also owns what the process looks like from outside: logs on stderr, one line and a chosen
 * exit code on failure, exit 0 on SIGINT/SIGTERM.
 *
 * @since 0.1.0
 */
import { Args, Command, Options, ValidationError } from "@effect/cli"
import type { CommandExecutor, FileSystem, Path, Terminal } from "@effect/platform"
import { Cause, Console, Effect, Exit, Option } from "effect"
import * as Demo from "./demo.js"
import { CliFailure, EXIT_FAILURE, EXIT_USAGE, loggerLayer } from "./io.js"
import * as Node from "./node.js"
import * as Stats from "./stats.js"

const node = Command.make(
  "node",
  {
    quiet: Options.boolean("quiet").pipe(
      Options.withDescription("print only the listening, peer_up and peer_down lines")
    )
  },
  ({ quiet }) => Node.run({ quiet })
).pipe(
  Command.withDescription(
    "Run one mesh node configured by the QUEEN_* environment variables: JSON commands on stdin, JSON events on stdout."
  )
)

const stats = Command.make(
  "stats",
  {
    url: Args.text({ name: "url" }).pipe(
      Args.withDescription(`the node's HTTP address or stats URL (default ${Stats.defaultUrl})`),
      Args.withDefault(Stats.defaultUrl)
    ),
    json: Options.boolean("json").pipe(Options.withDescription("print the raw JSON body"))
  },
  ({ url, json }) => Stats.run({ url, json })
).pipe(Command.withDescription("Print a node's mesh statistics as a table."))

const demo = Command.make(
  "demo",
  {
    duration: Options.float("duration").pipe(
      Options.withDescription("seconds to run, start-up included"),
      Options.withDefault(10),
      Options.filterMap(
        (seconds) => (seconds > 0 && seconds <= 3600 ? Option.some(seconds) : Option.none()),
        "--duration must be between 0 and 3600 seconds"
      )
    ),
    plain: Options.boolean("plain").pipe(
      Options.withDescription("print plain periodic lines instead of a live view (the default off a TTY)")
    )
  },
  ({ duration, plain }) => Demo.run({ duration, plain })
).pipe(
  Command.withDescription("Three nodes in one process on loopback with a simulated broker and a live view.")
)

const root = Command.make("queen-mesh", {}, () =>
  Effect.fail(
    new CliFailure({
      code: EXIT_USAGE,
      message: "usage: queen-mesh <node|stats|demo> [options]   (--help for more)"
    })
  )
).pipe(
  Command.withDescription("The inter-replica mesh of the Queen broker."),
  Command.withSubcommands([node, stats, demo])
)

const cli = Command.run(root, { name: "queen-mesh", version: "0.1.0" })

/**
 * What the CLI needs from the platform (`NodeContext.layer`).
 *
 * @since 0.1.0
 * @category models
 */
export type Environment =
  | CommandExecutor.CommandExecutor
  | FileSystem.FileSystem
  | Path.Path
  | Terminal.Terminal

/**
 * Runs the CLI on `argv` (as `process.argv`). Every failure is reported here, once, as a readable
 * message; what is left is a `CliFailure` carrying the exit code.
 *
 * @since 0.1.0
 * @category running
 */
export const main = (argv: ReadonlyArray<string>): Effect.Effect<void, CliFailure, Environment> =>
  cli(argv).pipe(
    Effect.catchAllCause((cause) => {
      if (Cause.isInterruptedOnly(cause)) return Effect.interrupt
      const failure = Cause.failureOption(cause)
      if (failure._tag === "Some") {
        const error = failure.value
        if (error instanceof CliFailure) {
          return Effect.zipRight(
            error.message === "" ? Effect.void : Console.error(error.message),
            Effect.fail(error)
          )
        }
        // @effect/cli has already printed usage errors and help.
        if (ValidationError.isValidationError(error)) {
          return Effect.fail(new CliFailure({ code: EXIT_USAGE, message: "" }))
        }
      }
      return Effect.zipRight(
        Console.error(`queen-mesh: unexpected failure\n${Cause.pretty(cause)}`),
        Effect.fail(new CliFailure({ code: EXIT_FAILURE, message: "" }))
      )
    }),
    Effect.provide(loggerLayer)
  )

/**
 * The exit code of a finished `main`: 0 on success and on interruption (SIGINT/SIGTERM), the
 * `CliFailure`'s code otherwise.
 *
 * @since 0.1.0
 * @category running
 */
export const exitCode = (exit: Exit.Exit<unknown, unknown>): number => {
  if (Exit.isSuccess(exit) || Cause.isInterruptedOnly(exit.cause)) return 0
  const failure = Cause.failureOption(exit.cause)
  return failure._tag === "Some" && failure.value instanceof CliFailure ? failure.value.code : EXIT_FAILURE
}
