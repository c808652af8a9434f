/**
 * What one wake-up of an idle `node` process costs this machine: a fresh process sleeps on a timer of
 * `intervalMs` over and over for `seconds`, and its `process.cpuUsage()` over the wakes is the CPU of
 * one. Every process of a write-load cell pays about this each time it is woken (a read, a timer), so it
 * is the unit the mesh's consumers' wake-ups are paid in (bench/README.md, write load).
 */
import { execFile } from "node:child_process"
import { Option, Schema } from "effect"

/** What the probe prints: its wakes and its CPU over them. */
const Report = Schema.Struct({ wakes: Schema.Number, cpuUs: Schema.Number })

const PROBE = `
const interval = Number(process.argv[1]), until = performance.now() + Number(process.argv[2]) * 1000
let wakes = 0
const start = process.cpuUsage()
const tick = () => {
  wakes++
  if (performance.now() < until) return setTimeout(tick, interval)
  const used = process.cpuUsage(start)
  process.stdout.write(JSON.stringify({ wakes, cpuUs: used.user + used.system }))
}
setTimeout(tick, interval)
`

/** The CPU of one timer wake of an idle `node` process, in µs, or `null` when the probe failed. */
export const timerWakeCpuUs = (intervalMs: number, seconds: number): Promise<number | null> =>
  new Promise((resolve) => {
    execFile(
      process.execPath,
      ["-e", PROBE, String(intervalMs), String(seconds)],
      { timeout: (seconds + 10) * 1000 },
      (error, stdout) => {
        if (error !== null) return resolve(null)
        const report = Schema.decodeUnknownOption(Schema.fromJsonString(Report))(stdout)
        resolve(
          Option.isSome(report) && report.value.wakes > 0
            ? Math.round((report.value.cpuUs / report.value.wakes) * 10) / 10
            : null
        )
      }
    )
  })
