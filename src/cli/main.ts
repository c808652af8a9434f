/**
 * The `queen-mesh` command line: `node`, `stats`, `demo` and `help` (docs/cli.md). `main` parses the
 * arguments (`args.ts`), sets up the logs (`log.ts`), runs the subcommand, and owns what the process
 * looks like from outside: logs on stderr, one line and a chosen exit code on failure, exit 0 on
 * SIGINT/SIGTERM.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Args from "./args.js"
import { escapeControl } from "./escape.js"
import * as Help from "./help.js"
import { CliFailure, columnsOf, EXIT_FAILURE, print, printLine, usageFailure, useColor } from "./io.js"
import * as Log from "./log.js"
import { version } from "./version.js"

type Options = ReadonlyMap<string, string | true>

const has = (options: Options, name: string) => options.has(name)

const optionValue = (options: Options, name: string): Option.Option<string> => {
  const value = options.get(name)
  return typeof value === "string" ? Option.some(value) : Option.none()
}

const fromResult = <A>(result: Result.Result<A, string>): Effect.Effect<A, CliFailure> =>
  Result.match(result, { onFailure: (why) => Effect.fail(usageFailure(why)), onSuccess: Effect.succeed })

/** A number option in `(0, max]`; `integer` for counts. */
const numberOption = (
  options: Options,
  name: string,
  fallback: number,
  limits: { readonly max: number; readonly integer?: boolean }
): Result.Result<number, string> =>
  Option.match(optionValue(options, name), {
    onNone: () => Result.succeed(fallback),
    onSome: (raw) => {
      const value = Number(raw)
      const ok =
        raw.trim() !== "" &&
        Number.isFinite(value) &&
        value > 0 &&
        value <= limits.max &&
        (limits.integer !== true || Number.isInteger(value))
      return ok
        ? Result.succeed(value)
        : Result.fail(
            `--${name}: expected ${limits.integer === true ? "a whole number" : "a number"} above 0 and at most ${limits.max}, got ${JSON.stringify(raw)}`
          )
    }
  })

/** Flag first, then the variable, then the default. A bad value names where it came from. */
const logSettings = (
  options: Options,
  defaultLevel: LogLevel.LogLevel
): Result.Result<{ readonly format: Log.LogFormat; readonly level: LogLevel.LogLevel }, string> => {
  const pick = (flag: string, variable: string) =>
    Option.match(optionValue(options, flag), {
      onSome: (raw) => Option.some([`--${flag}`, raw] as const),
      onNone: () => {
        const raw = process.env[variable]
        return raw === undefined || raw === "" ? Option.none() : Option.some([variable, raw] as const)
      }
    })
  const format = Option.match(pick("log-format", "QUEEN_MESH_LOG_FORMAT"), {
    onNone: () => Result.succeed<Log.LogFormat>("logfmt"),
    onSome: ([source, raw]) => Log.parseFormat(source, raw)
  })
  const level = Option.match(pick("log-level", "QUEEN_MESH_LOG_LEVEL"), {
    onNone: () => Result.succeed(defaultLevel),
    onSome: ([source, raw]) => Log.parseLevel(source, raw)
  })
  return Result.all({ format, level })
}

/**
 * The subcommands' modules are loaded on demand: help and usage errors then answer without loading the
 * mesh, the HTTP client and the platform (about half the start-up time).
 */
const load = {
  node: () => Effect.promise(() => import("./node.js")),
  stats: () => Effect.promise(() => import("./stats.js")),
  demo: () => Effect.promise(() => import("./demo.js"))
}

const runCommand = (command: Args.Parsed & { readonly _tag: "Run" }): Effect.Effect<void, CliFailure> => {
  const { options, positionals } = command
  switch (command.command) {
    case "node":
      return Effect.flatMap(load.node(), (Node) =>
        Node.run({ quiet: has(options, "quiet"), ack: has(options, "ack") })
      )
    case "stats":
      return Effect.gen(function* () {
        const Stats = yield* load.stats()
        const watching = has(options, "watch")
        for (const name of ["interval", "count"]) {
          if (!watching && has(options, name)) return yield* usageFailure(`stats: --${name} needs --watch`)
        }
        const interval = yield* fromResult(numberOption(options, "interval", 2, { max: 86_400 }))
        const count = yield* fromResult(numberOption(options, "count", 0, { max: 1e9, integer: true }))
        return yield* Stats.run({
          url: positionals[0] ?? Stats.defaultUrl,
          json: has(options, "json"),
          watch: watching
            ? Option.some({
                interval,
                count: has(options, "count") ? Option.some(count) : Option.none(),
                json: has(options, "json")
              })
            : Option.none()
        })
      })
    case "demo":
      return Effect.flatMap(fromResult(numberOption(options, "duration", 10, { max: 3600 })), (duration) =>
        Effect.flatMap(load.demo(), (Demo) => {
          const lane = options.get("lane")
          return Demo.run({
            duration,
            plain: has(options, "plain"),
            keep: has(options, "keep"),
            ...(typeof lane === "string" ? { lane } : {})
          })
        })
      )
  }
}

/**
 * The demo's view reports what the logs would: plain mode (also the default off a terminal) logs only
 * warnings and above, and the live view only errors, which would otherwise garble it.
 */
const defaultLevel = (command: Args.Parsed & { readonly _tag: "Run" }): LogLevel.LogLevel =>
  command.command !== "demo"
    ? Log.defaultLevel
    : command.options.has("plain") || process.stdout.isTTY !== true
      ? "Warn"
      : "Error"

const help = (command: Args.Parsed & { readonly _tag: "Help" }) =>
  print(Help.render(command.command, { color: useColor(process.stdout), width: columnsOf(process.stdout) }))

/**
 * Runs the CLI on `argv` (as `process.argv`). Every failure is reported here, once, as a readable
 * line; what is left is a `CliFailure` carrying the exit code.
 *
 * @since 0.1.0
 * @category running
 */
export const main = (argv: ReadonlyArray<string>): Effect.Effect<void, CliFailure> =>
  Effect.suspend(() => {
    const parsed = Args.parse(argv.slice(2))
    if (Result.isFailure(parsed)) return Effect.fail(usageFailure(parsed.failure))
    const command = parsed.success
    switch (command._tag) {
      case "Help":
        return help(command)
      case "Version":
        return printLine(version)
      case "Run":
        return Result.match(logSettings(command.options, defaultLevel(command)), {
          onFailure: (why) => Effect.fail(usageFailure(why)),
          onSuccess: ({ format, level }) => runCommand(command).pipe(Effect.provide(Log.layer(format, level)))
        })
    }
  }).pipe(
    Effect.catchCause((cause) => {
      if (Cause.hasInterruptsOnly(cause)) return Effect.interrupt
      const failure = Cause.findErrorOption(cause)
      if (Option.isSome(failure)) {
        const error = failure.value
        return Effect.andThen(
          error.message === "" ? Effect.void : Console.error(escapeControl(error.message)),
          Effect.fail(error)
        )
      }
      const pretty = Cause.pretty(cause)
        .split("\n")
        .map((line) => escapeControl(line))
        .join("\n")
      return Effect.andThen(
        Console.error(`queen-mesh: unexpected failure\n${pretty}`),
        Effect.fail(new CliFailure({ code: EXIT_FAILURE, message: "" }))
      )
    })
  )

/**
 * The exit code of a finished `main`: 0 on success and on interruption (SIGINT/SIGTERM), the
 * `CliFailure`'s code otherwise.
 *
 * @since 0.1.0
 * @category running
 */
export const exitCode = (exit: Exit.Exit<unknown, unknown>): number => {
  if (Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause)) return 0
  const failure = Cause.findErrorOption(exit.cause)
  return failure._tag === "Some" && failure.value instanceof CliFailure ? failure.value.code : EXIT_FAILURE
}
