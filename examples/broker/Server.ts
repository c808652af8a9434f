/**
 * The broker's Node HTTP server (`NodeHttpServer.layer` serves the API on it; see `Broker.ts`).
 */
import * as Http from "node:http"

/**
 * The HTTP server, with an answer for a request that comes while it closes. Under effect 3 the
 * platform's server stopped handling requests (its listener went) before it closed, and closing waits
 * for every connection with a request in flight: a request that arrived on a kept-alive connection in
 * between had no handler, so it was never answered and held the replica open until its client gave up
 * (30 s with the harness's client). Effect 4's Node server closes first and removes its listener after
 * (with a 503 listener of its own beneath it), so the gap is gone there; this stays for any server that
 * drops its listener first. Once every other listener is gone, this one answers: 503 and
 * `Connection: close`, so the connection ends and the close goes on. It is added then, not before, so a
 * request in service calls nothing more.
 */
export const createServer = (): Http.Server => {
  const server = Http.createServer()
  const closing = (_request: Http.IncomingMessage, response: Http.ServerResponse) => {
    response.writeHead(503, { "content-type": "application/json", connection: "close" })
    response.end(JSON.stringify({ error: "shutting_down" }))
  }
  server.on("removeListener", (event) => {
    if (event === "request" && server.listenerCount("request") === 0) server.on("request", closing)
  })
  return server
}
