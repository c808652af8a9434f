/**
 * The bench's process plumbing: one message shape on the IPC channel between the driver and its
 * children, a mailbox per channel, and a monotonic clock readable from every process.
 */
import { type ChildProcess, fork } from "node:child_process"
import { fileURLToPath } from "node:url"
import { Schema } from "effect"

/** Every IPC message: a kind, an optional sequence number, an optional body. */
export const Message = Schema.Struct({
  kind: Schema.String,
  i: Schema.optional(Schema.Number),
  data: Schema.optional(Schema.Unknown)
})
export type Message = typeof Message.Type

const decodeMessage = Schema.decodeUnknownSync(Message)

/**
 * `CLOCK_MONOTONIC` in nanoseconds, as a number. On Linux it is one clock for every process on the
 * machine, so a timestamp taken in one child can be subtracted from one taken in another.
 */
export const nowNs = (): number => Number(process.hrtime.bigint())

/** Messages arriving on one channel, taken in order by kind. A message of kind `error` fails it. */
export class Mailbox {
  private readonly queued: Array<Message> = []
  private readonly waiting: Array<{
    kind: string
    resolve: (m: Message) => void
    reject: (e: Error) => void
  }> = []
  private failure: Error | undefined = undefined
  private readonly handlers = new Map<string, (message: Message) => void>()

  /**
   * Hands every message of `kind` to `handler` synchronously, in the IPC callback, instead of queueing
   * it: the latency benchmarks' pushers act on the `push` command without a promise hop.
   */
  handle(kind: string, handler: (message: Message) => void): void {
    this.handlers.set(kind, handler)
  }

  deliver(message: Message): void {
    if (message.kind === "error") {
      this.fail(new Error(String(message.data)))
      return
    }
    const handler = this.handlers.get(message.kind)
    if (handler !== undefined) {
      handler(message)
      return
    }
    const at = this.waiting.findIndex((w) => w.kind === message.kind)
    if (at >= 0) {
      const [waiter] = this.waiting.splice(at, 1)
      waiter!.resolve(message)
      return
    }
    this.queued.push(message)
  }

  /** The next message of `kind`, failing after `timeoutMs`. */
  take(kind: string, timeoutMs: number, what = kind): Promise<Message> {
    const at = this.queued.findIndex((m) => m.kind === kind)
    if (at >= 0) return Promise.resolve(this.queued.splice(at, 1)[0]!)
    if (this.failure !== undefined) return Promise.reject(this.failure)
    return new Promise((resolve, reject) => {
      const waiter = {
        kind,
        resolve: (m: Message) => {
          clearTimeout(timer)
          resolve(m)
        },
        reject: (e: Error) => {
          clearTimeout(timer)
          reject(e)
        }
      }
      const timer = setTimeout(() => {
        const i = this.waiting.indexOf(waiter)
        if (i >= 0) this.waiting.splice(i, 1)
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`))
      }, timeoutMs)
      this.waiting.push(waiter)
    })
  }

  /** Fails every pending and future `take`, e.g. when the other side died. */
  fail(error: Error): void {
    if (this.failure === undefined) this.failure = error
    for (const waiter of this.waiting.splice(0)) waiter.reject(this.failure)
  }
}

// ---------------------------------------------------------------------------------------------
// child side
// ---------------------------------------------------------------------------------------------

const parentBox = new Mailbox()
let listening = false

/** The mailbox of messages from the driver (child side). */
export const fromParent = (): Mailbox => {
  if (!listening) {
    listening = true
    process.on("message", (raw) => parentBox.deliver(decodeMessage(raw)))
  }
  return parentBox
}

/** Sends to the driver (child side). */
export const toParent = (message: Message): void => {
  process.send?.(message)
}

/** Resolves once everything sent so far has left this process (IPC keeps order). */
export const flushParent = (): Promise<void> =>
  new Promise((resolve) => {
    if (process.send === undefined || !process.connected) return resolve()
    process.send({ kind: "flush" }, undefined, {}, () => resolve())
  })

// ---------------------------------------------------------------------------------------------
// driver side
// ---------------------------------------------------------------------------------------------

const childEntry = fileURLToPath(new URL("./child.js", import.meta.url))

/** A forked bench process running one role. */
export class Child {
  readonly process: ChildProcess
  readonly mailbox = new Mailbox()
  private exited = false

  constructor(
    readonly role: string,
    params: object,
    execArgv: ReadonlyArray<string> = [],
    /** The script to fork and the arguments before the role: `bench/child.js` by default. */
    entry: { readonly file: string; readonly args: ReadonlyArray<string> } = { file: childEntry, args: [] }
  ) {
    this.process = fork(entry.file, [...entry.args, role, JSON.stringify(params)], {
      execArgv: [...execArgv],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
      serialization: "json"
    })
    this.process.on("message", (raw) => this.mailbox.deliver(decodeMessage(raw)))
    this.process.on("exit", (code, signal) => {
      this.exited = true
      this.mailbox.fail(new Error(`${role} exited (${code ?? signal})`))
    })
  }

  send(message: Message): void {
    if (!this.exited) this.process.send(message)
  }

  /** The next message of `kind`; a child that dies or reports an error fails the wait. */
  take(kind: string, timeoutMs: number): Promise<Message> {
    return this.mailbox.take(kind, timeoutMs, `${kind} from ${this.role}`).catch((error: unknown) => {
      throw new Error(`${this.role}: ${error instanceof Error ? error.message : String(error)}`)
    })
  }

  /** Asks the child to stop, and kills it if it has not within a second. */
  async stop(): Promise<void> {
    if (this.exited) return
    this.send({ kind: "stop" })
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.process.kill("SIGKILL")
        resolve()
      }, 1000)
      this.process.once("exit", () => {
        clearTimeout(timer)
        resolve()
      })
    })
  }
}
