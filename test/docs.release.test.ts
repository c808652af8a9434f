/**
 * The docs as pages: the README is a front door (short, lines a reader can take in, a link to every
 * guide), every relative link and anchor in the pages lands, and the committed API reference in
 * `docs/api/` is what `npm run docs` writes from the doc comments in `src/`. That last check exists
 * because `docs/api/` is generated but committed (so it reads on GitHub and ships in the package): a
 * doc comment changed without `npm run docs` would leave it describing code that no longer exists.
 */
import { execFile } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import { compare, docgenModulesDir, headings, markLines, render } from "../scripts/docs-api.js"

const root = fileURLToPath(new URL("..", import.meta.url))
const read = (file: string) => Fs.readFileSync(Path.join(root, file), "utf8")
const readme = read("README.md")

/** Every file under `dir` (relative to the repository), recursively. */
const walk = (dir: string): ReadonlyArray<string> =>
  Fs.readdirSync(Path.join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = Path.posix.join(dir, entry.name)
    return entry.isDirectory() ? walk(path) : [path]
  })

/** The link targets of a markdown text, outside fenced code and inline code spans. */
const linkTargets = (markdown: string): ReadonlyArray<string> =>
  markLines(markdown).flatMap((line) => {
    if (line.inCode) return []
    const text = line.text.replace(/`[^`]*`/g, (code) => "x".repeat(code.length))
    return [...text.matchAll(/!?\[[^\]]*\]\(<?([^)\s>]+)>?(?:\s+"[^"]*")?\)/g)].map((match) => match[1]!)
  })

const isExternal = (target: string) => /^[a-z][a-z0-9+.-]*:/i.test(target)

/** A relative `target` as a path from the repository's root, seen from `file`, and its anchor. */
const resolveFrom = (file: string, target: string): { readonly path: string; readonly anchor: string } => {
  const hash = target.indexOf("#")
  const path = hash < 0 ? target : target.slice(0, hash)
  const anchor = hash < 0 ? "" : decodeURIComponent(target.slice(hash + 1))
  return {
    path: path === "" ? file : Path.posix.normalize(Path.posix.join(Path.posix.dirname(file), path)),
    anchor
  }
}

const lines = readme.endsWith("\n") ? readme.slice(0, -1).split("\n") : readme.split("\n")

describe("README.md", () => {
  it("is at most 200 lines", () => {
    assert.isAtMost(lines.length, 200)
  })

  it("has no line over 160 characters outside code blocks and tables", () => {
    const long = markLines(readme)
      .map((line, i) => ({ ...line, number: i + 1 }))
      .filter((line) => !line.inCode && !line.text.trimStart().startsWith("|") && line.text.length > 160)
      .map((line) => `README.md:${line.number} (${line.text.length} characters)`)
    assert.deepStrictEqual(long, [])
  })

  it("links every page in docs/, the API reference and the spec", () => {
    const linked = new Set(
      linkTargets(readme)
        .filter((target) => !isExternal(target))
        .map((target) => resolveFrom("README.md", target).path)
    )
    // docs/api/ and docs/spec/ are linked as a whole, through their index and the spec's one page.
    const pages = walk("docs").filter((file) => !/^docs\/(api|spec)\//.test(file))
    const missing = [...pages, "docs/api/README.md", "docs/spec/mesh.md"].filter((page) => !linked.has(page))
    assert.deepStrictEqual(missing, [], "pages the README does not link")
  })
})

describe("links", () => {
  const pages = [
    "README.md",
    "bench/README.md",
    ...walk("docs").filter((file) => file.endsWith(".md") && !file.startsWith("docs/spec/"))
  ]

  it("every relative link points at a file that exists, and every #anchor at a heading", () => {
    const anchors = new Map<string, ReadonlySet<string>>()
    const anchorsOf = (file: string) => {
      let found = anchors.get(file)
      if (found === undefined) {
        found = new Set(headings(read(file)).map((heading) => heading.anchor))
        anchors.set(file, found)
      }
      return found
    }
    const broken: Array<string> = []
    for (const page of pages) {
      for (const target of linkTargets(read(page))) {
        if (isExternal(target)) continue
        const { path, anchor } = resolveFrom(page, target)
        if (!Fs.existsSync(Path.join(root, path))) broken.push(`${page}: ${target} (no ${path})`)
        else if (anchor !== "" && path.endsWith(".md") && !anchorsOf(path).has(anchor))
          broken.push(`${page}: ${target} (no heading #${anchor} in ${path})`)
      }
    }
    assert.deepStrictEqual(broken, [])
  })
})

describe("docs/api", () => {
  /** Whether docgen's pages are older than the sources and settings they are made from. */
  const docgenStale = () => {
    if (!Fs.existsSync(docgenModulesDir)) return true
    // The module pages are rewritten on every run (docgen leaves its index.md alone).
    const generated = Fs.readdirSync(docgenModulesDir)
      .filter((name) => name.endsWith(".ts.md"))
      .map((name) => Fs.statSync(Path.join(docgenModulesDir, name)).mtimeMs)
    const sources = ["docgen.json", ...walk("src").filter((file) => file.endsWith(".ts"))].map(
      (file) => Fs.statSync(Path.join(root, file)).mtimeMs
    )
    return generated.length === 0 || Math.min(...generated) < Math.max(...sources)
  }

  it("is what `npm run docs` writes, every {@link} resolved", async () => {
    // Fresh after `npm run docs` or `docs:check`; otherwise (a fresh clone, `npm test`) docgen runs here.
    // Not with `execFileSync`: docgen takes half a minute alone and minutes on a busy machine, and a
    // test process whose event loop is held that long misses its replies to vitest, which then fails
    // the run ("Timeout calling onTaskUpdate") and leaves the files after it unreported.
    if (docgenStale()) {
      const ran = await new Promise<{ readonly failed: boolean; readonly output: string }>((resolve) =>
        execFile(
          Path.join(root, "node_modules", ".bin", "docgen"),
          [],
          { cwd: root, maxBuffer: 64 * 1024 * 1024 },
          (error, stdout, stderr) => resolve({ failed: error !== null, output: `${stdout}${stderr}` })
        )
      )
      if (ran.failed)
        assert.fail(`docgen failed (does an @example in src/ compile and run?):\n${ran.output.slice(-4000)}`)
    }
    const { files, unresolved } = render()
    assert.deepStrictEqual(unresolved, [], "{@link}s naming nothing public")
    assert.deepStrictEqual(compare(files), [], "docs/api is stale: run `npm run docs` and commit docs/api")
  }, 300_000)
})
