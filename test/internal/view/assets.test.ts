/**
 * The page's files as the library serves them: from the module generated out of `src/view/`, which
 * must still match it (a stale one serves yesterday's page: `npm run build` writes it again).
 */
import { readFileSync } from "node:fs"
import { assert, describe, it } from "@effect/vitest"
import { generatedPath, renderCurrent, viewDirectory } from "../../../scripts/view-module.js"
import * as Assets from "../../../src/internal/view/assets.js"

describe("the cluster page's files", () => {
  it("are generated from src/view/ as it is now", () => {
    assert.isTrue(
      readFileSync(generatedPath, "utf8") === renderCurrent(),
      "src/internal/view/pageFiles.ts does not match src/view/: run `npm run build`"
    )
  })

  it("are served byte for byte, with their types", () => {
    for (const name of ["page", "style", "script"] as const) {
      const asset = Assets.assetOf(name)
      const [file, type] = Assets.files[name]
      assert.isNotNull(asset)
      assert.strictEqual(asset?.contentType, type)
      assert.deepStrictEqual(
        Buffer.from(asset?.body ?? new Uint8Array()),
        readFileSync(`${viewDirectory}/${file}`),
        file
      )
    }
  })
})
