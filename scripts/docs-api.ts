/**
 * The API reference in `docs/api/`, from the pages `@effect/docgen` writes to `.docgen/modules/` (see
 * `docgen.json`). `npm run docs` runs docgen, which type-checks and runs every `@example`, then this
 * script, which turns each module's page into `docs/api/<Module>.md` for reading on GitHub:
 *
 * - the Jekyll front matter goes, and each page gets a title naming its import path;
 * - every `{@link X}`, `{@link Module.X}` and `{@link X | text}` outside code becomes a markdown link to
 *   the page and heading of `X` (GitHub's heading anchors, duplicates numbered as GitHub numbers them).
 *   A link that names nothing public is printed as code and reported; `--check` fails on it, since the
 *   doc comment in `src/` is what needs fixing;
 * - `docs/api/README.md` lists the modules, after the package overview of `src/index.ts`.
 *
 * The output depends only on docgen's pages (no dates), so it is committed, and
 * `tsx scripts/docs-api.ts --check` (run by `npm run docs:check`; `npm test` runs the same comparison in
 * `test/docs.release.test.ts`) fails when `docs/api/` is not what this script would write.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const root = fileURLToPath(new URL("..", import.meta.url))

/** Where docgen writes its pages (`outDir` in `docgen.json`, plus `modules`). */
export const docgenModulesDir = Path.join(root, ".docgen", "modules")

/** Where the reference is committed. */
export const apiDir = Path.join(root, "docs", "api")

// ---------------------------------------------------------------------------------------------
// markdown helpers, shared with test/docs.release.test.ts
// ---------------------------------------------------------------------------------------------

/** A line and whether it is inside a fenced code block (fence lines count as inside). */
export interface Line {
  readonly text: string
  readonly inCode: boolean
}

/** The lines of a markdown text, each marked in or out of fenced code (``` or ~~~, any indent). */
export const markLines = (markdown: string): ReadonlyArray<Line> => {
  const out: Array<Line> = []
  let fence: string | undefined
  for (const text of markdown.split("\n")) {
    const opening = /^\s*(`{3,}|~{3,})/.exec(text)
    if (fence === undefined) {
      if (opening !== null) {
        fence = opening[1]!
        out.push({ text, inCode: true })
      } else out.push({ text, inCode: false })
    } else {
      out.push({ text, inCode: true })
      if (opening !== null && opening[1]!.startsWith(fence) && text.trim() === opening[1]) fence = undefined
    }
  }
  return out
}

/** The text a heading's anchor is made from: markdown links, emphasis marks and HTML tags removed. */
const headingText = (heading: string): string =>
  heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/<[^>]+>/g, "")
    .trim()

/** GitHub's anchor of one heading, before numbering duplicates (github-slugger's rule). */
export const slug = (heading: string): string =>
  headingText(heading)
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
    .replace(/ /g, "-")

/** A heading of a page: its level, its text and its anchor, duplicates numbered in page order. */
export interface Heading {
  readonly level: number
  readonly text: string
  readonly anchor: string
}

/** Every ATX heading outside code, with the anchors GitHub gives them. */
export const headings = (markdown: string): ReadonlyArray<Heading> => {
  const seen = new Map<string, number>()
  const out: Array<Heading> = []
  for (const line of markLines(markdown)) {
    if (line.inCode) continue
    const match = /^(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line.text)
    if (match === null) continue
    const base = slug(match[2]!)
    let anchor = base
    let n = seen.get(base) ?? 0
    while (seen.has(anchor)) anchor = `${base}-${++n}`
    seen.set(base, n)
    seen.set(anchor, 0)
    out.push({ level: match[1]!.length, text: match[2]!, anchor })
  }
  return out
}

// ---------------------------------------------------------------------------------------------
// one module page
// ---------------------------------------------------------------------------------------------

interface Page {
  /** The module's name, `Mesh`. */
  readonly module: string
  /** The page as written to docs/api, links still unresolved. */
  readonly body: string
  /** Export name (and `Namespace.Member`) to its anchor on this page. */
  readonly names: ReadonlyMap<string, string>
  /** The overview: the text between the title and the table of contents. */
  readonly overview: string
}

/** `## ~~LocalWaker~~ (type alias)` → `LocalWaker`, and whether it names a type alias. */
const exportName = (text: string): { readonly name: string; readonly typeAlias: boolean } => {
  const plain = text.replace(/~~/g, "").trim()
  const kind = /\s+\(([a-z ]+)\)$/.exec(plain)
  return {
    name: kind === null ? plain : plain.slice(0, kind.index),
    typeAlias: kind?.[1] === "type alias"
  }
}

const parsePage = (module: string, source: string): Page => {
  const lines = source.replace(/\r\n/g, "\n").split("\n")
  // docgen's front matter (and the `***` prettier leaves before it) ends where the overview starts.
  const start = lines.findIndex((line) => /^## .* overview$/.test(line))
  if (start < 0) throw new Error(`${module}: no "## ${module} overview" heading in docgen's page`)
  const kept = lines.slice(start).map((line) =>
    // A raw HTML heading gets no anchor on GitHub; plain bold keeps the table of contents readable.
    line === '<h2 class="text-delta">Table of contents</h2>' ? "**Table of contents**" : line.trimEnd()
  )
  const body = `# queen-mesh/${module}\n\n${kept.join("\n").trim()}\n`

  const toc = kept.indexOf("**Table of contents**")
  const overview = kept
    .slice(1, toc < 0 ? kept.length : toc)
    .join("\n")
    .replace(/\n---\s*$/, "")
    .trim()

  const names = new Map<string, string>()
  const typeAliases = new Map<string, string>()
  let parent: string | undefined
  for (const heading of headings(body)) {
    if (heading.level === 2) {
      const { name, typeAlias } = exportName(heading.text)
      parent = name
      if (typeAlias) typeAliases.set(name, typeAliases.get(name) ?? heading.anchor)
      else names.set(name, names.get(name) ?? heading.anchor)
    } else if (heading.level === 3 && parent !== undefined) {
      const member = `${parent}.${exportName(heading.text).name}`
      names.set(member, names.get(member) ?? heading.anchor)
    } else if (heading.level < 2) parent = undefined
  }
  // A value (or class, or interface) wins over a type alias of the same name.
  for (const [name, anchor] of typeAliases) if (!names.has(name)) names.set(name, anchor)
  return { module, body, names, overview }
}

// ---------------------------------------------------------------------------------------------
// {@link}
// ---------------------------------------------------------------------------------------------

const LINK = /\{@link(code|plain)?\s+([^\s|}]+)(?:\s*\|\s*([^}]*?)|\s+([^}]*?))?\s*\}/g

/** Where `target` points, seen from the page of `from`, or undefined when it names nothing public. */
const resolve = (
  target: string,
  from: Page,
  pages: ReadonlyMap<string, Page>,
  fromIndex: boolean
): string | undefined => {
  const file = (page: Page) => `${page.module}.md`
  const on = (page: Page, anchor: string) =>
    page === from && !fromIndex ? `#${anchor}` : `${file(page)}#${anchor}`
  const own = from.names.get(target) ?? from.names.get(target.split(".")[0]!)
  if (own !== undefined) return on(from, own)
  const [first, ...rest] = target.split(".")
  const page = pages.get(first!)
  if (page === undefined) return undefined
  if (rest.length === 0) return file(page)
  const anchor = page.names.get(rest.join(".")) ?? page.names.get(rest[0]!)
  return anchor === undefined ? undefined : on(page, anchor)
}

/** `markdown` with every `{@link}` outside fenced code made a link; names that resolve nowhere are returned. */
const linkify = (
  markdown: string,
  from: Page,
  pages: ReadonlyMap<string, Page>,
  fromIndex = false
): { readonly text: string; readonly unresolved: ReadonlyArray<string> } => {
  const unresolved: Array<string> = []
  const lines = markLines(markdown).map((line) => {
    if (line.inCode) {
      // Code keeps TSDoc's syntax, but its targets must exist all the same.
      for (const match of line.text.matchAll(LINK)) {
        if (resolve(match[2]!, from, pages, fromIndex) === undefined) unresolved.push(match[2]!)
      }
      return line.text
    }
    return line.text.replace(LINK, (_all, kind: string | undefined, target: string, piped, spaced) => {
      const label = (piped ?? spaced ?? "").trim()
      const href = resolve(target, from, pages, fromIndex)
      if (href === undefined) unresolved.push(target)
      const text = label !== "" ? label : kind === "plain" ? target : `\`${target}\``
      return href === undefined ? text : `[${text}](${href})`
    })
  })
  return { text: lines.join("\n"), unresolved }
}

// ---------------------------------------------------------------------------------------------
// the reference
// ---------------------------------------------------------------------------------------------

/** The first sentence of an overview, for the module list. */
const firstSentence = (overview: string): string => {
  const paragraph = overview
    .split(/\n\s*\n/)[0]!
    .replace(/\s*\n\s*/g, " ")
    .trim()
  const end = /[.!?](?=\s|$)/.exec(paragraph.replace(/`[^`]*`/g, (code) => "x".repeat(code.length)))
  return end === null ? paragraph : paragraph.slice(0, end.index + 1)
}

/** The reference's files (name in docs/api to content), or the `{@link}`s that resolve nowhere. */
export const render = (
  modulesDir: string = docgenModulesDir
): { readonly files: ReadonlyMap<string, string>; readonly unresolved: ReadonlyArray<string> } => {
  if (!Fs.existsSync(modulesDir)) {
    throw new Error(`${Path.relative(root, modulesDir)} does not exist: run docgen first (npm run docs)`)
  }
  const names = Fs.readdirSync(modulesDir)
    .filter((name) => name.endsWith(".ts.md"))
    .sort()
  const pages = new Map<string, Page>()
  let index: Page | undefined
  for (const name of names) {
    const module = name.slice(0, -".ts.md".length)
    const page = parsePage(module, Fs.readFileSync(Path.join(modulesDir, name), "utf8"))
    if (module === "index") index = page
    else pages.set(module, page)
  }

  const files = new Map<string, string>()
  const unresolved: Array<string> = []
  for (const page of pages.values()) {
    const linked = linkify(page.body, page, pages)
    files.set(`${page.module}.md`, linked.text)
    for (const target of linked.unresolved) unresolved.push(`src/${page.module}.ts: {@link ${target}}`)
  }

  const rows = [...pages.values()].map((page) => {
    const summary = linkify(firstSentence(page.overview), page, pages, true).text
    return `| [${page.module}](${page.module}.md) | ${summary.replace(/\|/g, "\\|")} |`
  })
  const overview = index === undefined ? "" : `${linkify(index.overview, index, pages, true).text}\n\n`
  files.set(
    "README.md",
    [
      "# queen-mesh API reference",
      "",
      "Generated from the doc comments in `src/` by `npm run docs` ([@effect/docgen](https://github.com/effect-ts/docgen),",
      "then `scripts/docs-api.ts`); edit the comments, not these pages. The guides are in [docs/](../).",
      "",
      `${overview}| Module | What it is |`,
      "| ------ | ---------- |",
      ...rows,
      ""
    ].join("\n")
  )
  return { files, unresolved }
}

/** How `dir` differs from `files`: missing, changed and extra files, by name. */
export const compare = (files: ReadonlyMap<string, string>, dir: string = apiDir): ReadonlyArray<string> => {
  const present = Fs.existsSync(dir) ? Fs.readdirSync(dir) : []
  const out: Array<string> = []
  for (const [name, content] of files) {
    const path = Path.join(dir, name)
    if (!Fs.existsSync(path)) out.push(`missing: ${name}`)
    else if (Fs.readFileSync(path, "utf8") !== content) out.push(`differs: ${name}`)
  }
  for (const name of present) if (!files.has(name)) out.push(`extra: ${name}`)
  return out
}

const main = () => {
  const check = process.argv.includes("--check")
  const { files, unresolved } = render()
  if (unresolved.length > 0) {
    // Written as code meanwhile, so the reference can still be regenerated; the check fails on them.
    console.error(
      `docs-api: {@link} naming nothing public (fix the doc comment):\n  ${unresolved.join("\n  ")}`
    )
    if (check) process.exit(1)
  }
  const differences = compare(files)
  if (check) {
    if (differences.length > 0) {
      console.error(
        `docs-api: docs/api is stale; run \`npm run docs\` and commit it:\n  ${differences.join("\n  ")}`
      )
      process.exit(1)
    }
    console.log(`docs-api: docs/api is up to date (${files.size} pages)`)
    return
  }
  Fs.mkdirSync(apiDir, { recursive: true })
  for (const name of Fs.readdirSync(apiDir)) if (!files.has(name)) Fs.rmSync(Path.join(apiDir, name))
  for (const [name, content] of files) Fs.writeFileSync(Path.join(apiDir, name), content)
  console.log(`docs-api: wrote ${files.size} pages to docs/api (${differences.length} changed)`)
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) main()
