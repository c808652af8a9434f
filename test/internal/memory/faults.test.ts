import { assert, describe, it } from "@effect/vitest"
import { Faults, matches } from "../../../src/internal/memory/faults.js"

describe("memory network faults", () => {
  it("a target is a port on every host, a host on every port, or host:port", () => {
    assert.isTrue(matches(6633, "queen-b", 6633))
    assert.isFalse(matches(6633, "queen-b", 6634))
    assert.isTrue(matches("queen-b", "queen-b", 1))
    assert.isFalse(matches("queen-b", "queen-c", 1))
    assert.isTrue(matches("queen-b:6633", "queen-b", 6633))
    assert.isFalse(matches("queen-b:6633", "queen-b", 6634))
    // An unnamed node's wildcard listener (`*`) is any host on its port.
    assert.isTrue(matches("127.0.0.1:6633", "*", 6633))
    // IPv6 literals: the port is after the last colon.
    assert.isTrue(matches("::1:6633", "::1", 6633))
  })

  it("refusals and stopped readers are recorded per target until lifted", () => {
    const faults = new Faults()
    faults.refuse("queen-b", true)
    faults.stopReading(6633, true)
    assert.isTrue(faults.isRefused("queen-b", 1))
    assert.isFalse(faults.isRefused("queen-c", 1))
    assert.isTrue(faults.isStopped("queen-c", 6633))
    faults.refuse("queen-b", false)
    faults.stopReading(6633, false)
    assert.isFalse(faults.isRefused("queen-b", 1))
    assert.isFalse(faults.isStopped("queen-c", 6633))
  })

  it("a partition separates its two groups both ways; isolation separates one node from all", () => {
    const faults = new Faults()
    faults.partition(["a"], ["b", "c"])
    assert.isTrue(faults.blocked("a", "b"))
    assert.isTrue(faults.blocked("c", "a"))
    assert.isFalse(faults.blocked("b", "c"))
    // An unnamed dialer, or a node dialling itself, is never blocked.
    assert.isFalse(faults.blocked(undefined, "a"))
    assert.isFalse(faults.blocked("a", "a"))
    faults.isolate("d")
    assert.isTrue(faults.blocked("d", "b"))
    assert.isTrue(faults.blocked("b", "d"))
    faults.heal()
    assert.isFalse(faults.blocked("a", "b"))
    assert.isFalse(faults.blocked("d", "b"))
  })

  it("the delay is what was set last", () => {
    const faults = new Faults()
    assert.strictEqual(faults.delayMillis, 0)
    faults.setDelay(250)
    assert.strictEqual(faults.delayMillis, 250)
  })
})
