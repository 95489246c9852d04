// The ratekeeper dashboard: reads /dashboard/api/state, then follows /dashboard/api/events
// (Server-Sent Events, one `state` event a second); falls back to polling the JSON when the
// stream is unavailable. Plain browser JavaScript, no framework, no build step. Every value from
// the service (keys are client-controlled) is written as text, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const fmt = (n) => (n === null || n === undefined ? "-" : Number(n).toLocaleString("en-US", { maximumFractionDigits: 2 }));

/** Creates an element: attributes (class, title, data-*), then children (strings become text). */
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) e.setAttribute(k, String(v));
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function duration(ms) {
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

/** A 60-second sparkline: allowed (green) and denied (red) per second. */
function sparkline(allowed, denied) {
  const w = 120;
  const h = 24;
  const max = Math.max(1, ...allowed, ...denied);
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("width", w);
  svg.setAttribute("height", h);
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  const base = document.createElementNS(ns, "line");
  for (const [k, v] of Object.entries({ x1: 0, x2: w, y1: h - 1, y2: h - 1, stroke: "#d1d9e0" })) base.setAttribute(k, v);
  svg.append(base);
  for (const [series, color] of [
    [denied, "#cf222e"],
    [allowed, "#1a7f37"],
  ]) {
    if (!series.some((v) => v > 0)) continue;
    const line = document.createElementNS(ns, "polyline");
    const step = w / Math.max(1, series.length - 1);
    line.setAttribute("points", series.map((v, i) => `${(i * step).toFixed(1)},${(h - 1 - (v / max) * (h - 2)).toFixed(1)}`).join(" "));
    line.setAttribute("fill", "none");
    line.setAttribute("stroke", color);
    line.setAttribute("stroke-width", "1.2");
    svg.append(line);
  }
  const title = document.createElementNS(ns, "title");
  title.textContent = `last 60 s, per second: up to ${max}`;
  svg.append(title);
  return svg;
}

const last = (a) => (a.length ? a[a.length - 1] : 0);

function renderDomains(state) {
  const root = $("domains");
  const frag = document.createDocumentFragment();
  for (const d of state.domains) {
    const body = el("tbody");
    for (const r of d.rules) {
      const name = el("td", { class: "rule" }, r.id === "" ? "(no rule matched)" : r.id);
      if (r.shadow) name.append(el("span", { class: "tag" }, "shadow"));
      if (!r.configured && r.id !== "") name.append(el("span", { class: "tag" }, "not in rules file"));
      body.append(
        el(
          "tr",
          { "data-rule": r.id, "data-domain": d.domain },
          name,
          el("td", {}, r.limits === null ? "-" : r.limits),
          el("td", { class: "num allowed-rate" }, fmt(last(r.allowedPerSecond))),
          el("td", { class: "num denied-rate deny" }, fmt(last(r.deniedPerSecond))),
          el("td", {}, sparkline(r.allowedPerSecond, r.deniedPerSecond)),
          el("td", { class: "num allowed-total" }, fmt(r.allowed)),
          el("td", { class: "num denied-total" }, fmt(r.denied) + (r.shadowDenied ? ` (+${fmt(r.shadowDenied)} shadow)` : "")),
        ),
      );
    }
    const head = el(
      "tr",
      {},
      el("th", { class: "w-rule" }, "rule"),
      el("th", { class: "w-limits" }, "limits"),
      el("th", { class: "num w-rate" }, "allowed/s"),
      el("th", { class: "num w-rate" }, "denied/s"),
      el("th", { class: "w-spark" }, "last 60 s"),
      el("th", { class: "num w-total" }, "allowed"),
      el("th", { class: "num w-total" }, "denied"),
    );
    const title =
      d.domain === "(policy)" ? "plain keys (named policies)" : d.domain === "(unknown)" ? "(domains not in the rules)" : d.domain;
    frag.append(
      el(
        "div",
        { class: "domain", "data-domain": d.domain },
        el("h3", {}, title),
        el("table", { class: "rules" }, el("thead", {}, head), body),
      ),
    );
  }
  root.replaceChildren(frag);
}

function renderTop(state) {
  const t = state.topDenied;
  $("top-hint").textContent = !t.keys.length
    ? "No denials yet."
    : t.sampledDenials
      ? `About ${fmt(t.total)} denials since start, counted in a fixed-size sketch; during floods of denials one in 16 was counted, so these counts are estimates.`
      : `${fmt(t.total)} denials since start, counted in a fixed-size sketch: each count is at most ${fmt(t.maxError)} too high.`;
  const rows = t.keys.map((k) =>
    el(
      "tr",
      {},
      el("td", { class: "key" }, k.key),
      el("td", {}, k.domain),
      el("td", { class: "rule" }, k.rule === null ? "-" : k.rule || "(override)"),
      el("td", { class: "num" }, fmt(k.denials) + (k.error ? ` (±${fmt(k.error)})` : "")),
    ),
  );
  $("top").tBodies[0].replaceChildren(...rows);
}

function renderStore(state) {
  const s = state.store;
  const l = s.latencyMs;
  const items = [
    ["store", s.kind],
    ["status", s.status],
    ["circuit breaker", s.breaker === null ? "none" : s.breaker],
    ["latency p50 / p99 / max", l ? `${fmt(l.p50)} / ${fmt(l.p99)} / ${fmt(l.max)} ms (last ${fmt(l.samples)} calls)` : "-"],
    ["store errors", fmt(s.errors)],
    ["decided by the failure policy", fmt(s.failurePolicyDecisions)],
  ];
  $("store").replaceChildren(...items.flatMap(([k, v]) => [el("dt", {}, k), el("dd", { "data-field": k }, v)]));
  const o = state.overrides;
  $("overrides-hint").textContent = !o.enabled
    ? "No overrides store (start with --overrides)."
    : o.error
      ? `Could not list overrides: ${o.error}`
      : o.items.length === 0
        ? "None in force."
        : o.more
          ? `The first ${o.items.length}.`
          : "";
  $("overrides").tBodies[0].replaceChildren(
    ...o.items.map((x) =>
      el(
        "tr",
        { title: x.note || "" },
        el("td", {}, x.domain),
        el("td", { class: "key" }, x.key),
        el("td", {}, x.policy),
        el("td", {}, x.expiresAtMs === null ? "-" : new Date(x.expiresAtMs).toISOString()),
      ),
    ),
  );
}

let knownDomains = "";
function renderTryChoices(state) {
  const domains = state.domains.map((d) => d.domain).filter((d) => !d.startsWith("("));
  const policies = (state.domains.find((d) => d.domain === "(policy)")?.rules || []).map((r) => r.id.replace(/^policy:/, ""));
  const sig = JSON.stringify([domains, policies]);
  if (sig === knownDomains) return;
  knownDomains = sig;
  const keep = (select, values) => {
    const was = select.value;
    select.replaceChildren(...values.map((v) => el("option", { value: v }, v)));
    if (values.includes(was)) select.value = was;
  };
  keep($("try-domain"), domains);
  keep($("try-policy"), ["", ...policies]);
}

function render(state) {
  $("meta").textContent = `rules ${state.rulesSource} · up ${duration(state.nowMs - state.startedAtMs)} · store ${state.store.kind}`;
  $("allowed-rate").textContent = fmt(state.totals.allowedLastSecond);
  $("denied-rate").textContent = fmt(state.totals.deniedLastSecond);
  $("total").textContent = fmt(state.totals.allowed + state.totals.denied);
  const l = state.store.latencyMs;
  $("latency").textContent = l ? `${fmt(l.p50)} / ${fmt(l.p99)} ms` : "-";
  renderDomains(state);
  renderTop(state);
  renderStore(state);
  renderTryChoices(state);
}

function setLive(text, cls) {
  const e = $("live");
  e.textContent = text;
  e.className = `live ${cls}`;
}

let pollTimer;
function poll() {
  fetch("api/state", { cache: "no-store" })
    .then((r) => (r.ok ? r.json() : Promise.reject(new Error(`HTTP ${r.status}`))))
    .then((s) => {
      render(s);
      setLive("live (polling)", "on");
    })
    .catch((e) => setLive(`offline: ${e.message}`, "off"));
}

function connect() {
  if (typeof EventSource !== "function") {
    pollTimer = setInterval(poll, 2000);
    return poll();
  }
  const es = new EventSource("api/events");
  es.addEventListener("state", (ev) => {
    if (pollTimer) pollTimer = clearInterval(pollTimer);
    setLive("live", "on");
    render(JSON.parse(ev.data));
  });
  // The browser reconnects by itself; poll meanwhile so the numbers keep moving.
  es.addEventListener("error", () => {
    setLive("reconnecting", "off");
    if (!pollTimer) pollTimer = setInterval(poll, 2000);
  });
}

function descriptorOf(text) {
  const entries = text
    .split("|")
    .map((part) => part.trim())
    .filter(Boolean)
    .map((part) => {
      const eq = part.indexOf("=");
      return eq < 0 ? { key: part, value: "" } : { key: part.slice(0, eq), value: part.slice(eq + 1) };
    });
  if (entries.length === 0) throw new Error("give a descriptor (user_id=42) or a plain key and a policy");
  return entries;
}

async function tryCheck(ev) {
  ev.preventDefault();
  const out = $("try-result");
  const domain = $("try-domain").value;
  const key = $("try-key").value.trim();
  const policy = $("try-policy").value;
  const cost = Number($("try-cost").value || 1);
  const peek = $("try-peek").checked;
  try {
    let res;
    if (key) {
      if (!policy) throw new Error("a plain key needs a policy");
      res = peek
        ? await fetch(`/v1/keys/${encodeURIComponent(policy)}/${encodeURIComponent(key)}?policy=${encodeURIComponent(policy)}`)
        : await fetch("/v1/check", {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ key, policy, cost }),
          });
    } else {
      const entries = descriptorOf($("try-descriptor").value);
      const text = entries.map((e) => `${e.key}=${e.value}`).join("|");
      res = peek
        ? await fetch(`/v1/keys/${encodeURIComponent(domain)}/${encodeURIComponent(text)}`)
        : await fetch("/v1/check", {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ domain, descriptors: [entries], cost }),
          });
    }
    const body = await res.json();
    if (!res.ok) throw new Error(body.error || `HTTP ${res.status}`);
    showResult(body, peek);
  } catch (e) {
    out.replaceChildren(el("p", { class: "verdict deny" }, e.message));
  }
}

function showResult(body, peek) {
  const parts = [
    el(
      "p",
      { class: `verdict ${body.allowed ? "allow" : "deny"}` },
      `${body.allowed ? "allowed" : "denied"}${peek ? " (peek: nothing charged)" : ""}`,
    ),
  ];
  for (const s of body.statuses || []) {
    const facts = [
      `key ${s.key}`,
      s.limit === null ? "unlimited" : `limit ${s.limit}${s.policy ? ` (${s.policy})` : ""}`,
      s.remaining === null ? null : `remaining ${s.remaining}`,
      s.retryAfterMs ? `retry after ${s.retryAfterMs} ms` : null,
      s.delayMs ? `delay ${s.delayMs} ms` : null,
    ].filter(Boolean);
    parts.push(el("p", {}, facts.join(" · ")), el("pre", { class: "explain" }, s.explain ? s.explain.why : ""));
  }
  $("try-result").replaceChildren(...parts);
}

document.addEventListener("DOMContentLoaded", () => {
  $("try").addEventListener("submit", tryCheck);
  poll();
  connect();
});
