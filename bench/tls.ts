/**
 * What TLS-PSK links (`src/TlsTransport.ts`) cost against plain TCP (`src/TcpTransport.ts`), over
 * loopback in one process: the time a dial takes until the connection is usable (TCP connect, plus the
 * TLS 1.3 handshake for TLS), and the one-way latency of a 60-byte frame (timestamp before the dialer's
 * write, timestamp in the listener's 'data' event, both `process.hrtime`).
 *
 * `node .bench-dist/bench/tls.js [rounds]` (or `npx tsx bench/tls.ts [rounds]`) prints the figures as
 * JSON; `runTlsBench` returns them for a caller.
 */
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { Deferred, Effect, Exit, Scope } from "effect"
import * as Frame from "../src/Frame.js"
import * as TcpTransport from "../src/TcpTransport.js"
import * as TlsTransport from "../src/TlsTransport.js"
import type { TransportShape } from "../src/Transport.js"
import { percentile, round } from "./stats.js"

export interface ConnectFigures {
  readonly connectP50Us: number
  readonly connectP99Us: number
}

export interface LatencyFigures {
  readonly p50Us: number
  readonly p99Us: number
}

export interface TlsBenchResult {
  readonly tcp: ConnectFigures
  readonly tls: ConnectFigures
  readonly wakeTcp: LatencyFigures
  readonly wakeTls: LatencyFigures
}

const FRAME_BYTES = 60

/** A well-formed 60-byte `MESSAGE_AVAILABLE` frame, its JSON padded in the queue name. */
const frame = (() => {
  const bare = JSON.stringify({ queue: "", partition: "p", tenant: "t" })
  const header = Frame.LENGTH_PREFIX_BYTES + 1
  const payload = JSON.stringify({
    queue: "q".repeat(FRAME_BYTES - header - bare.length),
    partition: "p",
    tenant: "t"
  })
  return Frame.frameBytes(Frame.Tag.MESSAGE_AVAILABLE, payload)
})()

const nowNs = () => process.hrtime.bigint()
const micros = (ns: bigint) => Number(ns) / 1_000

const figures = (samples: ReadonlyArray<number>) => ({
  p50Us: round(percentile(samples, 50), 1),
  p99Us: round(percentile(samples, 99), 1)
})

const warmupOf = (rounds: number) => Math.min(100, Math.max(5, Math.floor(rounds / 10)))

/** Dial-until-usable times, in microseconds, against one listener. */
const connectTimes = (transport: TransportShape, rounds: number) =>
  Effect.scoped(
    Effect.gen(function* () {
      // Each accepted connection is read until the dialer closes it, as the mesh's listener does.
      const port = yield* transport.listen({ host: "127.0.0.1", port: 0 }, (connection) =>
        Effect.ignore(connection.read<never>(() => undefined))
      )
      const samples: Array<number> = []
      const warmup = warmupOf(rounds)
      for (let i = 0; i < warmup + rounds; i++) {
        const scope = yield* Scope.make()
        const start = nowNs()
        yield* Scope.provide(transport.dial("127.0.0.1", port), scope)
        const took = nowNs() - start
        yield* Scope.close(scope, Exit.void)
        if (i >= warmup) samples.push(micros(took))
      }
      return figures(samples)
    })
  )

/** One-way latency of a 60-byte frame, in microseconds, one frame in flight at a time. */
const wakeTimes = (transport: TransportShape, rounds: number) =>
  Effect.scoped(
    Effect.gen(function* () {
      let pending: { readonly sent: bigint; readonly done: Deferred.Deferred<number> } | undefined
      let buffered = 0
      const port = yield* transport.listen({ host: "127.0.0.1", port: 0 }, (connection) =>
        connection
          .read<never>((chunk) => {
            const at = nowNs()
            buffered += chunk.length
            if (buffered >= FRAME_BYTES && pending !== undefined) {
              buffered -= FRAME_BYTES
              // Cleared before it is completed: effect 4 runs the waiting fiber's continuation inside
              // `doneUnsafe`, and that fiber sets the next round's `pending` before this call returns.
              const round = pending
              pending = undefined
              Deferred.doneUnsafe(round.done, Exit.succeed(micros(at - round.sent)))
            }
            return undefined
          })
          .pipe(Effect.ignore)
      )
      const connection = yield* transport.dial("127.0.0.1", port)
      const samples: Array<number> = []
      const warmup = warmupOf(rounds)
      for (let i = 0; i < warmup + rounds; i++) {
        const done = yield* Deferred.make<number>()
        pending = { sent: nowNs(), done }
        // The mesh's idle-link path: the fast write when it is offered, else the effectful one.
        if (connection.unsafeTryWrite?.(frame) !== true) yield* connection.write(frame)
        const took = yield* Deferred.await(done)
        if (i >= warmup) samples.push(took)
      }
      return figures(samples)
    })
  )

/**
 * Runs both measurements over both transports, `rounds` samples each (after a short warm-up).
 */
export const runTlsBench = (rounds: number): Promise<TlsBenchResult> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const tcpTransport = TcpTransport.make()
      const tlsTransport = yield* TlsTransport.make({ secret: "bench-s3cr3t", identity: "bench-dialer" })
      const tcp = yield* connectTimes(tcpTransport, rounds)
      const tls = yield* connectTimes(tlsTransport, rounds)
      const wakeTcp = yield* wakeTimes(tcpTransport, rounds)
      const wakeTls = yield* wakeTimes(tlsTransport, rounds)
      return {
        tcp: { connectP50Us: tcp.p50Us, connectP99Us: tcp.p99Us },
        tls: { connectP50Us: tls.p50Us, connectP99Us: tls.p99Us },
        wakeTcp,
        wakeTls
      }
    })
  )

const isMain =
  process.argv[1] !== undefined && Path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)
if (isMain) {
  const rounds = Number(process.argv[2] ?? "1000")
  runTlsBench(Number.isInteger(rounds) && rounds > 0 ? rounds : 1000).then(
    (result) => console.log(JSON.stringify(result, null, 2)),
    (error: unknown) => {
      console.error(error)
      process.exitCode = 1
    }
  )
}
