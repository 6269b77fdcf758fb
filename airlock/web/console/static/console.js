// The airlock console: reads the JSON API, renders data with textContent only (agent output is untrusted).
"use strict";

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}
function row(cells) {
  const tr = el("tr");
  for (const c of cells) { const td = el("td"); if (c instanceof Node) td.appendChild(c); else td.textContent = c == null ? "" : String(c); tr.appendChild(td); }
  return tr;
}
function csrf() {
  const m = document.cookie.match(/(?:^|; )airlock_csrf=([^;]*)/);
  return m ? decodeURIComponent(m[1]) : "";
}
function fail(message) { const e = document.getElementById("error"); e.textContent = message; e.hidden = false; }
async function api(path, options) {
  const opts = Object.assign({ credentials: "same-origin", headers: {} }, options || {});
  if (opts.method && opts.method !== "GET") opts.headers["X-CSRF-Token"] = csrf();
  if (opts.json !== undefined) { opts.body = JSON.stringify(opts.json); opts.headers["Content-Type"] = "application/json"; }
  const r = await fetch(path, opts);
  if (r.status === 401) { location.href = "/login"; throw new Error("not logged in"); }
  const body = await r.json();
  if (!r.ok) throw new Error((body.error && body.error.message) || r.statusText);
  return body;
}
function duration(job) {
  if (!job.started_at) return "";
  const end = job.finished_at ? new Date(job.finished_at) : new Date();
  return ((end - new Date(job.started_at)) / 1000).toFixed(1) + " s";
}
function cost(job) {
  const m = job.output && job.output.metadata;
  return m && m.cost != null ? "$" + m.cost : "";
}
const TERMINAL = new Set(["succeeded", "failed", "cancelled", "timed_out", "interrupted"]);
function jobLink(id) { const a = el("a", id); a.href = "/jobs/" + encodeURIComponent(id); return a; }

const pages = {
  login() {
    document.getElementById("login-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const body = new URLSearchParams({ token: document.getElementById("token").value });
      const r = await fetch("/login", { method: "POST", body, credentials: "same-origin" });
      if (r.ok) location.href = "/"; else fail("login refused");
    });
  },
  async jobs() {
    const agents = (await api("/api/v1/agents")).agents;
    const select = document.getElementById("submit-agent");
    for (const a of agents) select.appendChild(el("option", a.name));
    document.getElementById("submit-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      try {
        const job = await api("/api/v1/jobs", { method: "POST", json: { agent: select.value, message: document.getElementById("submit-message").value } });
        location.href = "/jobs/" + encodeURIComponent(job.id);
      } catch (e) { fail(e.message); }
    });
    const body = document.querySelector("#jobs tbody");
    const newer = document.getElementById("page-newer"), older = document.getElementById("page-older");
    // tokens[i] opens page i (page 0 has none); the table refreshes the page it shows.
    let tokens = [null], at = 0, next = null;
    async function refresh() {
      const q = new URLSearchParams({ page_size: new URLSearchParams(location.search).get("page_size") || "25" });
      for (const name of ["state", "agent", "tenant"]) {
        const value = document.getElementById("filter-" + name).value.trim();
        if (value) q.set(name, value);
      }
      if (tokens[at]) q.set("page_token", tokens[at]);
      try {
        const page = await api("/api/v1/jobs?" + q);
        body.replaceChildren(...page.jobs.map((j) => row([jobLink(j.id), el("span", j.state, "state-" + j.state), j.agent, j.tenant, duration(j), cost(j)])));
        next = page.next_page_token || null;
        older.disabled = !next; newer.disabled = at === 0;
        document.getElementById("page-number").textContent = "page " + (at + 1);
      } catch (e) { fail(e.message); }
    }
    function go(page) { at = page; refresh(); }
    older.addEventListener("click", () => { if (next) { tokens[at + 1] = next; go(at + 1); } });
    newer.addEventListener("click", () => { if (at > 0) go(at - 1); });
    document.getElementById("filters").addEventListener("change", () => { tokens = [null]; go(0); });
    document.getElementById("filters").addEventListener("submit", (ev) => ev.preventDefault());
    await refresh();
    setInterval(refresh, 2000);
  },
  async job() {
    const id = document.body.dataset.job;
    async function summary() {
      const job = await api("/api/v1/jobs/" + encodeURIComponent(id));
      const dl = document.getElementById("summary");
      dl.replaceChildren();
      for (const [k, v] of [["State", job.state], ["Agent", job.agent], ["Tenant", job.tenant], ["Duration", duration(job)], ["Cost", cost(job)]]) {
        dl.appendChild(el("dt", k)); dl.appendChild(el("dd", v, k === "State" ? "state-" + v : ""));
      }
      if (job.parent_id) { const dd = el("dd"); dd.appendChild(jobLink(job.parent_id)); dl.appendChild(el("dt", "Parent")); dl.appendChild(dd); }
      if (job.forked_from) { const dd = el("dd"); dd.appendChild(jobLink(job.forked_from)); dd.appendChild(document.createTextNode(" at " + job.fork_point)); dl.appendChild(el("dt", "Forked from")); dl.appendChild(dd); }
      const kids = el("dd", null, "children");
      job.children.forEach((c, i) => { if (i) kids.appendChild(document.createTextNode(" ")); kids.appendChild(jobLink(c)); });
      dl.appendChild(el("dt", "Children")); dl.appendChild(kids);
      const msg = job.output && job.output.message;
      document.getElementById("output").textContent = msg == null ? "" : (typeof msg === "string" ? msg : JSON.stringify(msg, null, 2));
      const list = document.getElementById("artifacts");
      const files = (await api("/api/v1/jobs/" + encodeURIComponent(id) + "/artifacts")).artifacts || [];
      list.replaceChildren(...files.map((f) => { const li = el("li"); const a = el("a", f.path + " (" + f.size + " B)"); a.href = "/api/v1/jobs/" + encodeURIComponent(id) + "/artifacts/" + f.path.split("/").map(encodeURIComponent).join("/"); li.appendChild(a); return li; }));
    }
    document.getElementById("fork").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const json = { at: document.getElementById("fork-at").value.trim(), message: document.getElementById("fork-message").value };
      try { const fork = await api("/api/v1/jobs/" + encodeURIComponent(id) + "/fork", { method: "POST", json }); location.href = "/jobs/" + encodeURIComponent(fork.id); } catch (e) { fail(e.message); }
    });
    const timeline = document.getElementById("timeline"), egress = document.querySelector("#egress tbody");
    async function ledger() {
      const rows = (await api("/api/v1/jobs/" + encodeURIComponent(id) + "/egress")).decisions;
      egress.replaceChildren(...rows.map(egressRow));
    }
    const stream = new EventSource("/api/v1/jobs/" + encodeURIComponent(id) + "/events");
    stream.onmessage = null;
    const show = (msg) => {
      const event = JSON.parse(msg.data);
      const item = describe(event.data);
      if (item) { const li = el("li"); li.appendChild(el("time", event.time.slice(11, 19) + " ")); li.appendChild(el("strong", item[0] + " ")); if (item[1]) li.appendChild(el("pre", item[1])); li.dataset.kind = event.data.kind; timeline.appendChild(li); }
      if (event.data.kind === "sandbox" && event.data.event.type === "egress") ledger().catch((e) => fail(e.message));
      if (event.data.kind === "state" || event.data.kind === "approval") summary().catch((e) => fail(e.message));
      if (event.data.kind === "state" && TERMINAL.has(event.data.state)) stream.close();  // else it reconnects
    };
    for (const kind of ["state", "sandbox", "effect", "child", "signal", "log", "approval", "resume", "workspace"]) stream.addEventListener(kind, show);
    stream.onerror = () => { if (stream.readyState === EventSource.CLOSED) return; summary().catch(() => {}); };
    await summary();
    await ledger();
  },
  async approvals() {
    const body = document.querySelector("#approvals tbody");
    async function refresh() {
      const pending = (await api("/api/v1/approvals")).pending;
      body.replaceChildren(...pending.map((j) => {
        const calls = el("div");
        for (const c of j.approval ? j.approval.calls : []) calls.appendChild(el("pre", c.name + " " + JSON.stringify(c.input)));
        const buttons = el("div");
        if (j.may_decide) {
          const ok = el("button", "Approve", "approve"), no = el("button", "Reject", "reject");
          ok.addEventListener("click", () => decide(j.id, "approve", {}));
          no.addEventListener("click", () => { const reason = prompt("Why (the model reads it)?"); if (reason) decide(j.id, "reject", { reason }); });
          buttons.append(ok, no);
        }
        return row([jobLink(j.id), j.agent, calls, buttons]);
      }));
    }
    async function decide(id, how, json) {
      try { await api("/api/v1/jobs/" + encodeURIComponent(id) + "/" + how, { method: "POST", json }); } catch (e) { fail(e.message); }
      await refresh();
    }
    await refresh();
    setInterval(() => refresh().catch((e) => fail(e.message)), 2000);
  },
  async agents() {
    const box = document.getElementById("agents");
    for (const a of (await api("/api/v1/agents")).agents) {
      const s = el("section", null, "agent");
      s.appendChild(el("h2", a.name));
      s.appendChild(el("p", "backend " + a.backend + " · provider " + a.provider.kind + (a.provider.model ? " " + a.provider.model : "") + " · tools " + (a.tools.join(", ") || "none")));
      s.appendChild(el("p", "egress default: " + a.egress.default));
      const t = el("table");
      for (const r of a.egress.rules) t.appendChild(row(Object.values(r)));
      s.appendChild(t);
      s.appendChild(el("pre", JSON.stringify({ environment: a.environment, effects: a.effects, approval: a.approval, credentials: a.credentials }, null, 2)));
      const plot = el("div", null, "usage");
      s.appendChild(plot);
      box.appendChild(s);
      api("/api/v1/agents/" + encodeURIComponent(a.name) + "/usage").then((u) => usagePlot(plot, u)).catch((e) => fail(e.message));
    }
  },
};

pages.weave = async function weave() {
  const id = document.body.dataset.job;
  const g = await api("/api/v1/jobs/" + encodeURIComponent(id) + "/weave");
  const v = g.verification, status = document.getElementById("verification");
  const sealed = g.threads.some((t) => t.records.some((r) => r.sealed));
  status.textContent = v.ok ? "verified: " + v.records + " records, hash chain intact" + (sealed ? ", seals checked" : "") : "verification FAILED: " + v.breaks.length + " problem(s) in " + v.records + " records";
  status.className = v.ok ? "verified" : "denied";
  if (v.problems.length) status.textContent = "verification FAILED: the records cannot be read back";
  const named = v.breaks.map((b) => "#" + b.position + " " + b.record_id + ": " + b.problem);
  document.getElementById("breaks").replaceChildren(...[...v.problems, ...named].map((text) => el("li", text)));
  document.getElementById("graph").appendChild(weaveGraph(g, new Set(v.breaks.map((b) => b.record_id))));
};
// One column per thread, one row per clock tick; edges from each dependency to its dependant.
function weaveGraph(g, broken) {
  const CW = 220, RH = 54, BW = 190, BH = 40, TOP = 46;
  const clocks = [...new Set(g.threads.flatMap((t) => t.records.map((r) => r.clock)))].sort((a, b) => a - b);
  const rowOf = new Map(clocks.map((c, i) => [c, i])), at = new Map();
  g.threads.forEach((t, col) => t.records.forEach((r) => at.set(r.id, [col * CW + 10, TOP + rowOf.get(r.clock) * RH])));
  const W = g.threads.length * CW + 20, H = TOP + clocks.length * RH + 10;
  const chart = svg("svg", { viewBox: "0 0 " + W + " " + H, width: W, height: H, class: "weave", role: "img", "aria-label": "record graph" });
  g.threads.forEach((t, col) => {
    const intact = !t.records.some((r) => broken.has(r.id));
    chart.appendChild(svg("text", { x: col * CW + 10, y: 16, class: intact ? "thread intact" : "thread broken" }, t.agent + (intact ? " ✓" : " ✗ broken")));
    const link = svg("a", { href: "/jobs/" + encodeURIComponent(t.job) });
    link.appendChild(svg("text", { x: col * CW + 10, y: 32, class: "job" }, t.job));
    chart.appendChild(link);
  });
  for (const t of g.threads) for (const r of t.records) for (const d of r.depends_on) {
    const from = at.get(d), to = at.get(r.id);
    if (!from || !to) continue;
    const cross = r.cross_thread.includes(d);
    chart.appendChild(svg("line", { x1: from[0] + BW / 2, y1: from[1] + BH, x2: to[0] + BW / 2, y2: to[1], class: cross ? "edge cross" : "edge" }));
  }
  for (const t of g.threads) for (const r of t.records) {
    const [x, y] = at.get(r.id), node = svg("g", { class: "record " + r.type + (r.knot ? " knot" : "") + (broken.has(r.id) ? " broken" : "") });
    node.appendChild(svg("rect", { x, y, width: BW, height: BH, rx: 4 }));
    node.appendChild(svg("text", { x: x + 6, y: y + 16 }, r.n + ". " + r.type + " · " + r.kind + (r.knot ? " · knot" : "")));
    node.appendChild(svg("text", { x: x + 6, y: y + 32, class: "small" }, r.summary.slice(0, 30)));
    node.appendChild(svg("title", {}, r.id + "\nhash " + r.hash + (r.sealed ? " (sealed)" : "") + "\nstate " + r.state_hash_pre + " → " + r.state_hash_post + "\ndepends on " + (r.depends_on.join(", ") || "nothing") + "\n$" + r.cost_usd + ", " + r.tokens_in + "/" + r.tokens_out + " tokens\n" + r.summary));
    chart.appendChild(node);
  }
  return chart;
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = String(text);
  return node;
}
// Cost per bucket as bars, tokens (in + out) as a line, on one time axis.
function usagePlot(box, usage) {
  const t = usage.totals, W = 640, H = 150, L = 8, B = 20, n = usage.buckets.length;
  box.appendChild(el("h3", "Cost and tokens per " + usage.bucket + " since " + usage.since.slice(0, 16).replace("T", " ") + " UTC"));
  box.appendChild(el("p", t.jobs + " jobs · $" + t.cost_usd + " · " + t.tokens_in + " tokens in, " + t.tokens_out + " out" + (usage.truncated ? " (the most recent jobs only)" : "")));
  const costs = usage.buckets.map((b) => Number(b.cost_usd)), tokens = usage.buckets.map((b) => b.tokens_in + b.tokens_out);
  const maxCost = Math.max(...costs, 0) || 1, maxTokens = Math.max(...tokens, 0) || 1, w = (W - 2 * L) / n;
  const chart = svg("svg", { viewBox: "0 0 " + W + " " + H, class: "plot", role: "img", "aria-label": "cost and tokens over time" });
  chart.appendChild(svg("line", { x1: L, y1: H - B, x2: W - L, y2: H - B, class: "axis" }));
  usage.buckets.forEach((b, i) => {
    const h = (costs[i] / maxCost) * (H - B - 16);
    const bar = svg("rect", { x: L + i * w + 1, y: H - B - h, width: Math.max(w - 2, 1), height: h, class: "cost" });
    bar.appendChild(svg("title", {}, b.start.slice(0, 16).replace("T", " ") + ": $" + b.cost_usd + ", " + tokens[i] + " tokens, " + b.jobs + " jobs"));
    chart.appendChild(bar);
  });
  const points = tokens.map((v, i) => (L + i * w + w / 2).toFixed(1) + "," + (H - B - (v / maxTokens) * (H - B - 16)).toFixed(1));
  chart.appendChild(svg("polyline", { points: points.join(" "), class: "tokens" }));
  chart.appendChild(svg("text", { x: L, y: 12, class: "legend cost" }, "max $" + maxCost + " per " + usage.bucket));
  chart.appendChild(svg("text", { x: W - L, y: 12, "text-anchor": "end", class: "legend tokens" }, "max " + maxTokens + " tokens"));
  chart.appendChild(svg("text", { x: L, y: H - 4, class: "legend" }, usage.buckets[0].start.slice(0, 10)));
  chart.appendChild(svg("text", { x: W - L, y: H - 4, "text-anchor": "end", class: "legend" }, usage.until.slice(0, 10)));
  box.appendChild(chart);
}

function describe(d) {
  switch (d.kind) {
    case "state": return ["state → " + d.state, d.detail || (d.error ? d.error.message : "")];
    case "approval": return ["approval " + d.phase, d.decision ? d.decision.approver + ": " + (d.decision.approve ? "approved" : "rejected") + (d.decision.comment ? " — " + d.decision.comment : "") : d.calls.map((c) => c.name + " " + JSON.stringify(c.input)).join("\n")];
    case "effect": return ["effect " + d.source, JSON.stringify(d.outcome)];
    case "child": return ["child " + d.phase + " " + d.job + " (" + d.agent + ")", d.state || ""];
    case "log": return ["log " + d.level, d.message];
    case "signal": return ["signal " + d.signal_type, JSON.stringify(d.data)];
    case "resume": return ["resumed (" + d.cause + ")", d.reason];
    case "workspace": return ["workspace " + d.phase, d.phase === "stopped" ? d.reason : d.files + " file(s), " + d.bytes + " B · " + d.manifest];
    case "sandbox": return sandbox(d.event);
  }
  return null;
}
function sandbox(e) {
  switch (e.type) {
    case "inference_started": return ["model call " + e.iteration + (e.model ? " (" + e.model + ")" : ""), ""];
    case "inference_finished": return ["model reply " + e.iteration, e.stop_reason + " · " + e.tokens_in + " in / " + e.tokens_out + " out tokens · $" + (e.cost == null ? "?" : e.cost)];
    case "tool_started": return ["tool call " + e.name, JSON.stringify(e.input, null, 1)];
    case "tool_finished": return ["tool result " + e.name + (e.success ? "" : " (failed)"), e.output];
    case "egress": return ["egress " + (e.allowed ? "allowed " : "denied ") + e.host + ":" + e.port, e.rule];
    case "log": return ["sandbox log " + e.level, e.message];
    case "suspended": return ["waiting for approval", e.calls.map((c) => c.name).join(", ")];
    case "started": return ["turn started", ""];
  }
  return null;
}
function egressRow(d) {
  const snippet = d.suggested_rule ? el("code", d.suggested_rule, "rule") : "";
  const bytes = d.bytes_up == null ? "" : d.bytes_up + " / " + d.bytes_down;
  const decision = el("span", d.allowed ? "allowed" : "denied", d.allowed ? "allowed" : "denied");
  return row([d.time.slice(11, 19), decision, d.method + " " + d.host + ":" + d.port, d.rule + (d.reason ? " — " + d.reason : ""), bytes, snippet]);
}

document.addEventListener("DOMContentLoaded", async () => {
  const name = document.body.dataset.page;
  if (name !== "login") api("/api/v1/whoami").then((p) => { document.getElementById("whoami").textContent = p.name + " @ " + p.tenant; }).catch(() => {});
  try { await pages[name](); } catch (e) { fail(e.message); }
});
