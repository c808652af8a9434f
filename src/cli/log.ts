/**
 * The CLI's logs: on stderr only (stdout is data), as logfmt, JSON or a pretty form, with a minimum
 * level, from `--log-format` / `--log-level` or `QUEEN_MESH_LOG_FORMAT` / `QUEEN_MESH_LOG_LEVEL` (the
 * flag wins). Every string that reaches a line (message, cause, annotation) has its control characters
 * escaped: server ids and queue names come from peers, and a raw ESC would reach the operator's terminal.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Inspectable from "effect/Inspectable"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import type * as LogLevel from "effect/LogLevel"
import * as References from "effect/References"
import * as Result from "effect/Result"
import { escapeControl, safeJson } from "./escape.js"
import { BoundedWriter, DEFAULT_MAX_PENDING, useColor } from "./io.js"

/**
 * @since 0.1.0
 * @category models
 */
export type LogFormat = "logfmt" | "json" | "pretty"

/**
 * @since 0.1.0
 * @category models
 */
export type LevelName = "debug" | "info" | "warning" | "error" | "none"

const FORMATS: ReadonlyArray<LogFormat> = ["logfmt", "json", "pretty"]

const LEVELS: Readonly<Record<LevelName, LogLevel.LogLevel>> = {
  debug: "Debug",
  info: "Info",
  warning: "Warn",
  error: "Error",
  none: "None"
}

/**
 * The label a line shows for a level: effect 3's (`WARN`, `OFF`), kept as the lines have always read,
 * where effect 4 would upper-case its own names.
 */
const LABELS: Readonly<Record<LogLevel.LogLevel, string>> = {
  All: "ALL",
  Fatal: "FATAL",
  Error: "ERROR",
  Warn: "WARN",
  Info: "INFO",
  Debug: "DEBUG",
  Trace: "TRACE",
  None: "OFF"
}

/**
 * The level of `node` and `stats` unless told otherwise.
 *
 * @since 0.1.0
 * @category defaults
 */
export const defaultLevel: LogLevel.LogLevel = "Info"

const isFormat = (raw: string): raw is LogFormat => FORMATS.some((format) => format === raw)
const isLevel = (raw: string): raw is LevelName => Object.hasOwn(LEVELS, raw)

/**
 * Reads a format given by `source` (a flag or a variable name, for the error).
 *
 * @since 0.1.0
 * @category parsing
 */
export const parseFormat = (source: string, raw: string): Result.Result<LogFormat, string> =>
  isFormat(raw)
    ? Result.succeed(raw)
    : Result.fail(`${source}: expected one of ${FORMATS.join(", ")}, got ${JSON.stringify(raw)}`)

/**
 * @since 0.1.0
 * @category parsing
 */
export const parseLevel = (source: string, raw: string): Result.Result<LogLevel.LogLevel, string> =>
  isLevel(raw)
    ? Result.succeed(LEVELS[raw])
    : Result.fail(`${source}: expected one of ${Object.keys(LEVELS).join(", ")}, got ${JSON.stringify(raw)}`)

/**
 * The label a line shows for `level` (`WARN`, `OFF`).
 *
 * @since 0.1.0
 * @category formatting
 */
export const levelLabel = (level: LogLevel.LogLevel): string => LABELS[level]

/**
 * The name operators type for `level` (`warning`, not `WARN`).
 *
 * @since 0.1.0
 * @category parsing
 */
export const levelName = (level: LogLevel.LogLevel): string => {
  for (const [name, value] of Object.entries(LEVELS)) if (value === level) return name
  return LABELS[level].toLowerCase()
}

// ---------------------------------------------------------------------------------------------
// rendering
// ---------------------------------------------------------------------------------------------

/**
 * One log entry as the three formats see it, every string still raw.
 *
 * @since 0.1.0
 * @category models
 */
export interface Entry {
  readonly date: Date
  readonly level: LogLevel.LogLevel
  readonly fiber: string
  readonly message: string
  readonly cause: string | undefined
  /** Annotations, then spans (`name` to milliseconds), in order. */
  readonly fields: ReadonlyArray<readonly [string, unknown]>
}

const textOf = (value: unknown): string => {
  if (typeof value === "string") return value
  if (value instanceof Error) return value.message
  return Inspectable.toStringUnknown(value, 0)
}

const FIRST = ["server_id", "module", "peer"]
const rank = (key: string) => {
  const i = FIRST.indexOf(key)
  return i < 0 ? FIRST.length : i
}

const entryOf = (options: Logger.Options<unknown>): Entry => {
  const parts: ReadonlyArray<unknown> = Array.isArray(options.message) ? options.message : [options.message]
  const fields: Array<readonly [string, unknown]> = []
  // The usual keys first, the rest by name, so lines read alike whatever order they were added in.
  const annotations = Object.entries(options.fiber.getRef(References.CurrentLogAnnotations)).sort(
    ([a], [b]) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0)
  )
  for (const [key, value] of annotations) fields.push([key, value])
  const now = options.date.getTime()
  for (const [label, start] of options.fiber.getRef(References.CurrentLogSpans))
    fields.push([label, `${now - start}ms`])
  return {
    date: options.date,
    level: options.logLevel,
    fiber: `#${options.fiber.id}`,
    message: parts.map(textOf).join(" "),
    cause: options.cause.reasons.length === 0 ? undefined : Cause.pretty(options.cause),
    fields
  }
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: a value with controls must be quoted
const BARE = /^[^\s="\\\u0000-\u001f\u007f-\u009f]+$/

const logfmtValue = (s: string): string =>
  BARE.test(s) ? s : `"${escapeControl(s.replace(/[\\"]/g, (c) => `\\${c}`))}"`

const logfmtKey = (key: string): string => {
  const clean = escapeControl(key).replace(/[\s="\\]/g, "_")
  return clean === "" ? "_" : clean
}

/**
 * `key=value` pairs, Effect's `logfmtLogger` layout, control characters escaped.
 *
 * @since 0.1.0
 * @category rendering
 */
export const renderLogfmt = (entry: Entry): string => {
  const pairs: Array<string> = [
    `timestamp=${entry.date.toISOString()}`,
    `level=${LABELS[entry.level]}`,
    `fiber=${logfmtValue(entry.fiber)}`,
    `message=${logfmtValue(entry.message)}`
  ]
  if (entry.cause !== undefined) pairs.push(`cause=${logfmtValue(entry.cause)}`)
  for (const [key, value] of entry.fields) pairs.push(`${logfmtKey(key)}=${logfmtValue(textOf(value))}`)
  return pairs.join(" ")
}

const jsonValue = (value: unknown): unknown =>
  value === null || typeof value === "string" || typeof value === "boolean"
    ? value
    : typeof value === "number"
      ? Number.isFinite(value)
        ? value
        : String(value)
      : textOf(value)

/**
 * One JSON object per line; DEL and C1 escaped as well as what `JSON.stringify` escapes.
 *
 * @since 0.1.0
 * @category rendering
 */
export const renderJson = (entry: Entry): string => {
  const object: Record<string, unknown> = {
    timestamp: entry.date.toISOString(),
    level: LABELS[entry.level],
    fiber: entry.fiber,
    message: entry.message
  }
  if (entry.cause !== undefined) object.cause = entry.cause
  for (const [key, value] of entry.fields) {
    if (!Object.hasOwn(object, key)) object[key] = jsonValue(value)
  }
  return safeJson(object)
}

const paint = (code: string, color: boolean) => (s: string) => (color ? `\x1b[${code}m${s}\x1b[0m` : s)

/**
 * For a terminal: time, level, message, then the fields; a cause on the lines after, indented.
 * Coloured only when `color` is set.
 *
 * @since 0.1.0
 * @category rendering
 */
export const renderPretty = (entry: Entry, color: boolean): string => {
  const dim = paint("2", color)
  const levelColor =
    entry.level === "Error" || entry.level === "Fatal"
      ? "31"
      : entry.level === "Warn"
        ? "33"
        : entry.level === "Info"
          ? "32"
          : "2"
  const level = paint(levelColor, color)(LABELS[entry.level].padEnd(5))
  const fields = entry.fields.map(
    ([key, value]) => `${dim(`${escapeControl(key)}=`)}${logfmtValue(textOf(value))}`
  )
  const head = [
    dim(entry.date.toISOString().slice(11, 23)),
    level,
    escapeControl(entry.message),
    ...fields
  ].join(" ")
  if (entry.cause === undefined) return head
  const cause = entry.cause
    .split("\n")
    .map((line) => `    ${escapeControl(line)}`)
    .join("\n")
  return `${head}\n${cause}`
}

/**
 * stderr, bounded like stdout, and never a crash when it fails.
 *
 * @since 0.1.0
 * @category output
 */
export const stderr = new BoundedWriter(process.stderr, {
  maxPending: DEFAULT_MAX_PENDING,
  onDropped: () => {},
  onClosed: () => {}
})

/**
 * A logger writing `format` lines through `write` (stderr by default).
 *
 * @since 0.1.0
 * @category logging
 */
export const make = (
  format: LogFormat,
  write: (line: string) => void = (line) => {
    stderr.writeLine(line)
  }
): Logger.Logger<unknown, void> => {
  const color = format === "pretty" && useColor(process.stderr)
  return Logger.make((options) => {
    const entry = entryOf(options)
    write(
      format === "json"
        ? renderJson(entry)
        : format === "pretty"
          ? renderPretty(entry, color)
          : renderLogfmt(entry)
    )
  })
}

/**
 * Replaces the loggers with {@link make}`(format)` at `level`.
 *
 * @since 0.1.0
 * @category logging
 */
export const layer = (format: LogFormat, level: LogLevel.LogLevel): Layer.Layer<never> =>
  Layer.merge(Logger.layer([make(format)]), Layer.succeed(References.MinimumLogLevel, level))
