/**
 * The write-load section's processes: its children run `bench/writeloadChild.js`, are profiled by role
 * with the driver's `--cpu-prof=wl-<role>`, and are killed with the driver. Shared by the write-load
 * cells (bench/writeload.ts) and the hand-off rounds (bench/handoff.ts).
 */
import { fileURLToPath } from "node:url"
import { Child } from "./ipc.js"

const entry = fileURLToPath(new URL("./writeloadChild.js", import.meta.url))

const children = new Set<Child>()

/** Extra `node` flags per role (the driver's `--cpu-prof=`). */
let execArgvFor: (role: string) => ReadonlyArray<string> = () => []

export const setExecArgv = (f: (role: string) => ReadonlyArray<string>): void => {
  execArgvFor = f
}

/** A forked child running one of the section's roles. */
export const startChild = (role: string, params: object): Child => {
  const child = new Child(role, params, execArgvFor(`wl-${role}`), { file: entry, args: [] })
  children.add(child)
  child.process.once("exit", () => children.delete(child))
  return child
}

/** Kills every child of this section (the driver's exit handler). */
export const killChildren = (): void => {
  for (const child of children) child.process.kill("SIGKILL")
}

export const stopAll = (list: ReadonlyArray<Child>): Promise<unknown> =>
  Promise.all(list.map((c) => c.stop()))

/** A `pg` client, its errors reported to the driver. */
export const pgClient = async (url: string) => {
  const { default: pg } = await import("pg")
  const client = new pg.Client({ connectionString: url })
  client.on("error", (error) => process.send?.({ kind: "error", data: `pg: ${error.message}` }))
  await client.connect()
  return client
}

export type PgClient = Awaited<ReturnType<typeof pgClient>>
