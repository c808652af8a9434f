/**
 * `tls`: what TLS-PSK links cost against plain TCP, in one child over loopback (bench/tls.ts): dial
 * until usable, and the one-way latency of a small frame.
 */
import { Schema } from "effect"
import type { Driver } from "../driver.js"
import { fmt, row } from "../report.js"
import { section } from "../section.js"
import { ratio } from "../stats.js"

interface TlsPlan {
  readonly tls: { readonly rounds: number }
}

const Connect = Schema.Struct({ connectP50Us: Schema.Number, connectP99Us: Schema.Number })
const Latency = Schema.Struct({ p50Us: Schema.Number, p99Us: Schema.Number })
const TlsFigures = Schema.Struct({ tcp: Connect, tls: Connect, wakeTcp: Latency, wakeTls: Latency })

const run = async (driver: Driver, plan: TlsPlan) => {
  driver.progress(`TLS-PSK against plain TCP x ${plan.tls.rounds}`)
  const child = driver.spawn("tls", { rounds: plan.tls.rounds })
  try {
    const r = Schema.decodeUnknownSync(TlsFigures)((await child.take("result", 300_000)).data)
    return {
      rounds: plan.tls.rounds,
      ...r,
      ratios: {
        connectP50: ratio(r.tls.connectP50Us, r.tcp.connectP50Us),
        wakeP50: ratio(r.wakeTls.p50Us, r.wakeTcp.p50Us),
        wakeP99: ratio(r.wakeTls.p99Us, r.wakeTcp.p99Us)
      }
    }
  } finally {
    await child.stop()
  }
}

export const tls = section({
  names: ["tls"],
  plan: { full: { tls: { rounds: 1_000 } }, quick: { tls: { rounds: 300 } } },
  run,
  results: (result) => ({ tls: result }),
  rows: (t) => [
    row(
      "connect p50 / p99, TLS-PSK vs TCP (µs)",
      `${fmt(t.tls.connectP50Us)} / ${fmt(t.tls.connectP99Us)}`,
      `${fmt(t.tcp.connectP50Us)} / ${fmt(t.tcp.connectP99Us)}`,
      fmt(t.ratios.connectP50, 2)
    ),
    row(
      "frame latency p50 / p99, TLS-PSK vs TCP (µs)",
      `${fmt(t.wakeTls.p50Us)} / ${fmt(t.wakeTls.p99Us)}`,
      `${fmt(t.wakeTcp.p50Us)} / ${fmt(t.wakeTcp.p99Us)}`,
      fmt(t.ratios.wakeP50, 2)
    )
  ],
  notes: () => ["TLS: bench/tls.ts in one process over loopback."]
})
