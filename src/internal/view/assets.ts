/**
 * The cluster page's files: plain HTML, CSS and script, written in the package's `src/view/` and
 * carried as text by `pageFiles` (generated from them at build time), so they travel with the module
 * through tsc, the CLI's bundle and a host's own bundler alike: nothing is read beside the module at
 * run time. Each file is encoded once, on its first request.
 *
 * @internal
 */
import * as PageFiles from "./pageFiles.js"

/**
 * Where the page's sources ship in the package (`src/view/`, two levels above `src/internal/` and
 * `dist/internal/` alike), for a reader; serving does not read from it.
 */
export const directory = new URL("../../../src/view/", import.meta.url)

export const files = {
  page: ["cluster.html", "text/html; charset=utf-8"],
  style: ["cluster.css", "text/css; charset=utf-8"],
  script: ["cluster.js", "text/javascript; charset=utf-8"]
} as const satisfies Record<string, readonly [PageFiles.File, string]>

export type Name = keyof typeof files

export interface Asset {
  readonly file: string
  readonly body: Uint8Array
  readonly contentType: string
}

const encoded = new Map<Name, Asset>()

/** The file's bytes and type (never `null` once built: the generated module holds every file). */
export const assetOf = (name: Name): Asset | null => {
  const known = encoded.get(name)
  if (known !== undefined) return known
  const [file, contentType] = files[name]
  const asset: Asset = { file, body: new TextEncoder().encode(PageFiles.text[file]), contentType }
  encoded.set(name, asset)
  return asset
}
