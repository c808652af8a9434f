/**
 * The stdin protocol of `queen-mesh node`: one JSON command per line, each a call of the `Mesh` API
 * (docs/cli.md, "node"). Lines are decoded with a Schema, so a malformed one is refused with a reason
 * and never reaches the mesh.
 *
 * @since 0.1.0
 */
import { Effect, Either, ParseResult, Schema } from "effect"
import { QueueName } from "../Frame.js"
import type { MeshShape } from "../Mesh.js"
import type { InvalidInputError } from "../MeshError.js"

/** Absent and `null` both mean "no tenant": the receiver fans out to every tenant (spec "The frame set"). */
const tenant = Schema.optional(Schema.NullOr(Schema.String))

const item = {
  queue: QueueName,
  partition: Schema.String,
  tenant
}

/**
 * `{queue, partition, tenant?}`: one item of `message_available_batch`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Item = Schema.Struct(item)

/**
 * @since 0.1.0
 * @category schemas
 */
export const MessageAvailable = Schema.Struct({ op: Schema.Literal("message_available"), ...item })

/**
 * @since 0.1.0
 * @category schemas
 */
export const MessageAvailableBatch = Schema.Struct({
  op: Schema.Literal("message_available_batch"),
  items: Schema.Array(Item)
})

/**
 * @since 0.1.0
 * @category schemas
 */
export const HotlistDirty = Schema.Struct({ op: Schema.Literal("hotlist_dirty"), ...item })

/**
 * @since 0.1.0
 * @category schemas
 */
export const QueueConfig = Schema.Struct({
  op: Schema.Literal("queue_config_set", "queue_config_delete"),
  queue: QueueName,
  tenant
})

/**
 * @since 0.1.0
 * @category schemas
 */
export const Maintenance = Schema.Struct({
  op: Schema.Literal("maintenance", "pop_maintenance"),
  enabled: Schema.Boolean
})

/**
 * Every command `queen-mesh node` accepts on stdin.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Command = Schema.Union(
  MessageAvailable,
  MessageAvailableBatch,
  HotlistDirty,
  QueueConfig,
  Maintenance
)

/**
 * @since 0.1.0
 * @category models
 */
export type Command = typeof Command.Type

const decodeJson = Schema.decodeUnknownEither(Schema.parseJson(Command))

/**
 * Decodes one stdin line. The failure is a one-line reason, fit for stderr.
 *
 * @since 0.1.0
 * @category decoding
 */
export const decodeLine = (line: string): Either.Either<Command, string> =>
  Either.mapLeft(decodeJson(line), (error) =>
    ParseResult.ArrayFormatter.formatErrorSync(error)
      .map((issue) => (issue.path.length === 0 ? issue.message : `${issue.path.join(".")}: ${issue.message}`))
      .join("; ")
  )

/**
 * Sends one command through the `Mesh` API.
 *
 * @since 0.1.0
 * @category running
 */
export const run = (mesh: MeshShape, command: Command): Effect.Effect<void, InvalidInputError> => {
  switch (command.op) {
    case "message_available":
      return mesh.messageAvailable(command)
    case "message_available_batch":
      return mesh.messageAvailableBatch(command.items)
    case "hotlist_dirty":
      return mesh.hotlistDirty(command)
    case "queue_config_set":
      return mesh.queueConfigSet(command)
    case "queue_config_delete":
      return mesh.queueConfigDelete(command)
    case "maintenance":
      return mesh.setMaintenance(command.enabled)
    case "pop_maintenance":
      return mesh.setPopMaintenance(command.enabled)
  }
}

/**
 * Decodes and runs one line; a refused line is logged at error level (stderr) and the caller carries
 * on. Blank lines are ignored.
 *
 * @since 0.1.0
 * @category running
 */
export const handleLine = (mesh: MeshShape, line: string): Effect.Effect<void> => {
  const text = line.trim()
  if (text === "") return Effect.void
  return Either.match(decodeLine(text), {
    onLeft: (reason) =>
      Effect.logError("ignored a bad stdin command").pipe(Effect.annotateLogs({ reason, line: text })),
    onRight: (command) =>
      run(mesh, command).pipe(
        Effect.catchAll((error) =>
          Effect.logError("ignored a bad stdin command").pipe(
            Effect.annotateLogs({ reason: error.message, line: text })
          )
        )
      )
  })
}
