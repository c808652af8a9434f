/**
 * Every environment variable the CLI reads, in one table: the help of each subcommand is written from
 * it, and a test holds docs/cli.md and docs/configuration.md to it. The mesh's variables come from
 * `MeshConfig.variables`; the lane's and the command line's own are here, beside their readers in
 * `Postgres.config`, `node.ts` and `log.ts`.
 *
 * @since 0.1.0
 */
import * as MeshConfig from "../MeshConfig.js"

/**
 * @since 0.1.0
 * @category models
 */
export type Subcommand = "node" | "stats" | "demo"

/**
 * @since 0.1.0
 * @category models
 */
export interface Variable extends MeshConfig.Variable {
  readonly commands: ReadonlyArray<Subcommand>
}

const ALL: ReadonlyArray<Subcommand> = ["node", "stats", "demo"]

/** The mesh's own variables: `MeshConfig.variables`, read by `node`. */
const mesh: ReadonlyArray<Variable> = MeshConfig.variables.map((variable) => ({
  ...variable,
  commands: ["node"]
}))

/**
 * The table, in the order the help lists it: the mesh's variables (from `MeshConfig`, where their names,
 * defaults and meanings are declared once), the lane's, then the command line's own.
 *
 * @since 0.1.0
 * @category variables
 */
export const variables: ReadonlyArray<Variable> = [
  ...mesh,
  {
    name: "QUEEN_MESH_PG_URL",
    default: "(none)",
    description:
      "PostgreSQL connection string: hints also go over LISTEN/NOTIFY; with no peers, on that lane alone, no mesh port",
    commands: ["node"]
  },
  {
    name: "QUEEN_MESH_PG_CHANNEL",
    default: "queen_mesh[_<label>]",
    description: "channel of the PostgreSQL lane, 1 to 63 bytes (default from QUEEN_MESH_CLUSTER_LABEL)",
    commands: ["node"]
  },
  {
    name: "QUEEN_MESH_HTTP_HOST",
    default: "127.0.0.1",
    description: "address the HTTP stats routes bind",
    commands: ["node"]
  },
  {
    name: "QUEEN_MESH_HTTP_PORT",
    default: "6632",
    description: "port of the HTTP stats routes; 0 = ephemeral",
    commands: ["node"]
  },
  {
    name: "QUEEN_MESH_STDOUT_BUFFER",
    default: "4194304",
    description: "bytes of stdout events left pending for a slow reader before new ones are dropped",
    commands: ["node"]
  },
  {
    name: "QUEEN_MESH_LOG_FORMAT",
    default: "logfmt",
    description: "log format on stderr: logfmt, json or pretty (--log-format wins)",
    commands: ALL
  },
  {
    name: "QUEEN_MESH_LOG_LEVEL",
    default: "info",
    description: "least severe level logged: debug, info, warning, error or none (--log-level wins)",
    commands: ALL
  },
  {
    name: "QUEEN_MESH_COMPILE_CACHE",
    default: "1",
    description:
      "1: compile the command with V8's code cache beside it (written after a start); 0: without; report: say which on stderr",
    commands: ALL
  },
  {
    name: "NO_COLOR",
    default: "(unset)",
    description: "set to anything to turn off colour, which is also off when the output is not a terminal",
    commands: ALL
  }
]

/**
 * The variables `command` reads.
 *
 * @since 0.1.0
 * @category variables
 */
export const forCommand = (command: Subcommand): ReadonlyArray<Variable> =>
  variables.filter((variable) => variable.commands.includes(command))
