// The Understudy dashboard: plain JavaScript, no libraries. It reads and writes only through the service's JSON API
// (/v1/...), polls it for live views, and draws its charts as inline SVG. Data never goes through innerHTML.
"use strict";

(() => {
  const BASE = document.documentElement.dataset.base || "";
  const KEY_STORE = "understudy.apiKey";
  const FINAL = new Set(["done", "oom", "failed"]);
  const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"];
  const HISTORY_FILTERS = ["q", "model", "target", "host", "estimator", "status"];
  const HISTORY_COLUMNS = [
    ["created_at", "Created"], ["model", "Workload"], ["target", "Target"], ["estimator", "Estimator"],
    ["host", "Host"], ["status", "Status"], ["latency", "Latency (ms)", "num"], [null, "Spread (ms)", "num"],
    ["samples_per_s", "Samples/s", "num"],
  ];

  let config = null;
  let catalog = null;
  let generation = 0; // bumped on every route change: the old view's polls stop

  // --- DOM ----------------------------------------------------------------------------------------------------

  const $ = (selector, root = document) => root.querySelector(selector);

  function el(tag, props = {}, ...children) {
    const node = document.createElement(tag);
    setProps(node, props);
    append(node, children);
    return node;
  }

  function svg(tag, props = {}, ...children) {
    const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    setProps(node, props);
    append(node, children);
    return node;
  }

  function setProps(node, props) {
    for (const [key, value] of Object.entries(props)) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "class") node.setAttribute("class", value);
      else if (key === "text") node.textContent = value;
      else if (key === "dataset") Object.assign(node.dataset, value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
  }

  function append(node, children) {
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : String(child));
    }
  }

  function notice(message, isError = false) {
    const box = $("#notice");
    box.textContent = message || "";
    box.classList.toggle("error", isError);
    box.hidden = !message;
  }

  // --- the API ------------------------------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, detail, errors) {
      super(detail);
      this.status = status;
      this.errors = errors || [];
    }
  }

  const apiKey = () => sessionStorage.getItem(KEY_STORE) || "";

  async function api(path, { method = "GET", body, params } = {}) {
    const url = new URL(BASE + path, location.origin);
    for (const [key, value] of Object.entries(params || {})) {
      if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, value);
    }
    const headers = { Accept: "application/json" };
    if (apiKey()) headers["X-API-Key"] = apiKey();
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let response;
    try {
      response = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (err) {
      throw new ApiError(0, `the service does not answer (${err.message})`, []);
    }
    let data = null;
    try {
      data = await response.json();
    } catch (_) {
      data = null;
    }
    if (!response.ok) {
      const detail = (data && data.detail) || `${response.status} ${response.statusText}`;
      throw new ApiError(response.status, detail, (data && data.errors) || []);
    }
    return data;
  }

  // --- formatting ---------------------------------------------------------------------------------------------

  function fmtMs(value) {
    if (value === null || value === undefined) return "–";
    if (value >= 100) return value.toFixed(1);
    if (value >= 10) return value.toFixed(2);
    return value.toFixed(3);
  }

  // "10.90–14.10": a prediction's interval (interval_ms at its coverage).
  const fmtInterval = (p) => (p.interval_ms ? `${fmtMs(p.interval_ms[0])}–${fmtMs(p.interval_ms[1])}` : "–");
  const percent = (share) => `${Math.round(share * 100)} %`;

  const fmtNum = (value, digits = 1) => (value === null || value === undefined ? "–" : value.toFixed(digits));

  function fmtTime(iso) {
    if (!iso) return "–";
    const date = new Date(iso);
    return date.toLocaleString(undefined, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit",
                                            second: "2-digit" });
  }

  function ago(iso) {
    if (!iso) return "–";
    const seconds = Math.max(0, (Date.now() - new Date(iso).getTime()) / 1000);
    if (seconds < 90) return `${seconds.toFixed(0)} s ago`;
    if (seconds < 5400) return `${(seconds / 60).toFixed(0)} min ago`;
    return `${(seconds / 3600).toFixed(1)} h ago`;
  }

  function workloadLabel(w) {
    const [h, wd] = w.resolution || [];
    const side = h === wd ? `${h}` : `${h}x${wd}`;
    return `${w.model} ${w.mode} ${w.precision} b${w.batch_size} ${side}px`;
  }

  const badge = (status) => el("span", { class: `badge status-${status}`, text: status });

  // A prediction's time in a table: marked apart ("estimate") while it is the GPU-free estimate, not its own answer.
  function latencyCell(p) {
    const value = p.latency ? fmtMs(p.latency.min_ms) : "–";
    if (p.answer !== "estimate") return el("td", { class: "num", text: value });
    return el("td", { class: "num estimate", dataset: { answer: "estimate" },
                      title: `estimated without a GPU (${p.estimate.estimator}); the measurement follows` },
      el("span", { class: "answer-tag", text: "estimate" }), ` ${value}`);
  }

  // What a final prediction was estimated at before its measurement: "estimate 10.90 ms (analytic)".
  const estimateNote = (p) => (p.answer === "final" && p.estimate && p.estimate.latency_ms !== null
    ? `estimate ${fmtMs(p.estimate.latency_ms)} ms (${p.estimate.estimator})` : "");
  const hostLabel = (p) => p.host.gpu_name || p.host.host_class;
  const targetLabel = (p) => p.target_name || p.target_id;

  function estimatorColor(name) {
    const names = (config ? config.estimators.map((e) => e.name) : []);
    const index = names.indexOf(name);
    return PALETTE[(index >= 0 ? index : names.length + name.length) % PALETTE.length];
  }

  // --- routing: #/history?..., #/workload/<digest>?request=..., #/live, #/catalog, #/submit -------------------

  function parseHash() {
    const raw = location.hash.replace(/^#\/?/, "");
    const [path, query = ""] = raw.split("?");
    const parts = path.split("/").filter(Boolean);
    return { view: parts[0] || "history", arg: parts[1] ? decodeURIComponent(parts[1]) : null,
             params: new URLSearchParams(query) };
  }

  function go(view, params) {
    const query = params && [...params].length ? `?${params}` : "";
    location.hash = `#/${view}${query}`;
  }

  const VIEWS = { history: showHistory, workload: showWorkload, live: showLive, catalog: showCatalog,
                  submit: showSubmit };
  // Views kept in files of their own (populations.js, loaded first) register a factory that gets the helpers.
  for (const [name, factory] of Object.entries(window.UnderstudyViews || {})) {
    VIEWS[name] = factory({ $, el, svg, api, poll, notice, fmtMs, fmtNum, fmtTime, workloadLabel, apiKey, base: BASE,
                            current: (gen) => gen === generation });
  }

  async function route() {
    generation += 1;
    const gen = generation;
    const { view, arg, params } = parseHash();
    const name = VIEWS[view] ? view : "history";
    for (const section of document.querySelectorAll("section.view")) section.hidden = section.id !== `view-${name}`;
    for (const link of document.querySelectorAll("nav a")) {
      const active = link.dataset.view === name || (name === "workload" && link.dataset.view === "history");
      link.classList.toggle("active", active);
    }
    try {
      await VIEWS[name](arg, params, gen);
    } catch (err) {
      if (gen === generation) notice(err.message, true);
    }
  }

  // Run fn now and again after the delay (ms) it returns, until it returns null or the view changes.
  async function poll(gen, fn) {
    while (gen === generation) {
      let delay = 5000;
      try {
        delay = await fn();
        if (gen === generation) notice("");
      } catch (err) {
        if (gen === generation) notice(err.message, true);
      }
      if (delay === null || delay === undefined) return;
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }

  // --- shared data --------------------------------------------------------------------------------------------

  async function loadCatalog() {
    if (!catalog) catalog = (await api("/v1/targets")).data;
    return catalog;
  }

  async function loadHostOptions() {
    try {
      const hosts = (await api("/v1/hosts")).data;
      const list = $("#host-options");
      list.replaceChildren(el("option", { value: "cpu" }),
        ...hosts.flatMap((h) => [el("option", { value: h.id }), el("option", { value: h.host_class })]));
    } catch (_) {
      // The list is a convenience only.
    }
  }

  function fillSelect(select, values, keepFirst = true) {
    const first = keepFirst ? [...select.options].slice(0, 1) : [];
    select.replaceChildren(...first, ...values.map(([value, text]) => el("option", { value, text })));
  }

  // --- history ------------------------------------------------------------------------------------------------

  function historyParams() {
    return parseHash().params;
  }

  function setHistoryParam(changes) {
    const params = historyParams();
    for (const [key, value] of Object.entries(changes)) {
      if (value === null || value === undefined || value === "") params.delete(key);
      else params.set(key, value);
    }
    go("history", params);
  }

  function applyHistoryFilters() {
    const form = $("#history-filters");
    const changes = { skip: null, limit: form.elements.limit.value === "25" ? null : form.elements.limit.value };
    for (const name of HISTORY_FILTERS) changes[name] = form.elements[name].value.trim();
    setHistoryParam(changes);
  }

  function renderHistoryHead(sort, order) {
    const row = $("#history-table thead tr");
    row.replaceChildren(...HISTORY_COLUMNS.map(([key, text, cls]) => {
      if (!key) return el("th", { class: cls, text });
      const active = key === sort;
      const arrow = active ? (order === "asc" ? " ▲" : " ▼") : "";
      const next = active ? (order === "asc" ? "desc" : "asc") : (key === "created_at" ? "desc" : "asc");
      return el("th", { class: cls, "aria-sort": active ? (order === "asc" ? "ascending" : "descending") : "none" },
        el("button", { type: "button", class: "sort", dataset: { sort: key },
                       onclick: () => setHistoryParam({ sort: key, order: next, skip: null }) }, text + arrow));
    }));
  }

  function renderHistoryRows(page, skip, limit) {
    const body = $("#history-table tbody");
    if (!page.data.length) {
      body.replaceChildren(el("tr", {}, el("td", { colspan: HISTORY_COLUMNS.length, class: "empty",
                                                     text: "No predictions match." })));
    } else {
      body.replaceChildren(...page.data.map((p) => {
        const link = `#/workload/${encodeURIComponent(p.workload_digest)}`;
        return el("tr", { dataset: { id: p.id, status: p.status }, class: "clickable",
                          onclick: (event) => { if (event.target.tagName !== "A") location.hash = link; } },
          el("td", { text: fmtTime(p.created_at), title: p.created_at }),
          el("td", {}, el("a", { href: link, text: workloadLabel(p.workload) })),
          el("td", { text: targetLabel(p), title: p.target_id }),
          el("td", { text: p.estimator }),
          el("td", { text: hostLabel(p), title: p.host.worker || p.host.host_class }),
          el("td", { class: "status" }, badge(p.status)),
          latencyCell(p),
          el("td", { class: "num", text: p.latency ? fmtMs(p.latency.spread_ms) : "–" }),
          el("td", { class: "num", text: fmtNum(p.samples_per_s) }));
      }));
    }
    const last = Math.min(skip + limit, page.count);
    $("#history-range").textContent = page.count ? `${skip + 1}–${last} of ${page.count}` : "0 of 0";
    $("#history-prev").disabled = skip <= 0;
    $("#history-next").disabled = skip + limit >= page.count;
  }

  async function showHistory(_arg, params, gen) {
    const form = $("#history-filters");
    if (form.elements.target.options.length <= 1) {
      const targets = await loadCatalog();
      fillSelect(form.elements.target, targets.map((t) => [t.id, t.name]));
    }
    loadHostOptions();
    for (const name of HISTORY_FILTERS) {
      const field = form.elements[name];
      if (document.activeElement !== field) field.value = params.get(name) || "";
    }
    const sort = params.get("sort") || "created_at";
    const order = params.get("order") || "desc";
    const limit = Math.max(1, Number(params.get("limit")) || 25);
    const skip = Math.max(0, Number(params.get("skip")) || 0);
    form.elements.limit.value = String(limit);
    renderHistoryHead(sort, order);
    $("#history-prev").onclick = () => setHistoryParam({ skip: Math.max(0, skip - limit) || null });
    $("#history-next").onclick = () => setHistoryParam({ skip: skip + limit });
    const query = { sort, order, skip, limit };
    for (const name of HISTORY_FILTERS) query[name] = params.get(name);
    // Until the first page of this query arrives, say so (the rows of the previous query would mislead).
    const table = $("#history-table");
    table.setAttribute("aria-busy", "true");
    $("#history-table tbody").replaceChildren(el("tr", { class: "loading" },
      el("td", { colspan: HISTORY_COLUMNS.length, class: "empty", text: "Loading predictions…" })));
    $("#history-range").textContent = "";
    await poll(gen, async () => {
      const page = await api("/v1/predictions", { params: query });
      if (gen === generation) {
        renderHistoryRows(page, skip, limit);
        table.dataset.sorted = `${sort}:${order}`;
        table.removeAttribute("aria-busy");
      }
      return page.data.some((p) => !FINAL.has(p.status)) ? 2000 : 5000;
    });
  }

  // --- one workload: the chart --------------------------------------------------------------------------------

  function niceStep(range, ticks) {
    const raw = range / ticks;
    const power = 10 ** Math.floor(Math.log10(raw));
    const fraction = raw / power;
    const nice = fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 2.5 ? 2.5 : fraction <= 5 ? 5 : 10;
    return nice * power;
  }

  // groups: [{id, name, cells: {estimator: prediction}}]; series: estimator names.
  function drawChart(groups, series) {
    const cells = groups.flatMap((group) => Object.values(group.cells));
    const slot = Math.max(56, 28 * series.length + 20);
    const margin = { top: 34, right: 20, bottom: 110, left: 92 };
    const available = Math.max(640, $("#workload-chart").clientWidth || 960);
    const width = Math.max(available, margin.left + margin.right + groups.length * slot);
    const height = 420;
    const inner = { w: width - margin.left - margin.right, h: height - margin.top - margin.bottom };
    const slotWidth = inner.w / Math.max(1, groups.length);
    let top = 0;
    let coverage = null;
    for (const group of groups) {
      for (const p of Object.values(group.cells)) {
        if (p.latency && p.latency.min_ms !== null) top = Math.max(top, p.latency.min_ms + (p.latency.spread_ms || 0));
        if (p.estimate && p.estimate.latency_ms !== null) top = Math.max(top, p.estimate.latency_ms);
        if (p.interval_ms) {
          top = Math.max(top, p.interval_ms[1]);
          coverage = p.coverage;
        }
      }
    }
    const step = niceStep(top > 0 ? top : 1, 5);
    const yMax = Math.max(step, Math.ceil((top > 0 ? top : 1) / step) * step);
    const y = (value) => margin.top + inner.h * (1 - value / yMax);
    const power = Math.floor(Math.log10(step));
    const decimals = Math.max(0, -power + (Math.abs(step / 10 ** power - 2.5) < 1e-9 ? 1 : 0));

    const chart = svg("svg", { id: "latency-chart", viewBox: `0 0 ${width} ${height}`, width, height,
                               role: "img", "aria-label": "predicted step time per target", class: "chart-svg" });
    chart.append(svg("defs", {},
      svg("pattern", { id: "oom-hatch", patternUnits: "userSpaceOnUse", width: 8, height: 8,
                       patternTransform: "rotate(45)" },
        svg("rect", { width: 4, height: 8, fill: "#c0392b", "fill-opacity": 0.35 }))));

    const axis = svg("g", { class: "axis y-axis" });
    for (let value = 0; value <= yMax + step / 2; value += step) {
      axis.append(
        svg("line", { x1: margin.left, x2: width - margin.right, y1: y(value), y2: y(value), class: "grid" }),
        svg("text", { x: margin.left - 8, y: y(value) + 4, "text-anchor": "end", text: value.toFixed(decimals) }));
    }
    axis.append(svg("text", { class: "axis-title", "text-anchor": "middle",
                              transform: `translate(${margin.left - 58} ${margin.top + inner.h / 2}) rotate(-90)`,
                              text: "predicted step time (ms)" }));
    axis.append(svg("line", { x1: margin.left, x2: width - margin.right, y1: y(0), y2: y(0), class: "baseline" }));
    chart.append(axis);

    const barsLayer = svg("g", { class: "bars" });
    groups.forEach((group, i) => {
      const x0 = margin.left + i * slotWidth;
      const pad = Math.min(14, slotWidth * 0.15);
      const barWidth = Math.min(72, (slotWidth - 2 * pad) / series.length);
      const start = x0 + (slotWidth - barWidth * series.length) / 2;
      const g = svg("g", { class: "target-group", dataset: { target: group.id } });
      series.forEach((name, j) => {
        const p = group.cells[name];
        if (!p) return;
        const x = start + j * barWidth;
        const w = Math.max(2, barWidth - 3);
        const setting = p.host_setting ? p.host_setting.summary : "no host setting (nothing measured)";
        const tip = `${targetLabel(p)} · ${name}: `;
        if ((p.status === "done" || p.status === "estimated") && p.latency) {
          const value = p.latency.min_ms;
          const tight = p.memory && p.memory.verdict === "tight";
          // The GPU-free estimate, while the measurement is awaited: a pale bar, dotted in the estimator's colour.
          const estimated = p.answer === "estimate";
          const interval = p.interval_ms ? ` · ${percent(p.coverage)} interval ${fmtInterval(p)} ms` : "";
          const memory = p.memory ? ` · memory ${p.memory.summary}` : "";
          const what = estimated ? ` (estimated without a GPU by ${p.estimate.estimator}; the measurement follows)`
            : ` (spread ${fmtMs(p.latency.spread_ms)} ms)`;
          const classes = ["bar", tight ? "tight" : null, estimated ? "estimate" : null].filter(Boolean).join(" ");
          g.append(svg("rect", { class: classes, x, y: y(value), width: w, height: Math.max(1, y(0) - y(value)),
                                 fill: estimatorColor(name), "fill-opacity": estimated ? 0.2 : null,
                                 stroke: estimated ? estimatorColor(name) : null,
                                 dataset: { target: group.id, estimator: name, answer: p.answer } },
            svg("title", { text: `${tip}${fmtMs(value)} ms${interval}${what}${memory} · ${setting}` })));
          if (p.interval_ms) {
            // The shaded range: where the measured time should fall, for the coverage's share of workloads.
            const [low, high] = p.interval_ms;
            g.append(svg("g", { class: "band", dataset: { target: group.id, estimator: name, low, high } },
              svg("rect", { class: "band-range", x, y: y(high), width: w, height: Math.max(1, y(low) - y(high)) }),
              svg("line", { class: "band-cap", x1: x, x2: x + w, y1: y(high), y2: y(high) }),
              svg("line", { class: "band-cap", x1: x, x2: x + w, y1: y(low), y2: y(low) }),
              svg("title", { text: `${tip}${percent(p.coverage)} interval ${fmtInterval(p)} ms` +
                                   (p.band ? ` (${p.band.basis})` : "") })));
          }
          const spread = p.latency.spread_ms || 0;
          if (spread > 0) {
            const cx = x + w / 2;
            g.append(svg("g", { class: "errorbar" },
              svg("line", { x1: cx, x2: cx, y1: y(value), y2: y(value + spread) }),
              svg("line", { x1: cx - w / 4, x2: cx + w / 4, y1: y(value + spread), y2: y(value + spread) })));
          }
          if (w >= 22) {
            const above = Math.max(value + spread, p.interval_ms ? p.interval_ms[1] : 0);
            g.append(svg("text", { class: "bar-value", x: x + w / 2, y: y(above) - 5,
                                   "text-anchor": "middle", text: estimated ? `~${fmtMs(value)}` : fmtMs(value) }));
          }
          if (!estimated && p.estimate && p.estimate.latency_ms !== null) {
            // What it was estimated at before it was measured: a hollow point on the measured bar.
            g.append(svg("circle", { class: "estimate-point", cx: x + w / 2, cy: y(p.estimate.latency_ms), r: 4,
                                     dataset: { target: group.id, estimator: name } },
              svg("title", { text: `${tip}estimated ${fmtMs(p.estimate.latency_ms)} ms without a GPU ` +
                                   `(${p.estimate.estimator}) before it was measured` })));
          }
        } else if (p.status === "oom") {
          g.append(svg("rect", { class: "oom", x, y: margin.top, width: w, height: inner.h,
                                 fill: "url(#oom-hatch)", dataset: { target: group.id, estimator: name } },
            svg("title", { text: `${tip}does not fit (OOM)${p.error ? ": " + p.error : ""}` })));
          g.append(svg("text", { class: "oom-label", x: x + w / 2, y: margin.top + 14, "text-anchor": "middle",
                                 text: "OOM" }));
        } else {
          const text = p.status === "failed" ? "failed" : "…";
          g.append(svg("text", { class: `marker marker-${p.status}`, x: x + w / 2, y: y(0) - 6,
                                 "text-anchor": "middle", text },
            svg("title", { text: `${tip}${p.status}${p.error ? ": " + p.error : ""}` })));
        }
      });
      const lx = x0 + slotWidth / 2;
      const ly = y(0) + 14;
      const short = group.name.length > 24 ? `${group.name.slice(0, 23)}…` : group.name;
      g.append(svg("text", { class: "x-label", x: lx, y: ly, "text-anchor": "end",
                             transform: `rotate(-35 ${lx} ${ly})`, text: short }, svg("title", { text: group.name })));
      barsLayer.append(g);
    });
    chart.append(barsLayer);

    const legend = svg("g", { class: "legend" });
    series.forEach((name, j) => {
      const x = margin.left + j * 130;
      legend.append(svg("rect", { x, y: 8, width: 12, height: 12, fill: estimatorColor(name) }),
                    svg("text", { x: x + 18, y: 18, text: name }));
    });
    let ox = margin.left + series.length * 130;
    if (coverage !== null) {
      legend.append(svg("rect", { class: "band-range", x: ox, y: 8, width: 12, height: 12 }),
                    svg("text", { x: ox + 18, y: 18, text: `${percent(coverage)} interval` }));
      ox += 130;
    }
    legend.append(svg("rect", { class: "tight-swatch", x: ox, y: 8, width: 12, height: 12, fill: "#fff" }),
                  svg("text", { x: ox + 18, y: 18, text: "memory tight" }));
    ox += 130;
    legend.append(svg("rect", { x: ox, y: 8, width: 12, height: 12, fill: "url(#oom-hatch)", stroke: "#c0392b" }),
                  svg("text", { x: ox + 18, y: 18, text: "OOM: does not fit" }));
    ox += 150;
    if (cells.some((p) => p.estimate)) {
      legend.append(svg("rect", { class: "estimate-swatch", x: ox, y: 8, width: 12, height: 12 }),
                    svg("text", { x: ox + 18, y: 18, text: "estimate (no GPU)" }));
    }
    chart.append(legend);
    return chart;
  }

  // "tight 22.0-26.4 GB of 24", coloured by the verdict, its parts in the tooltip.
  function memoryVerdict(memory) {
    if (!memory) return "–";
    const parts = Object.entries(memory.parts_gb || {}).map(([part, gb]) => `${part} ${fmtNum(gb)}`).join(", ");
    return el("span", { class: `memory-verdict memory-${memory.verdict}`, dataset: { verdict: memory.verdict },
                        text: memory.summary,
                        title: `predicted peak ${fmtNum(memory.peak_gb)} GB (${parts}); it may take ` +
                               `${fmtNum(memory.low_gb)}–${fmtNum(memory.high_gb)} GB of ${memory.capacity_gb} GB` });
  }

  function renderWorkload(predictions, requestId) {
    const state = $("#workload-state");
    if (!predictions.length) {
      $("#workload-title").textContent = "Workload";
      state.textContent = "No predictions for this workload.";
      $("#workload-chart").replaceChildren();
      $("#workload-table tbody").replaceChildren();
      return false;
    }
    const workload = predictions[0].workload;
    $("#workload-title").textContent = workloadLabel(workload);
    $("#workload-spec").replaceChildren(...Object.entries(workload).flatMap(([key, value]) => [
      el("dt", { text: key }), el("dd", { text: Array.isArray(value) ? value.join(" × ") : String(value) })]));

    // The newest prediction per (target, estimator): estimators side by side, one slot per target.
    const newest = new Map();
    for (const p of predictions) {
      const key = `${p.target_id}\u0000${p.estimator}`;
      const seen = newest.get(key);
      if (!seen || p.created_at > seen.created_at) newest.set(key, p);
    }
    const shown = [...newest.values()];
    const order = config ? config.estimators.map((e) => e.name) : [];
    const series = [...new Set(shown.map((p) => p.estimator))]
      .sort((a, b) => (order.indexOf(a) - order.indexOf(b)) || a.localeCompare(b));
    const groups = new Map();
    for (const p of shown) {
      if (!groups.has(p.target_id)) groups.set(p.target_id, { id: p.target_id, name: targetLabel(p), cells: {} });
      groups.get(p.target_id).cells[p.estimator] = p;
    }
    const rank = (group) => {
      const values = Object.values(group.cells).filter((p) => p.latency).map((p) => p.latency.min_ms);
      return values.length ? Math.min(...values) : Infinity;
    };
    const sortedGroups = [...groups.values()].sort((a, b) => (rank(a) - rank(b)) || a.name.localeCompare(b.name));
    $("#workload-chart").replaceChildren(drawChart(sortedGroups, series));

    const counts = {};
    for (const p of shown) counts[p.status] = (counts[p.status] || 0) + 1;
    const pending = shown.some((p) => !FINAL.has(p.status));
    state.dataset.state = pending ? "pending" : "final";
    state.textContent = `${groups.size} target(s), ${series.length} estimator(s): ` +
      Object.entries(counts).map(([status, n]) => `${n} ${status}`).join(", ") + (pending ? " — updating…" : "");

    const rows = [];
    for (const group of sortedGroups) {
      for (const name of series) {
        const p = group.cells[name];
        if (!p) continue;
        rows.push(el("tr", { dataset: { id: p.id, target: p.target_id, estimator: p.estimator, status: p.status,
                                        ...(p.answer ? { answer: p.answer } : {}) },
                             class: requestId && p.request_id === requestId ? "mine" : null },
          el("td", { text: targetLabel(p), title: p.target_id }),
          el("td", {}, el("span", { class: "swatch", dataset: { estimator: name } }), ` ${name} v${p.estimator_version}`),
          el("td", { class: "status" }, badge(p.status)),
          latencyCell(p),
          el("td", { class: "num interval", text: fmtInterval(p),
                     title: p.interval_ms ? `${percent(p.coverage)} interval: ${p.band.basis}` : null }),
          el("td", { class: "num", text: p.latency ? fmtMs(p.latency.spread_ms) : "–" }),
          el("td", { class: "num", text: fmtNum(p.samples_per_s) }),
          el("td", { class: "memory" }, memoryVerdict(p.memory)),
          el("td", { text: p.host_setting ? p.host_setting.summary : (p.status === "done" ? "none (not measured)" : "–"),
                     class: p.host_setting ? null : "muted" }),
          el("td", { text: hostLabel(p), title: p.host.worker || "" }),
          el("td", { class: "note", text: [p.error, p.cached ? "cached" : null, estimateNote(p)]
            .filter(Boolean).join(" · ") })));
      }
    }
    $("#workload-table tbody").replaceChildren(...rows);
    for (const swatch of document.querySelectorAll("#workload-table .swatch")) {
      swatch.replaceChildren(svg("svg", { width: 10, height: 10, "aria-hidden": "true" },
        svg("rect", { width: 10, height: 10, fill: estimatorColor(swatch.dataset.estimator) })));
    }
    return pending;
  }

  async function showWorkload(digest, params, gen) {
    $("#workload-state").textContent = "loading…";
    $("#workload-state").dataset.state = "loading";
    if (!digest) throw new Error("no workload given");
    const requestId = params.get("request");
    await poll(gen, async () => {
      const page = await api("/v1/predictions", { params: { workload: digest, limit: 500, sort: "created_at",
                                                            order: "desc" } });
      if (gen !== generation) return null;
      return renderWorkload(page.data, requestId) ? 1000 : 5000;
    });
  }

  // --- live: jobs and workers ---------------------------------------------------------------------------------

  // Estimated predictions still wait for their measurement: they are jobs too.
  function renderJobs(queued, running, estimated) {
    const jobs = [...running.data, ...estimated.data, ...queued.data];
    $("#jobs-count").textContent = `${running.count} running · ${estimated.count} estimated · ${queued.count} queued`;
    const body = $("#jobs-table tbody");
    if (!jobs.length) {
      body.replaceChildren(el("tr", {}, el("td", { colspan: 9, class: "empty", text: "Nothing queued or running." })));
      return;
    }
    body.replaceChildren(...jobs.map((p) => el("tr", { dataset: { id: p.id, status: p.status } },
      el("td", { class: "status" }, badge(p.status)),
      el("td", {}, el("a", { href: `#/workload/${encodeURIComponent(p.workload_digest)}`, text: workloadLabel(p.workload) })),
      el("td", { text: targetLabel(p) }),
      el("td", { text: p.estimator }),
      el("td", { text: p.host.host_class }),
      el("td", { class: "worker", text: p.host.worker || "–" }),
      el("td", { text: ago(p.created_at), title: p.created_at }),
      el("td", { text: p.started_at ? ago(p.started_at) : "–", title: p.started_at || "" }),
      el("td", { class: "num", text: String(p.attempts) }))));
  }

  // What a worker can run: what it advertises, less the GPU estimators where it has no GPU (a worker older than
  // that rule advertised every estimator).
  function runnableEstimators(host) {
    const advertised = (host.info && host.info.estimators) || {};
    return Object.entries(advertised).filter(([, e]) => host.gpu_name || !(e && e.needs_gpu)).map(([name]) => name);
  }

  function renderHosts(hosts) {
    const body = $("#hosts-table tbody");
    if (!hosts.data.length) {
      body.replaceChildren(el("tr", {}, el("td", { colspan: 7, class: "empty",
                                                   text: "No worker has registered (understudy worker --gpu N)." })));
      return;
    }
    body.replaceChildren(...hosts.data.map((h) => el("tr", { dataset: { id: h.id } },
      el("td", { text: h.id }),
      el("td", { text: h.gpu_name || "no GPU" }),
      el("td", { text: h.host_class }),
      el("td", {}, el("span", { class: `badge ${h.alive ? "status-done" : "status-failed"}`,
                                text: h.alive ? "alive" : "silent" })),
      el("td", { text: ago(h.last_heartbeat), title: h.last_heartbeat }),
      el("td", { class: "num", text: h.queue_depth === null ? "–" : String(h.queue_depth) }),
      el("td", { class: "estimators", text: runnableEstimators(h).join(", ") || "–" }))));
  }

  async function showLive(_arg, _params, gen) {
    await poll(gen, async () => {
      const [queued, running, estimated, hosts] = await Promise.all([
        api("/v1/predictions", { params: { status: "queued", sort: "created_at", order: "asc", limit: 100 } }),
        api("/v1/predictions", { params: { status: "running", sort: "created_at", order: "asc", limit: 100 } }),
        api("/v1/predictions", { params: { status: "estimated", sort: "created_at", order: "asc", limit: 100 } }),
        api("/v1/hosts"),
      ]);
      if (gen !== generation) return null;
      renderJobs(queued, running, estimated);
      renderHosts(hosts);
      $("#live-updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
      return 2000;
    });
  }

  // --- the catalog --------------------------------------------------------------------------------------------

  function renderCatalog() {
    const needle = $("#catalog-filter").value.trim().toLowerCase();
    const rows = catalog.filter((t) => !needle || `${t.id} ${t.name} ${t.architecture}`.toLowerCase().includes(needle));
    $("#catalog-count").textContent = `${rows.length} of ${catalog.length}`;
    $("#catalog-table tbody").replaceChildren(...rows.map((t) => el("tr", { dataset: { id: t.id } },
      el("td", { text: t.id }), el("td", { text: t.name }), el("td", { text: t.architecture }),
      el("td", { class: "num", text: String(t.sm_count) }), el("td", { class: "num", text: String(t.boost_clock_mhz) }),
      el("td", { class: "num", text: String(Math.round(t.sustained_clock_mhz ?? t.boost_clock_mhz)) }),
      el("td", { class: "num",
                 text: String(Math.round(t.fp16_tensor_clock_mhz ?? t.sustained_clock_mhz ?? t.boost_clock_mhz)) }),
      el("td", { class: "num", text: t.tdp_w == null ? "-" : String(t.tdp_w) }),
      el("td", { class: "num", text: String(t.memory_size_gb) }),
      el("td", { class: "num", text: String(t.memory_bandwidth_gbps) }),
      el("td", { class: "num", text: fmtNum(t.fp32_tflops) }),
      el("td", { class: "num", text: fmtNum(t.fp16_tensor_tflops) }))));
  }

  async function showCatalog() {
    await loadCatalog();
    renderCatalog();
  }

  // --- submit -------------------------------------------------------------------------------------------------

  async function showSubmit() {
    const form = $("#submit-form");
    $("#submit-keyhint").hidden = Boolean(apiKey());
    if (form.elements.targets.options.length === 0) {
      const targets = await loadCatalog();
      const byArch = new Map();
      for (const t of targets) {
        if (!byArch.has(t.architecture)) byArch.set(t.architecture, []);
        byArch.get(t.architecture).push(t);
      }
      form.elements.targets.replaceChildren(...[...byArch].map(([arch, list]) => el("optgroup", { label: arch },
        ...list.map((t) => el("option", { value: t.id, text: `${t.name} (${t.id})` })))));
    }
    loadHostOptions();
  }

  function renderSubmitErrors(err) {
    const list = $("#submit-errors");
    const form = $("#submit-form");
    const items = err.errors && err.errors.length ? err.errors.map((e) => `${e.field}: ${e.reason}`) : [err.message];
    if (err.status === 401) items.unshift("The API key is missing or not valid: enter one above.");
    list.replaceChildren(...items.map((text) => el("li", { text })));
    list.hidden = false;
    for (const e of err.errors || []) {
      const name = e.field.replace(/^workload\./, "").replace(/\[.*$/, "").split(".")[0];
      const field = form.elements[name];
      if (field && field.setAttribute) {
        field.setAttribute("aria-invalid", "true");
        field.classList.add("invalid");
      }
    }
  }

  async function submitPrediction(event) {
    event.preventDefault();
    const form = event.target;
    const f = form.elements;
    $("#submit-errors").hidden = true;
    for (const field of form.querySelectorAll(".invalid")) {
      field.classList.remove("invalid");
      field.removeAttribute("aria-invalid");
    }
    if (!apiKey()) {
      renderSubmitErrors(new ApiError(401, "no API key", []));
      return;
    }
    const numberOrText = (value) => (value.trim() !== "" && !Number.isNaN(Number(value)) ? Number(value) : value);
    const workload = {
      model: f.model.value.trim(), mode: f.mode.value, batch_size: numberOrText(f.batch_size.value),
      resolution: numberOrText(f.resolution.value), precision: f.precision.value, memory_format: f.memory_format.value,
    };
    if (f.mode.value === "train") workload.optimizer = f.optimizer.value;
    const body = { workload, targets: [...f.targets.selectedOptions].map((option) => option.value) };
    if (f.estimator.value) body.estimator = f.estimator.value;
    if (f.host.value.trim()) body.host = f.host.value.trim();
    const button = $("#submit-button");
    button.disabled = true;
    try {
      const created = await api("/v1/predictions", { method: "POST", body });
      const params = new URLSearchParams({ request: created.request_id });
      go(`workload/${encodeURIComponent(created.data[0].workload_digest)}`, params);
    } catch (err) {
      renderSubmitErrors(err);
    } finally {
      button.disabled = false;
    }
  }

  // --- start --------------------------------------------------------------------------------------------------

  function showKeyState() {
    const key = apiKey();
    $("#key-state").textContent = key ? `key ${key.slice(0, 7)}… in this tab` : "no key (read only)";
    $("#api-key").value = "";
    $("#api-key").placeholder = key ? "•••••• (set)" : "us_...";
    $("#submit-keyhint").hidden = Boolean(key);
  }

  function bindOnce() {
    $("#key-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const value = $("#api-key").value.trim();
      if (value) sessionStorage.setItem(KEY_STORE, value);
      showKeyState();
    });
    $("#key-forget").addEventListener("click", () => {
      sessionStorage.removeItem(KEY_STORE);
      showKeyState();
    });
    const filters = $("#history-filters");
    filters.addEventListener("submit", (event) => {
      event.preventDefault();
      applyHistoryFilters();
    });
    for (const select of filters.querySelectorAll("select")) select.addEventListener("change", applyHistoryFilters);
    let typing = null;
    filters.elements.q.addEventListener("input", () => {
      clearTimeout(typing);
      typing = setTimeout(applyHistoryFilters, 350);
    });
    $("#history-clear").addEventListener("click", () => go("history", null));
    $("#catalog-filter").addEventListener("input", () => catalog && renderCatalog());
    const submit = $("#submit-form");
    submit.addEventListener("submit", submitPrediction);
    submit.elements.targets.addEventListener("change", () => {
      $("#targets-picked").textContent = `${submit.elements.targets.selectedOptions.length} chosen`;
    });
    submit.elements.mode.addEventListener("change", () => {
      submit.elements.optimizer.disabled = submit.elements.mode.value !== "train";
    });
  }

  function fillChoices() {
    const submit = $("#submit-form").elements;
    const pairs = (values) => values.map((v) => [v, v]);
    fillSelect(submit.mode, pairs(config.modes), false);
    fillSelect(submit.precision, pairs(config.precisions), false);
    fillSelect(submit.optimizer, pairs(config.optimizers.filter((o) => o !== "none")), false);
    fillSelect(submit.memory_format, pairs(config.memory_formats), false);
    fillSelect(submit.estimator, config.estimators.map((e) => [e.name, `${e.name}${e.needs_gpu ? "" : " (no GPU)"}`]));
    const filters = $("#history-filters").elements;
    fillSelect(filters.estimator, pairs(config.estimators.map((e) => e.name)));
    fillSelect(filters.status, pairs(config.statuses));
    submit.precision.value = "amp-fp16";
    submit.optimizer.value = "sgd";
  }

  async function start() {
    bindOnce();
    showKeyState();
    try {
      config = await api("/dashboard/config.json");
      fillChoices();
    } catch (err) {
      notice(err.message, true);
    }
    window.addEventListener("hashchange", route);
    if (!location.hash) history.replaceState(null, "", "#/history");
    document.body.dataset.ready = "true";
    await route();
  }

  start();
})();
