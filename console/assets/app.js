// braid console: polls /api/overview and /api/live (console/console.go) and
// draws each watched peer's paths with uPlot. No framework, no build step.
"use strict";
(() => {
  const WINDOW = 600; // seconds of history on the charts
  const MAX_WATCH = 8; // peers a page may watch (the daemon allows 16 a request)
  const MAX_LIST = 200; // client rows drawn at once; the search narrows the rest
  const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"];

  const $ = (sel) => document.querySelector(sel);
  function el(tag, props, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (k === "class") e.className = v;
      else if (k === "data") Object.assign(e.dataset, v);
      else e[k] = v;
    }
    for (const k of kids) e.append(k);
    return e;
  }

  let overview = null;
  let watched = []; // public keys
  let since = 0; // the newest second received; the next poll asks after it
  const views = new Map(); // public key -> view of a watched peer

  // Formatting.
  const mbps = (bps) => (bps / 1e6).toFixed(bps >= 1e8 ? 0 : 2) + " Mbit/s";
  function bytes(n) {
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return n.toFixed(i ? 1 : 0) + " " + u[i];
  }
  function age(t) {
    if (!t) return "never";
    const s = Math.max(0, (Date.now() - Date.parse(t)) / 1000);
    return duration(s) + " ago";
  }
  function duration(s) {
    s = Math.round(s);
    if (s < 120) return s + " s";
    if (s < 7200) return Math.round(s / 60) + " min";
    if (s < 172800) return Math.floor(s / 3600) + " h " + Math.round((s % 3600) / 60) + " min";
    return Math.floor(s / 86400) + " days";
  }
  const short = (key) => key.slice(0, 10) + "…";

  async function getJSON(url) {
    const r = await fetch(url, { cache: "no-store" });
    if (!r.ok) throw new Error(r.status + " " + url);
    return r.json();
  }
  function connected(ok, msg) {
    const c = $("#conn");
    c.className = "conn " + (ok ? "ok" : "bad");
    c.textContent = ok ? "live" : "no answer from the daemon: " + msg;
  }

  // Watching: kept in the address's fragment, so a reload or a shared link
  // shows the same clients.
  function readHash() {
    const m = location.hash.match(/watch=([^&]*)/);
    return m ? m[1].split(",").filter(Boolean).map(decodeURIComponent) : [];
  }
  function setWatched(keys) {
    keys = keys.slice(0, MAX_WATCH);
    if (keys.join() === watched.join()) return;
    watched = keys;
    if (overview && overview.role !== "client") {
      history.replaceState(null, "", "#watch=" + keys.map(encodeURIComponent).join(","));
    }
    // Start over: a newly watched peer's history comes whole with since=0.
    since = 0;
    for (const [k, v] of views) { v.section.remove(); views.delete(k); }
    pollLive();
  }

  // The overview: the instance line and, on a server, the client list.
  async function pollOverview() {
    try {
      overview = await getJSON("api/overview");
      connected(true);
    } catch (e) {
      connected(false, e.message);
      return;
    }
    const o = overview;
    $("#instance").textContent = `${o.role} ${o.interface} · ${o.transport || ""} · up ${duration(o.uptime_seconds)} · ${o.peers.length} peer(s)`;
    if (o.role === "client") {
      setWatched(o.peers.map((p) => p.public_key));
    } else {
      $("#clients").hidden = false;
      drawClients();
      if (!watched.length) setWatched(readHash().filter((k) => o.peers.some((p) => p.public_key === k)));
    }
  }

  function drawClients() {
    const q = $("#search").value.trim().toLowerCase();
    const all = overview.peers;
    const match = all.filter((p) => !q || (p.name || "").toLowerCase().includes(q) || p.public_key.toLowerCase().includes(q) ||
      (p.allowed_ips || []).some((a) => a.includes(q)));
    $("#client-count").textContent = `${match.length} of ${all.length}`;
    const rows = match.slice(0, MAX_LIST).map((p) => {
      const box = el("input", { type: "checkbox", checked: watched.includes(p.public_key) });
      box.addEventListener("change", () => {
        setWatched(box.checked ? [...watched, p.public_key] : watched.filter((k) => k !== p.public_key));
      });
      return el("tr", { data: { key: p.public_key } },
        el("td", {}, box), el("td", {}, p.name || ""), el("td", { title: p.public_key }, short(p.public_key)),
        el("td", {}, (p.allowed_ips || []).join(", ")),
        el("td", {}, p.established ? "up, handshake " + age(p.last_handshake) : "none"),
        el("td", { class: "num" }, `${p.up} / ${p.paths}`),
        el("td", { class: "num" }, bytes(p.rx_bytes)), el("td", { class: "num" }, bytes(p.tx_bytes)));
    });
    $("#client-table tbody").replaceChildren(...rows);
    $("#client-more").textContent = match.length > MAX_LIST ? `${match.length - MAX_LIST} more: narrow the search` : "";
  }

  // A watched peer: header, path table, two charts.
  function view(p) {
    let v = views.get(p.public_key);
    if (v) return v;
    const section = el("section", { class: "peer", data: { key: p.public_key } });
    v = { section, head: el("h2"), info: el("p", { class: "muted" }), tbody: el("tbody"), chartBox: el("div", { class: "charts" }),
      t0: null, tmax: -1, series: new Map(), pathKey: "", charts: null };
    const cols = ["path", "state", "tier", "RTT", "loss", "delivery rate", "rate now", "share", "MTU", "budget"];
    section.append(v.head, v.info,
      el("table", {}, el("thead", {}, el("tr", {}, ...cols.map((c, i) => el("th", { class: i > 1 ? "num" : "" }, c)))), v.tbody),
      v.chartBox);
    $("#peers").append(section);
    views.set(p.public_key, v);
    return v;
  }

  function drawPeer(v, p) {
    v.head.textContent = (p.name || short(p.public_key)) + (p.established ? "" : " — no session");
    v.info.textContent = `session ${p.established ? "up" : "down"}, handshake ${age(p.last_handshake)} · scheduler ${p.scheduler} · congestion ${p.congestion} · recovery ${p.recovery}`;
    const charted = chartedPaths(p);
    const rows = p.paths.map((pa) => {
      const i = charted.indexOf(pa);
      const s = v.series.get(String(pa.id));
      const now = s && s.rate.length ? s.rate[s.rate.length - 1] : null;
      const budget = pa.budget ? `${bytes(pa.budget_used || 0)} of ${pa.budget}` + (pa.budget_bytes ? ` (${Math.round(100 * (pa.budget_used || 0) / pa.budget_bytes)} %)` : "") : "—";
      const where = !pa.remote ? `${pa.device || pa.local}` : pa.device ? `${pa.device} → ${pa.remote}` : `${pa.local} → ${pa.remote}`;
      return el("tr", { data: { path: pa.id, device: pa.device || "", state: pa.state, rate: now == null ? "" : String(now) } },
        el("td", {}, el("span", { class: "swatch", style: i < 0 ? "" : `background:${COLORS[i % COLORS.length]}` }), `${pa.id < 0 ? "" : pa.id} ${where}`),
        el("td", {}, el("span", { class: "state " + pa.state }, pa.state)),
        el("td", { class: "num" }, String(pa.priority)),
        el("td", { class: "num" }, pa.srtt_ms ? pa.srtt_ms.toFixed(1) + " ms" : "—"),
        el("td", { class: "num" }, (100 * pa.loss_rate).toFixed(2) + " %"),
        el("td", { class: "num" }, mbps(pa.delivery_rate_bps)),
        el("td", { class: "num" }, now == null ? "—" : mbps(now * 1e6)),
        el("td", { class: "num" }, (100 * pa.share).toFixed(1) + " %"),
        el("td", { class: "num" }, pa.mtu ? String(pa.mtu) : "—"),
        el("td", { class: "num" }, budget));
    });
    v.tbody.replaceChildren(...rows);
  }

  // chartedPaths are the paths with a socket: a client's path waiting for
  // its interface (id -1) has a row but no history.
  const chartedPaths = (p) => p.paths.filter((pa) => pa.id >= 0);

  // merge adds a path's new samples to the view's columns (index = second - t0).
  function merge(v, id, h) {
    let s = v.series.get(id);
    if (!s) { s = { rate: [], rtt: [] }; v.series.set(id, s); }
    for (let k = 0; k < h.rx_bps.length; k++) {
      const i = h.from + k - v.t0;
      if (i < 0) continue;
      const rx = h.rx_bps[k], tx = h.tx_bps[k];
      s.rate[i] = rx == null || tx == null ? null : (rx + tx) / 1e6;
      s.rtt[i] = h.rtt_ms[k];
      v.tmax = Math.max(v.tmax, h.from + k);
    }
  }

  function chartData(v, ids) {
    let n = v.tmax - v.t0 + 1;
    if (n > WINDOW) {
      const d = n - WINDOW;
      v.t0 += d;
      for (const s of v.series.values()) { s.rate.splice(0, d); s.rtt.splice(0, d); }
      n = WINDOW;
    }
    const x = Array.from({ length: n }, (_, i) => v.t0 + i);
    const col = (arr) => Array.from({ length: n }, (_, i) => (arr[i] === undefined ? null : arr[i]));
    return {
      rate: [x, ...ids.map((id) => col(v.series.get(id) ? v.series.get(id).rate : []))],
      rtt: [x, ...ids.map((id) => col(v.series.get(id) ? v.series.get(id).rtt : []))],
    };
  }

  function makeChart(box, title, unit, p, data) {
    const wrap = el("div", { class: "chart" }, el("h3", {}, title));
    box.append(wrap);
    const width = Math.max(320, Math.min(640, (box.clientWidth || 1200) / 2 - 20));
    return new uPlot({
      width, height: 220,
      scales: { x: { time: true } },
      axes: [{}, { label: unit, size: 60 }],
      series: [{}, ...chartedPaths(p).map((pa, i) => ({
        label: `path ${pa.id}` + (pa.device ? ` (${pa.device})` : ""), stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: false,
      }))],
    }, data, wrap);
  }

  function drawCharts(v, p) {
    const ids = chartedPaths(p).map((pa) => String(pa.id));
    const data = chartData(v, ids);
    const key = ids.join();
    if (!v.charts || v.pathKey !== key) {
      // New paths: new series, so new charts.
      v.chartBox.replaceChildren();
      v.pathKey = key;
      v.charts = {
        rate: makeChart(v.chartBox, "Rate per path (received + sent)", "Mbit/s", p, data.rate),
        rtt: makeChart(v.chartBox, "Smoothed RTT per path", "ms", p, data.rtt),
      };
    } else {
      v.charts.rate.setData(data.rate);
      v.charts.rtt.setData(data.rtt);
    }
    if (!document.body.dataset.chartsReady) {
      // For the browser test and the load-time target: ms since navigation.
      window.braidFirstChart = performance.now();
      document.body.dataset.chartsReady = "1";
    }
  }

  let liveBusy = false;
  async function pollLive() {
    if (!watched.length || liveBusy) return;
    liveBusy = true;
    const keys = watched.slice();
    try {
      const q = keys.map((k) => "peer=" + encodeURIComponent(k)).join("&") + "&since=" + since;
      const r = await getJSON("api/live?" + q);
      if (keys.join() !== watched.join()) return; // the watch changed meanwhile
      connected(true);
      for (const lp of r.peers) {
        const p = lp.status;
        const v = view(p);
        const hs = Object.entries(lp.history);
        if (v.t0 === null) {
          v.t0 = hs.length ? Math.min(...hs.map(([, h]) => h.from)) : r.now;
        }
        for (const [id, h] of hs) merge(v, id, h);
        if (v.tmax < r.now) v.tmax = r.now;
        drawPeer(v, p);
        drawCharts(v, p);
      }
      since = r.now;
    } catch (e) {
      connected(false, e.message);
    } finally {
      liveBusy = false;
    }
  }

  $("#search").addEventListener("input", () => overview && drawClients());
  (async () => {
    await pollOverview();
    pollLive();
    setInterval(pollLive, 1000);
    // A server's list of a thousand clients is fetched every 5 s; a short one every second.
    const every = () => (overview && overview.peers.length > 50 ? 5000 : 1000);
    const loop = async () => { await pollOverview(); setTimeout(loop, every()); };
    setTimeout(loop, every());
  })();
})();
