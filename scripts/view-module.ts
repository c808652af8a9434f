/**
 * Writes `src/internal/view/pageFiles.ts`: the cluster page's files (`src/view/cluster.html`,
 * `cluster.css`, `cluster.js`) as string constants, so that whatever carries the library's modules (tsc's
 * `dist/`, the CLI's bundle, a host's own bundler) carries the page too, with no file read beside the
 * module at run time. `src/view/` stays the one source: the output is not committed, `npm run build`
 * (hence `npm ci`) writes it before tsc runs, and `--check` exits 1 when it no longer matches.
 *
 * `npx tsx scripts/view-module.ts [--check]`
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const root = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "..")

/** The page's files, in the order the module lists them. */
export const viewFiles = ["cluster.html", "cluster.css", "cluster.js"] as const

export const viewDirectory = Path.join(root, "src", "view")
export const generatedPath = Path.join(root, "src", "internal", "view", "pageFiles.ts")

/** A template literal holding `text` exactly: backslashes, backticks and `${` escaped. */
const literal = (text: string): string =>
  `\`${text.replaceAll("\\", "\\\\").replaceAll("`", "\\`").replaceAll("${", "\\${")}\``

/** The module's text for the given file contents. */
export const render = (contents: Readonly<Record<(typeof viewFiles)[number], string>>): string =>
  `/**
 * The cluster page's files, as text. Generated from \`src/view/\` by \`scripts/view-module.ts\` in
 * \`npm run build\` and not committed: edit \`src/view/\`, then build (or run the script).
 *
 * @internal
 */

export type File = ${viewFiles.map((file) => JSON.stringify(file)).join(" | ")}

export const text: Readonly<Record<File, string>> = {
${viewFiles.map((file) => `  ${JSON.stringify(file)}: ${literal(contents[file])}`).join(",\n")}
}
`

/** The module's text for the files as they are in `src/view/` now. */
export const renderCurrent = (): string => {
  const read = (file: (typeof viewFiles)[number]) => Fs.readFileSync(Path.join(viewDirectory, file), "utf8")
  return render({
    "cluster.html": read("cluster.html"),
    "cluster.css": read("cluster.css"),
    "cluster.js": read("cluster.js")
  })
}

const main = () => {
  const wanted = renderCurrent()
  const existing = Fs.existsSync(generatedPath) ? Fs.readFileSync(generatedPath, "utf8") : undefined
  if (process.argv.includes("--check")) {
    if (existing !== wanted) {
      process.stderr.write(
        `${Path.relative(root, generatedPath)} does not match src/view/: run \`npm run build\`\n`
      )
      process.exit(1)
    }
    return
  }
  // Unchanged output keeps its mtime, so nothing downstream sees a change that is not one.
  if (existing !== wanted) Fs.writeFileSync(generatedPath, wanted)
}

if (process.argv[1] !== undefined && Path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main()
