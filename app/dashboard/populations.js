// The dashboard's population view: a fleet's step-time distribution, its FL round time against K, the deadline
// curve, and trace downloads. It registers itself with dashboard.js (loaded after it), which hands it the shared
// helpers; like the rest of the page it reads only the JSON API and draws inline SVG.
"use strict";

window.UnderstudyViews = window.UnderstudyViews || {};

window.UnderstudyViews.populations = (h) => {
  const { $, el, svg, api, poll, notice, fmtMs, fmtNum, fmtTime, workloadLabel, current, apiKey, base } = h;
  const K_AXIS = [1, 2, 5, 10, 20, 50, 100, 200];
  const COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1"];
  const ROUND_FIELDS = ["local_steps", "sigma", "availability", "dropout", "overcommit"];

  // --- a line chart: series of [x, y] points on linear or log axes ------------------------------------------

  function ticks(lo, hi, log) {
    if (log) {
      const out = [];
      for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e += 1) {
        for (const m of [1, 2, 5]) {
          const v = m * 10 ** e;
          if (v >= lo * 0.999 && v <= hi * 1.001) out.push(v);
        }
      }
      return out;
    }
    const raw = (hi - lo) / 5;
    const power = 10 ** Math.floor(Math.log10(raw || 1));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= raw) || raw;
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step / 1e6; v += step) out.push(Number(v.toPrecision(12)));
    return out;
  }

  function label(v) {
    if (v === 0) return "0";
    if (Math.abs(v) >= 100) return v.toFixed(0);
    if (Math.abs(v) >= 1) return Number(v.toPrecision(3)).toString();
    return Number(v.toPrecision(2)).toString();
  }

  // series: [{name, points: [[x, y]], step?: true, dots?: true}]; marker: an x to draw a vertical line at
  function lineChart({ id, series, xTitle, yTitle, xLog = false, yMax = null, marker = null }) {
    const width = 390;
    const height = 300;
    const m = { top: 28, right: 16, bottom: 46, left: 62 };
    const xs = series.flatMap((s) => s.points.map((p) => p[0])).filter((x) => !xLog || x > 0);
    const ys = series.flatMap((s) => s.points.map((p) => p[1]));
    let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
    if (x0 === x1) [x0, x1] = xLog ? [x0 / 2, x1 * 2] : [x0 - 1, x1 + 1];
    const y1 = yMax !== null ? yMax : Math.max(...ys) * 1.08 || 1;
    const fx = (x) => m.left + (width - m.left - m.right) *
      (xLog ? Math.log(x / x0) / Math.log(x1 / x0) : (x - x0) / (x1 - x0));
    const fy = (y) => m.top + (height - m.top - m.bottom) * (1 - y / y1);
    const chart = svg("svg", { id, viewBox: `0 0 ${width} ${height}`, width, height, class: "chart-svg", role: "img",
                               "aria-label": yTitle });
    const axis = svg("g", { class: "axis" });
    for (const t of ticks(0, y1, false)) {
      axis.append(svg("line", { x1: m.left, x2: width - m.right, y1: fy(t), y2: fy(t), class: "grid" }),
                  svg("text", { x: m.left - 6, y: fy(t) + 4, "text-anchor": "end", text: label(t) }));
    }
    for (const t of ticks(x0, x1, xLog)) {
      axis.append(svg("text", { x: fx(t), y: height - m.bottom + 16, "text-anchor": "middle", text: label(t) }));
    }
    axis.append(svg("text", { class: "axis-title", x: m.left + (width - m.left - m.right) / 2, y: height - 8,
                              "text-anchor": "middle", text: xTitle }),
                svg("text", { class: "axis-title", "text-anchor": "middle",
                              transform: `translate(16 ${m.top + (height - m.top - m.bottom) / 2}) rotate(-90)`,
                              text: yTitle }),
                svg("line", { x1: m.left, x2: width - m.right, y1: fy(0), y2: fy(0), class: "baseline" }));
    chart.append(axis);
    series.forEach((s, i) => {
      const color = COLORS[i % COLORS.length];
      const pts = s.points.filter((p) => p[1] !== null && (!xLog || p[0] > 0));
      let d = "";
      pts.forEach(([x, y], j) => {
        if (j === 0) d += `M${fx(x)},${fy(y)}`;
        else if (s.step) d += `H${fx(x)}V${fy(y)}`;
        else d += `L${fx(x)},${fy(y)}`;
      });
      chart.append(svg("path", { d, fill: "none", stroke: color, "stroke-width": 2, class: "series",
                                 dataset: { series: s.name } }));
      if (s.dots) {
        // A step series starts at zero height: its dots are the steps.
        for (const [x, y] of s.step ? pts.slice(1) : pts) {
          chart.append(svg("circle", { cx: fx(x), cy: fy(y), r: 3.5, fill: color, class: "point",
                                       dataset: { series: s.name, x, y } },
            svg("title", { text: `${s.name}: ${label(x)} → ${label(y)}` })));
        }
      }
      chart.append(svg("rect", { x: m.left + 8 + i * 120, y: 8, width: 12, height: 12, fill: color }),
                   svg("text", { x: m.left + 26 + i * 120, y: 18, text: s.name }));
    });
    if (marker !== null && marker >= x0 && marker <= x1) {
      chart.append(svg("line", { x1: fx(marker), x2: fx(marker), y1: m.top, y2: fy(0), class: "deadline-marker" }));
    }
    return chart;
  }

  // --- the list -----------------------------------------------------------------------------------------------

  function renderList(page) {
    $("#populations-count").textContent = `${page.count} population(s)`;
    $("#populations-table tbody").replaceChildren(...page.data.map((p) => el("tr", {
      class: "clickable", dataset: { id: p.id, status: p.status },
      onclick: () => { location.hash = `#/populations/${encodeURIComponent(p.id)}`; },
    },
    el("td", { text: fmtTime(p.created_at) }), el("td", { text: workloadLabel(p.workload) }),
    el("td", { class: "num", text: String(p.devices.length) }), el("td", { text: p.estimator }),
    el("td", {}, el("span", { class: `badge status-${p.status}`, text: p.status })),
    el("td", { class: "num", text: p.summary ? fmtMs(p.summary.p50_ms) : "–" }),
    el("td", { class: "num", text: p.summary ? fmtMs(p.summary.p90_ms) : "–" }))));
  }

  // --- one population -----------------------------------------------------------------------------------------

  function roundParams() {
    const form = $("#rounds-form").elements;
    const params = new URLSearchParams();
    for (const name of ROUND_FIELDS) if (form[name].value !== "") params.set(name, form[name].value);
    return params;
  }

  function fleetCdf(population) {
    // A provisional population counts each device not measured yet at its GPU-free estimate (its summary does too).
    const ran = population.devices.filter((d) => ["done", "estimated"].includes(d.status) && d.latency_ms !== null)
      .sort((a, b) => a.latency_ms - b.latency_ms);
    const total = ran.reduce((sum, d) => sum + d.share, 0) || 1;
    let cumulative = 0;
    const points = [[ran[0].latency_ms, 0]];
    for (const d of ran) {
      cumulative += d.share / total;
      points.push([d.latency_ms, cumulative]);
    }
    return lineChart({ id: "fleet-cdf", series: [{ name: "share of the fleet", points, step: true, dots: true }],
                       xTitle: "predicted step time (ms)", yTitle: "share at or below", yMax: 1 });
  }

  function renderRounds(rounds, deadline) {
    const expected = rounds.rounds.filter((r) => r.expected_round_s !== null);
    $("#round-vs-k").replaceChildren(lineChart({
      id: "round-vs-k-chart", xLog: true, xTitle: "clients per round (K)", yTitle: "expected round time (s)",
      series: [{ name: "E[round]", dots: true, points: expected.map((r) => [r.k, r.expected_round_s]) }] }));
    const shown = rounds.deadline_curves.filter((c) => [1, 10, 50].includes(c.k));
    $("#deadline-curve").replaceChildren(lineChart({
      id: "deadline-curve-chart", xTitle: "deadline (s)", yTitle: "P(K clients finish by it)", yMax: 1,
      marker: deadline, series: shown.map((c) => ({ name: `K = ${c.k}`, points: c.deadline_s.map((d, i) =>
        [d, c.p_complete[i]]) })) }));
    $("#round-kinds tbody").replaceChildren(...rounds.kinds.map((k) => el("tr", { dataset: { target: k.target_id } },
      el("td", { text: k.target_name || k.target_id }), el("td", { class: "num", text: `${(k.share * 100).toFixed(1)} %` }),
      el("td", { class: "num", text: `${fmtNum(k.down_mbps)} / ${fmtNum(k.up_mbps)}` }),
      el("td", { class: "num", text: k.download_s.toFixed(3) }), el("td", { class: "num", text: k.compute_s.toFixed(3) }),
      el("td", { class: "num", text: k.upload_s.toFixed(3) }), el("td", { class: "num", text: k.nominal_s.toFixed(3) }),
      el("td", { class: "num", text: k.sigma.toFixed(3) }))));
    const rows = rounds.rounds.filter((r) => [1, 10, 50, 100].includes(r.k));
    $("#round-outcomes").replaceChildren(...rows.map((r) => el("li", { text:
      `K = ${r.k}: ${r.sampled} sampled, P(K finish) ${r.p_complete.toFixed(3)}, expected round ` +
      `${r.expected_round_s === null ? "never" : `${r.expected_round_s.toFixed(2)} s`}` +
      (r.p_deadline === null ? "" : `, P(K by ${deadline} s) ${r.p_deadline.toFixed(3)}`) })));
    $("#population-rounds").dataset.state = "drawn";
  }

  async function loadRounds(id) {
    const params = roundParams();
    for (const k of K_AXIS) params.append("k", k);
    const deadline = $("#rounds-form").elements.deadline_s.value;
    if (deadline !== "") params.set("deadline_s", deadline);
    const rounds = await api(`/v1/populations/${encodeURIComponent(id)}/rounds?${params}`);
    renderRounds(rounds, deadline === "" ? null : Number(deadline));
  }

  async function downloadTrace(id) {
    const form = $("#trace-form").elements;
    const params = roundParams();
    for (const name of ["format", "clients", "rounds", "seed"]) params.set(name, form[name].value);
    const headers = apiKey() ? { "X-API-Key": apiKey() } : {};
    const response = await fetch(`${base}/v1/populations/${encodeURIComponent(id)}/trace?${params}`, { headers });
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      throw new Error(body.detail || `${response.status} ${response.statusText}`);
    }
    const disposition = response.headers.get("Content-Disposition") || "";
    const name = (disposition.match(/filename="([^"]+)"/) || [null, `trace.${form.format.value}`])[1];
    const link = el("a", { href: URL.createObjectURL(await response.blob()), download: name });
    document.body.append(link);
    link.click();
    link.remove();
    $("#trace-state").textContent = `downloaded ${name}`;
  }

  function renderPopulation(population) {
    $("#population-title").textContent = `${workloadLabel(population.workload)} over ${population.devices.length} ` +
      "device kind(s)";
    const s = population.summary;
    const measured = (population.measurements || []).length;
    const by = measured ? `${population.estimator} by ${measured} measured step time(s)` : population.estimator;
    const provisional = population.status === "estimated"
      ? " (provisional: devices not measured yet count at their GPU-free estimate; updating…)" : "";
    $("#population-state").textContent = s
      ? `${by}: p50 ${fmtMs(s.p50_ms)} ms, p90 ${fmtMs(s.p90_ms)} ms, p99 ${fmtMs(s.p99_ms)} ms${provisional}`
      : `${population.status}${population.error ? `: ${population.error}` : ""}`;
    $("#population-state").dataset.state = population.status;
    if (s) $("#fleet-chart").replaceChildren(fleetCdf(population));
  }

  async function showOne(id, gen) {
    $("#populations-list").hidden = true;
    $("#population-detail").hidden = false;
    $("#population-rounds").dataset.state = "";
    $("#rounds-form").onsubmit = (event) => {
      event.preventDefault();
      loadRounds(id).catch((err) => notice(err.message, true));
    };
    $("#trace-form").onsubmit = (event) => {
      event.preventDefault();
      downloadTrace(id).catch((err) => notice(err.message, true));
    };
    let drawn = false;
    await poll(gen, async () => {
      const population = await api(`/v1/populations/${encodeURIComponent(id)}`);
      if (!current(gen)) return null;
      renderPopulation(population);
      if (population.status === "done" && !drawn) {
        drawn = true;
        await loadRounds(id);
      }
      return ["done", "failed"].includes(population.status) ? null : 1500;
    });
  }

  return async function showPopulations(id, _params, gen) {
    if (id) return showOne(id, gen);
    $("#populations-list").hidden = false;
    $("#population-detail").hidden = true;
    await poll(gen, async () => {
      const page = await api("/v1/populations", { params: { limit: 50 } });
      if (!current(gen)) return null;
      renderList(page);
      return page.data.some((p) => !["done", "failed"].includes(p.status)) ? 2000 : 10000;
    });
  };
};
