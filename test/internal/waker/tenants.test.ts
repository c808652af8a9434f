import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import { Tenants } from "../../../src/internal/waker/tenants.js"
import * as Names from "../../../src/internal/wire/names.js"

const UUID = "AC3E0000-0000-4000-8000-00000000AC3E"
const long = "x".repeat(Names.MAX_NAME_CHARS + 1)

describe("Tenants", () => {
  it("with tenancy on, an absent or empty tenant fans out; a named one names itself, UUIDs in lower case", () => {
    const tenants = new Tenants({})
    assert.isTrue(tenants.fansOut(Option.none()))
    assert.isTrue(tenants.fansOut(Option.some("")))
    assert.isFalse(tenants.fansOut(Option.some("acme")))
    assert.strictEqual(tenants.ofWake(Option.some("acme")), "acme")
    assert.strictEqual(tenants.ofWake(Option.some(UUID)), UUID.toLowerCase())
    // Asked again, the remembered answer is the same.
    assert.strictEqual(tenants.ofWake(Option.some(UUID)), UUID.toLowerCase())
    assert.isUndefined(tenants.ofWake(Option.some(long)))
    assert.isUndefined(tenants.ofWake(Option.some(long)))
  })

  it("with tenancy off nothing fans out: an absent tenant is the default one", () => {
    const tenants = new Tenants({ tenancy: false })
    assert.isFalse(tenants.fansOut(Option.none()))
    assert.strictEqual(tenants.ofWake(Option.none()), Names.DEFAULT_TENANT)
    assert.strictEqual(tenants.ofWake(Option.some("")), Names.DEFAULT_TENANT)
  })

  it("the default tenant is upstream's unless given, normalised as any tenant is", () => {
    assert.strictEqual(new Tenants({}).defaultTenant, Names.DEFAULT_TENANT)
    assert.strictEqual(new Tenants({ defaultTenant: "" }).defaultTenant, Names.DEFAULT_TENANT)
    assert.strictEqual(new Tenants({ defaultTenant: UUID }).defaultTenant, UUID.toLowerCase())
    assert.strictEqual(new Tenants({ defaultTenant: "main" }).defaultTenant, "main")
  })

  it("a host target names its tenant, the default one when absent, none when a name is over-long", () => {
    const tenants = new Tenants({})
    assert.strictEqual(tenants.ofTarget("q", Option.none()), Names.DEFAULT_TENANT)
    assert.strictEqual(tenants.ofTarget("q", Option.some(UUID)), UUID.toLowerCase())
    assert.isUndefined(tenants.ofTarget(long, Option.none()))
    assert.isUndefined(tenants.ofTarget("q", Option.some(long)))
  })

  it("a host target's tenant may be a string, an Option or none, read by the same rule", () => {
    const tenants = new Tenants({})
    for (const none of [undefined, null, "", Option.none(), Option.some("")]) {
      assert.strictEqual(tenants.ofTarget("q", none), Names.DEFAULT_TENANT)
    }
    assert.strictEqual(tenants.ofTarget("q", UUID), UUID.toLowerCase())
    assert.strictEqual(tenants.ofTarget("q", "acme"), "acme")
    assert.isUndefined(tenants.ofTarget("q", long))
  })

  it("remembers a bounded number of tenants and still answers past the bound", () => {
    const tenants = new Tenants({})
    for (let i = 0; i < 1_000; i++) assert.strictEqual(tenants.ofWake(Option.some(`t${i}`)), `t${i}`)
  })
})
