/**
 * Where an idle process's memory goes, for the sections that break it down (`startup`: a
 * `queen-mesh node`; `floor`: a broker replica): a module preloaded with `--import` that, on SIGUSR2,
 * after a full GC when exposed, writes what the process's own heap holds to the file named by
 * `QUEEN_BENCH_MEMORY_FILE`; and `/proc`'s view of its resident memory beside it.
 */
import * as Fs from "node:fs"
import { Schema } from "effect"
import { round, sleep } from "./stats.js"

const MEMORY_PROBE = `import v8 from "node:v8"
import fs from "node:fs"
process.on("SIGUSR2", () => {
  globalThis.gc?.()
  const code = v8.getHeapCodeStatistics()
  fs.writeFileSync(process.env.QUEEN_BENCH_MEMORY_FILE, JSON.stringify({
    usage: process.memoryUsage(),
    spaces: Object.fromEntries(v8.getHeapSpaceStatistics().map((s) => [s.space_name, s.physical_space_size])),
    code: code.code_and_metadata_size + code.bytecode_and_metadata_size,
    source: code.external_script_source_size
  }))
})`

/** The flags that preload the probe, and the variable that names its file. */
export const memoryProbe = {
  flags: ["--expose-gc", `--import=data:text/javascript,${encodeURIComponent(MEMORY_PROBE)}`],
  variable: "QUEEN_BENCH_MEMORY_FILE"
} as const

/** A probe's report, read once the probe has written its file (within 10 s). */
export const readProbe = async <S extends Schema.ConstraintDecoder<unknown>>(
  schema: S,
  file: string,
  probe: string
): Promise<S["Type"]> => {
  const deadline = Date.now() + 10_000
  while (!Fs.existsSync(file) || Fs.statSync(file).size === 0) {
    if (Date.now() > deadline) throw new Error(`the ${probe} probe wrote nothing`)
    await sleep(20)
  }
  await sleep(50)
  return Schema.decodeUnknownSync(Schema.fromJsonString(schema))(Fs.readFileSync(file, "utf8"))
}

const MemoryReport = Schema.Struct({
  usage: Schema.Struct({
    rss: Schema.Number,
    heapTotal: Schema.Number,
    heapUsed: Schema.Number,
    external: Schema.Number
  }),
  spaces: Schema.Record(Schema.String, Schema.Number),
  code: Schema.Number,
  source: Schema.Number
})

/** `RssAnon`, `RssFile` and `RssShmem` of a process, in bytes (`/proc/<pid>/status`). */
export const rssParts = (pid: number | undefined) => {
  const status = Fs.readFileSync(`/proc/${pid}/status`, "utf8")
  const kB = (name: string) =>
    Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? Number.NaN) * 1024
  return { anon: kB("RssAnon"), file: kB("RssFile"), shmem: kB("RssShmem") }
}

const MiB = 1024 * 1024
const mib = (bytes: number) => round(bytes / MiB, 1)

/**
 * What an idle process's RSS is spent on, read once (MiB): `/proc` first, then the probe (its GC
 * changes what it reads). The process must have been started with {@link memoryProbe}.
 */
export const breakdown = async (pid: number | undefined, signal: () => void, file: string) => {
  const rss = rssParts(pid)
  signal()
  const report = await readProbe(MemoryReport, file, "memory")
  const spaces = report.spaces
  return {
    rssAnon: mib(rss.anon),
    rssFile: mib(rss.file),
    heapTotal: mib(report.usage.heapTotal),
    heapUsed: mib(report.usage.heapUsed),
    newSpace: mib(spaces.new_space ?? 0),
    oldSpace: mib(spaces.old_space ?? 0),
    codeSpace: mib((spaces.code_space ?? 0) + (spaces.code_large_object_space ?? 0)),
    largeObjects: mib(spaces.large_object_space ?? 0),
    external: mib(report.usage.external),
    codeAndBytecode: mib(report.code),
    scriptSource: mib(report.source)
  }
}
export type MemoryBreakdown = Awaited<ReturnType<typeof breakdown>>
