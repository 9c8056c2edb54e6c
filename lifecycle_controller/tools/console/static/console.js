// The lifecycle-controller console: plain SVG drawn from the server's counts, no library.
// The server counts (GET /api/timeline); this script only draws, and asks again whenever
// the server's stream says a look at the cluster found something new.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const LABELS = { delete: "delete", restart: "restart", "dry-run": "dry-run report", warning: "warning" };
const LANE = 7; // height of one category's lane in a group's line
const LINE = 4 * LANE + 8;
const LEFT = 190; // room for the group names
const state = { span: "day", by: "namespace", policy: "", overview: null, timeline: null, cell: null, drawn: 0, fetched: 0 };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "text") node.textContent = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  return node;
}

async function get(path, params) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params || {})) {
    for (const item of [].concat(value)) if (item !== "" && item !== undefined) query.append(key, item);
  }
  const response = await fetch(path + (query.toString() ? "?" + query : ""), { cache: "no-store" });
  if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
  return response.json();
}

// Intl formatters are costly to make: one of each, made once.
const TIME = new Intl.DateTimeFormat([], { hour: "2-digit", minute: "2-digit", hour12: false });
const DAY = new Intl.DateTimeFormat([], { weekday: "short", day: "numeric" });

function clock(ms, withDay) {
  const date = new Date(ms);
  const time = TIME.format(date);
  return withDay ? DAY.format(date) + " " + time : time;
}

function objectName(row) {
  return `${row.kind}/${row.namespace ? row.namespace + "/" : ""}${row.name}`;
}

// --- overview: banners, last actions, policies -------------------------------------------

function drawBanners(overview) {
  const banners = document.getElementById("banners");
  banners.replaceChildren();
  const add = (kind, text) => banners.append(el("p", { class: `banner ${kind}`, role: kind === "danger" ? "alert" : "status", text }));
  if (overview.error) add("danger", `The last look at the cluster failed: ${overview.error}`);
  if (!overview.ready) return;
  if (overview.breaker.open) add("danger", overview.breaker.text);
  for (const problem of overview.unreadable) add("warn", `could not list ${problem}`);
  if (overview.guard) add("info", overview.guard);
}

function drawLook(overview) {
  const look = document.getElementById("look");
  if (!overview.ready) {
    look.textContent = "Reading the cluster… (the first look lists every watched type)";
    return;
  }
  const problems = overview.problems ? `, ${overview.problems} with problems` : "";
  look.textContent = `${overview.objects} objects${problems}; last change seen ${new Date(overview.collectedAt).toLocaleTimeString()}; live`;
}

function fillSelect(select, values) {
  const chosen = select.value;
  select.replaceChildren(el("option", { value: "", text: "all" }));
  for (const value of values) select.append(el("option", { value, text: value }));
  select.value = values.includes(chosen) ? chosen : "";
}

function drawActions() {
  const overview = state.overview;
  if (!overview || !overview.ready) return;
  const namespace = document.getElementById("actions-namespace");
  const policy = document.getElementById("actions-policy");
  const action = document.getElementById("actions-action").value;
  const actions = overview.actions;
  fillSelect(namespace, [...new Set(actions.map((a) => a.namespace).filter(Boolean))].sort());
  fillSelect(policy, [...new Set(actions.map((a) => a.policy).filter(Boolean))].sort());
  const body = document.querySelector("#actions tbody");
  body.replaceChildren();
  const shown = actions.filter(
    (a) =>
      (!namespace.value || a.namespace === namespace.value) &&
      (!policy.value || a.policy === policy.value) &&
      (!action || (action === "dry-run" ? a.dryRun : !a.dryRun && a.action === action)),
  );
  for (const done of shown) {
    const kind = done.dryRun ? "dry-run" : done.action;
    body.append(
      el("tr", { "data-name": done.name, "data-action": kind, "data-namespace": done.namespace },
        el("td", { title: done.at, text: clock(done.atMs, true) }),
        el("td", {}, el("span", { class: `chip ${kind}`, text: done.dryRun ? `${done.action} (dry run)` : done.action })),
        el("td", { text: objectName(done) }),
        el("td", { text: done.policy || "-" }),
        el("td", { class: "note", text: done.note || "" })),
    );
  }
  if (!shown.length) body.append(el("tr", {}, el("td", { colspan: "5", class: "muted", text: "No action recorded (Events expire after an hour; policies keep their last 50)." })));
}

function count(value) {
  return value === null || value === undefined ? "-" : String(value);
}

function drawPolicies() {
  const overview = state.overview;
  if (!overview || !overview.ready) return;
  const body = document.querySelector("#policies tbody");
  body.replaceChildren();
  for (const policy of overview.policies) {
    const conditions = el("td", {});
    for (const condition of policy.conditions) {
      const bad = condition === "Invalid" || condition === "Ready=False" || condition === "Limited";
      conditions.append(el("span", { class: `badge ${bad ? "bad" : "good"}`, text: condition }), " ");
    }
    if (policy.detail) conditions.append(el("div", { class: "small muted", text: policy.detail }));
    const next = policy.nextAt ? `${clock(Date.parse(policy.nextAt), true)} ${policy.nextObject}` : policy.next_action;
    const button = el("button", { type: "button", "aria-pressed": String(state.policy === policy.ref), text: state.policy === policy.ref ? "Shown" : "Show" });
    button.addEventListener("click", () => choosePolicy(state.policy === policy.ref ? "" : policy.ref));
    body.append(
      el("tr", { "data-ref": policy.ref, class: state.policy === policy.ref ? "chosen" : "" },
        el("th", { scope: "row", text: policy.ref }),
        el("td", { text: policy.action }),
        el("td", { class: "num", "data-count": "matched", text: count(policy.matched) }),
        el("td", { class: "num", "data-count": "overlapped", text: count(policy.overlapped) }),
        el("td", { class: "num", "data-count": "protected", text: count(policy.protected) }),
        el("td", { class: "num", "data-count": "held", text: count(policy.held) }),
        conditions,
        el("td", { text: next || "-" }),
        el("td", {}, button)),
    );
  }
  if (!overview.policies.length) body.append(el("tr", {}, el("td", { colspan: "9", class: "muted", text: "No lifecycle policies." })));
}

// --- the timeline ---------------------------------------------------------------------------

function drawLegend(timeline) {
  const legend = document.getElementById("legend");
  legend.replaceChildren();
  for (const category of Object.keys(LABELS)) {
    legend.append(el("li", {}, el("span", { class: `swatch ${category}` }), `${LABELS[category]}: ${timeline.totals[category] || 0}`));
  }
  if (timeline.overdue) legend.append(el("li", { text: `${timeline.overdue} already due (drawn at now)` }));
  for (const window of timeline.windows) {
    legend.append(el("li", {}, el("span", { class: "swatch window" }), `maintenance window ${window.text} (${window.from})`));
  }
}

function ticks(timeline) {
  const hour = 3600000;
  const every = timeline.endMs - timeline.startMs <= hour ? 600000 : timeline.endMs - timeline.startMs <= 24 * hour ? 3 * hour : 24 * hour;
  const first = Math.ceil(timeline.startMs / every) * every;
  const found = [];
  for (let at = first; at < timeline.endMs; at += every) found.push(at);
  return found;
}

function drawTimeline() {
  const timeline = state.timeline;
  const chart = document.getElementById("chart");
  drawLegend(timeline);
  const width = Math.max(640, chart.clientWidth || 960);
  const groups = timeline.groups;
  const height = 34 + Math.max(1, groups.length) * LINE + 6;
  const plot = width - LEFT - 10;
  const x = (ms) => LEFT + ((ms - timeline.startMs) / (timeline.endMs - timeline.startMs)) * plot;
  const cellWidth = plot / timeline.buckets;
  const root = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "group", "aria-label": `Timeline from ${clock(timeline.startMs, true)} to ${clock(timeline.endMs, true)}` });
  for (const window of timeline.windows) {
    for (const [opens, closes] of window.spans) {
      const shade = svg("rect", { class: "window", x: x(opens), y: 24, width: Math.max(1, x(closes) - x(opens)), height: height - 30 });
      shade.append(Object.assign(svg("title"), { textContent: `maintenance window ${window.text}: ${clock(opens, true)}–${clock(closes, true)}` }));
      root.append(shade);
    }
  }
  for (const at of ticks(timeline)) {
    root.append(svg("line", { class: "tick", x1: x(at), x2: x(at), y1: 20, y2: height - 6 }));
    const label = svg("text", { class: "axis", x: x(at) + 3, y: 14 });
    label.textContent = clock(at, timeline.endMs - timeline.startMs > 86400000);
    root.append(label);
  }
  const now = Math.min(Math.max(Date.now(), timeline.startMs), timeline.endMs);
  root.append(svg("line", { class: "now", x1: x(now), x2: x(now), y1: 18, y2: height - 6 }));
  const lanes = Object.keys(LABELS);
  // Each bucket's words, once: thousands of marks share a few hundred buckets.
  const spans = [];
  for (let bucket = 0; bucket < timeline.buckets; bucket += 1) {
    const start = timeline.startMs + bucket * timeline.stepMs;
    spans.push(`${clock(start, true)} to ${clock(start + timeline.stepMs)}`);
  }
  // One group of marks, one listener of each kind for all of them (thousands at scale).
  const marks = svg("g", { class: "marks" });
  marks.addEventListener("click", (event) => event.target.classList.contains("mark") && select(event.target));
  marks.addEventListener("keydown", (event) => event.target.classList.contains("mark") && key(event, event.target));
  marks.addEventListener("mouseover", (event) => event.target.classList.contains("mark") && hint(event.target));
  marks.addEventListener("focusin", (event) => event.target.classList.contains("mark") && hint(event.target));
  groups.forEach((group, index) => {
    const top = 28 + index * LINE;
    const name = svg("text", { class: "group", x: 6, y: top + LINE / 2 + 4 });
    name.textContent = group.name.length > 26 ? group.name.slice(0, 25) + "…" : group.name;
    name.append(Object.assign(svg("title"), { textContent: `${group.name}: ${group.total}` }));
    root.append(name);
    root.append(svg("line", { class: "rule", x1: LEFT, x2: width - 10, y1: top + LINE - 2, y2: top + LINE - 2 }));
    for (const [bucket, category, number] of group.cells) {
      const start = timeline.startMs + bucket * timeline.stepMs;
      const mark = svg("rect", {
        class: `mark ${category}`,
        x: LEFT + bucket * cellWidth + 0.5,
        y: top + lanes.indexOf(category) * LANE,
        width: Math.max(2, cellWidth - 1),
        height: LANE - 1,
        rx: 1.5,
        tabindex: "-1",
        role: "button",
        "data-group": group.name,
        "data-line": String(index),
        "data-bucket": String(bucket),
        "data-category": category,
        "data-count": String(number),
        "data-start-ms": String(start),
        "data-end-ms": String(start + timeline.stepMs),
        "aria-label": `${number} ${LABELS[category]} in ${group.name}, ${spans[bucket]}`,
        "fill-opacity": number > 1 ? String(Math.min(1, 0.75 + Math.log10(number) / 4)) : "0.75",
      });
      marks.append(mark);
    }
  });
  root.append(marks);
  if (!groups.length) {
    const empty = svg("text", { class: "axis", x: LEFT, y: 48 });
    empty.textContent = "Nothing due in this span.";
    root.append(empty);
  }
  chart.replaceChildren(root);
  const drawn = marks.children;
  const chosen = state.cell && [...drawn].find((m) => m.dataset.group === state.cell.group && m.dataset.bucket === state.cell.bucket && m.dataset.category === state.cell.category);
  (chosen || drawn[0])?.setAttribute("tabindex", "0");
  if (chosen) chosen.classList.add("selected");
  document.body.dataset.version = String(timeline.version);
  if (!state.drawn) {
    // What the benchmark reads: since the navigation started, and the drawing alone.
    document.body.dataset.firstDrawMs = String(Math.round(performance.now()));
    document.body.dataset.firstDrawWorkMs = String(Math.round(performance.now() - state.fetched));
  }
  state.drawn += 1;
}

function hint(mark) {
  document.getElementById("hint").textContent = mark.getAttribute("aria-label");
}

function key(event, mark) {
  const marks = [...document.querySelectorAll("#chart .mark")];
  const at = marks.indexOf(mark);
  let next = null;
  if (event.key === "ArrowRight") next = marks[at + 1];
  else if (event.key === "ArrowLeft") next = marks[at - 1];
  else if (event.key === "ArrowDown" || event.key === "ArrowUp") {
    const line = Number(mark.dataset.line) + (event.key === "ArrowDown" ? 1 : -1);
    const there = marks.filter((m) => Number(m.dataset.line) === line);
    const bucket = Number(mark.dataset.bucket);
    next = there.sort((a, b) => Math.abs(a.dataset.bucket - bucket) - Math.abs(b.dataset.bucket - bucket))[0];
  } else if (event.key === "Home") next = marks[0];
  else if (event.key === "End") next = marks[marks.length - 1];
  else if (event.key === "Enter" || event.key === " ") {
    event.preventDefault();
    select(mark);
    return;
  } else return;
  event.preventDefault();
  if (!next) return;
  mark.setAttribute("tabindex", "-1");
  next.setAttribute("tabindex", "0");
  next.focus();
}

async function select(mark) {
  for (const other of document.querySelectorAll("#chart .mark")) {
    other.classList.remove("selected");
    other.setAttribute("tabindex", "-1");
  }
  mark.classList.add("selected");
  mark.setAttribute("tabindex", "0");
  const group = state.timeline.groups[Number(mark.dataset.line)];
  state.cell = { group: mark.dataset.group, groups: group.folded || [group.name], bucket: mark.dataset.bucket, category: mark.dataset.category };
  await drawCell();
}

async function drawCell() {
  const cell = state.cell;
  const panel = document.getElementById("cell");
  if (!cell) return;
  const answer = await get("/api/cell", { span: state.span, by: state.by, policy: state.policy, bucket: cell.bucket, group: cell.groups });
  const items = answer.items.filter((item) => item.category === cell.category);
  const list = el("ul", { class: "items" });
  for (const row of items) {
    const origin = row.policy ? `policy ${row.policy}${row.based_on ? " (" + row.based_on + ")" : ""}` : "its own annotations";
    const explain = el("button", { type: "button", text: "Explain" });
    const text = el("pre", { class: "explain", hidden: "" });
    explain.addEventListener("click", async () => {
      text.hidden = false;
      text.textContent = "…";
      const answer = await get("/api/explain", { apiVersion: row.api_version, kind: row.kind, namespace: row.namespace, name: row.name });
      text.textContent = answer.text;
    });
    list.append(
      el("li", { "data-name": row.name, "data-category": row.category, "data-at-ms": String(row.atMs) },
        el("div", {},
          el("span", { class: `chip ${row.category}`, text: LABELS[row.category] }), " ",
          el("strong", { text: objectName(row) }), " ",
          el("span", { class: "muted", title: row.next, text: `at ${clock(row.atMs, true)}` })),
        el("div", { class: "small", text: `from ${origin}` }),
        el("div", { class: "small", text: row.problems.length ? row.problems.join("; ") : row.summary }),
        explain, text),
    );
  }
  const heading = el("h3", { id: "cell-heading", text: `${cell.group}: ${items.length} ${LABELS[cell.category]}` });
  const more = answer.total > answer.items.length ? el("p", { class: "muted small", text: `showing ${answer.items.length} of ${answer.total}` }) : null;
  panel.replaceChildren(heading, list, more || "");
}

// --- state and the live stream ----------------------------------------------------------

function choosePolicy(ref) {
  state.policy = ref;
  document.getElementById("filter").hidden = !ref;
  document.getElementById("filter-name").textContent = ref;
  state.cell = null;
  drawPolicies();
  refreshTimeline();
}

function radio(id, key) {
  const group = document.getElementById(id);
  for (const button of group.querySelectorAll("button")) {
    button.addEventListener("click", () => {
      for (const other of group.querySelectorAll("button")) other.setAttribute("aria-checked", String(other === button));
      state[key] = button.dataset.value;
      state.cell = null;
      refreshTimeline();
    });
  }
}

async function refreshTimeline() {
  if (!state.overview || !state.overview.ready) return;
  state.timeline = await get("/api/timeline", { span: state.span, by: state.by, policy: state.policy });
  state.fetched = performance.now();
  drawTimeline();
  if (state.cell) await drawCell();
}

// One load at a time: a version pushed while one runs loads once more when it ends.
let loading = null;
let again = false;

function refresh() {
  if (loading) {
    again = true;
    return;
  }
  loading = load().finally(() => {
    loading = null;
    if (again) {
      again = false;
      refresh();
    }
  });
}

async function load() {
  try {
    state.overview = await get("/api/overview");
  } catch (error) {
    document.getElementById("look").textContent = `The console is not answering: ${error.message}`;
    return;
  }
  document.getElementById("title").textContent = state.overview.title ? `— ${state.overview.title}` : "";
  drawBanners(state.overview);
  drawLook(state.overview);
  if (!state.overview.ready) {
    setTimeout(refresh, 2000); // the stream says when the first look is done; this is a fallback
    return;
  }
  drawActions();
  drawPolicies();
  await refreshTimeline();
  document.body.dataset.ready = "true";
}

function theme() {
  const button = document.getElementById("theme");
  const saved = localStorage.getItem("lifecycle-console-theme");
  const dark = saved ? saved === "dark" : window.matchMedia("(prefers-color-scheme: dark)").matches;
  const apply = (on) => {
    document.documentElement.dataset.theme = on ? "dark" : "light";
    button.textContent = on ? "Light" : "Dark";
    button.setAttribute("aria-pressed", String(on));
  };
  apply(dark);
  button.addEventListener("click", () => {
    const on = document.documentElement.dataset.theme !== "dark";
    localStorage.setItem("lifecycle-console-theme", on ? "dark" : "light");
    apply(on);
  });
}

function start() {
  theme();
  radio("span", "span");
  radio("by", "by");
  document.getElementById("filter-clear").addEventListener("click", () => choosePolicy(""));
  for (const id of ["actions-namespace", "actions-policy", "actions-action"]) {
    document.getElementById(id).addEventListener("change", drawActions);
  }
  // The stream's first message, at once, is the current version: it starts the first load.
  const stream = new EventSource("/api/stream");
  stream.addEventListener("version", (event) => {
    if (!state.overview || Number(event.data) !== state.overview.version) refresh();
  });
  setInterval(refreshTimeline, 30000); // the axis moves with the clock
  window.addEventListener("resize", () => state.timeline && drawTimeline());
}

start();
