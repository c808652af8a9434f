/**
 * Stack traces of the bundled `queen-mesh` command, mapped back to our sources when a trace is
 * formatted (the launcher, `dist/cli.js`, installs it before it loads the bundle).
 *
 * Node's own source-map support (`--enable-source-maps`, `process.setSourceMapsEnabled`) reads and
 * decodes the map of every file as it loads: about a sixth of a node's start-up. Here a file's map is
 * read only when a trace first has a frame in it. A frame in one of the bundle's files takes the place
 * its map gives it, written as Node writes a mapped frame (`file:///.../src/cli/node.ts:12:3`); a frame
 * the map says nothing of (a package's code) and any other frame are V8's own.
 *
 * @internal
 */
import * as Fs from "node:fs"
import * as Module from "node:module"
import * as Url from "node:url"

/** One frame of a trace, mapped when it is in a file under `bin` whose map knows the place. */
const frameOf = (site: NodeJS.CallSite, bin: string, mapOf: (file: string) => Module.SourceMap | null) => {
  const text = String(site)
  const file = site.getFileName()
  const line = site.getLineNumber()
  const column = site.getColumnNumber()
  if (typeof file !== "string" || line === null || column === null) return text
  // A module's file is a `file:` URL; a script's (or a module a loader ran as one) is a path, with the
  // query a loader may have added to it (a test runner's module runner does): the same file.
  const url = file.startsWith("file:")
    ? file.replace(/[?#].*$/, "")
    : file.startsWith("/")
      ? Url.pathToFileURL(file.replace(/\?.*$/, "")).href
      : file
  if (!url.startsWith(bin)) return text
  const entry = mapOf(url)?.findEntry(line - 1, column - 1)
  if (entry === undefined || !("originalSource" in entry)) return text
  const where = `${file}:${line}:${column}`
  const at = text.lastIndexOf(where)
  if (at < 0) return text
  const source = new URL(entry.originalSource, url).href
  return `${text.slice(0, at)}${source}:${entry.originalLine + 1}:${entry.originalColumn + 1}${text.slice(at + where.length)}`
}

/**
 * Maps the frames of every trace formatted from now on in files under `bin` (a `file:` URL ending in
 * `/`), each through the `.map` beside it; with `files` (paths under `bin`), only in those: the files
 * whose maps name our sources, so a frame in a package's chunk reads no map at all. Nothing is done
 * where Node's own source maps are on. Returns what puts the previous formatter back.
 */
export const mapStackTraces = (bin: string, files?: ReadonlyArray<string>): (() => void) => {
  const previous = Error.prepareStackTrace
  if (process.sourceMapsEnabled) return () => {}
  const maps = new Map<string, Module.SourceMap | null>()
  const only = files === undefined ? undefined : new Set(files.map((file) => new URL(file, bin).href))
  const mapOf = (file: string) => {
    let map = maps.get(file)
    if (map === undefined && only !== undefined && !only.has(file)) {
      map = null
      maps.set(file, map)
    }
    if (map === undefined) {
      try {
        map = new Module.SourceMap(JSON.parse(Fs.readFileSync(`${Url.fileURLToPath(file)}.map`, "utf8")))
      } catch {
        // No map, or not one: the file's frames stay as V8 writes them.
        map = null
      }
      maps.set(file, map)
    }
    return map
  }
  Error.prepareStackTrace = (error: Error, sites: Array<NodeJS.CallSite>) => {
    let out: string
    try {
      out = Error.prototype.toString.call(error)
    } catch {
      out = "<error>"
    }
    for (const site of sites) {
      let text: string
      try {
        text = frameOf(site, bin, mapOf)
      } catch {
        text = String(site)
      }
      out += `\n    at ${text}`
    }
    return out
  }
  return () => {
    Error.prepareStackTrace = previous
  }
}
