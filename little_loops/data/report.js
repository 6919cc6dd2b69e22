// The run report's script (ll report): the timeline, the step list and a step's details,
// drawn from the JSON in #ll-data. Nothing is fetched; every text goes in as textContent.
"use strict";
(function () {
  const root = document.documentElement;
  const errors = [];
  function fail(message) {
    errors.push(String(message));
    root.dataset.llErrors = errors.join(" | ");
  }
  window.addEventListener("error", function (e) { fail(e.message || e.type); });
  window.addEventListener("unhandledrejection", function (e) { fail(e.reason); });

  const marks = ["start " + Math.round(performance.now())];
  const DATA = JSON.parse(document.getElementById("ll-data").textContent);
  marks.push("parsed " + Math.round(performance.now()));
  const runs = DATA.runs;
  const ROW = 20;
  const LABEL = 230;
  const COLORS = { ok: "#40c057", fail: "#fa5252", warn: "#fab005", other: "#4dabf7", none: "#ced4da" };
  const OUTCOME = { success: "ok", failure: "fail", error: "fail", timeout: "fail", max_iterations: "fail",
    budget: "fail", interrupted: "warn", suspended: "warn", cancelled: "none" };

  function el(tag, attrs) {
    const node = document.createElement(tag);
    for (const key in attrs || {}) {
      if (key === "text") node.textContent = attrs[key];
      else if (key === "cls") node.className = attrs[key];
      else node.setAttribute(key, attrs[key]);
    }
    for (let i = 2; i < arguments.length; i++) {
      const child = arguments[i];
      if (child === null || child === undefined) continue;
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }
  function ms(value) {
    if (value === null || value === undefined) return "";
    if (value < 1000) return value + " ms";
    const s = value / 1000;
    if (s < 60) return s.toFixed(1) + " s";
    const m = Math.floor(s / 60);
    if (m < 60) return m + "m" + String(Math.round(s % 60)).padStart(2, "0") + "s";
    return Math.floor(m / 60) + "h" + String(m % 60).padStart(2, "0") + "m";
  }
  function json(value) {
    return typeof value === "string" ? value : JSON.stringify(value, null, 2);
  }

  // -- the timeline: one lane a run, its steps as bars on the tree's time axis -------------
  let total = 1;
  for (const run of runs) {
    total = Math.max(total, run.end || 0);
    const rows = run.rows;
    if (rows.length) {
      const last = rows[rows.length - 1];
      total = Math.max(total, last[2] + last[3]);
    }
  }
  const lanes = runs.map(function (_, i) { return i; });
  let shown = lanes;
  const scroller = document.getElementById("tl-scroll");
  const spacer = document.getElementById("tl-spacer");
  const canvas = document.getElementById("tl-canvas");
  const ctx = canvas.getContext("2d");
  let selected = null; // [run, step]

  // A step's colour: its verdict's, or a failure's when the child loop it called failed.
  function cls(row) {
    const c = DATA.vclass[row[4]];
    return (row[6] & 16) && (c === "other" || c === "ok") ? "fail" : c;
  }
  function laneTitle(run) {
    return " ".repeat(run.depth * 3) + run.label;
  }
  function xOf(t, width) { return LABEL + (t / total) * (width - LABEL - 8); }

  function draw() {
    const width = scroller.clientWidth;
    const height = scroller.clientHeight;
    const ratio = window.devicePixelRatio || 1;
    canvas.width = width * ratio;
    canvas.height = height * ratio;
    canvas.style.width = width + "px";
    canvas.style.height = height + "px";
    canvas.style.top = scroller.scrollTop + "px";
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    ctx.font = "12px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    const first = Math.floor(scroller.scrollTop / ROW);
    const count = Math.ceil(height / ROW) + 1;
    for (let i = first; i < Math.min(shown.length, first + count); i++) {
      const r = shown[i];
      const run = runs[r];
      const y = i * ROW - scroller.scrollTop;
      if (i % 2) { ctx.fillStyle = "#f8f9fa"; ctx.fillRect(0, y, width, ROW); }
      ctx.fillStyle = COLORS[OUTCOME[run.outcome] || "none"];
      ctx.fillRect(2, y + 4, 4, ROW - 8);
      ctx.fillStyle = "#212529";
      ctx.save();
      ctx.beginPath(); ctx.rect(8, y, LABEL - 12, ROW); ctx.clip();
      ctx.fillText(laneTitle(run), 10, y + ROW / 2);
      ctx.restore();
      // the run's span, then its steps; bars in one pixel column are drawn once
      const x0 = xOf(run.start, width), x1 = xOf(run.end || run.start, width);
      ctx.fillStyle = "#e9ecef";
      ctx.fillRect(x0, y + ROW / 2 - 1, Math.max(1, x1 - x0), 2);
      let lastX = -1, lastC = "";
      for (const row of run.rows) {
        const bx = xOf(row[2], width);
        const bw = Math.max(1, (row[3] / total) * (width - LABEL - 8));
        const color = COLORS[cls(row)];
        if (Math.floor(bx) === lastX && color === lastC && bw <= 1) continue;
        lastX = Math.floor(bx); lastC = color;
        ctx.fillStyle = color;
        ctx.fillRect(bx, y + 4, bw, ROW - 8);
        if (row[6] & 2) { ctx.strokeStyle = "#862e9c"; ctx.lineWidth = 2; ctx.strokeRect(bx, y + 3, bw, ROW - 6); }
      }
      if (selected && selected[0] === r) {
        const row = findRow(r, selected[1]);
        if (row) {
          ctx.strokeStyle = "#000"; ctx.lineWidth = 1.5;
          ctx.strokeRect(xOf(row[2], width) - 1, y + 2, Math.max(3, (row[3] / total) * (width - LABEL - 8)) + 2, ROW - 4);
        }
      }
    }
  }
  function layoutLanes() {
    const onlyFailed = document.getElementById("tl-failed").checked;
    shown = onlyFailed ? lanes.filter(function (r) { return OUTCOME[runs[r].outcome] !== "ok"; }) : lanes;
    spacer.style.height = shown.length * ROW + "px";
    scroller.style.height = Math.min(360, Math.max(3, shown.length) * ROW + 2) + "px";
    document.getElementById("tl-count").textContent = shown.length + " of " + runs.length + " runs";
    draw();
  }
  function findRow(r, step) {
    const rows = runs[r].rows;
    let lo = 0, hi = rows.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (rows[mid][0] === step) return rows[mid];
      if (rows[mid][0] < step) lo = mid + 1; else hi = mid - 1;
    }
    return null;
  }
  canvas.addEventListener("click", function (e) {
    const box = canvas.getBoundingClientRect();
    const lane = Math.floor((e.clientY - box.top + scroller.scrollTop) / ROW);
    if (lane < 0 || lane >= shown.length) return;
    const r = shown[lane];
    const width = scroller.clientWidth;
    const t = ((e.clientX - box.left - LABEL) / (width - LABEL - 8)) * total;
    const rows = runs[r].rows;
    if (!rows.length) return;
    let lo = 0, hi = rows.length - 1;
    while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (rows[mid][2] <= t) lo = mid; else hi = mid - 1; }
    select(r, rows[lo][0]);
  });
  scroller.addEventListener("scroll", draw);
  window.addEventListener("resize", function () { draw(); renderList(); });
  document.getElementById("tl-failed").addEventListener("change", layoutLanes);

  // -- the step list: every step of the tree, rendered as it scrolls into view -------------
  const listBox = document.getElementById("steps-scroll");
  const listSpacer = document.getElementById("steps-spacer");
  const listRows = document.getElementById("steps-rows");
  const filterBox = document.getElementById("steps-filter");
  const failedBox = document.getElementById("steps-failed");
  const LROW = 24;
  let items = [];
  function buildItems() {
    const text = filterBox.value.trim().toLowerCase();
    const onlyFailed = failedBox.checked;
    items = [];
    for (let r = 0; r < runs.length; r++) {
      const run = runs[r];
      const label = run.label.toLowerCase();
      for (let i = 0; i < run.rows.length; i++) {
        const row = run.rows[i];
        const c = cls(row);
        if (onlyFailed && c !== "fail" && c !== "warn") continue;
        if (text && label.indexOf(text) < 0 && DATA.states[row[1]].toLowerCase().indexOf(text) < 0 &&
          DATA.verdicts[row[4]].indexOf(text) < 0) continue;
        items.push(r, i);
      }
    }
    listSpacer.style.height = (items.length / 2) * LROW + "px";
    document.getElementById("steps-count").textContent = (items.length / 2) + " steps";
    renderList();
  }
  function renderList() {
    const first = Math.max(0, Math.floor(listBox.scrollTop / LROW) - 5);
    const count = Math.ceil(listBox.clientHeight / LROW) + 10;
    listRows.textContent = "";
    listRows.style.top = first * LROW + "px";
    for (let k = first; k < Math.min(items.length / 2, first + count); k++) {
      const r = items[2 * k], row = runs[r].rows[items[2 * k + 1]];
      const verdict = DATA.verdicts[row[4]] || "—";
      const line = el("div", { cls: "srow" + (selected && selected[0] === r && selected[1] === row[0] ? " sel" : ""),
        "data-run": r, "data-step": row[0] },
        el("span", { cls: "c-run", text: runs[r].label }),
        el("span", { cls: "c-step", text: "#" + row[0] }),
        el("span", { cls: "c-state", text: DATA.states[row[1]] }),
        el("span", { cls: "c-verdict v-" + cls(row), text: verdict }),
        el("span", { cls: "c-dur", text: ms(row[3]) }),
        el("span", { cls: "c-flags", text: (row[5] > 1 ? "×" + row[5] + " " : "") + (row[6] & 1 ? "⚖" : "") }));
      listRows.appendChild(line);
    }
  }
  listBox.addEventListener("scroll", renderList);
  listRows.addEventListener("click", function (e) {
    const line = e.target.closest(".srow");
    if (line) select(Number(line.dataset.run), Number(line.dataset.step));
  });
  filterBox.addEventListener("input", buildItems);
  failedBox.addEventListener("change", buildItems);

  // -- a step's details --------------------------------------------------------------------
  const panel = document.getElementById("detail");
  function add(parent, child) {
    if (child) parent.appendChild(child);
  }
  function field(name, value) {
    if (value === null || value === undefined || value === "") return null;
    return el("div", { cls: "field" }, el("span", { cls: "k", text: name }), el("span", { cls: "v", text: String(value) }));
  }
  function block(name, text, open) {
    if (!text) return null;
    const d = el("details", { cls: "block" }, el("summary", { text: name }), el("pre", { text: text }));
    if (open) d.open = true;
    return d;
  }
  function table(obj) {
    const t = el("table", { cls: "kv" });
    for (const key in obj) t.appendChild(el("tr", {}, el("th", { text: key }), el("td", {}, el("pre", { text: json(obj[key]) }))));
    return t;
  }
  function select(r, step) {
    selected = [r, step];
    const run = runs[r];
    const row = findRow(r, step);
    const detail = DATA.details[r + ":" + step];
    panel.textContent = "";
    panel.dataset.run = r;
    panel.dataset.step = step;
    const verdict = row ? DATA.verdicts[row[4]] : "";
    add(panel, el("h3", {}, el("span", { text: run.label + " · step " + step + " · " + (row ? DATA.states[row[1]] : "") + " " }),
      el("span", { cls: "badge v-" + (row ? cls(row) : "none"), text: verdict || "no verdict" })));
    if (row) {
      add(panel, field("duration", ms(row[3])));
      if (row[5] > 1) add(panel, field("attempts", row[5]));
    }
    if (!detail) {
      add(panel, el("p", { cls: "note", text: "Details of this step were left out to keep the report small. See: ll logs " + run.id + " --step " + step }));
    } else {
      add(panel, field("reason", detail.reason));
      add(panel, field("route", detail.to ? (detail.via || "") + " → " + detail.to : verdict && verdict !== "" ? "none (the run ended here)" : null));
      add(panel, field("exit code", detail.exit));
      add(panel, field("action time", detail.ms !== undefined ? ms(detail.ms) : null));
      add(panel, field("timed out", detail.timed_out ? "yes" : null));
      add(panel, field("evaluator", detail.eval));
      add(panel, field("judge failed open", detail.fail_open));
      if (detail.action) add(panel, el("div", { cls: "sub" }, el("h4", { text: "action (" + (detail.type || "shell") + ", as run, secrets masked)" }), el("pre", { cls: "action", text: detail.action })));
      if (detail.tail) add(panel, el("div", { cls: "sub" }, el("h4", { text: "last lines" }), el("pre", { cls: "tail", text: detail.tail.join("\n") })));
      if (detail.output) add(panel, block("whole output (the last " + Math.min(detail.output.length, detail.output_bytes) + " of " + detail.output_bytes + " bytes)", detail.output, false));
      if (detail.details && typeof detail.details === "object") {
        add(panel, el("div", { cls: "sub" }, el("h4", { text: "evaluator details" }), table(detail.details)));
      } else if (detail.details) {
        add(panel, block("evaluator details", detail.details, true));
      }
      for (const ask of detail.judge || []) {
        const head = "judge request: " + ask.model + " (" + ask.provider + ")" + (ask.cached ? ", cached" : "");
        add(panel, el("div", { cls: "sub judge" }, el("h4", { text: head }),
          field("temperature", ask.temperature), field("max tokens", ask.max_tokens), field("estimated input tokens", ask.est_input_tokens),
          block("system prompt", ask.system, false), block("user message (fenced input)", ask.user, false),
          block("answer schema", json(ask.schema), false)));
      }
    }
    const kids = runs.map(function (c, i) { return [c, i]; }).filter(function (p) { return p[0].parent === r && p[0].parent_step === step; });
    if (kids.length) {
      const list = el("ul", { cls: "kids" });
      for (const p of kids.slice(0, 200)) {
        const link = el("a", { href: "#", text: p[0].label }); link.dataset.run = p[1];
        list.appendChild(el("li", {}, link, " " + (p[0].verdict || p[0].outcome || "") + " · " + p[0].steps + " steps"));
      }
      if (kids.length > 200) list.appendChild(el("li", { text: "… " + (kids.length - 200) + " more" }));
      add(panel, el("div", { cls: "sub" }, el("h4", { text: "child runs" }), list));
    }
    draw();
    renderList();
  }
  panel.addEventListener("click", function (e) {
    const link = e.target.closest("a[data-run]");
    if (!link) return;
    e.preventDefault();
    const r = Number(link.dataset.run);
    const rows = runs[r].rows;
    if (rows.length) select(r, rows[rows.length - 1][0]);
  });

  // -- start: the step that ended the run is shown first (or the one the address names) ----
  layoutLanes();
  marks.push("timeline " + Math.round(performance.now()));
  buildItems();
  marks.push("list " + Math.round(performance.now()));
  const asked = /select=(\d+):(\d+)/.exec(window.location.hash);
  if (asked) {
    select(Number(asked[1]), Number(asked[2]));
  } else {
    // the failing step that began last in the whole tree (where the trouble was), else the
    // root's last step
    let first = null, when = -1;
    for (let r = 0; r < runs.length; r++) {
      for (const row of runs[r].rows) {
        if (cls(row) === "fail" && row[2] >= when) { first = [r, row[0]]; when = row[2]; }
      }
    }
    const top = runs[0].rows;
    if (!first && top.length) first = [0, top[top.length - 1][0]];
    if (first) select(first[0], first[1]);
  }
  marks.push("selected " + Math.round(performance.now()));
  root.dataset.llMarks = marks.join(", ");
  root.dataset.llLanes = String(runs.length);
  root.dataset.llRenderMs = String(Math.round(performance.now()));
  root.dataset.llReady = "1";
})();
