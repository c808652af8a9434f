/**
 * The stdin protocol of `queen-mesh node`: one JSON command per line, each a call of the `Mesh` API
 * (docs/cli.md, "stdin"). A line is decoded in three steps, so a refusal says one thing: not JSON; an
 * unknown `op`; or, with the op's own Schema, the one field that is wrong
 * (`message_available: queue must be a non-empty string`).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as SchemaIssue from "effect/SchemaIssue"
import * as Frame from "../Frame.js"
import * as Names from "../internal/wire/names.js"
import * as Membership from "../Membership.js"
import type { MeshShape } from "../Mesh.js"
import type { InvalidInputError, MeshClosedError } from "../MeshError.js"
import { safeJson } from "./escape.js"
import { printLine, stdout } from "./io.js"

const fits = Names.fitsName

/**
 * A name field: the message says what is wrong with it, without its path (the caller adds that). The
 * message of a value that is not a string is the schema's; a string's is its check's.
 */
const name = (options: { readonly nonEmpty: boolean }) =>
  Schema.String.annotate({
    message: options.nonEmpty ? "must be a non-empty string" : "must be a string"
  }).check(
    Schema.makeFilter((s: string) =>
      options.nonEmpty && s === ""
        ? "must be a non-empty string"
        : fits(s) || `is longer than ${Names.MAX_NAME_CHARS} characters`
    )
  )

const queue = name({ nonEmpty: true })
const partition = name({ nonEmpty: false })
/**
 * An optional name where `null` means none: the message says which rule the value broke. The message
 * is on the union with `undefined` itself (what `Schema.optional` would add), which is the one a value
 * of no member's type fails.
 */
const optionalName = Schema.optionalKey(
  Schema.UndefinedOr(Schema.NullOr(name({ nonEmpty: false }))).annotate({
    message: "must be a string or null"
  })
)

/** Absent and `null` both mean "no tenant": the receiver fans out to every tenant (spec "The frame set"). */
const tenant = optionalName
const enabled = Schema.Boolean.annotate({ message: "must be true or false" })

const item = { queue, partition, tenant }

/**
 * `{queue, partition, tenant?}`: one item of `message_available_batch`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Item = Schema.Struct(item).annotate({ message: "must be an object" })

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
  items: Schema.Array(Item).annotate({ message: "must be an array of {queue, partition, tenant}" })
})

/**
 * `{op: "hotlist_dirty", queue, partition, tenant?, group?}`: `group` scopes the mark to one consumer
 * group's ring; left out, `null` or `""`, the mark is for every ring.
 *
 * @since 0.1.0
 * @category schemas
 */
export const HotlistDirty = Schema.Struct({
  op: Schema.Literal("hotlist_dirty"),
  ...item,
  group: optionalName
})

/**
 * `{op: "eph_admin", action, tenant, queue}`: an ephemeral-queue admin verb for every peer
 * (`EPH_ADMIN`); `action` is `reset`, `delete` or `config_set`, the tenant a UUID.
 *
 * @since 0.1.0
 * @category schemas
 */
export const EphAdmin = Schema.Struct({
  op: Schema.Literal("eph_admin"),
  action: Frame.EphOp.annotate({ message: `must be ${Names.alternatives(Frame.EphOp.literals)}` }),
  tenant: Schema.String.annotate({ message: "must be a UUID" }).check(
    Schema.makeFilter((s: string) => Names.isUuid(s) || "must be a UUID")
  ),
  queue
})

/**
 * `{op: "eph_members"}`: prints upstream's ephemeral member list as one line,
 * `{"event":"eph_members","members":[{server_id, http_addr, epoch}]}`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const EphMembers = Schema.Struct({ op: Schema.Literal("eph_members") })

/**
 * @since 0.1.0
 * @category schemas
 */
export const QueueConfig = Schema.Struct({
  op: Schema.Literals(["queue_config_set", "queue_config_delete"]),
  queue,
  tenant
})

/**
 * @since 0.1.0
 * @category schemas
 */
export const Maintenance = Schema.Struct({
  op: Schema.Literals(["maintenance", "pop_maintenance"]),
  enabled
})

/**
 * Every command `queen-mesh node` accepts on stdin.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Command = Schema.Union([
  MessageAvailable,
  MessageAvailableBatch,
  HotlistDirty,
  QueueConfig,
  Maintenance,
  EphAdmin,
  EphMembers
])

/**
 * @since 0.1.0
 * @category models
 */
export type Command = typeof Command.Type

/** The op of each command, to its Schema: a new command is one row here and one case in `run`. */
const decoder = <S extends Schema.Decoder<Command>>(schema: S) =>
  Schema.decodeUnknownResult(schema, { errors: "first" })
const BY_OP: Readonly<Record<Command["op"], (u: unknown) => Result.Result<Command, Schema.SchemaError>>> = {
  message_available: decoder(MessageAvailable),
  message_available_batch: decoder(MessageAvailableBatch),
  hotlist_dirty: decoder(HotlistDirty),
  queue_config_set: decoder(QueueConfig),
  queue_config_delete: decoder(QueueConfig),
  maintenance: decoder(Maintenance),
  pop_maintenance: decoder(Maintenance),
  eph_admin: decoder(EphAdmin),
  eph_members: decoder(EphMembers)
}

/**
 * Every op, in the order the docs list them.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ops: ReadonlyArray<Command["op"]> = Object.keys(BY_OP).filter((op): op is Command["op"] =>
  Object.hasOwn(BY_OP, op)
)

const isOp = (op: string): op is Command["op"] => Object.hasOwn(BY_OP, op)

const Envelope = Schema.Struct({ op: Schema.String })
const decodeEnvelope = Schema.decodeUnknownResult(Envelope)

/** The issues of a decode as path and message; a missing field "is missing", as the lines always said. */
const formatIssues = SchemaIssue.makeFormatterStandardSchemaV1({
  leafHook: (issue) => (issue._tag === "MissingKey" ? "is missing" : SchemaIssue.defaultLeafHook(issue))
})

const pathText = (path: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }>): string =>
  path
    .map((segment, i) => {
      const key = typeof segment === "object" ? segment.key : segment
      return typeof key === "number" ? `[${key}]` : i === 0 ? String(key) : `.${String(key)}`
    })
    .join("")

/** Text from the line, cut and escaped, for a message. */
const quote = (s: string) => safeJson(s.length > 40 ? `${s.slice(0, 40)}…` : s)

/**
 * A refused line: `op` when the line got as far as naming a known one.
 *
 * @since 0.1.0
 * @category models
 */
export interface Refusal {
  readonly op: string | null
  readonly reason: string
}

/**
 * Decodes one stdin line; the failure says in one line what is wrong.
 *
 * @since 0.1.0
 * @category decoding
 */
export const decodeLine = (line: string): Result.Result<Command, Refusal> => {
  let json: unknown
  try {
    json = JSON.parse(line)
  } catch {
    return Result.fail({ op: null, reason: "not JSON: expected one JSON object per line" })
  }
  const envelope = decodeEnvelope(json)
  if (Result.isFailure(envelope)) {
    const hasOp = typeof json === "object" && json !== null && !Array.isArray(json) && "op" in json
    return Result.fail({
      op: null,
      reason: hasOp ? "op must be a string" : 'expected a JSON object with an "op" field'
    })
  }
  const op = envelope.success.op
  if (!isOp(op)) {
    return Result.fail({ op: null, reason: `unknown op ${quote(op)} (expected one of ${ops.join(", ")})` })
  }
  return Result.mapError(BY_OP[op](json), (error) => {
    const issue = formatIssues(error.issue).issues[0]
    const where = issue?.path === undefined ? "" : pathText(issue.path)
    const message = issue?.message ?? "is invalid"
    return { op, reason: `${op}: ${where === "" ? message : `${where} ${message}`}` }
  })
}

/**
 * Sends one command through the `Mesh` API.
 *
 * @since 0.1.0
 * @category running
 */
export const run = (
  mesh: MeshShape,
  command: Command
): Effect.Effect<void, InvalidInputError | MeshClosedError> => {
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
    case "eph_admin":
      return mesh.ephemeralAdmin({ op: command.action, tenant: command.tenant, queue: command.queue })
    case "eph_members":
      return Effect.flatMap(mesh.members, (members) => printLine(ephMembersLine(members)))
  }
}

/**
 * The line of `eph_members`: upstream's list, sorted by server id.
 *
 * @since 0.1.0
 * @category lines
 */
export const ephMembersLine = (members: ReadonlyArray<Membership.Member>): string =>
  safeJson({
    event: "eph_members",
    members: Membership.ephemeralMembers(members).map((member) => ({
      server_id: member.serverId,
      http_addr: member.httpAddr,
      epoch: member.epoch
    }))
  })

/**
 * @since 0.1.0
 * @category models
 */
export interface HandleOptions {
  /** Answer each command on stdout: `sent` or `refused`. */
  readonly ack: boolean
}

/**
 * The `--ack` line of an accepted command.
 *
 * @since 0.1.0
 * @category lines
 */
export const sentLine = (op: string): string => safeJson({ event: "sent", op })

/**
 * The `--ack` line of a refused command.
 *
 * @since 0.1.0
 * @category lines
 */
export const refusedLine = (refusal: Refusal): string =>
  safeJson({ event: "refused", op: refusal.op, reason: refusal.reason })

/**
 * Refuses a line: one error log on stderr and, with `--ack`, a `refused` line on stdout.
 *
 * @since 0.1.0
 * @category running
 */
export const refuse = (refusal: Refusal, line: string, options: HandleOptions): Effect.Effect<void> =>
  Effect.andThen(
    Effect.logError("ignored a bad stdin command").pipe(
      Effect.annotateLogs({
        reason: refusal.reason,
        line: Names.excerpt(line)
      })
    ),
    options.ack ? printLine(refusedLine(refusal)) : Effect.void
  )

/**
 * Decodes and runs one line. Blank lines are ignored.
 *
 * @since 0.1.0
 * @category running
 */
export const handleLine = (mesh: MeshShape, line: string, options: HandleOptions): Effect.Effect<void> => {
  const text = line.trim()
  if (text === "") return Effect.void
  return Result.match(decodeLine(text), {
    onFailure: (refusal) => refuse(refusal, text, options),
    onSuccess: (command) =>
      run(mesh, command).pipe(
        Effect.matchEffect({
          onFailure: (error) =>
            refuse(
              {
                op: command.op,
                reason: `${command.op}: ${error._tag === "InvalidInputError" ? error.detail : error.message}`
              },
              text,
              options
            ),
          onSuccess: () => (options.ack ? printLine(sentLine(command.op)) : Effect.void)
        })
      )
  })
}

/**
 * The common line, a `message_available` the Schema accepts, checked by hand (the Schema costs many
 * times more per line): the item, or `undefined` for any other line, which `handleLine` then decodes
 * and, if it must, refuses in words. Accepts exactly what `MessageAvailable` accepts (test/cli.parts).
 *
 * @since 0.1.0
 * @category decoding
 */
export const quickMessageAvailable = (
  json: unknown
):
  | { readonly queue: string; readonly partition: string; readonly tenant: string | null | undefined }
  | undefined => {
  if (typeof json !== "object" || json === null || Array.isArray(json)) return undefined
  const { op, queue, partition, tenant } = json as { readonly [key: string]: unknown }
  if (op !== "message_available") return undefined
  if (typeof queue !== "string" || queue === "" || !fits(queue)) return undefined
  if (typeof partition !== "string" || !fits(partition)) return undefined
  if (tenant === undefined || tenant === null) return { queue, partition, tenant }
  return typeof tenant === "string" && fits(tenant) ? { queue, partition, tenant } : undefined
}

/**
 * Runs a valid `message_available` line at once, with no fiber: the push is the mesh's synchronous
 * call. `false` for any other line (nothing was done; `handleLine` takes it).
 *
 * @since 0.1.0
 * @category running
 */
export const unsafeHandleQuick = (mesh: MeshShape, line: string, options: HandleOptions): boolean => {
  let json: unknown
  try {
    json = JSON.parse(line)
  } catch {
    return false
  }
  const item = quickMessageAvailable(json)
  if (item === undefined) return false
  try {
    mesh.unsafeMessageAvailable(item)
  } catch {
    // Refused by the mesh's own check: nothing was sent, and `handleLine` words the refusal.
    return false
  }
  if (options.ack) stdout.writeLine(sentLine("message_available"))
  return true
}
