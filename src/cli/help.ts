/**
 * Help written for operators, from the surface table (`args.ts`) and the environment table (`env.ts`):
 * usage, options, every variable with its default, an example. Plain text, with bold headings only on
 * a terminal without `NO_COLOR`; wrapped to the terminal's width (100 columns off a terminal).
 *
 * @since 0.1.0
 */
import { type CommandSpec, commands, findCommand, globalOptions, type OptionSpec } from "./args.js"
import { forCommand, type Subcommand } from "./env.js"
import { version } from "./version.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface HelpStyle {
  readonly color: boolean
  readonly width: number
}

/** Words of `text` in lines of at most `width` (a longer word gets its own line). */
const wrap = (text: string, width: number): Array<string> => {
  const lines: Array<string> = []
  let line = ""
  for (const word of text.split(" ")) {
    if (line !== "" && line.length + 1 + word.length > width) {
      lines.push(line)
      line = word
    } else line = line === "" ? word : `${line} ${word}`
  }
  if (line !== "") lines.push(line)
  return lines
}

/** Two-space indented columns; the last one wraps under itself. */
const columns = (rows: ReadonlyArray<ReadonlyArray<string>>, width: number): Array<string> => {
  const widths: Array<number> = []
  for (const row of rows) {
    row.slice(0, -1).forEach((cell, i) => {
      widths[i] = Math.max(widths[i] ?? 0, cell.length)
    })
  }
  const lead = 2 + widths.reduce((sum, w) => sum + w + 2, 0)
  const room = Math.max(30, width - lead)
  return rows.flatMap((row) => {
    const head = `  ${row
      .slice(0, -1)
      .map((cell, i) => cell.padEnd(widths[i] ?? 0))
      .join("  ")}  `
    const [first = "", ...rest] = wrap(row[row.length - 1] ?? "", room)
    return [`${head}${first}`.trimEnd(), ...rest.map((line) => `${" ".repeat(lead)}${line}`)]
  })
}

const optionName = (option: OptionSpec) =>
  `${option.short === undefined ? "" : `-${option.short}, `}--${option.name}${option.value === undefined ? "" : ` ${option.value}`}`

const optionRows = (options: ReadonlyArray<OptionSpec>) =>
  options.map((option) => [optionName(option), option.description])

const heading = (title: string, style: HelpStyle) => (style.color ? `\x1b[1m${title}\x1b[0m` : title)

/**
 * `queen-mesh --help`.
 *
 * @since 0.1.0
 * @category rendering
 */
export const top = (style: HelpStyle): string =>
  [
    `queen-mesh ${version}: the inter-replica mesh of the Queen broker`,
    "",
    heading("Usage", style),
    "  queen-mesh <command> [options]",
    "  queen-mesh help [command]",
    "",
    heading("Commands", style),
    ...columns(
      [
        ...commands.map((command) => [command.name, command.summary]),
        ["help", "this help, or a command's (also: queen-mesh <command> --help)"]
      ],
      style.width
    ),
    "",
    heading("Options of every command", style),
    ...columns(optionRows(globalOptions), style.width),
    "",
    heading("Example", style),
    "  $ QUEEN_SERVER_ID=node-a QUEEN_MESH_PEERS=10.0.0.2 queen-mesh node",
    "  $ queen-mesh stats 127.0.0.1:6632 --watch",
    "",
    'Run "queen-mesh help <command>" for its options, environment variables and an example.',
    "Exit codes: 0 done (or stopped by SIGINT/SIGTERM), 1 runtime failure, 2 bad usage or environment.",
    ""
  ].join("\n")

const usageLine = (command: CommandSpec) => `  queen-mesh ${command.usage}`

/**
 * `queen-mesh help <command>` and `queen-mesh <command> --help`.
 *
 * @since 0.1.0
 * @category rendering
 */
export const forSubcommand = (command: CommandSpec, style: HelpStyle): string => {
  const lines = [
    `queen-mesh ${command.name}: ${command.summary}`,
    "",
    heading("Usage", style),
    usageLine(command),
    ""
  ]
  lines.push(...command.description.map((line) => `  ${line}`), "")
  if (command.positionals.length > 0) {
    lines.push(
      heading("Arguments", style),
      ...columns(
        command.positionals.map((positional) => [positional.name, positional.description]),
        style.width
      ),
      ""
    )
  }
  lines.push(
    heading("Options", style),
    ...columns(optionRows([...command.options, ...globalOptions]), style.width),
    ""
  )
  lines.push(heading("Environment", style))
  for (const variable of forCommand(command.name)) {
    const names = variable.alias === undefined ? variable.name : `${variable.name} (or ${variable.alias})`
    lines.push(`  ${names}  default ${variable.default}`)
    lines.push(...wrap(variable.description, Math.max(30, style.width - 6)).map((line) => `      ${line}`))
  }
  lines.push("")
  lines.push(heading("Example", style), ...command.example.map((line) => `  ${line}`.trimEnd()), "")
  lines.push("The full contract: docs/cli.md.", "")
  return lines.join("\n")
}

/**
 * The help of `command`, or the top-level help.
 *
 * @since 0.1.0
 * @category rendering
 */
export const render = (command: Subcommand | undefined, style: HelpStyle): string => {
  const spec = command === undefined ? undefined : findCommand(command)
  return spec === undefined ? top(style) : forSubcommand(spec, style)
}
