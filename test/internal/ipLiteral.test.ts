import { isIP } from "node:net"
import { describe, expect, it } from "@effect/vitest"
import { ipVersion } from "../../src/internal/ipLiteral.js"

const texts = [
  "",
  "127.0.0.1",
  "0.0.0.0",
  "255.255.255.255",
  "256.0.0.1",
  "1.2.3",
  "1.2.3.4.",
  "01.2.3.4",
  " 1.2.3.4",
  "::",
  "::1",
  "[::1]",
  "fe80::1%eth0",
  "::ffff:127.0.0.1",
  "2001:db8::8a2e:370:7334",
  "2001:db8:0:0:0:0:2:1",
  "1:2:3:4:5:6:7:8:9",
  "gggg::1",
  "localhost",
  "queen-0.queen.svc",
  "host:8080",
  "127.0.0.1:8080",
  ":",
  "1.2.3.4%eth0",
  "１.２.３.４"
]

describe("ipVersion", () => {
  it("answers as net.isIP does", () => {
    for (const text of texts) expect([text, ipVersion(text)]).toEqual([text, isIP(text)])
  })

  it("answers as net.isIP does on random texts of digits, dots, colons and hex letters", () => {
    const alphabet = "0123456789abcdef.:%[]"
    let seed = 0x2545f491
    const next = () => {
      seed ^= seed << 13
      seed ^= seed >>> 17
      seed ^= seed << 5
      return (seed >>> 0) / 2 ** 32
    }
    for (let i = 0; i < 5_000; i++) {
      const length = Math.floor(next() * 24)
      let text = ""
      for (let j = 0; j < length; j++) text += alphabet[Math.floor(next() * alphabet.length)]
      if (ipVersion(text) !== isIP(text)) expect([text, ipVersion(text)]).toEqual([text, isIP(text)])
    }
  })
})
