// The cluster page's script: polls `view.json` (the cluster as the node serving the page sees it,
// see ClusterView.ts) every second and draws it; lists `events` (server-sent) as they come. Plain
// script, no dependencies, no build step. Every string from the view is set as text, never as HTML:
// server ids and reasons come from peers.
;(() => {
  const POLL_MS = 1000
  const HISTORY = 12
  const MAX_EVENTS = 200
  const SVG = "http://www.w3.org/2000/svg"
  const $ = (id) => document.getElementById(id)

  const el = (tag, attrs, ...children) => {
    const node = document.createElement(tag)
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v))
    for (const child of children) node.append(child instanceof Node ? child : String(child))
    return node
  }
  const svg = (tag, attrs, text) => {
    const node = document.createElementNS(SVG, tag)
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v))
    if (text !== undefined) node.textContent = text
    return node
  }
  const clear = (node) => {
    while (node.firstChild) node.removeChild(node.firstChild)
  }
  const short = (text, n) => (text.length > n ? `${text.slice(0, n - 1)}…` : text)
  const fixed = (x) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2))
  const duration = (ms) => {
    const s = Math.floor(ms / 1000)
    if (s < 60) return `${s}s`
    if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`
    return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`
  }
  const seconds = (x) =>
    x < 1e-3 ? `${fixed(x * 1e6)} µs` : x < 1 ? `${fixed(x * 1e3)} ms` : `${fixed(x)} s`

  /** Views received, newest last: rates come from the difference between the last two. */
  const history = []

  const rate = (pick) => {
    if (history.length < 2) return null
    const a = history[history.length - 2]
    const b = history[history.length - 1]
    const x = pick(a)
    const y = pick(b)
    const dt = (b.generated_at - a.generated_at) / 1000
    if (x === null || x === undefined || y === null || y === undefined || dt <= 0 || y < x) return null
    return (y - x) / dt
  }
  const perSecond = (value) => (value === null ? "–" : `${fixed(value)}/s`)
  const nodeIn = (view, id) => view.nodes.find((n) => n.id === id)
  const linkIn = (view, from, to) => view.links.find((l) => l.from === from && l.to === to)

  const setStatus = (text, tone) => {
    const status = $("status")
    status.textContent = text
    status.className = `status ${tone}`
  }

  // -------------------------------------------------------------------------------------------
  // the graph
  // -------------------------------------------------------------------------------------------

  const drawGraph = (view) => {
    const nodesLayer = $("nodes-layer")
    const linksLayer = $("links-layer")
    clear(nodesLayer)
    clear(linksLayer)
    const nodes = view.nodes
    const cx = 280
    const cy = 210
    const r = nodes.length <= 1 ? 0 : Math.min(160, 60 + nodes.length * 25)
    const at = new Map()
    nodes.forEach((node, i) => {
      const angle = -Math.PI / 2 + (2 * Math.PI * i) / Math.max(1, nodes.length)
      at.set(node.id, { x: cx + r * Math.cos(angle), y: cy + r * Math.sin(angle) })
    })
    const radius = 34
    for (const link of view.links) {
      const a = at.get(link.from)
      const b = at.get(link.to)
      if (!a || !b || link.state === "self") continue
      const dx = b.x - a.x
      const dy = b.y - a.y
      const len = Math.hypot(dx, dy) || 1
      const ux = dx / len
      const uy = dy / len
      // The two directions of a pair run side by side, each offset to its own right.
      const ox = -uy * 7
      const oy = ux * 7
      const x1 = a.x + ux * (radius + 4) + ox
      const y1 = a.y + uy * (radius + 4) + oy
      const x2 = b.x - ux * (radius + 6) + ox
      const y2 = b.y - uy * (radius + 6) + oy
      const title = `${link.from} → ${link.to}: ${link.state}${link.reason ? ` (${link.reason})` : ""}`
      const line = svg("path", {
        d: `M${x1.toFixed(1)},${y1.toFixed(1)}L${x2.toFixed(1)},${y2.toFixed(1)}`,
        class: `link ${link.state}`,
        "marker-end": `url(#arrow-${link.state})`,
        "data-from": link.from,
        "data-to": link.to,
        "data-state": link.state
      })
      line.append(svg("title", {}, title))
      linksLayer.append(line)
      const trouble =
        (link.queued || 0) + (link.dropped_full || 0) + (link.dropped_down || 0) + (link.discarded || 0)
      if (trouble > 0 || (link.reconnects || 0) > 0) {
        const label = `q${link.queued ?? "–"} d${(link.dropped_full || 0) + (link.dropped_down || 0) + (link.discarded || 0)} r${link.reconnects ?? "–"}`
        linksLayer.append(
          svg(
            "text",
            {
              x: ((x1 + x2) / 2 + ox * 1.6).toFixed(1),
              y: ((y1 + y2) / 2 + oy * 1.6).toFixed(1),
              class: "link-label"
            },
            label
          )
        )
      }
    }
    for (const node of nodes) {
      const p = at.get(node.id)
      const health =
        node.stats?.health?.status ?? (node.stats && !node.stats.enabled ? "inactive" : node.state)
      const g = svg("g", {
        class: `node ${node.state}${node.self ? " self" : ""}`,
        "data-node": node.id,
        "data-state": node.state,
        transform: `translate(${p.x.toFixed(1)},${p.y.toFixed(1)})`
      })
      g.append(svg("title", {}, `${node.id}: ${node.state}`))
      g.append(svg("circle", { r: radius }))
      g.append(svg("text", { y: -2, class: "name" }, short(node.id, 11)))
      g.append(svg("text", { y: 13, class: "sub" }, short(health.replace("_", " "), 11)))
      nodesLayer.append(g)
    }
  }

  // -------------------------------------------------------------------------------------------
  // node cards
  // -------------------------------------------------------------------------------------------

  const fetchText = (fetch) => {
    switch (fetch.status) {
      case "self":
        return "this node"
      case "ok":
        return `stats fetched in ${fetch.ms ?? "?"} ms`
      case "no_address":
        return "no stats address announced: shown as heard here"
      default:
        return `stats: ${fetch.status.replace(/_/g, " ")}${fetch.detail ? ` (${fetch.detail})` : ""}`
    }
  }

  const drawNodes = (view) => {
    const box = $("nodes")
    clear(box)
    for (const node of view.nodes) {
      const s = node.stats
      const card = el("div", { class: `card ${node.state}`, "data-node": node.id, "data-state": node.state })
      const title = el("h3", {}, node.id)
      title.append(el("span", { class: `badge ${node.state}` }, node.state.replace("_", " ")))
      if (s?.health)
        title.append(
          el("span", { class: `badge ${s.health.status}`, "data-health": s.health.status }, s.health.status)
        )
      if (node.self) title.append(el("span", { class: "badge self" }, "viewing"))
      card.append(title)
      card.append(el("p", {}, fetchText(node.fetch)))
      if (node.heard && !node.self)
        card.append(
          el(
            "p",
            {},
            `heard by ${node.heard.by}: `,
            el("b", {}, node.heard.alive ? "alive" : "dead"),
            ` (${node.heard.last_seen_ms_ago} ms ago)`
          )
        )
      if (s) {
        if (!s.enabled) card.append(el("p", {}, "mesh not running: ", el("b", {}, s.reason ?? "")))
        else {
          const inRate = rate((v) => nodeIn(v, node.id)?.stats?.messages_received)
          const outRate = rate((v) => nodeIn(v, node.id)?.stats?.messages_sent)
          card.append(
            el(
              "p",
              {},
              "frames in ",
              el("b", {}, perSecond(inRate)),
              " out ",
              el("b", {}, perSecond(outRate))
            )
          )
          card.append(
            el(
              "p",
              {},
              "dropped ",
              el(
                "b",
                {},
                `${s.messages_dropped} full / ${s.messages_dropped_down} down / ${s.messages_discarded} discarded`
              )
            )
          )
          const refusals = Object.entries(s.rejections)
            .map(([k, n]) => `${k} ${n}`)
            .join(", ")
          card.append(
            el(
              "p",
              {},
              "handshakes refused ",
              el("b", {}, String(s.handshake_failures)),
              refusals ? ` (${refusals})` : ""
            )
          )
          if (s.health)
            card.append(
              el("p", {}, `expects ${s.health.expected}, healthy ${s.health.healthy}, lane ${s.health.lane}`)
            )
        }
        card.append(
          el(
            "p",
            {},
            `v${s.version} · up ${duration(s.uptime_ms)}${s.auth ? ` · auth ${s.auth}` : ""}${s.tls && s.tls !== "off" ? ` · tls ${s.tls}` : ""}`
          )
        )
        if (s.maintenance_mode || s.pop_maintenance_mode)
          card.append(
            el(
              "p",
              {},
              el(
                "b",
                {},
                [s.maintenance_mode ? "maintenance" : "", s.pop_maintenance_mode ? "pop maintenance" : ""]
                  .filter(Boolean)
                  .join(", ")
              ),
              " on"
            )
          )
      }
      box.append(card)
    }
  }

  // -------------------------------------------------------------------------------------------
  // links, wakes, lane
  // -------------------------------------------------------------------------------------------

  const drawLinks = (view) => {
    const body = $("links").tBodies[0]
    clear(body)
    for (const link of view.links) {
      const wakes = link.wakes === null ? "–" : perSecond(rate((v) => linkIn(v, link.from, link.to)?.wakes))
      const dropped =
        link.dropped_full === null ? "–" : `${link.dropped_full} / ${link.dropped_down} / ${link.discarded}`
      const row = el(
        "tr",
        { "data-from": link.from, "data-to": link.to, "data-state": link.state },
        el("td", {}, link.from),
        el("td", {}, link.to),
        el("td", {}, el("span", { class: `badge ${link.state}` }, link.state)),
        el("td", {}, link.reason ?? ""),
        el("td", { class: "num" }, link.queued ?? "–"),
        el("td", { class: "num" }, dropped),
        el("td", { class: "num" }, link.reconnects ?? "–"),
        el("td", { class: "num" }, wakes)
      )
      body.append(row)
    }
    if (view.links.length === 0)
      body.append(
        el("tr", {}, el("td", { colspan: 8, class: "empty" }, "no links: no peer configured or heard"))
      )
  }

  const drawWakes = (view) => {
    const inRate = rate((v) => v.local.wakes_received)
    const outRate = rate((v) => v.local.wakes_sent)
    const p = $("wakes")
    clear(p)
    p.append("received ", el("b", {}, perSecond(inRate)), ` (${view.local.wakes_received} in all)  ·  sent `)
    p.append(el("b", {}, perSecond(outRate)), ` (${view.local.wakes_sent} in all)`)
    drawHistogram(view)
  }

  /** The histogram of the last few views when it moved, else since the start. */
  const drawHistogram = (view) => {
    const box = $("histogram")
    clear(box)
    const latest = view.local.apply_seconds
    if (!latest || latest.count === 0) {
      box.append(el("p", { class: "empty" }, "nothing received yet"))
      $("histogram-span").textContent = ""
      clear($("histogram-axis"))
      return
    }
    let counts = latest.counts
    let span = "since the start"
    const oldest = history[0]?.local.apply_seconds
    if (
      oldest &&
      history.length > 1 &&
      latest.count > oldest.count &&
      oldest.counts.length === latest.counts.length
    ) {
      counts = latest.counts.map((n, i) => n - oldest.counts[i])
      span = `the last ${Math.round((view.generated_at - history[0].generated_at) / 1000)} s`
    }
    $("histogram-span").textContent = `(${span}; ${counts.reduce((a, b) => a + b, 0)} chunks)`
    let first = counts.findIndex((n) => n > 0)
    let last = counts.length - 1 - [...counts].reverse().findIndex((n) => n > 0)
    first = Math.max(0, first - 1)
    last = Math.min(counts.length - 1, last + 1)
    const max = Math.max(...counts.slice(first, last + 1), 1)
    const label = (i) =>
      i < latest.bounds.length
        ? `≤ ${seconds(latest.bounds[i])}`
        : `> ${seconds(latest.bounds[latest.bounds.length - 1] ?? 0)}`
    for (let i = first; i <= last; i++) {
      const bar = el("div", { class: "bar", title: `${label(i)}: ${counts[i]}` })
      bar.style.height = `${Math.round((100 * counts[i]) / max)}%`
      box.append(bar)
    }
    const axis = $("histogram-axis")
    clear(axis)
    axis.append(el("span", {}, label(first)), el("span", {}, label(last)))
  }

  const drawLane = (view) => {
    const box = $("lane")
    clear(box)
    const withLane = view.nodes.filter((n) => n.stats?.lane)
    if (withLane.length === 0) {
      box.append(el("p", { class: "empty" }, "no lane: the hints travel over the TCP mesh only"))
      return
    }
    const table = el(
      "table",
      {},
      el(
        "thead",
        {},
        el(
          "tr",
          {},
          ...["node", "lane", "members alive", "dropped", "reconnects", "last error"].map((h) =>
            el("th", {}, h)
          )
        )
      )
    )
    const body = el("tbody")
    for (const node of withLane) {
      const lane = node.stats.lane
      const members = lane.members.map((m) => `${m.server_id}${m.alive ? "" : " (dead)"}`).join(", ")
      body.append(
        el(
          "tr",
          { "data-node": node.id, "data-lane": lane.status },
          el("td", {}, node.id),
          el("td", {}, el("span", { class: `badge ${lane.status}` }, lane.status)),
          el("td", {}, `${lane.members_alive} of ${lane.members.length}${members ? `: ${members}` : ""}`),
          el("td", { class: "num" }, lane.dropped),
          el("td", { class: "num" }, lane.reconnects),
          el("td", {}, lane.last_error ?? "")
        )
      )
    }
    table.append(body)
    box.append(table)
  }

  // -------------------------------------------------------------------------------------------
  // polling
  // -------------------------------------------------------------------------------------------

  const render = (view) => {
    history.push(view)
    while (history.length > HISTORY) history.shift()
    $("from").textContent = `viewed from ${view.self} · ${new Date(view.generated_at).toLocaleTimeString()}`
    document.title = `${view.self} · queen-mesh cluster`
    const troubled = view.nodes.filter((n) => n.state === "down" || n.state === "no_answer").length
    const broken = view.links.filter((l) => l.state !== "linked" && l.state !== "self").length
    if (troubled + broken === 0)
      setStatus(`${view.nodes.length} nodes, ${view.links.length} links up`, "good")
    else setStatus(`${troubled} node(s) in trouble, ${broken} link(s) not up`, "bad")
    drawGraph(view)
    drawNodes(view)
    drawLinks(view)
    drawWakes(view)
    drawLane(view)
    document.body.dataset.generated = String(view.generated_at)
  }

  const poll = async () => {
    const started = Date.now()
    const controller = new AbortController()
    const timer = setTimeout(() => controller.abort(), 8000)
    try {
      const response = await fetch("view.json", { cache: "no-store", signal: controller.signal })
      if (!response.ok) throw new Error(`answered ${response.status}`)
      render(await response.json())
    } catch (error) {
      setStatus(`this node does not answer (${error instanceof Error ? error.message : "error"})`, "bad")
    } finally {
      clearTimeout(timer)
      // One view a second, however long the last one took.
      setTimeout(poll, Math.max(100, POLL_MS - (Date.now() - started)))
    }
  }

  // -------------------------------------------------------------------------------------------
  // events
  // -------------------------------------------------------------------------------------------

  /** Events listed, by what they say: a new stream begins with the node's recent events again. */
  const listed = new Set()
  const addEvents = (batch) => {
    const list = $("events")
    const events = Array.isArray(batch.events) ? batch.events : []
    const latest = history[history.length - 1]
    for (const event of events) {
      const key = `${event.at}|${event.tag}|${event.subject}|${event.detail}`
      if (listed.has(key)) continue
      listed.add(key)
      if (listed.size > 4 * MAX_EVENTS) listed.delete(listed.values().next().value)
      const time = new Date(event.at).toLocaleTimeString()
      // Links are named by their peer-list address: say which node that is, where the view knows.
      const known = latest?.nodes.find((node) => node.address === event.subject && node.id !== event.subject)
      const subject = known ? `${known.id} (${event.subject})` : event.subject
      list.prepend(
        el(
          "li",
          { class: event.tone, "data-tag": event.tag },
          el("time", {}, time),
          el("b", {}, subject),
          " ",
          event.detail
        )
      )
    }
    if (batch.dropped > 0) list.prepend(el("li", { class: "info" }, `${batch.dropped} more events left out`))
    while (list.children.length > MAX_EVENTS) list.lastElementChild.remove()
  }

  const listen = () => {
    const state = $("events-state")
    const source = new EventSource("events")
    source.onopen = () => {
      state.textContent = "live"
    }
    source.onmessage = (message) => {
      try {
        addEvents(JSON.parse(message.data))
      } catch {
        state.textContent = "an unreadable event was skipped"
      }
    }
    source.addEventListener("busy", () => {
      state.textContent = "too many pages are listening: trying again later"
    })
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) {
        state.textContent = "disconnected: trying again"
        setTimeout(listen, 5000)
      } else state.textContent = "reconnecting…"
    }
  }

  poll()
  listen()
})()
