/**
 * The suite's `layer` (test/fixtures/layer.ts) leaves vitest's `it` as it found it: a test collected
 * after a layer's, in the same file as in a later file of the same process, still runs with the test
 * services.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/testing/TestClock"
import { layer } from "./fixtures/layer.js"

class Greeting extends Context.Service<Greeting, { readonly text: string }>()("test/layerFixture/Greeting") {}

layer(Layer.succeed(Greeting, { text: "hello" }), { excludeTestServices: true })("inside the layer", (it) => {
  it.effect("a test sees the layer's services", () =>
    Greeting.use((greeting) => Effect.sync(() => assert.strictEqual(greeting.text, "hello")))
  )
})

// In a describe of its own, collected after the layer's, as a later file's tests are.
describe("after it", () => {
  it.effect("a test still has the TestClock", () =>
    Effect.gen(function* () {
      yield* TestClock.adjust("1 minute")
      assert.strictEqual(yield* Effect.clockWith((clock) => clock.currentTimeMillis), 60_000)
    })
  )
})
