/**
 * What every section of the bench runs with, in the driver process: the flags it was given, the child
 * processes it forks (each under `node --cpu-prof` when `--cpu-prof=` names its role), the CLI nodes
 * it starts, loopback ports, and upstream's Rust mesh where one is built. Whatever a section starts
 * through it is killed when the driver exits, however it exits.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { Schema } from "effect"
import { freePort } from "../src/internal/ports.js"
import type { CliOptions } from "./cli.js"
import { Child } from "./ipc.js"

/** The mesh secret of every node the bench starts. */
export const SECRET = "bench-s3cr3t"

/** Upstream's Rust mesh behind its harness, or why it is not run. */
export type Upstream = { readonly binary: string } | { readonly skipped: string }

/** Where `build.sh` of the upstream harness (`../shared/upstream-mesh`) builds commit 2719e64. */
const UPSTREAM_DEFAULT = Path.join(
  Os.tmpdir(),
  "upstream-mesh-harness",
  "target",
  "release",
  "upstream-mesh-node"
)

/** `--upstream=<path>|off` (`flag`), else `QUEEN_MESH_BENCH_UPSTREAM`, else the default build if it exists. */
export const findUpstream = (flag: string | undefined): Upstream => {
  const env = process.env.QUEEN_MESH_BENCH_UPSTREAM
  const [given, from] =
    flag !== undefined
      ? [flag, "--upstream"]
      : env !== undefined && env !== ""
        ? [env, "QUEEN_MESH_BENCH_UPSTREAM"]
        : []
  if (given === "off" || given === "none") return { skipped: `turned off by ${from}=${given}` }
  const binary = given ?? UPSTREAM_DEFAULT
  try {
    Fs.accessSync(binary, Fs.constants.X_OK)
    return { binary: Path.resolve(binary) }
  } catch {
    return {
      skipped:
        given === undefined
          ? // The results are committed: the reason names the harness's place in the temporary directory, not a
            // path of this machine.
            `upstream's harness is not built (no upstream-mesh-harness/target/release/upstream-mesh-node in the temporary directory; build it with ../shared/upstream-mesh/build.sh, or pass --upstream=<path>)`
          : `${from}=${given} is not an executable file`
    }
  }
}

/** Ports named before their servers bind them, below the ephemeral range (`src/internal/ports.ts`). */
export { freePort }

export const stopAll = async (list: ReadonlyArray<Child>): Promise<void> => {
  await Promise.all(list.map((c) => c.stop()))
}

const PortData = Schema.Struct({ port: Schema.Number })
/** The port a child reported on `ready`. */
export const portOf = (data: unknown): number => Schema.decodeUnknownSync(PortData)(data).port

export const Numbers = Schema.Array(Schema.Number)

export interface DriverOptions {
  readonly quick: boolean
  /** `--only=`: the section names to run; every section when undefined. */
  readonly only: ReadonlyArray<string> | undefined
  /** `--cpu-prof=`: the roles run under `node --cpu-prof`. */
  readonly profiled: ReadonlySet<string>
  readonly profileDir: string
  readonly upstream: Upstream
}

interface Killable {
  readonly process: { kill: (signal: NodeJS.Signals) => boolean }
}

/** The driver's processes and flags, handed to every section's `run`. */
export class Driver {
  private readonly children = new Set<Child>()
  private readonly nodes = new Set<Killable>()
  private profiles = 0
  readonly quick: boolean
  readonly upstream: Upstream
  /** How the CLI sections start nodes: profiled by role, killed at exit, upstream's binary when built. */
  readonly cli: CliOptions

  constructor(private readonly options: DriverOptions) {
    this.quick = options.quick
    this.upstream = options.upstream
    const cli: CliOptions = {
      secret: SECRET,
      freePort,
      execArgv: this.profile,
      onStart: (node) => {
        this.nodes.add(node)
      }
    }
    this.cli = "binary" in options.upstream ? { ...cli, upstream: options.upstream.binary } : cli
  }

  /** Whether `--only=` selects the section `name` (every section without it). */
  readonly selected = (name: string): boolean =>
    this.options.only === undefined || this.options.only.includes(name)

  /** `--cpu-prof` with a file named after the role, e.g. `bench/profiles/wake-mesh-b.3.cpuprofile`. */
  readonly profile = (role: string): ReadonlyArray<string> =>
    this.options.profiled.has(role)
      ? [
          "--cpu-prof",
          "--cpu-prof-dir",
          this.options.profileDir,
          "--cpu-prof-name",
          `${role}.${++this.profiles}.cpuprofile`
        ]
      : []

  /** A child process running `role` of bench/child.ts. */
  readonly spawn = (role: string, params: object, execArgv: ReadonlyArray<string> = []): Child => {
    const child = new Child(role, params, [...execArgv, ...this.profile(role)])
    this.children.add(child)
    child.process.once("exit", () => this.children.delete(child))
    return child
  }

  readonly progress = (text: string): void => {
    process.stderr.write(`  ${text}\n`)
  }

  /** Kills every child and CLI node still running. */
  killAll(): void {
    for (const child of this.children) child.process.kill("SIGKILL")
    for (const node of this.nodes) node.process.kill("SIGKILL")
  }
}
