/**
 * The docs' promises held against the code, so the two cannot drift apart unnoticed: every field of
 * every stats body has a row in docs/operating.md's table and no row names a field that does not exist;
 * every variable `queen-mesh node` reads is in its `--help` and in docs/configuration.md (the variables
 * are recorded as the node's configuration reads them, and every `QUEEN_*` name the sources mention is
 * counted too); README's list of what is in it names every namespace the package exports; and no
 * committed file names a path of one machine.
 */
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import { Config, ConfigProvider, Effect, Result, type SchemaAST } from "effect"
import * as EnvTable from "../src/cli/env.js"
import * as Help from "../src/cli/help.js"
import * as Io from "../src/cli/io.js"
import * as Node from "../src/cli/node.js"
import * as MeshStats from "../src/MeshStats.js"
import * as Postgres from "../src/Postgres.js"

const root = fileURLToPath(new URL("..", import.meta.url))
const read = (file: string) => Fs.readFileSync(Path.join(root, file), "utf8")

/** Two lists of names hold the same names: what each has that the other lacks is said under its label. */
const sameNames = (a: Iterable<string>, aLabel: string, b: Iterable<string>, bLabel: string): void => {
  const [left, right] = [new Set(a), new Set(b)]
  assert.deepStrictEqual(
    [...left].filter((name) => !right.has(name)).sort(),
    [],
    `in ${aLabel}, not in ${bLabel}`
  )
  assert.deepStrictEqual(
    [...right].filter((name) => !left.has(name)).sort(),
    [],
    `in ${bLabel}, not in ${aLabel}`
  )
}

// ---------------------------------------------------------------------------------------------
// the stats body and its table
// ---------------------------------------------------------------------------------------------

/**
 * The leaf paths of a Schema's type: `a.b` for a struct's fields, `a[]` for an array's items, `a.*` for
 * a record's values; a union of structs (an optional part) is its structs' paths. Effect 4's AST is the
 * type itself (transformations and checks ride on its nodes), so there is no encoded side to skip.
 */
const leafPaths = (ast: SchemaAST.AST, path = "", out = new Set<string>()): Set<string> => {
  const at = (name: string) => (path === "" ? name : `${path}.${name}`)
  switch (ast._tag) {
    case "Objects":
      if (ast.indexSignatures.length > 0) out.add(at("*"))
      for (const field of ast.propertySignatures) leafPaths(field.type, at(String(field.name)), out)
      return out
    case "Union": {
      const parts = ast.types.filter(
        (t) => t._tag !== "Null" && t._tag !== "Undefined" && !(t._tag === "Literal" && t.literal === null)
      )
      if (parts.some((t) => t._tag !== "Literal")) for (const part of parts) leafPaths(part, path, out)
      else out.add(path)
      return out
    }
    case "Arrays":
      for (const element of ast.rest) leafPaths(element, `${path}[]`, out)
      return out
    case "Suspend":
      return leafPaths(ast.thunk(), path, out)
    default:
      out.add(path)
      return out
  }
}

const bodyPaths = (): Set<string> => {
  const paths = new Set<string>()
  for (const schema of [MeshStats.ActiveStats, MeshStats.InactiveStats, Io.StatsExtras]) {
    for (const path of leafPaths(schema.ast)) paths.add(path)
  }
  return paths
}

/**
 * The fields the operating page's table names: the backticked names of each row's first cell. A row
 * may abbreviate: after its first name, a bare name shares the first one's parent (`peers[].host`,
 * `port` is `peers[].port`). A name ending in `.*` stands for every key below it.
 */
const tableFields = (page: string): Array<string> => {
  const start = page.indexOf("## The stats body")
  const rows = page
    .slice(start)
    .split("\n")
    .filter((line) => line.startsWith("| `"))
  const fields: Array<string> = []
  for (const row of rows) {
    const cell = row.split("|")[1] ?? ""
    const names = [...cell.matchAll(/`([^`]+)`/g)].map((match) => match[1]!)
    const first = names[0] ?? ""
    const parent = first.includes(".") ? first.slice(0, first.lastIndexOf(".") + 1) : ""
    for (const [i, name] of names.entries()) {
      fields.push(i > 0 && !name.includes(".") && !name.includes("[") ? parent + name : name)
    }
  }
  return fields
}

/** Whether a table field stands for a body path: the same, a wildcard above it, or an array's items. */
const covers = (field: string, path: string): boolean =>
  field === path ||
  (field.endsWith(".*") && path.startsWith(field.slice(0, -1))) ||
  (field.endsWith("[]") === false && path === `${field}[]`)

describe("docs/operating.md's stats table", () => {
  it("names every field of every stats body, and nothing else", () => {
    const paths = [...bodyPaths()]
    const fields = tableFields(read("docs/operating.md"))
    assert.isAbove(fields.length, 30)
    const missing = paths.filter((path) => !fields.some((field) => covers(field, path)))
    const unknown = fields.filter((field) => !paths.some((path) => covers(field, path)))
    assert.deepStrictEqual(missing, [], "body fields the table does not name")
    assert.deepStrictEqual(unknown, [], "table rows that name no field of any body")
  })
})

// ---------------------------------------------------------------------------------------------
// the variables
// ---------------------------------------------------------------------------------------------

/** A provider over `env` that records every name the configuration asks for. */
const recording = (env: Record<string, string>) => {
  const asked = new Set<string>()
  const inner = ConfigProvider.fromEnv({ env })
  const provider = ConfigProvider.make((path) => {
    asked.add(path.join("."))
    return inner.load(path)
  })
  return { asked, provider }
}

/** Every variable `queen-mesh node` reads through its configuration, as it asks for them. */
const configured = (): Set<string> => {
  const names = new Set<string>()
  const cases: ReadonlyArray<readonly [Config.Config<unknown>, Record<string, string>]> = [
    // Nothing set: every fallback is taken, so every alias is asked for.
    [Node.config, {}],
    [Postgres.config, { QUEEN_MESH_PG_URL: "postgres://db/queen" }]
  ]
  for (const [config, env] of cases) {
    const { asked, provider } = recording(env)
    Effect.runSync(Effect.result(config.parse(provider)))
    for (const name of asked) names.add(name)
  }
  return names
}

/** Every `QUEEN_*` name the sources mention (read from the environment by hand, or named in a message). */
const mentioned = (): Set<string> => {
  const names = new Set<string>()
  const walk = (dir: string) => {
    for (const entry of Fs.readdirSync(Path.join(root, dir), { withFileTypes: true })) {
      const path = Path.posix.join(dir, entry.name)
      if (entry.isDirectory()) walk(path)
      else if (path.endsWith(".ts")) {
        for (const match of read(path).matchAll(/\b(QUEEN_[A-Z0-9_]*[A-Z0-9])\b/g)) names.add(match[1]!)
      }
    }
  }
  walk("src")
  return names
}

/** Variables the CLI reads straight from `process.env` rather than through its configuration. */
const readByHand = ["QUEEN_MESH_LOG_FORMAT", "QUEEN_MESH_LOG_LEVEL", "NO_COLOR"]

describe("the variables queen-mesh node reads", () => {
  const read_ = new Set([...configured(), ...mentioned(), ...readByHand])
  const help = Help.render("node", { width: 100, color: false })
  const configuration = read("docs/configuration.md")

  it("are asked for by its configuration as expected (the recording works)", () => {
    for (const name of [
      "QUEEN_MESH_PEERS",
      "QUEEN_UDP_PEERS",
      "PORT",
      "QUEEN_MESH_HTTP_PORT",
      "QUEEN_MESH_PG_CHANNEL"
    ]) {
      assert.isTrue(read_.has(name), name)
    }
  })

  it("each appears in `queen-mesh help node` and in docs/configuration.md", () => {
    const named = (text: string, name: string) =>
      new RegExp(`(^|[^A-Z0-9_])\\$?${name}([^A-Z0-9_]|$)`).test(text)
    const notInHelp = [...read_].filter((name) => !named(help, name)).sort()
    const notInDocs = [...read_].filter((name) => !named(configuration, name)).sort()
    assert.deepStrictEqual(notInHelp, [], "read by node, not in its --help")
    assert.deepStrictEqual(notInDocs, [], "read by node, not in docs/configuration.md")
  })

  it("--help names no variable the node does not read", () => {
    const listed = [
      ...help.matchAll(/^ {2}([A-Z][A-Z0-9_]+)(?: \(or ([A-Z][A-Z0-9_]+)\))? {2}default/gm)
    ].flatMap((match) => [match[1]!, ...(match[2] === undefined ? [] : [match[2]])])
    assert.isAbove(listed.length, 20)
    assert.deepStrictEqual(
      listed.filter((name) => !read_.has(name)),
      [],
      "in --help, read by nothing"
    )
  })
})

// ---------------------------------------------------------------------------------------------
// machine paths
// ---------------------------------------------------------------------------------------------

describe("committed files", () => {
  it("name no path of one machine", () => {
    const files = execFileSync("git", ["ls-files"], { cwd: root, encoding: "utf8" })
      .split("\n")
      .filter((file) => file !== "" && file !== "package-lock.json" && Fs.existsSync(Path.join(root, file)))
    const offending: Array<string> = []
    for (const file of files) {
      const bytes = Fs.readFileSync(Path.join(root, file))
      if (bytes.includes(0)) continue
      const text = bytes.toString("utf8")
      for (const match of text.matchAll(
        /(?<![\w.])\/(?:work|root|home|Users)\/[\w.-]+|(?<![\w.])\/tmp\/[\w.-]+\//g
      )) {
        offending.push(`${file}: ${match[0]}`)
      }
    }
    assert.deepStrictEqual(offending, [])
  })
})

// Guards against a recording that silently records nothing.
it("the recording provider records", () => {
  const { asked, provider } = recording({ A: "1" })
  const result = Effect.runSync(Effect.result(Config.String("A").parse(provider)))
  assert.isTrue(Result.isSuccess(result))
  assert.deepStrictEqual([...asked], ["A"])
})

describe("docs/cli.md's environment table", () => {
  it("lists exactly the variables of `queen-mesh help node`", () => {
    const page = read("docs/cli.md")
    const section = page.slice(
      page.indexOf("### Environment"),
      page.indexOf("\n## ", page.indexOf("### Environment"))
    )
    const inPage = new Set(
      section
        .split("\n")
        .filter((line) => line.startsWith("| `"))
        .flatMap((line) => [...(line.split("|")[1] ?? "").matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]!))
    )
    const inHelp = new Set(
      EnvTable.forCommand("node").flatMap((v) => [v.name, ...(v.alias === undefined ? [] : [v.alias])])
    )
    sameNames(inHelp, "--help", inPage, "docs/cli.md")
  })
})

describe("README's list of what is in it", () => {
  it("names every namespace the package's index exports, and nothing else", () => {
    const exported = new Set(
      [...read("src/index.ts").matchAll(/^export \* as (\w+) from /gm)].map((m) => m[1]!)
    )
    const readme = read("README.md")
    const start = readme.indexOf("## What is in it")
    const section = readme.slice(start, readme.indexOf("\n## ", start + 1))
    // The bold names at the head of each bullet: **`Mesh`** or **`Waker`, `HotList`**.
    const named = new Set(
      [...section.matchAll(/\*\*([^*]+)\*\*/g)].flatMap((m) =>
        [...m[1]!.matchAll(/`(\w+)`/g)].map((n) => n[1]!)
      )
    )
    assert.isAbove(exported.size, 10)
    sameNames(exported, "src/index.ts's exports", named, "README")
  })
})
