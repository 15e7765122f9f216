// cloudddp ui: the jobs page (#/) and a job's page (#/job/PROVIDER/ID), refreshed without reloading.
// Everything comes from this server (/api/...); the token travels in a header, from the page's URL.
"use strict";
const token = new URLSearchParams(location.search).get("token") || "";
const view = document.getElementById("view");
const MAX_LOG_LINES = 200; // per node, in the page: bounded at both ends (the server keeps as many, log_stream.py)
let timer = null;
let stream = null; // the open job page's log tail (server-sent events from /api/logs)
const charts = {};
// A chart's x axis counts values (1, 2, 3...): ticks a whole number apart, as `cloudddp metrics --plot` draws them
// (uPlot's own increments include 0.5 steps).
const WHOLE_STEPS = [1, 10, 100, 1000, 10000, 100000].flatMap(power => [power, 2 * power, 5 * power]);

async function api(path, options = {}) {
  const response = await fetch(path, { ...options, headers: { "X-Cloudddp-Token": token, ...(options.headers || {}) } });
  if (!response.ok) throw new Error(`${response.status} ${await response.text()}`);
  return response.json();
}

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value); else node.setAttribute(name, value);
  }
  for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child ?? "")));
  return node;
}

function span(seconds) {
  if (seconds == null) return "";
  const s = Math.floor(seconds);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor(s % 3600 / 60)).padStart(2, "0")} min`;
}

function stamp() { document.getElementById("updated").textContent = `updated ${new Date().toLocaleTimeString()}`; }

// -- the jobs page ---------------------------------------------------------------------------------------------
const filters = { provider: "", state: "" };

async function jobsPage() {
  const { jobs } = await api("/api/jobs");
  const providers = [...new Set(jobs.map(j => j.provider))].sort();
  const states = [...new Set(jobs.map(j => j.state))].sort();
  const select = (name, values) => {
    const box = el("select", { id: `filter-${name}`, onchange: e => { filters[name] = e.target.value; render(); } },
      el("option", { value: "" }, `every ${name}`), ...values.map(v => el("option", { value: v }, v)));
    box.value = filters[name];
    return box;
  };
  const render = () => {
    const shown = jobs.filter(j => (!filters.provider || j.provider === filters.provider) && (!filters.state || j.state === filters.state));
    const rows = shown.map(j => el("tr", { class: "job", "data-id": j.id, onclick: () => { location.hash = `#/job/${encodeURIComponent(j.provider)}/${encodeURIComponent(j.id)}`; } },
      el("td", {}, j.name), el("td", {}, j.provider), el("td", { class: `state-${j.state}` }, j.state),
      el("td", {}, j.nodes ?? ""), el("td", {}, new Date(j.submitted * 1000).toLocaleString()), el("td", {}, span(j.duration)),
      el("td", {}, Object.entries(j.metrics).map(([k, v]) => `${k}=${v}`).join("  "))));
    view.replaceChildren(
      el("div", { class: "filters" }, select("provider", providers), select("state", states)),
      el("table", { id: "jobs" }, el("tr", {}, ...["NAME", "PROVIDER", "STATE", "NODES", "STARTED", "DURATION", "METRICS"].map(h => el("th", {}, h))), ...rows),
      shown.length ? "" : el("p", {}, "No jobs launched from here yet: cloudddp launch ..."));
  };
  render();
  stamp();
}

// -- a job's page ----------------------------------------------------------------------------------------------
function drawCharts(box, samples) {
  const byMetric = {};
  for (const s of samples) (byMetric[s.metric] ||= []).push(s);
  for (const [metric, values] of Object.entries(byMetric)) {
    const data = [values.map((_, i) => i + 1), values.map(v => v.value)];
    if (charts[metric] && document.body.contains(charts[metric].root)) { charts[metric].setData(data); continue; }
    const holder = el("div", { class: "chart", "data-metric": metric, "data-points": values.length });
    box.append(holder);
    charts[metric] = new uPlot({ title: metric, width: 380, height: 200, scales: { x: { time: false } },
      axes: [{ incrs: WHOLE_STEPS }, {}],
      series: [{ label: "value #" }, { label: metric, stroke: "#0969da", points: { show: true } }] }, data, holder);
  }
  for (const holder of box.querySelectorAll(".chart")) holder.dataset.points = (byMetric[holder.dataset.metric] || []).length;
}

function when(seconds) { return seconds == null ? "" : new Date(seconds * 1000).toLocaleTimeString(); }

async function jobPage(provider, id) {
  const job = await api(`/api/job?provider=${encodeURIComponent(provider)}&id=${encodeURIComponent(id)}`);
  let page = document.getElementById("job");
  if (!page || page.dataset.id !== id) {
    for (const key of Object.keys(charts)) delete charts[key];
    page = el("div", { id: "job", "data-id": id },
      el("h2", {}, job.name, " ", el("span", { id: "state" })),
      el("p", { id: "reason" }),
      el("button", { class: "cancel", id: "cancel", onclick: () => cancel(job.provider, job.id) }, "Cancel"),
      el("div", { class: "columns" },
        el("section", {}, el("h3", {}, "Nodes"), el("table", { id: "nodes" })),
        el("section", {}, el("h3", {}, "Timeline"), el("table", { id: "timeline" }))),
      el("section", {}, el("h3", {}, "Metrics"), el("div", { class: "charts", id: "charts" })),
      el("section", { id: "logs" }, el("h3", {}, "Logs ", el("small", { id: "log-state" }))),
      el("details", { id: "request-box" }, el("summary", {}, "Request, as its dry run printed it"), el("pre", { id: "request" })));
    view.replaceChildren(page);
    follow(job.provider, job.id);
  }
  const state = document.getElementById("state");
  state.textContent = job.state; state.className = `state-${job.state}`;
  document.getElementById("cancel").hidden = ["SUCCEEDED", "FAILED", "STOPPED"].includes(job.state);
  document.getElementById("reason").textContent = job.reason || "";
  document.getElementById("nodes").replaceChildren(el("tr", {}, el("th", {}, "NODE"), el("th", {}, "STATE")),
    ...Object.entries(job.nodes).map(([node, s]) => el("tr", {}, el("td", {}, node), el("td", { class: `state-${s}` }, s))));
  document.getElementById("timeline").replaceChildren(el("tr", {}, ...["TIME", "NODE", "EVENT"].map(h => el("th", {}, h))),
    ...job.events.map(e => el("tr", { class: "event" }, el("td", {}, when(e.time)), el("td", {}, e.node || "job"), el("td", {}, e.what))));
  document.getElementById("request").textContent = job.request ?? `${job.provider} does not keep the request after submitting it; its dry run printed it.`;
  drawCharts(document.getElementById("charts"), job.metrics);
  stamp();
}

// Each node's last MAX_LOG_LINES lines, as the server streams them: the whole kept tail first ("reset"), then
// what is new every quarter second, with how many lines a burst made it skip.
function follow(provider, id) {
  if (stream) stream.close();
  const logs = document.getElementById("logs");
  const status = document.getElementById("log-state");
  const tails = {};
  stream = new EventSource(`/api/logs?provider=${encodeURIComponent(provider)}&id=${encodeURIComponent(id)}`);
  stream.onopen = () => { status.textContent = "(following)"; };
  stream.onmessage = event => {
    const { lines, skipped, reset } = JSON.parse(event.data);
    if (reset) for (const node of Object.keys(tails)) tails[node].length = 0;
    for (const [node, added] of Object.entries(lines)) {
      let pre = logs.querySelector(`pre[data-node="${CSS.escape(node)}"]`);
      if (!pre) { logs.append(el("h4", {}, node || "(no node)"), pre = el("pre", { class: "log", "data-node": node })); }
      const tail = (tails[node] ||= []);
      if (skipped[node]) tail.push(`... ${skipped[node]} lines not shown ...`);
      tail.push(...added);
      tail.splice(0, Math.max(0, tail.length - MAX_LOG_LINES));
      const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.textContent = tail.join("\n");
      if (atBottom) pre.scrollTop = pre.scrollHeight;
    }
  };
  stream.addEventListener("end", event => {
    const { error } = JSON.parse(event.data);
    status.textContent = error ? `(stopped: ${error})` : "(ended)";
    stream.close();
  });
  stream.onerror = () => { status.textContent = "(reconnecting)"; };
}

async function cancel(provider, id) {
  if (!window.confirm(`Stop ${id}? Its script gets SIGTERM and can checkpoint.`)) return;
  try { await api("/api/cancel", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ provider, id }) }); }
  catch (error) { document.getElementById("reason").replaceChildren(el("span", { class: "error" }, String(error))); }
}

// -- routing ---------------------------------------------------------------------------------------------------
async function route() {
  clearTimeout(timer);
  const match = location.hash.match(/^#\/job\/([^/]+)\/(.+)$/);
  if (!match && stream) { stream.close(); stream = null; }
  try {
    if (match) await jobPage(decodeURIComponent(match[1]), decodeURIComponent(match[2]));
    else await jobsPage();
  } catch (error) {
    view.replaceChildren(el("p", { class: "error" }, String(error)));
  }
  timer = setTimeout(route, match ? 2000 : 5000);
}
window.addEventListener("hashchange", route);
route();
