/**
 * Broker replicas as child processes of the demo, the bench and the tests, and the cluster shapes they
 * run in: three replicas over one database with the TCP mesh (`tcp`), the PostgreSQL lane and no mesh
 * port (`lane`), or no mesh at all, where pops find remote pushes by their re-poll (`off`).
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as Fs from "node:fs"
import { fileURLToPath } from "node:url"
import { Schema } from "effect"
import { BrokerClient } from "./client.js"
import { freePort } from "./ports.js"

/** The compiled broker next to this file's compiled copy (`.examples-dist`, `.bench-dist`). */
export const defaultEntry = fileURLToPath(new URL("../main.js", import.meta.url))

/** Ports named before their servers bind them, below the ephemeral range (`./ports.ts`). */
export { freePort }

const Listening = Schema.fromJsonString(
  Schema.Struct({ listening: Schema.Struct({ http: Schema.Number, mesh: Schema.NullOr(Schema.Number) }) })
)

/** CPU time of every thread of a process, in ns (`/proc/<pid>/task/*\/schedstat`); 0 where unreadable. */
export const cpuNs = (pid: number | undefined): number => {
  let ns = 0
  try {
    for (const tid of Fs.readdirSync(`/proc/${pid}/task`)) {
      try {
        ns += Number(Fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0])
      } catch {
        // A thread that ended between the listing and the read.
      }
    }
  } catch {
    // Gone, or no /proc.
  }
  return ns
}

export interface Exit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

export class Replica {
  private readonly output: Array<string> = []
  private readonly listeners: Set<(line: string) => void>
  readonly exited: Promise<Exit>

  private constructor(
    readonly name: string,
    readonly child: ChildProcess,
    readonly client: BrokerClient,
    readonly meshPort: number | null,
    exited: Promise<Exit>,
    output: Array<string>,
    listeners: Set<(line: string) => void>
  ) {
    this.exited = exited
    this.output = output
    this.listeners = listeners
  }

  /** Calls `listener` with every line it prints on stdout from now on (its stage lines, say); undone by the function returned. */
  onLine(listener: (line: string) => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  /** Starts `entry` with `env` (on top of this process's PATH only) and waits for its ready line. */
  static start(options: {
    readonly name: string
    readonly env: Readonly<Record<string, string>>
    readonly entry?: string
    readonly timeoutMs?: number
    readonly execArgv?: ReadonlyArray<string>
  }): Promise<Replica> {
    const entry = options.entry ?? defaultEntry
    const child = spawn(process.execPath, [...(options.execArgv ?? []), entry], {
      env: { PATH: process.env.PATH ?? "", ...options.env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    const output: Array<string> = []
    const listeners = new Set<(line: string) => void>()
    const keep = (line: string) => {
      output.push(line)
      if (output.length > 200) output.shift()
    }
    const exited = new Promise<Exit>((resolve) =>
      child.once("exit", (code, signal) => resolve({ code, signal }))
    )
    return new Promise<Replica>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill("SIGKILL")
        reject(
          new Error(
            `${options.name} printed no ready line in ${options.timeoutMs ?? 60_000} ms:\n${output.join("\n")}`
          )
        )
      }, options.timeoutMs ?? 60_000)
      let partial = ""
      child.stdout?.on("data", (chunk: Buffer) => {
        const lines = (partial + chunk.toString("utf8")).split("\n")
        partial = lines.pop() ?? ""
        for (const line of lines) {
          if (line.startsWith('{"stages"')) {
            for (const listener of listeners) listener(line)
            continue
          }
          keep(line)
          if (!line.startsWith('{"listening"')) continue
          const ready = Schema.decodeUnknownResult(Listening)(line)
          if (ready._tag === "Failure") continue
          clearTimeout(timer)
          const client = new BrokerClient("127.0.0.1", ready.success.listening.http)
          resolve(
            new Replica(options.name, child, client, ready.success.listening.mesh, exited, output, listeners)
          )
        }
      })
      child.stderr?.on("data", (chunk: Buffer) => {
        for (const line of chunk.toString("utf8").split("\n")) if (line !== "") keep(line)
      })
      void exited.then((exit) => {
        clearTimeout(timer)
        reject(
          new Error(
            `${options.name} exited (${exit.code ?? exit.signal}) before it was ready:\n${output.join("\n")}`
          )
        )
      })
    })
  }

  get pid(): number | undefined {
    return this.child.pid
  }

  /** The last lines it printed, for a failure's message. */
  tail(): string {
    return this.output.slice(-40).join("\n")
  }

  cpuNs(): number {
    return cpuNs(this.child.pid)
  }

  kill(signal: NodeJS.Signals = "SIGKILL"): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal)
  }

  /** SIGTERM, then SIGKILL if it has not exited within `graceMs`. */
  async stop(graceMs = 10_000): Promise<Exit> {
    this.kill("SIGTERM")
    const timer = setTimeout(() => this.kill("SIGKILL"), graceMs)
    const exit = await this.exited
    clearTimeout(timer)
    this.client.close()
    return exit
  }
}

/** How the replicas of a cluster tell each other about pushes. */
export type Carrier = "tcp" | "lane" | "off"

export interface ClusterOptions {
  readonly carrier: Carrier
  readonly databaseUrl: string
  readonly size?: number
  /** Added to every replica's environment (the re-poll intervals, say). */
  readonly env?: Readonly<Record<string, string>>
  readonly entry?: string
  /** Node flags per replica (a CPU profile, say). */
  readonly execArgv?: (index: number) => ReadonlyArray<string>
}

/** The environment of each replica of a cluster. */
export const clusterEnv = async (options: ClusterOptions): Promise<Array<Record<string, string>>> => {
  const size = options.size ?? 3
  const meshPorts = options.carrier === "tcp" ? await Promise.all(Array.from({ length: size }, freePort)) : []
  return Array.from({ length: size }, (_, i) => {
    const env: Record<string, string> = {
      QUEEN_SERVER_ID: `broker-${String.fromCharCode(97 + i)}`,
      QUEEN_SYNC_SECRET: "broker-demo-secret",
      QUEEN_SYNC_HEARTBEAT_MS: "500",
      QUEEN_SYNC_DEAD_THRESHOLD_MS: "3000",
      BROKER_HOST: "127.0.0.1",
      BROKER_PORT: "0",
      BROKER_DATABASE_URL: options.databaseUrl
    }
    if (options.carrier === "tcp") {
      env.QUEEN_MESH_PORT = String(meshPorts[i])
      env.QUEEN_MESH_BIND_ADDR = "127.0.0.1"
      env.QUEEN_MESH_PEERS = meshPorts
        .filter((_, j) => j !== i)
        .map((port) => `127.0.0.1:${port}`)
        .join(",")
    } else if (options.carrier === "lane") {
      env.QUEEN_MESH_PG_URL = options.databaseUrl
    } else {
      env.QUEEN_SYNC_ENABLED = "false"
    }
    return { ...env, ...options.env }
  })
}

/** Starts the replicas side by side; stops those that started if one fails. */
export const startCluster = async (options: ClusterOptions): Promise<Array<Replica>> => {
  const envs = await clusterEnv(options)
  const started = await Promise.allSettled(
    envs.map((env, i) =>
      Replica.start({
        name: env.QUEEN_SERVER_ID ?? `replica-${i}`,
        env,
        ...(options.entry === undefined ? {} : { entry: options.entry }),
        ...(options.execArgv === undefined ? {} : { execArgv: options.execArgv(i) })
      })
    )
  )
  const replicas = started.flatMap((result) => (result.status === "fulfilled" ? [result.value] : []))
  const failed = started.find((result) => result.status === "rejected")
  if (failed !== undefined) {
    await Promise.all(replicas.map((replica) => replica.stop()))
    throw failed.reason
  }
  return replicas
}

/** Polls `check` every `everyMs` until it holds; rejects with `what` after `withinMs`. */
export const until = async (
  what: string,
  check: () => Promise<boolean> | boolean,
  withinMs = 30_000,
  everyMs = 50
): Promise<void> => {
  const deadline = Date.now() + withinMs
  let last: unknown
  while (Date.now() < deadline) {
    try {
      if (await check()) return
    } catch (error) {
      last = error
    }
    await new Promise((resolve) => setTimeout(resolve, everyMs))
  }
  throw new Error(
    `${what}: not within ${withinMs} ms${last === undefined ? "" : ` (last error: ${String(last)})`}`
  )
}

/** Every replica linked to every other (`clustered`), or for `off` merely answering. */
export const clustered = (replicas: ReadonlyArray<Replica>, carrier: Carrier, withinMs = 30_000) =>
  until(
    `${carrier} cluster formed`,
    async () => {
      const states = await Promise.all(replicas.map((replica) => replica.client.ready()))
      return states.every((state) =>
        carrier === "off" ? state.status === 200 : state.status === 200 && state.health === "clustered"
      )
    },
    withinMs
  )
