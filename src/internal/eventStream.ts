/**
 * A mesh's events as server-sent events, for the cluster page's live list: observed synchronously
 * (`Mesh.observe`, for the kinds asked only), held in a bounded buffer (64 events; more between two
 * messages are counted, not kept), sent as one message every 250 ms at most, a comment when idle so
 * that no proxy closes the stream, and ended after its lifetime (the page reconnects). The streams of
 * one mesh take places from a `Places` counter, so open pages cannot take every connection.
 *
 * @internal
 */
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import type { MeshShape } from "../Mesh.js"
import type { MeshEvent } from "../MeshEvent.js"

/** Event streams open now, and how many may be. */
export class Places {
  open = 0
  constructor(readonly max: number) {}

  get full(): boolean {
    return this.open >= this.max
  }
}

/** Events waiting for the stream's next message: at most 64, the rest counted. */
class EventBuffer<A> {
  private events: Array<readonly [MeshEvent, number]> = []
  private dropped = 0

  constructor(private readonly format: (event: MeshEvent, at: number) => A | undefined) {}

  push(event: MeshEvent, at: number): void {
    if (this.events.length < 64) this.events.push([event, at])
    else this.dropped++
  }

  /** The next message's body, `undefined` when there is nothing to say. */
  take(): { readonly events: ReadonlyArray<A>; readonly dropped: number } | undefined {
    if (this.events.length === 0 && this.dropped === 0) return undefined
    const events = this.events.flatMap(([event, at]) => {
      const line = this.format(event, at)
      return line === undefined ? [] : [line]
    })
    const batch = { events, dropped: this.dropped }
    this.events = []
    this.dropped = 0
    return batch
  }
}

const encoder = new TextEncoder()
const TICK_MILLIS = 250
/** A comment every so often keeps an idle stream from being closed by a proxy. */
const KEEP_ALIVE_TICKS = 60

export interface Options<A> {
  readonly tags: ReadonlyArray<MeshEvent["_tag"]>
  /** The message's form of an event, `undefined` to leave it out. */
  readonly format: (event: MeshEvent, at: number) => A | undefined
  readonly places: Places
  readonly lifetime: Duration.Duration
  /** Events observed before the stream opened, oldest first: its first message carries them. */
  readonly recent?: ReadonlyArray<readonly [MeshEvent, number]>
}

/** The stream's bytes: `data: {"events":[...],"dropped":n}` messages. */
export const eventStream = <A>(mesh: MeshShape, options: Options<A>): Stream.Stream<Uint8Array> =>
  Stream.unwrap(
    Effect.gen(function* () {
      const { places } = options
      const open = yield* Effect.acquireRelease(
        Effect.sync(() => ++places.open <= places.max),
        () =>
          Effect.sync(() => {
            places.open--
          })
      )
      // Lost the race for the last place: say so and end (the page tries again later).
      if (!open) return Stream.make(encoder.encode("retry: 10000\nevent: busy\ndata: {}\n\n"))
      const buffer = new EventBuffer(options.format)
      for (const [event, at] of options.recent ?? []) buffer.push(event, at)
      yield* mesh.observe((event) => buffer.push(event, Date.now()), options.tags)
      let idle = 0
      const ticks = Stream.fromSchedule(Schedule.spaced(TICK_MILLIS)).pipe(
        Stream.map(() => {
          const batch = buffer.take()
          if (batch !== undefined) {
            idle = 0
            return `data: ${JSON.stringify(batch)}\n\n`
          }
          return ++idle % KEEP_ALIVE_TICKS === 0 ? ": keep-alive\n\n" : ""
        }),
        Stream.filter((text) => text !== ""),
        Stream.map((text) => encoder.encode(text))
      )
      // The first bytes send the headers, so the page knows at once that the stream is open.
      return Stream.concat(Stream.make(encoder.encode("retry: 1000\n\n")), ticks).pipe(
        Stream.interruptWhen(Effect.sleep(options.lifetime))
      )
    })
  )
