/**
 * Every environment variable the CLI reads, in one table: the help of each subcommand and docs/cli.md
 * are written from it, so a new variable is one line here (and its reader where it is used: the mesh's
 * own in `MeshConfig.config`, the CLI's in `node.ts` and `log.ts`).
 *
 * @since 0.1.0
 */

/**
 * @since 0.1.0
 * @category models
 */
export type Subcommand = "node" | "stats" | "demo"

/**
 * @since 0.1.0
 * @category models
 */
export interface Variable {
  readonly name: string
  /** The legacy name, read when `name` is unset. */
  readonly alias?: string
  /** The default as an operator would type it, or a phrase. */
  readonly default: string
  /** One line. */
  readonly description: string
  readonly commands: ReadonlyArray<Subcommand>
}

const ALL: ReadonlyArray<Subcommand> = ["node", "stats", "demo"]

/**
 * The table, in the order the help lists it.
 *
 * @since 0.1.0
 * @category variables
 */
export const variables: ReadonlyArray<Variable> = [
  {
    name: "QUEEN_MESH_PEERS",
    alias: "QUEEN_UDP_PEERS",
    default: "(none)",
    description: "comma-separated host or host:port peers; with none the mesh does not run",
    commands: ["node"]
  },
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
    name: "QUEEN_MESH_PORT",
    alias: "QUEEN_UDP_NOTIFY_PORT",
    default: "6633",
    description: "mesh listening port, also the port of peers given without one; 0 = ephemeral",
    commands: ["node"]
  },
  {
    name: "QUEEN_MESH_BIND_ADDR",
    alias: "QUEEN_BIND_ADDR",
    default: "0.0.0.0",
    description:
      "address the mesh listener binds, without a port; set but empty is an error (QUEEN_MESH_BIND_HOST: deprecated)",
    commands: ["node"]
  },
  {
    name: "QUEEN_MESH_ADVERTISE_HOST",
    default: "the host name",
    description: "host of the http_addr advertised in the HELLO (http://host:$PORT), as upstream Queen does",
    commands: ["node"]
  },
  {
    name: "PORT",
    default: "(unset)",
    description:
      "the broker's HTTP port, the port of the advertised http_addr; unset, the node advertises where its own routes answer",
    commands: ["node"]
  },
  {
    name: "QUEEN_MESH_TENANTS",
    default: "uuid",
    description:
      "uuid: tenants are UUIDs, as upstream Queen reads them; any: any string (queen-mesh-only clusters)",
    commands: ["node"]
  },
  {
    name: "QUEEN_MESH_DISCOVERY",
    default: "(none)",
    description:
      "dns:<name>[:<port>]: resolve the name every interval and dial every address it lists (a headless Service)",
    commands: ["node"]
  },
  {
    name: "QUEEN_MESH_DISCOVERY_INTERVAL_MS",
    default: "5000",
    description: "how often the discovery name is resolved; a peer missing from two rounds is dropped",
    commands: ["node"]
  },
  {
    name: "QUEEN_SYNC_ENABLED",
    default: "true",
    description: "false turns the mesh off without removing the peers",
    commands: ["node"]
  },
  {
    name: "QUEEN_SYNC_SECRET",
    default: "(empty)",
    description: "shared HELLO secret; empty is open mode (firewall the port regardless)",
    commands: ["node"]
  },
  {
    name: "QUEEN_SYNC_SECRETS",
    default: "(none)",
    description:
      "the keyring instead of QUEEN_SYNC_SECRET: the primary key first, then keys still accepted (rotation)",
    commands: ["node"]
  },
  {
    name: "QUEEN_SYNC_HEARTBEAT_MS",
    default: "1000",
    description: "heartbeat period on every link, busy or not (upstream sends them so)",
    commands: ["node"]
  },
  {
    name: "QUEEN_SYNC_DEAD_THRESHOLD_MS",
    default: "5000",
    description: "silence after which a peer is reported dead",
    commands: ["node"]
  },
  {
    name: "QUEEN_SERVER_ID",
    default: "$HOSTNAME",
    description: "this node's id, announced in HELLO; without either, queen- and 8 random hex digits",
    commands: ["node"]
  },
  {
    name: "QUEEN_MESH_HANDSHAKE_TIMEOUT_MS",
    default: "5000",
    description: "time an accepted connection has to send its HELLO",
    commands: ["node"]
  },
  {
    name: "QUEEN_MESH_HOTLIST_FLUSH_MS",
    default: "20",
    description: "window over which hot-list marks are coalesced into one frame",
    commands: ["node"]
  },
  {
    name: "QUEEN_MESH_SEND_QUEUE",
    default: "1024",
    description: "frames each peer's send queue holds before dropping",
    commands: ["node"]
  },
  {
    name: "QUEEN_MESH_AUTH",
    default: "legacy",
    description:
      "how HELLOs are authenticated: legacy (the spec's, replayable), permissive or required (challenge-response)",
    commands: ["node"]
  },
  {
    name: "QUEEN_MESH_CHALLENGE_WAIT_MS",
    default: "500",
    description: "how long a permissive dialer waits for a challenge before a legacy HELLO",
    commands: ["node"]
  },
  {
    name: "QUEEN_MESH_CLUSTER_LABEL",
    default: "(empty)",
    description: "bound into v2 HELLOs and the lane's channel: clusters that share a secret stay apart",
    commands: ["node"]
  },
  {
    name: "QUEEN_MESH_TLS",
    default: "off",
    description: "psk: every mesh link over TLS 1.3 keyed from the secret (needs a secret)",
    commands: ["node"]
  },
  {
    name: "QUEEN_MESH_MAX_INBOUND",
    default: "64",
    description: "concurrent inbound mesh connections; more are refused at once",
    commands: ["node"]
  },
  {
    name: "QUEEN_MESH_MAX_UNAUTHENTICATED_PER_IP",
    default: "8",
    description: "inbound connections one address may hold before its HELLO",
    commands: ["node"]
  },
  {
    name: "QUEEN_MESH_HELLO_MAX_BYTES",
    default: "4096",
    description: "the first frame's cap in bytes, checked from its length prefix",
    commands: ["node"]
  },
  {
    name: "QUEEN_MESH_AUTH_FAILURE_DELAY_MS",
    default: "1000",
    description: "pause before closing a refused connection (it holds no buffer meanwhile)",
    commands: ["node"]
  },
  {
    name: "QUEEN_MESH_IDLE_TIMEOUT_MS",
    default: "the dead threshold",
    description: "an authenticated inbound link silent this long is closed",
    commands: ["node"]
  },
  {
    name: "QUEEN_CACHE_REFRESH_INTERVAL_MS",
    default: "60000",
    description: "the host's reconcile period, the backstop for lost hints",
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
