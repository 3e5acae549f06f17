/**
 * The operators' dashboard, `GET /dashboard`: one self-contained HTML page
 * (inline CSS and JS, no build step, nothing from a CDN) served by the
 * platform Worker.
 *
 * The page holds no data, so it is public; it asks for an API token once
 * (kept in the tab's sessionStorage), then calls the same HTTP API with it:
 * `GET /v1/queues/health` (health table, throughput and lag charts from each
 * queue's per-minute `series`), `GET /v1/dlq` (dead letters with replay, skip
 * and escalate, details from `GET /v1/dlq/:id`), `GET /v1/batches` (batch jobs
 * with progress bars). Every value from the API reaches the page through
 * `textContent` or an attribute set with `setAttribute` — never as HTML.
 *
 * Headers: a Content-Security-Policy allowing only this response's own inline
 * script and style (a fresh nonce per response) and requests to its own
 * origin; `x-frame-options: DENY` (and `frame-ancestors 'none'`);
 * `cache-control: no-store`; no referrer; no sniffing.
 */
import type { Context } from "hono"

const style = String.raw`
:root { --ok: #15803d; --ok-bg: #dcfce7; --warn: #a16207; --warn-bg: #fef9c3; --crit: #b91c1c; --crit-bg: #fee2e2;
  --muted: #64748b; --line: #e2e8f0; --ink: #0f172a; --accent: #4f46e5; --panel: #ffffff; --bg: #f8fafc; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); background: var(--bg); }
header { display: flex; align-items: center; gap: 16px; padding: 10px 24px; background: #0f172a; color: #e2e8f0; }
header h1 { font-size: 16px; margin: 0; font-weight: 600; letter-spacing: .2px; }
header .host { color: #94a3b8; font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
header .spacer { flex: 1; }
header .meta { color: #94a3b8; font-size: 12px; }
header button { background: #1e293b; color: #e2e8f0; border-color: #334155; }
header label { color: #cbd5e1; font-size: 12px; display: flex; align-items: center; gap: 4px; }
main { max-width: 1480px; margin: 0 auto; padding: 16px 24px 48px; }
section { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; margin-top: 16px; }
section > .head { display: flex; align-items: center; gap: 12px; padding: 12px 16px; border-bottom: 1px solid var(--line); flex-wrap: wrap; }
section > .head h2 { font-size: 15px; margin: 0; }
section > .head .sub { color: var(--muted); font-size: 12px; }
section > .head .spacer { flex: 1; }
section > .body { padding: 12px 16px; overflow-x: auto; }
button { font: inherit; font-size: 13px; padding: 4px 10px; border-radius: 6px; border: 1px solid #cbd5e1; background: #fff; color: var(--ink); cursor: pointer; }
button:hover { border-color: #94a3b8; }
button:disabled { opacity: .5; cursor: default; }
button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
button.danger { color: var(--crit); border-color: #fca5a5; }
select, input, textarea { font: inherit; font-size: 13px; padding: 4px 8px; border: 1px solid #cbd5e1; border-radius: 6px; background: #fff; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 6px 7px; border-bottom: 1px solid var(--line); vertical-align: middle; white-space: nowrap; }
th { font-size: 11px; text-transform: uppercase; letter-spacing: .4px; color: var(--muted); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.mono, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
td.wrap { white-space: normal; min-width: 260px; max-width: 420px; word-break: break-word; }
td.error-text { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
tr.resolved td { opacity: .75; background: #f8fafc; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 12px; font-weight: 600; }
.badge.ok, .badge.replayed, .badge.completed { background: var(--ok-bg); color: var(--ok); }
.badge.warning, .badge.replaying, .badge.running { background: var(--warn-bg); color: var(--warn); }
.badge.critical, .badge.open, .badge.failed { background: var(--crit-bg); color: var(--crit); }
.badge.skipped { background: #e2e8f0; color: #334155; }
.badge.escalated { background: #ede9fe; color: #6d28d9; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(180px, 1fr)); gap: 12px; margin-bottom: 12px; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; }
.card .label { color: var(--muted); font-size: 12px; }
.card .value { font-size: 22px; font-weight: 600; font-variant-numeric: tabular-nums; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(320px, 1fr)); gap: 12px; margin-bottom: 12px; }
.chart { border: 1px solid var(--line); border-radius: 8px; padding: 8px 12px; }
.chart .label { color: var(--muted); font-size: 12px; display: flex; justify-content: space-between; }
svg.big { width: 100%; height: 90px; display: block; }
svg.spark { width: 96px; height: 26px; display: block; }
.chart .axis { color: var(--muted); font-size: 11px; display: flex; justify-content: space-between; }
svg .area { fill: rgba(79, 70, 229, .15); stroke: none; }
svg .line { fill: none; stroke: var(--accent); stroke-width: 1.5; vector-effect: non-scaling-stroke; }
svg.lag .area { fill: rgba(234, 88, 12, .15); }
svg.lag .line { stroke: #ea580c; }
svg .base { stroke: var(--line); stroke-width: 1; vector-effect: non-scaling-stroke; }
.checks { color: var(--muted); font-size: 12px; }
.bar { position: relative; width: 180px; height: 10px; background: #e2e8f0; border-radius: 999px; overflow: hidden; display: inline-block; vertical-align: middle; }
.bar > .fill { position: absolute; left: 0; top: 0; bottom: 0; background: var(--accent); border-radius: 999px; }
.empty { color: var(--muted); padding: 20px 8px; text-align: center; }
.empty strong { color: var(--ink); display: block; margin-bottom: 4px; }
.error { background: var(--crit-bg); color: var(--crit); border: 1px solid #fca5a5; border-radius: 6px; padding: 8px 12px; margin: 4px 0 8px; white-space: pre-wrap; }
.notice { background: #eef2ff; color: #3730a3; border: 1px solid #c7d2fe; border-radius: 6px; padding: 8px 12px; margin: 4px 0 8px; }
.filters { display: flex; gap: 8px; align-items: center; flex-wrap: wrap; }
.filters label { color: var(--muted); font-size: 12px; display: flex; gap: 4px; align-items: center; }
.actions { display: flex; gap: 6px; }
.detail td { background: #f8fafc; white-space: normal; }
.detail dl { display: grid; grid-template-columns: 160px 1fr; gap: 4px 12px; margin: 0 0 8px; }
.detail dt { color: var(--muted); }
.detail dd { margin: 0; word-break: break-word; }
.detail pre { background: #0f172a; color: #e2e8f0; padding: 10px; border-radius: 6px; max-height: 320px; overflow: auto; font-size: 12px; white-space: pre-wrap; word-break: break-word; }
.detail ol { margin: 0; padding-left: 20px; }
#login { max-width: 440px; margin: 12vh auto; background: #fff; border: 1px solid var(--line); border-radius: 10px; padding: 24px; }
#login h2 { margin: 0 0 8px; font-size: 18px; }
#login p { color: var(--muted); margin: 0 0 16px; }
#login input { width: 100%; padding: 8px 10px; margin-bottom: 12px; }
#login button { width: 100%; padding: 8px; }
dialog { border: 1px solid var(--line); border-radius: 10px; padding: 20px; width: min(520px, 92vw); }
dialog::backdrop { background: rgba(15, 23, 42, .4); }
dialog h3 { margin: 0 0 8px; font-size: 16px; }
dialog p { color: var(--muted); margin: 0 0 12px; }
dialog textarea { width: 100%; min-height: 80px; margin-bottom: 12px; }
dialog .buttons { display: flex; justify-content: flex-end; gap: 8px; }
#toast { position: fixed; right: 20px; bottom: 20px; display: flex; flex-direction: column; gap: 8px; z-index: 10; }
#toast div { background: #0f172a; color: #e2e8f0; padding: 8px 14px; border-radius: 8px; box-shadow: 0 4px 12px rgba(0,0,0,.2); max-width: 420px; }
#toast div.bad { background: var(--crit); color: #fff; }
[hidden] { display: none !important; }
`

// The client: plain ES2020, no template literals (this file embeds it in one), no innerHTML anywhere.
const script = String.raw`
"use strict";
(function () {
  var TOKEN_KEY = "factline.dashboard.token";
  var QUEUES = ["factline-events", "factline-projections", "factline-fact-processing", "factline-webhooks", "factline-batch"];
  var REFRESH_MS = 10000;
  var state = {
    token: sessionStorage.getItem(TOKEN_KEY),
    window: "1h",
    filters: { status: "open", queue: "", type: "", reason: "" },
    rows: [], next: null, resolved: new Map(), expanded: new Map(),
    auto: true, timer: null, loading: false, updated: null,
    // Bumped at every sign-in and sign-out: a response that belongs to an earlier session is dropped, never
    // rendered and never allowed to sign the new session out (a slow 401 of a wrong token did exactly that).
    session: 0
  };

  function $(id) { return document.getElementById(id); }
  function h(tag, props) {
    var el = document.createElement(tag);
    if (props) for (var k in props) {
      var v = props[k];
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") el.className = v;
      else if (k === "text") el.textContent = String(v);
      else if (k.slice(0, 2) === "on") el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? "" : String(v));
    }
    for (var i = 2; i < arguments.length; i++) append(el, arguments[i]);
    return el;
  }
  function append(el, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { append(el, c); }); return; }
    el.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
  function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); return el; }
  var SVG = "http://www.w3.org/2000/svg";
  function s(tag, attrs) { var el = document.createElementNS(SVG, tag); for (var k in attrs) el.setAttribute(k, String(attrs[k])); return el; }

  function ApiError(status, code, message) { this.status = status; this.code = code; this.message = message; }
  /** A promise that never settles: what a response of an earlier session becomes. */
  function stale() { return new Promise(function () {}); }
  function api(method, path, body) {
    var session = state.session;
    var init = { method: method, headers: { authorization: "Bearer " + state.token, accept: "application/json" }, cache: "no-store" };
    if (body !== undefined) { init.headers["content-type"] = "application/json"; init.body = JSON.stringify(body); }
    return fetch(path, init).then(function (res) {
      if (session !== state.session) return stale();
      return res.text().then(function (text) {
        if (session !== state.session) return stale();
        var json = null;
        try { json = text ? JSON.parse(text) : null; } catch (e) { json = null; }
        if (!res.ok) {
          var err = (json && json.error) || {};
          if (res.status === 401) signOut("The API refused this token: " + (err.message || "unauthorized") + ". Enter a valid token.");
          throw new ApiError(res.status, err.code || "http_" + res.status, err.message || (res.status + " " + res.statusText));
        }
        return json;
      });
    }, function (e) {
      if (session !== state.session) return stale();
      throw new ApiError(0, "network", "cannot reach the API (" + (e && e.message ? e.message : "network error") + ")");
    });
  }
  function errorText(e) { return e instanceof ApiError ? (e.status ? e.status + " " + e.code + ": " : "") + e.message : String(e); }

  // Formatting
  function n(v) { return v === null || v === undefined ? "—" : Number(v).toLocaleString("en-US"); }
  function ms(v) {
    if (v === null || v === undefined) return "—";
    if (v < 1000) return "≤ " + v + " ms";
    if (v < 60000) return "≤ " + (v / 1000) + " s";
    return "≤ " + (v / 60000) + " min";
  }
  function pct(v) { return (Math.round(v * 1000) / 10) + "%"; }
  function ago(iso) {
    if (!iso) return "—";
    var d = (Date.now() - Date.parse(iso)) / 1000;
    if (!isFinite(d)) return String(iso);
    if (d < 5) return "just now";
    if (d < 60) return Math.round(d) + " s ago";
    if (d < 3600) return Math.round(d / 60) + " min ago";
    if (d < 86400) return Math.round(d / 3600) + " h ago";
    return Math.round(d / 86400) + " d ago";
  }
  function when(iso) { return h("span", { title: iso || "", text: ago(iso) }); }
  function badge(status) { return h("span", { class: "badge " + status, text: status }); }
  function short(text, max) { text = text === null || text === undefined ? "" : String(text); return text.length > max ? text.slice(0, max - 1) + "…" : text; }

  function toast(message, bad) {
    var el = h("div", { class: bad ? "bad" : "", role: "status", text: message });
    $("toast").appendChild(el);
    setTimeout(function () { if (el.parentNode) el.parentNode.removeChild(el); }, bad ? 8000 : 4000);
  }

  // Sign-in
  function newSession() {
    state.session++;
    state.loading = false;
    $("refresh").disabled = false;
  }
  function signOut(message) {
    newSession();
    state.token = null;
    sessionStorage.removeItem(TOKEN_KEY);
    stopTimer();
    // Nothing of the previous session stays on the page.
    state.rows = []; state.next = null; state.resolved.clear(); state.expanded.clear();
    clear($("dlq-rows")); clear($("health-body")); clear($("batches-body"));
    $("health-sub").textContent = ""; $("batches-sub").textContent = ""; $("dlq-count").textContent = ""; $("updated").textContent = "";
    $("dlq-empty").hidden = true; $("dlq-error").hidden = true;
    $("app").hidden = true;
    $("login").hidden = false;
    $("login-error").hidden = !message;
    $("login-error").textContent = message || "";
    $("token").value = "";
    $("token").focus();
  }
  function signIn(token) {
    newSession();
    state.token = token;
    sessionStorage.setItem(TOKEN_KEY, token);
    $("login").hidden = true;
    $("app").hidden = false;
    refresh();
  }

  // Charts: the window's per-minute series, bucketed into at most 60 points (empty minutes count as 0 / no lag).
  var WINDOWS = { "15m": 15, "1h": 60, "6h": 360, "24h": 1440 };
  function buckets(series, aggregate) {
    var minutes = WINDOWS[state.window] || 60;
    var size = Math.max(1, Math.ceil(minutes / 60));
    var count = Math.ceil(minutes / size);
    var end = Math.floor(Date.now() / 60000);
    var start = end - count * size + 1;
    var out = [];
    for (var i = 0; i < count; i++) out.push({ received: 0, lag: null });
    series.forEach(function (p) {
      var i = Math.floor((Math.floor(Date.parse(p.minute) / 60000) - start) / size);
      if (i < 0 || i >= count) return;
      out[i].received += p.received;
      if (p.lag_p99_ms !== null && p.lag_p99_ms !== undefined) out[i].lag = Math.max(out[i].lag || 0, p.lag_p99_ms);
    });
    return { points: out, size: size };
  }
  function chart(values, kind, cls, title) {
    var width = cls === "big" ? 600 : 96, height = cls === "big" ? 90 : 26;
    var svg = s("svg", { viewBox: "0 0 " + width + " " + height, preserveAspectRatio: "none", class: cls + " " + kind, role: "img" });
    var t = s("title", {}); t.textContent = title; svg.appendChild(t);
    svg.setAttribute("aria-label", title);
    var max = 0; values.forEach(function (v) { if (v !== null && v > max) max = v; });
    var step = values.length > 1 ? width / (values.length - 1) : width;
    var y = function (v) { return max === 0 ? height - 1 : height - 1 - (v / max) * (height - 4); };
    svg.appendChild(s("line", { class: "base", x1: 0, x2: width, y1: height - 0.5, y2: height - 0.5 }));
    // Runs of consecutive values (null breaks a run); a run of one point is drawn as a short flat tick.
    var runs = [], run = null;
    values.forEach(function (v, i) {
      if (v === null) { run = null; return; }
      if (!run) { run = []; runs.push(run); }
      run.push([i * step, y(v)]);
    });
    var d = "", area = "";
    runs.forEach(function (r) {
      if (r.length === 1) r = [[Math.max(0, r[0][0] - Math.max(step * 0.8, 3)), r[0][1]], r[0]];
      d += " M" + r.map(function (p) { return p[0].toFixed(1) + " " + p[1].toFixed(1); }).join(" L");
      area += " M" + r[0][0].toFixed(1) + " " + height + " L" + r.map(function (p) { return p[0].toFixed(1) + " " + p[1].toFixed(1); }).join(" L") +
        " L" + r[r.length - 1][0].toFixed(1) + " " + height + " Z";
    });
    if (area) svg.appendChild(s("path", { class: "area", d: area }));
    if (d) svg.appendChild(s("path", { class: "line", d: d }));
    return svg;
  }

  function axis(window) { return h("div", { class: "axis" }, h("span", { text: window + " ago" }), h("span", { text: "now" })); }

  // Health
  function renderHealth(health) {
    var body = clear($("health-body"));
    var queues = health.queues || [];
    var totalOpen = 0, totalReceived = 0, totalDead = 0;
    queues.forEach(function (q) { totalOpen += q.dlq_open; totalReceived += q.received; totalDead += q.dead_lettered; });
    $("health-sub").textContent = "window " + health.window + " · since " + new Date(health.since).toLocaleTimeString();
    body.appendChild(h("div", { class: "cards" },
      h("div", { class: "card" }, h("div", { class: "label", text: "Overall" }), h("div", { class: "value" }, badge(health.status))),
      h("div", { class: "card" }, h("div", { class: "label", text: "Received (" + health.window + ")" }), h("div", { class: "value", text: n(totalReceived) })),
      h("div", { class: "card" }, h("div", { class: "label", text: "Dead-lettered (" + health.window + ")" }), h("div", { class: "value", text: n(totalDead) })),
      h("div", { class: "card" }, h("div", { class: "label", text: "Open dead letters" }), h("div", { class: "value", id: "open-total", text: n(totalOpen) })),
      h("div", { class: "card" }, h("div", { class: "label", text: "Ledger shards with relay pending" }),
        h("div", { class: "value", text: n(health.ledger ? health.ledger.relay_pending_shards : null) }))));

    var all = [];
    queues.forEach(function (q) { all = all.concat(q.series || []); });
    var overall = buckets(all);
    var per = overall.size === 1 ? "min" : overall.size + " min";
    var throughput = overall.points.map(function (p) { return p.received; });
    var lag = overall.points.map(function (p) { return p.lag; });
    var peak = Math.max.apply(null, throughput.concat([0]));
    var worstLag = lag.reduce(function (a, b) { return b === null ? a : Math.max(a, b); }, 0);
    body.appendChild(h("div", { class: "charts" },
      h("div", { class: "chart", id: "chart-throughput" },
        h("div", { class: "label" }, h("span", { text: "Throughput, all queues (messages per " + per + ")" }), h("span", { text: "peak " + n(peak) })),
        chart(throughput, "throughput", "big", "messages received per " + per + " over the last " + health.window + "; peak " + peak), axis(health.window)),
      h("div", { class: "chart", id: "chart-lag" },
        h("div", { class: "label" }, h("span", { text: "Lag p99, worst queue (created → processed)" }), h("span", { text: "max " + (worstLag ? ms(worstLag) : "—") })),
        chart(lag, "lag", "big", "lag p99 per " + per + " over the last " + health.window), axis(health.window))));

    var thead = h("thead", {}, h("tr", {},
      ["Queue", "Status", "Received", "Acked", "Retried", "Dead-lettered", "Retry rate", "DLQ open", "Depth", "Lag p50", "Lag p99", "Processing p99", "Throughput", "Lag"].map(function (label, i) {
        return h("th", { class: i >= 2 && i <= 11 ? "num" : "", text: label });
      })));
    var tbody = h("tbody");
    queues.forEach(function (q) {
      var b = buckets(q.series || []);
      var failing = Object.keys(q.checks || {}).filter(function (k) { return q.checks[k] !== "ok"; });
      var reasons = Object.keys(q.dlq_by_reason || {}).map(function (r) { return r + " " + q.dlq_by_reason[r]; }).join(", ");
      tbody.appendChild(h("tr", { "data-queue": q.queue, "data-status": q.status },
        h("td", { class: "mono" }, q.queue),
        h("td", {}, badge(q.status), failing.length ? h("div", { class: "checks", text: failing.map(function (k) { return k + " " + q.checks[k]; }).join(", ") }) : null),
        h("td", { class: "num", text: n(q.received) }),
        h("td", { class: "num", text: n(q.acked) }),
        h("td", { class: "num", text: n(q.retried) }),
        h("td", { class: "num", text: n(q.dead_lettered), title: reasons || null }),
        h("td", { class: "num", text: pct(q.retry_rate) }),
        h("td", { class: "num", text: n(q.dlq_open) }),
        h("td", { class: "num", text: q.depth === null ? "n/a" : n(q.depth), title: q.depth === null ? "queue depth is not available here" : null }),
        h("td", { class: "num", text: ms(q.lag_p50_ms) }),
        h("td", { class: "num", text: ms(q.lag_p99_ms) }),
        h("td", { class: "num", text: ms(q.processing_p99_ms) }),
        h("td", {}, chart(b.points.map(function (p) { return p.received; }), "throughput", "spark", q.queue + ": messages received per " + (b.size === 1 ? "minute" : b.size + " minutes") + ", last " + health.window)),
        h("td", {}, chart(b.points.map(function (p) { return p.lag; }), "lag", "spark", q.queue + ": lag p99, last " + health.window))));
    });
    body.appendChild(h("table", { id: "health-table" }, thead, tbody));
  }
  function loadHealth() {
    return api("GET", "/v1/queues/health?window=" + encodeURIComponent(state.window)).then(renderHealth, function (e) {
      var body = clear($("health-body"));
      $("health-sub").textContent = "";
      if (e.status === 403) body.appendChild(h("div", { class: "notice", id: "health-forbidden", text: "Queue health needs a token with the platform scope (the queues are shared by every tenant). This token sees its own tenant's dead letters and batch jobs." }));
      else body.appendChild(h("div", { class: "error", text: "Could not load queue health: " + errorText(e) }));
    });
  }

  // Dead letters
  function dlqQuery(cursor) {
    var p = new URLSearchParams();
    var f = state.filters;
    if (f.status) p.set("status", f.status);
    if (f.queue) p.set("queue", f.queue);
    if (f.type) p.set("type", f.type);
    if (f.reason) p.set("reason", f.reason);
    p.set("limit", "50");
    if (cursor) p.set("cursor", cursor);
    return "/v1/dlq?" + p.toString();
  }
  function loadDlq(more) {
    return api("GET", dlqQuery(more ? state.next : null)).then(function (page) {
      state.rows = more ? state.rows.concat(page.data) : page.data;
      state.next = page.next_cursor;
      $("dlq-error").hidden = true;
      renderDlq();
    }, function (e) {
      $("dlq-error").hidden = false;
      $("dlq-error").textContent = "Could not load dead letters: " + errorText(e);
    });
  }
  function renderDlq() {
    var tbody = clear($("dlq-rows"));
    var ids = new Set(state.rows.map(function (r) { return r.id; }));
    // What this operator just resolved stays visible (with its new status) until the filters change.
    var rows = state.rows.map(function (r) { return state.resolved.get(r.id) || r; });
    state.resolved.forEach(function (r, id) { if (!ids.has(id)) rows.push(r); });
    $("dlq-empty").hidden = rows.length > 0;
    $("dlq-table").hidden = rows.length === 0;
    $("dlq-more").hidden = !state.next;
    $("dlq-count").textContent = rows.length === 0 ? "" : rows.length + (state.next ? "+" : "") + " shown";
    rows.forEach(function (r) {
      var open = r.status === "open";
      var tr = h("tr", { "data-id": r.id, class: state.resolved.has(r.id) && !open ? "resolved" : "" },
        h("td", {}, when(r.received_at)),
        h("td", {}, h("div", { class: "mono", text: r.queue }), h("div", { class: "mono checks", text: r.message_type || "—" })),
        h("td", { class: "mono subject", text: short(r.subject || "—", 40), title: r.subject || "" }),
        h("td", { class: "mono", text: r.tenant_id || "—" }),
        h("td", {}, h("div", { text: r.reason }), h("div", { class: "checks", text: n(r.attempts) + (r.attempts === 1 ? " attempt" : " attempts") })),
        h("td", { class: "wrap error-text", text: short(r.last_error, 200), title: r.last_error }),
        h("td", { class: "dl-status" }, badge(r.status), r.resolved_by && !open ? h("div", { class: "checks", text: "by " + r.resolved_by + " · " + ago(r.resolved_at) }) : null),
        h("td", {}, h("div", { class: "actions" },
          open ? h("button", { "data-action": "replay", class: "primary", title: "Send it back to " + r.queue + " with the same idempotency key", onclick: function (ev) { replay(r, ev.currentTarget); } }, "Replay") : null,
          open ? h("button", { "data-action": "skip", onclick: function () { askSkip(r); } }, "Skip") : null,
          h("button", { "data-action": "details", "aria-expanded": state.expanded.has(r.id) ? "true" : "false", onclick: function () { toggle(r.id); } }, state.expanded.has(r.id) ? "Hide" : "Details"))));
      tbody.appendChild(tr);
      if (state.expanded.has(r.id)) tbody.appendChild(detailRow(r.id, state.expanded.get(r.id)));
    });
  }
  function detailRow(id, detail) {
    var td = h("td", { colspan: 8 });
    var tr = h("tr", { class: "detail", "data-detail": id }, td);
    if (!detail) { td.appendChild(h("div", { class: "checks", text: "Loading…" })); return tr; }
    if (detail.error) { td.appendChild(h("div", { class: "error", text: detail.error })); return tr; }
    var d = detail.record;
    var dl = h("dl");
    [["id", d.id], ["queue", d.queue], ["status", d.status], ["reason", d.reason], ["last error", d.last_error], ["attempts", d.attempts],
      ["first attempted", d.first_attempted_at], ["last attempted", d.last_attempted_at], ["received", d.received_at],
      ["tenant", d.tenant_id], ["message type", d.message_type], ["idempotency key", d.idempotency_key], ["subject", d.subject],
      ["resolved by", d.resolved_by], ["resolved at", d.resolved_at], ["replay operation", d.replay_operation_id]].forEach(function (pair) {
      if (pair[1] === null || pair[1] === undefined || pair[1] === "") return;
      dl.appendChild(h("dt", { text: pair[0] }));
      dl.appendChild(h("dd", { class: "mono", text: String(pair[1]) }));
    });
    td.appendChild(dl);
    td.appendChild(h("div", { class: "checks", text: "History" }));
    td.appendChild(d.history && d.history.length ? h("ol", {}, d.history.map(function (e) {
      return h("li", { text: e.at + " — " + e.action + " by " + e.by + (e.note ? " (" + e.note + ")" : "") + (e.operation_id ? " · " + e.operation_id : "") });
    })) : h("div", { class: "checks", text: "no actions yet" }));
    var json = JSON.stringify(d.original_message, null, 2) || "null";
    td.appendChild(h("div", { class: "checks", text: "Original message" + (json.length > 65536 ? " (first 64 KiB)" : "") }));
    td.appendChild(h("pre", { text: json.slice(0, 65536) }));
    if (d.status === "open") td.appendChild(h("div", { class: "actions" }, h("button", { "data-action": "escalate", onclick: function () { askEscalate(d); } }, "Escalate…")));
    return tr;
  }
  function toggle(id) {
    if (state.expanded.has(id)) { state.expanded.delete(id); renderDlq(); return; }
    state.expanded.set(id, null);
    renderDlq();
    return loadDetail(id);
  }
  function loadDetail(id) {
    return api("GET", "/v1/dlq/" + encodeURIComponent(id)).then(function (record) {
      if (state.expanded.has(id)) state.expanded.set(id, { record: record });
    }, function (e) {
      if (state.expanded.has(id)) state.expanded.set(id, { error: errorText(e) });
    }).then(renderDlq);
  }
  function resolved(record, message) {
    state.resolved.set(record.id, record);
    if (state.expanded.has(record.id)) state.expanded.set(record.id, { record: record });
    renderDlq();
    toast(message);
    loadHealth();
  }
  function replay(r, button) {
    button.disabled = true;
    button.textContent = "Replaying…";
    return api("POST", "/v1/dlq/" + encodeURIComponent(r.id) + "/replay").then(function (record) {
      resolved(record, "Replayed to " + record.queue + " (" + (record.replay_operation_id || "") + ")");
    }, function (e) {
      toast("Replay failed: " + errorText(e), true);
      loadDlq();
    });
  }

  // Dialogs (no window.prompt/confirm: a reason is typed, checked and sent as JSON)
  var pending = null;
  function openDialog(config) {
    pending = config;
    $("dialog-title").textContent = config.title;
    $("dialog-text").textContent = config.text;
    $("dialog-input").hidden = !config.input;
    $("dialog-input").value = "";
    $("dialog-input").placeholder = config.placeholder || "";
    $("dialog-error").hidden = true;
    $("dialog-ok").textContent = config.ok;
    $("dialog-ok").disabled = false;
    $("dialog").showModal();
    if (config.input) $("dialog-input").focus();
  }
  function confirmDialog() {
    if (!pending) return;
    var value = $("dialog-input").value.trim();
    if (pending.required && value === "") { $("dialog-error").hidden = false; $("dialog-error").textContent = "A reason is required."; return; }
    $("dialog-ok").disabled = true;
    var run = pending.run;
    run(value).then(function () { pending = null; $("dialog").close(); }, function (e) {
      $("dialog-ok").disabled = false;
      $("dialog-error").hidden = false;
      $("dialog-error").textContent = errorText(e);
    });
  }
  function askSkip(r) {
    openDialog({
      title: "Skip this dead letter?",
      text: "Its work will not be done. The decision is recorded as a reconciliation fact in the ledger, with your reason. (" + r.queue + " · " + (r.message_type || "?") + " · " + short(r.subject || r.id, 60) + ")",
      input: true, required: true, placeholder: "Why is this work given up? (required)", ok: "Skip",
      run: function (reason) {
        return api("POST", "/v1/dlq/" + encodeURIComponent(r.id) + "/skip", { reason: reason }).then(function (record) {
          resolved(record, "Skipped; reconciliation fact " + (record.reconciliation_fact_id || "") + " appended");
        });
      }
    });
  }
  function askEscalate(r) {
    openDialog({
      title: "Escalate this dead letter?", text: "It leaves the open list, marked escalated, for someone to take over. A note is optional.",
      input: true, required: false, placeholder: "Note (optional)", ok: "Escalate",
      run: function (note) {
        return api("POST", "/v1/dlq/" + encodeURIComponent(r.id) + "/escalate", note ? { note: note } : {}).then(function (record) { resolved(record, "Escalated"); });
      }
    });
  }
  function askReplayAll() {
    var f = state.filters;
    var parts = ["queue", "type", "reason"].filter(function (k) { return f[k]; }).map(function (k) { return k + " = " + f[k]; });
    openDialog({
      title: "Replay every open dead letter matching?",
      text: (parts.length ? parts.join(", ") : "No filter: every open dead letter this token can see") + ". Up to 1,000 records, sent back to their queues in waves of 100, 2 s apart.",
      input: false, ok: "Replay all",
      run: function () {
        var p = new URLSearchParams();
        ["queue", "type", "reason"].forEach(function (k) { if (f[k]) p.set(k, f[k]); });
        return api("POST", "/v1/dlq/replay" + (p.toString() ? "?" + p.toString() : "")).then(function (result) {
          toast("Replaying " + result.count + " dead letter(s) in " + result.waves + " wave(s) — operation " + result.operation_id);
          return refresh();
        });
      }
    });
  }

  // Batch jobs
  function loadBatches() {
    return api("GET", "/v1/batches?limit=20").then(function (page) {
      var body = clear($("batches-body"));
      var jobs = page.data || [];
      var running = jobs.filter(function (b) { return b.status === "running"; });
      var recent = jobs.filter(function (b) { return b.status !== "running"; }).slice(0, 10);
      $("batches-sub").textContent = running.length + " running";
      if (jobs.length === 0) {
        body.appendChild(h("div", { class: "empty", id: "batches-empty" }, h("strong", { text: "No batch jobs" }),
          "Imports, exports, reconciles and rebuilds (POST /v1/batches) show here with their progress."));
        return;
      }
      var tbody = h("tbody");
      running.concat(recent).forEach(function (b) {
        // Every job has offset / total (a rebuild's in shards, an import's in lines); total is unknown until the end of a manifest.
        var rebuild = b.operation === "rebuild";
        var total = b.total || 0, done = b.offset || 0;
        var fraction = total === 0 ? (b.status === "running" || b.status === "queued" ? 0 : 1) : Math.min(1, done / total);
        var fill = h("div", { class: "fill" });
        fill.style.width = (fraction * 100).toFixed(1) + "%";
        var target = b.projection || (b.params && b.params.projection) || (b.params && b.params.manifest) || "";
        tbody.appendChild(h("tr", { "data-batch": b.batch_id, "data-status": b.status },
          h("td", { class: "mono", text: b.batch_id }),
          h("td", { text: b.operation + (target ? " " + target : "") }),
          h("td", {}, badge(b.status)),
          h("td", {}, h("div", { class: "bar", role: "progressbar", "aria-valuemin": 0, "aria-valuemax": total, "aria-valuenow": done }, fill),
            " ", h("span", { class: "checks", text: done + " / " + (b.total === null ? "?" : total) + (rebuild ? " shards" : " items") })),
          h("td", { class: "num", text: n(b.succeeded) + (b.failed ? " (" + n(b.failed) + " failed)" : "") }),
          h("td", {}, when(b.started_at || b.created_at)),
          h("td", {}, b.finished_at ? when(b.finished_at) : "—"),
          h("td", { class: "wrap", text: b.error || (b.errors && b.errors.length ? "line " + b.errors[0].line + ": " + b.errors[0].error : "") })));
      });
      body.appendChild(h("table", {}, h("thead", {}, h("tr", {}, ["Batch", "Operation", "Status", "Progress", "Done", "Started", "Finished", "Error"].map(function (label, i) {
        return h("th", { class: i === 4 ? "num" : "", text: label });
      }))), tbody));
    }, function (e) {
      var body = clear($("batches-body"));
      body.appendChild(h("div", { class: "error", text: "Could not load batch jobs: " + errorText(e) }));
    });
  }

  // Refresh
  function refresh() {
    if (!state.token || state.loading) return Promise.resolve();
    var session = state.session;
    state.loading = true;
    $("refresh").disabled = true;
    function done() {
      if (session !== state.session) return;
      state.loading = false; $("refresh").disabled = false; schedule();
    }
    return Promise.all([loadHealth(), loadDlq(false), loadBatches()]).then(function () {
      if (session !== state.session) return;
      state.updated = new Date();
      $("updated").textContent = "updated " + state.updated.toLocaleTimeString();
    }).then(done, done);
  }
  function stopTimer() { if (state.timer) clearTimeout(state.timer); state.timer = null; }
  function schedule() {
    stopTimer();
    if (!state.auto || !state.token) return;
    state.timer = setTimeout(function () {
      // Not while a dialog is open or the tab is hidden; the next tick tries again.
      if (document.hidden || $("dialog").open) schedule(); else refresh();
    }, REFRESH_MS);
  }

  function filtersChanged() {
    state.filters = { status: $("f-status").value, queue: $("f-queue").value, type: $("f-type").value.trim(), reason: $("f-reason").value.trim() };
    state.resolved.clear();
    state.expanded.clear();
    state.next = null;
    loadDlq(false);
  }

  function init() {
    QUEUES.forEach(function (q) { $("f-queue").appendChild(h("option", { value: q, text: q })); });
    $("host").textContent = location.host;
    $("login-form").addEventListener("submit", function (ev) {
      ev.preventDefault();
      var token = $("token").value.trim();
      if (token) signIn(token);
    });
    $("signout").addEventListener("click", function () { signOut(""); });
    $("refresh").addEventListener("click", function () { refresh(); });
    $("auto").addEventListener("change", function (ev) { state.auto = ev.currentTarget.checked; schedule(); });
    $("window").addEventListener("change", function (ev) { state.window = ev.currentTarget.value; loadHealth(); });
    ["f-status", "f-queue"].forEach(function (id) { $(id).addEventListener("change", filtersChanged); });
    $("filters").addEventListener("submit", function (ev) { ev.preventDefault(); filtersChanged(); });
    $("dlq-more").addEventListener("click", function () { loadDlq(true); });
    $("replay-all").addEventListener("click", askReplayAll);
    $("dialog-cancel").addEventListener("click", function () { pending = null; $("dialog").close(); });
    $("dialog-form").addEventListener("submit", function (ev) { ev.preventDefault(); confirmDialog(); });
    document.addEventListener("visibilitychange", function () { if (!document.hidden && state.token && state.auto && !state.loading) refresh(); });
    if (state.token) signIn(state.token); else signOut("");
  }
  init();
})();
`

const body = `
<div id="login" hidden>
  <h2>factline operations</h2>
  <p>Enter an API token (scope <code>platform</code> for every tenant and queue health, or a tenant's <code>admin</code>). It is kept in this browser tab only and sent to this deployment's API as a bearer token.</p>
  <div id="login-error" class="error" role="alert" hidden></div>
  <form id="login-form" autocomplete="off">
    <input id="token" type="password" placeholder="API token" aria-label="API token" autocomplete="off" spellcheck="false" required>
    <button type="submit" class="primary">Sign in</button>
  </form>
</div>
<div id="app" hidden>
  <header>
    <h1>factline operations</h1><span class="host" id="host"></span>
    <span class="spacer"></span>
    <span class="meta" id="updated"></span>
    <label><input type="checkbox" id="auto" checked> auto-refresh 10 s</label>
    <button id="refresh" type="button">Refresh</button>
    <button id="signout" type="button">Sign out</button>
  </header>
  <main>
    <section id="health">
      <div class="head"><h2>Queue health</h2><span class="sub" id="health-sub"></span><span class="spacer"></span>
        <label class="sub">window <select id="window"><option value="15m">15 min</option><option value="1h" selected>1 hour</option><option value="6h">6 hours</option><option value="24h">24 hours</option></select></label>
      </div>
      <div class="body" id="health-body"><div class="checks">Loading…</div></div>
    </section>
    <section id="dlq">
      <div class="head"><h2>Dead letters</h2><span class="sub" id="dlq-count"></span><span class="spacer"></span>
        <form id="filters" class="filters">
          <label>status <select id="f-status"><option value="open" selected>open</option><option value="replaying">replaying</option><option value="replayed">replayed</option><option value="skipped">skipped</option><option value="escalated">escalated</option><option value="">all</option></select></label>
          <label>queue <select id="f-queue"><option value="">all</option></select></label>
          <label>type <input id="f-type" size="16" placeholder="message type"></label>
          <label>reason <input id="f-reason" size="16" placeholder="e.g. permanent_failure"></label>
          <button type="submit">Apply</button>
        </form>
        <button type="button" id="replay-all" class="danger" title="Replay every open dead letter matching the queue, type and reason filters">Replay all matching…</button>
      </div>
      <div class="body">
        <div id="dlq-error" class="error" role="alert" hidden></div>
        <div id="dlq-empty" class="empty" hidden><strong>No dead letters match.</strong>Messages that fail permanently or exhaust their retries land here, with their failure context, until someone replays, skips or escalates them.</div>
        <table id="dlq-table" hidden>
          <thead><tr><th>Received</th><th>Queue · type</th><th>Subject</th><th>Tenant</th><th>Failure</th><th>Last error</th><th>Status</th><th>Actions</th></tr></thead>
          <tbody id="dlq-rows"></tbody>
        </table>
        <button type="button" id="dlq-more" hidden>Load more</button>
      </div>
    </section>
    <section id="batches">
      <div class="head"><h2>Batch jobs</h2><span class="sub" id="batches-sub"></span></div>
      <div class="body" id="batches-body"><div class="checks">Loading…</div></div>
    </section>
  </main>
</div>
<dialog id="dialog">
  <form id="dialog-form" method="dialog">
    <h3 id="dialog-title"></h3>
    <p id="dialog-text"></p>
    <textarea id="dialog-input" maxlength="1000"></textarea>
    <div id="dialog-error" class="error" role="alert" hidden></div>
    <div class="buttons"><button type="button" id="dialog-cancel">Cancel</button><button type="submit" id="dialog-ok" class="primary">OK</button></div>
  </form>
</dialog>
<div id="toast" aria-live="polite"></div>
`

/** The page with this response's nonce on its one script and one style element. */
export const html = (nonce: string) =>
  `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>factline operations</title>
<link rel="icon" href="data:,">
<style nonce="${nonce}">${style}</style>
</head>
<body>${body}<script nonce="${nonce}">${script}</script>
</body>
</html>
`

export const contentSecurityPolicy = (nonce: string) =>
  [
    "default-src 'none'",
    `script-src 'nonce-${nonce}'`,
    `style-src 'nonce-${nonce}'`,
    "connect-src 'self'",
    "img-src data:",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'"
  ].join("; ")

export const newNonce = () => {
  const bytes = crypto.getRandomValues(new Uint8Array(18))
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_")
}

/** The page: no data in it (every call it makes authenticates with the token the operator enters). */
export const page = (c: Context<any>) => {
    const nonce = newNonce()
    return c.body(html(nonce), 200, {
      "content-type": "text/html; charset=utf-8",
      "content-security-policy": contentSecurityPolicy(nonce),
      "x-frame-options": "DENY",
      "cache-control": "no-store",
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer",
      "cross-origin-opener-policy": "same-origin",
      "cross-origin-resource-policy": "same-origin",
      "permissions-policy": "camera=(), microphone=(), geolocation=(), payment=()"
    })
}
