/* ragwatch dashboard: draws the view data (ragwatch/report/view.py) with uPlot.
 *
 * One file for both views: the static HTML report carries its data in <script type="application/json"
 * id="rw-data">; the live page fetches "<its own path>.json" with its own query string (range, filters,
 * the dashboard token) every few seconds. All user text (questions, answers, claims, chunk ids, routes,
 * models, tags) reaches the page through text nodes only: nothing here sets innerHTML or src, and the one
 * href (a card's trace link) is set only to an http(s) URL the server built from the operator's
 * trace_url_template with the trace id percent-encoded.
 */
(function () {
  "use strict";

  var METRIC_COLORS = {
    faithfulness: "#2563eb",
    hallucination_rate: "#c026d3",
    answer_relevance: "#7c3aed",
    context_relevance: "#0891b2",
    context_precision_3: "#ea580c",
  };
  var DIAG_COLORS = {
    healthy: "#16a34a",
    off_topic: "#eab308",
    hallucination: "#c026d3",
    noisy_retrieval: "#f97316",
    retrieval_miss: "#dc2626",
    unknown: "#9ca3af",
  };
  var MARK_COLORS = { mode: "#dc2626", override: "#c2410c", judge: "#7c3aed", version: "#0f766e" };
  var DIAG_ORDER = ["healthy", "off_topic", "hallucination", "noisy_retrieval", "retrieval_miss", "unknown"];
  var RANGES = ["15m", "1h", "6h", "24h"];
  var ICON = { ok: "\u2705", warn: "\u26a0\ufe0f", fail: "\u274c", "no data": "\u2013" };
  var WARN_BAND = 0.05;
  var PAGE_SIZE = 3;
  var FETCH_TIMEOUT_MS = 20000;
  var TZ = (Intl.DateTimeFormat().resolvedOptions().timeZone) || "local time";

  var state = { charts: [], data: null, rendered: 0, error: null, page: 0, live: false, loads: 0, again: false,
    feedback: false, sent: {}, feedbackSent: 0, feedbackError: null };
  window.ragwatch = state;

  function el(tag, cls) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    for (var i = 2; i < arguments.length; i++) {
      var c = arguments[i];
      if (c === null || c === undefined || c === false) continue;
      e.append(typeof c === "object" ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function num(x, digits) {
    return x === null || x === undefined ? "\u2013" : Number(x).toFixed(digits === undefined ? 3 : digits);
  }

  function signed(x) {
    return x === null || x === undefined ? "\u2013" : (x >= 0 ? "+" : "") + Number(x).toFixed(3);
  }

  function pad(n) {
    return (n < 10 ? "0" : "") + n;
  }

  // one date format everywhere: ISO 8601 in the browser's time zone, which the header names
  function when(t) {
    if (t === null || t === undefined) return "\u2013";
    var d = new Date(t * 1000);
    return (
      d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds())
    );
  }

  function tick(t, span) {
    var s = when(t);
    if (span >= 86400) return s.slice(0, 16);  // 2026-05-01 14:00
    if (span >= 600) return s.slice(11, 16);  // 14:00
    return span >= 30 ? s.slice(11) : s.slice(11) + "." + Math.floor((t * 10) % 10);  // 14:00:30 / 14:00:30.4
  }

  // "min": the threshold is a floor (quality scores); "max": a ceiling (hallucination_rate, a rate of bad answers)
  function direction(data, metric) {
    return (data.directions && data.directions[metric]) || "min";
  }

  function bound(dir) {
    return dir === "max" ? "\u2264 " : "\u2265 ";
  }

  function status(value, threshold, dir) {
    if (value === null || value === undefined) return "no data";
    if (threshold === null || threshold === undefined) return "ok";
    var past = dir === "max" ? value - threshold : threshold - value;  // how far on the wrong side
    if (past <= 1e-12) return "ok";
    return past <= WARN_BAND + 1e-12 ? "warn" : "fail";
  }

  // bucket midpoints on the x axis, and the axis spanning whole buckets: a point sits in its bucket's middle
  function xs(data) {
    var half = data.timeline.step / 2;
    return data.timeline.t.map(function (t) { return t + half; });
  }

  function xRange(data) {
    var t = data.timeline.t;
    return [t[0], t[t.length - 1] + data.timeline.step];
  }

  function stepLabel(s) {
    if (s < 60) return s + " s";
    if (s < 3600) return s / 60 + " min";
    if (s < 86400) return s / 3600 + " h";
    return s / 86400 + " d";
  }

  function rangeName(r) {
    if (!r) return "";
    if (r.name === "all") return "every record read";
    if (r.name === "custom") return "chosen range";
    return "last " + r.name;
  }

  // -- the breaker in words: ragwatch/report/now.py breaker_words says the same --------------------------
  function breakerWords(b) {
    if (!b) return "mode: not in this source";
    var dwell = b.not_before ? "; not before " + when(b.not_before) + " (minimum dwell)" : "";
    if (b.state === "forced_on") return "degraded by an operator since " + when(b.since) + "; stays until `ragwatch degrade auto`";
    if (b.state === "forced_off") return "normal by an operator (the window is not acted on) until `ragwatch degrade auto`";
    if (b.state === "degraded") {
      var progress = b.leave.so_far !== null && b.leave.so_far !== undefined ? b.leave.so_far.toFixed(0) + " s so far" : "not there yet";
      return "degraded since " + when(b.since) + "; leaves when " + b.metric + " " + b.leave.op + " " +
        b.leave.line.toFixed(2) + " for " + b.leave.hold.toFixed(0) + " s \u2014 " + progress + dwell;
    }
    return "normal" + (b.since ? " since " + when(b.since) : "") + "; enters degraded when " + b.metric + " " +
      b.enter.op + " " + b.enter.line.toFixed(2) + " over at least " + b.enter.min_samples + " samples" + dwell;
  }

  // -- charts ---------------------------------------------------------------------------------------------
  function shade(periods) {
    return function (u) {
      var ctx = u.ctx;
      var left = u.bbox.left;
      var right = u.bbox.left + u.bbox.width;
      ctx.save();
      ctx.fillStyle = "rgba(220, 38, 38, 0.13)";
      for (var i = 0; i < periods.length; i++) {
        var x0 = Math.max(left, u.valToPos(periods[i].start, "x", true));
        var x1 = Math.min(right, u.valToPos(periods[i].end, "x", true));
        if (x1 - x0 < 2) x1 = Math.min(right, x0 + 2);
        if (x1 > x0) ctx.fillRect(x0, u.bbox.top, x1 - x0, u.bbox.height);
      }
      ctx.restore();
    };
  }

  // markers: a dashed line and a short label for each change (mode switch, operator override, judge version,
  // service version)
  function marks(list) {
    return function (u) {
      var ctx = u.ctx;
      var dpr = window.devicePixelRatio || 1;
      ctx.save();
      ctx.font = Math.round(10 * dpr) + "px system-ui, sans-serif";
      ctx.setLineDash([4 * dpr, 3 * dpr]);
      ctx.lineWidth = dpr;
      var lastLabel = -1e9;
      for (var i = 0; i < list.length; i++) {
        var x = Math.round(u.valToPos(list[i].t, "x", true));
        if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
        ctx.strokeStyle = ctx.fillStyle = MARK_COLORS[list[i].kind] || "#334155";
        ctx.beginPath();
        ctx.moveTo(x, u.bbox.top);
        ctx.lineTo(x, u.bbox.top + u.bbox.height);
        ctx.stroke();
        if (x - lastLabel > 70 * dpr) {  // labels that would overlap are left to the tooltip
          ctx.fillText(list[i].label, x + 3 * dpr, u.bbox.top + 11 * dpr);
          lastLabel = x;
        }
      }
      ctx.restore();
    };
  }

  function chartWidth(container, columns) {
    var w = container.clientWidth || 1100;
    return Math.max(280, Math.floor((w - (columns - 1) * 16) / columns) - 12);  // minus the frame: padding + border
  }

  function timeAxis(data) {
    var span = xRange(data)[1] - xRange(data)[0];
    return {
      stroke: "#475569",
      label: "time (" + TZ + ")",
      labelSize: 18,
      size: 34,
      space: 75,  // px between ticks: a label such as "04:37:57.5" is ~60 px wide; uPlot's default 50 overlaps them
      values: function (u, splits) { return splits.map(function (t) { return tick(t, span); }); },
    };
  }

  function xSeries() {
    return { value: function (u, v) { return v === null || v === undefined ? "" : when(v); } };
  }

  function hooks(data) {
    return { drawClear: [shade(data.degraded_periods || [])], draw: [marks(data.markers || [])] };
  }

  function scoreChart(host, data, metric, width) {
    var s = data.timeline.series[metric];
    var t = xs(data);
    var threshold = data.thresholds[metric];
    var perBucket = "samples / " + stepLabel(data.timeline.step);
    var series = [
      xSeries(),
      {
        label: perBucket,
        scale: "n",
        stroke: "#cbd5e1",
        fill: "rgba(148, 163, 184, 0.35)",
        paths: uPlot.paths.bars({ size: [0.8, 40] }),
        points: { show: false },
      },
      { label: "mean", stroke: METRIC_COLORS[metric] || "#334155", width: 2, points: { size: 5 } },
    ];
    var columns = [t, s.count, s.mean];
    if (threshold !== null && threshold !== undefined) {
      series.push({ label: "threshold " + bound(direction(data, metric)) + num(threshold, 2), stroke: "#b91c1c", dash: [6, 4], width: 1.5, points: { show: false } });
      columns.push(t.map(function () { return threshold; }));
    }
    var merged = Object.keys(data.merged || {}).filter(function (k) { return data.merged[k] === metric; });
    var opts = {
      width: width,
      height: 180,
      title: metric + (merged.length ? " (= " + merged.join(", ") + ")" : ""),
      scales: {
        x: { time: true, range: xRange(data) },
        y: { range: [0, 1] },
        n: { range: function (u, min, max) { return [0, Math.max(1, max) * 3]; } },
      },
      axes: [
        timeAxis(data),
        { scale: "y", stroke: "#475569", size: 44, label: "mean score", labelSize: 16 },
        { scale: "n", side: 1, stroke: "#94a3b8", grid: { show: false }, size: 40, label: perBucket, labelSize: 16 },
      ],
      series: series,
      hooks: hooks(data),
    };
    var wrap = el("div", "chart", null);
    wrap.setAttribute("data-metric", metric);
    host.append(wrap);
    var u = new uPlot(opts, columns, wrap);
    var points = s.mean.filter(function (v) { return v !== null; }).length;
    state.charts.push({ name: metric, kind: "score", points: points, plot: u });
  }

  function mixChart(host, data, width) {
    var mix = data.diagnosis_mix;
    var t = xs(data);
    var names = DIAG_ORDER.filter(function (d) { return mix[d] !== undefined; });
    var totals = t.map(function (_, i) {
      return names.reduce(function (a, d) { return a + mix[d][i]; }, 0);
    });
    var own = {};
    names.forEach(function (d) {
      own[d] = t.map(function (_, i) { return totals[i] ? (100 * mix[d][i]) / totals[i] : null; });
    });
    var cumulative = [];
    names.forEach(function (d, k) {
      cumulative.push(t.map(function (_, i) {
        if (!totals[i]) return null;
        var sum = 0;
        for (var j = 0; j <= k; j++) sum += own[names[j]][i];
        return sum;
      }));
    });
    var series = [xSeries()];
    var columns = [t];
    for (var k = names.length - 1; k >= 0; k--) {  // tallest first, so each shorter stack is drawn on top
      (function (name, k) {
        series.push({
          label: name,
          stroke: DIAG_COLORS[name],
          fill: DIAG_COLORS[name],
          width: 0,
          paths: uPlot.paths.bars({ size: [0.9, 60] }),
          points: { show: false },
          value: function (u, v, si, i) { return i === null || own[name][i] === null ? "\u2013" : own[name][i].toFixed(0) + "%"; },
        });
        columns.push(cumulative[k]);
      })(names[k], k);
    }
    var opts = {
      width: width,
      height: 180,
      title: "diagnosis labels (share of labels per bucket)",
      scales: { x: { time: true, range: xRange(data) }, y: { range: [0, 100] } },
      axes: [timeAxis(data), { stroke: "#475569", size: 44, label: "share of labels", labelSize: 16,
        values: function (u, vals) { return vals.map(function (v) { return v + "%"; }); } }],
      series: series,
      hooks: hooks(data),
    };
    var wrap = el("div", "chart", null);
    wrap.setAttribute("data-metric", "diagnosis_mix");
    host.append(wrap);
    var u = new uPlot(opts, columns, wrap);
    state.charts.push({ name: "diagnosis_mix", kind: "mix", points: totals.filter(Boolean).length, plot: u });
  }

  // -- query: range and filters live in the page's own query string ------------------------------------------
  function query() {
    return new URLSearchParams(location.search);
  }

  function navigate(changes) {
    var q = query();
    Object.keys(changes).forEach(function (k) {
      if (changes[k] === null || changes[k] === "") q.delete(k);
      else q.set(k, changes[k]);
    });
    history.replaceState(null, "", location.pathname + (q.toString() ? "?" + q.toString() : ""));
    state.page = 0;
    // a load already on its way asks for the old range and filters: load again once it is back, or the
    // choice would wait for the next refresh (which never comes while the focus stays on the controls)
    if (state.inflight) state.again = true;
    else poll(config(), true);
  }

  function choosing() {
    var focus = document.activeElement;
    return !!(focus && focus.closest && focus.closest(".controls"));
  }

  function select(name, label, options, current) {
    var s = el("select", null, el("option", null, label + ": all"));
    s.options[0].value = "";
    options.forEach(function (o) {
      var opt = el("option", null, o);
      opt.value = o;
      if (o === current) opt.selected = true;
      s.append(opt);
    });
    s.name = name;
    s.setAttribute("aria-label", label);
    return s;
  }

  function localInput(t) {
    var s = when(t);
    return s === "\u2013" ? "" : s.slice(0, 16).replace(" ", "T");
  }

  function controls(data) {
    var r = data.range || {};
    var bar = el("div", "controls");
    var ranges = el("div", "ranges", el("span", "label", "range "));
    RANGES.forEach(function (name) {
      var b = el("button", name === r.name ? "on" : null, name);
      b.type = "button";
      b.setAttribute("data-range", name);
      b.addEventListener("click", function () { navigate({ range: name, from: null, to: null }); });
      ranges.append(b);
    });
    var from = el("input");
    from.type = "datetime-local";
    from.name = "from";
    from.value = r.name === "custom" ? localInput(r.start) : "";
    var to = el("input");
    to.type = "datetime-local";
    to.name = "to";
    to.value = r.name === "custom" ? localInput(r.end) : "";
    var custom = el("button", r.name === "custom" ? "on" : null, "custom");
    custom.type = "button";
    custom.setAttribute("data-range", "custom");
    custom.addEventListener("click", function () {
      var f = from.value ? new Date(from.value).getTime() / 1000 : null;
      var t = to.value ? new Date(to.value).getTime() / 1000 : null;
      navigate({ range: null, from: f === null ? null : String(f), to: t === null ? null : String(t) });
    });
    ranges.append(from, to, custom);
    bar.append(ranges);

    var f = data.filters || {};
    var o = data.filter_options || {};
    var finds = el("div", "filters", el("span", "label", "find "));
    var diag = select("diagnosis", "diagnosis", o.diagnosis || [], f.diagnosis);
    var route = select("route", "route", o.route || [], f.route);
    var model = select("model", "model", o.model || [], f.model);
    var tag = select("tag", "tag", o.tag || [], f.tag);
    var metric = select("metric", "metric", data.heatmap.metrics, f.metric);
    var lo = el("input");
    lo.type = "number"; lo.step = "0.05"; lo.min = "0"; lo.max = "1"; lo.name = "min"; lo.placeholder = "min";
    lo.value = f.low === null || f.low === undefined ? "" : f.low;
    var hi = el("input");
    hi.type = "number"; hi.step = "0.05"; hi.min = "0"; hi.max = "1"; hi.name = "max"; hi.placeholder = "max";
    hi.value = f.high === null || f.high === undefined ? "" : f.high;
    var text = el("input");
    text.type = "search"; text.name = "q"; text.placeholder = "question, answer, sample or trace id";
    text.value = f.text || "";
    var apply = el("button", null, "apply");
    apply.type = "button";
    apply.name = "apply";
    function go() {
      navigate({ diagnosis: diag.value, route: route.value, model: model.value, tag: tag.value,
        metric: metric.value, min: lo.value, max: hi.value, q: text.value });
    }
    apply.addEventListener("click", go);
    text.addEventListener("keydown", function (e) { if (e.key === "Enter") go(); });
    [diag, route, model, tag].forEach(function (s) { s.addEventListener("change", go); });
    var clear = el("button", null, "clear");
    clear.type = "button";
    clear.name = "clear";
    clear.addEventListener("click", function () {
      navigate({ diagnosis: null, route: null, model: null, tag: null, metric: null, min: null, max: null, q: null });
    });
    finds.append(diag, route, model, tag, metric, lo, hi, text, apply, clear);
    bar.append(finds);
    return bar;
  }

  // -- sections -------------------------------------------------------------------------------------------
  function header(data) {
    var mode = data.mode;
    var badge;
    if (!mode) badge = el("span", "badge muted", "mode: not in this source");
    else if (mode.degraded) badge = el("span", "badge bad", "DEGRADED" + (mode.override === "on" ? " (forced on)" : ""));
    else badge = el("span", "badge good", "normal" + (mode.override === "off" ? " (forced off)" : ""));
    var head = el(
      "header", null,
      el("h1", null, "ragwatch health", el("span", "services", data.services.length ? data.services.join(", ") : "no service")),
      badge
    );
    var r = data.range || {};
    var start = r.start !== null && r.start !== undefined ? r.start : r.first_at;
    var end = r.end !== null && r.end !== undefined ? r.end : RANGES.indexOf(r.name) >= 0 ? data.generated_at : r.last_at;
    var facts = el(
      "p", "facts",
      data.samples + " scored samples",
      " in " + when(start) + " \u2192 " + when(end) + " (" + rangeName(r) + ")",
      " \u00b7 generated " + when(data.generated_at),
      data.source ? " \u00b7 from " + data.source : "",
      data.previous_at ? " \u00b7 \u0394 against " + when(data.previous_at) : "",
      " \u00b7 times in " + TZ
    );
    var out = [head, facts];
    var active = Object.keys(data.filters || {}).filter(function (k) { return data.filters[k] !== null; });
    if (active.length) {
      out.push(el("p", "filtered", "filtered: " + active.map(function (k) { return k + " " + data.filters[k]; }).join(" \u00b7 ") +
        " (the now-panel is never filtered)"));
    }
    return out;
  }

  function nowPanel(data) {
    var now = data.now;
    var s = el("section", "now", el("h2", null, "Now", el("span", "note",
      now ? "the live window that decides the mode, as of " + when(now.as_of) + " (from the " + now.from + ")" : "")));
    if (!now) {
      s.append(el("p", "muted", "No live window in this view (no SLA policy, or a report built without it)."));
      return s;
    }
    s.append(el("p", "breaker " + (now.breaker ? now.breaker.state : "none"), breakerWords(now.breaker)));
    var table = el("table", "now-windows");
    table.append(el("thead", null, el("tr", null, el("th", null, "metric"), el("th", "n", "window"), el("th", "n", "threshold"),
      el("th", "n", "margin"), el("th", "n", "samples"), el("th", null, "status"))));
    var body = el("tbody");
    now.windows.forEach(function (w) {
      var st = status(w.value, w.threshold, w.direction);
      body.append(el("tr", "status-" + st.replace(" ", "-"),
        el("td", null, w.metric, w.sla ? el("span", "kind", "SLA") : null),
        el("td", "n window-value", num(w.value)),
        el("td", "n", w.threshold === null ? "\u2013" : bound(w.direction) + num(w.threshold)),
        el("td", "n", signed(w.margin)),
        el("td", "n", w.samples + (w.enough ? "" : " (too few)")),
        el("td", "icon", (ICON[st] || "") + " " + st)));
    });
    table.append(body);
    s.append(table);
    return s;
  }

  function opsPanel(data) {
    var o = data.operations;
    if (!o) return null;
    var s = el("div", "ops");
    if (!o.available) {
      s.append(el("p", "muted", o.note, o.error ? " (" + o.error + ")" : ""));
      return s;
    }
    function tile(label, value) { return el("div", "tile", el("span", "label", label), el("strong", null, value)); }
    s.append(
      tile("requests / s", num(o.rate_per_second, 2)),
      tile("errors", o.error_ratio === null ? "\u2013" : (100 * o.error_ratio).toFixed(1) + "%"),
      tile("p95 latency", o.p95_seconds === null ? "\u2013" : (o.p95_seconds * 1000).toFixed(0) + " ms"),
      tile("cost / hour", "$" + num(o.cost_per_hour, 4)),
      el("span", "note", "since " + when(o.since) + " \u00b7 " + o.from)
    );
    return s;
  }

  function metricTable(data) {
    var table = el("table", "metrics");
    table.append(el("thead", null, el("tr", null, el("th", null, "metric"), el("th", "n", "samples"), el("th", "n", "mean"),
      el("th", "n", "std"), el("th", "n", "\u0394"), el("th", "n", "threshold"), el("th", null, "status"))));
    var body = el("tbody");
    data.metrics.forEach(function (r) {
      var tr = el("tr", "status-" + r.status.replace(" ", "-"),
        el("td", null, r.metric), el("td", "n", r.samples), el("td", "n", num(r.mean)), el("td", "n", num(r.std)),
        el("td", "n", signed(r.delta)), el("td", "n", r.threshold === null ? "\u2013" : bound(r.direction) + num(r.threshold)),
        el("td", "icon", (ICON[r.status] || "") + " " + r.status));
      body.append(tr);
    });
    table.append(body);
    return table;
  }

  function heatmap(data) {
    var h = data.heatmap;
    if (!h.rows.length) return el("p", "muted", "No route, model or tag on these records.");
    var table = el("table", "heatmap");
    var hr = el("tr", null, el("th", null, "slice"), el("th", "n", "samples"));
    h.metrics.forEach(function (m) { hr.append(el("th", "n", m)); });
    table.append(el("thead", null, hr));
    var body = el("tbody");
    h.rows.forEach(function (row) {
      var tr = el("tr", null, el("td", "slice", el("span", "kind", row.kind), row.value), el("td", "n", row.samples));
      h.metrics.forEach(function (m) {
        var c = row.cells[m];
        var st = status(c.mean, data.thresholds[m], direction(data, m));
        var td = el("td", "cell " + st.replace(" ", "-"), c.mean === null ? "\u2013" : num(c.mean, 2), el("small", null, c.n ? " n=" + c.n : ""));
        td.title = m + " on " + row.kind + " " + row.value + ": " + num(c.mean) + " over " + c.n + " samples";
        tr.append(td);
      });
      body.append(tr);
    });
    table.append(body);
    return table;
  }

  function highlighted(answer, claims) {
    var p = el("p", "answer");
    p.append(el("span", "label", "A "));
    if (!answer) { p.append(el("span", "muted", "(no answer stored)")); return p; }
    var ranges = claims.filter(function (c) {
      // only offsets that point at the claim's own text: a judge that paraphrases gets a list, not a wrong span
      return c.start !== null && c.end !== null && c.end > c.start && answer.slice(c.start, c.end) === c.text;
    }).sort(function (a, b) { return a.start - b.start; });
    var at = 0;
    ranges.forEach(function (c) {
      if (c.start < at) return;  // overlapping claims: the first one keeps its span
      if (c.start > at) p.append(document.createTextNode(answer.slice(at, c.start)));
      var mark = el("mark", "claim " + c.verdict.toLowerCase(), answer.slice(c.start, c.end));
      mark.title = c.verdict + (c.chunk_id ? " \u00b7 checked against " + c.chunk_id : "");
      p.append(mark);
      at = c.end;
    });
    if (at < answer.length) p.append(document.createTextNode(answer.slice(at)));
    return p;
  }

  function traceRef(w) {
    if (!w.trace_id) return null;
    var span = el("span", "trace", "trace ");
    var link = w.trace_link;
    if (link && /^https?:\/\//i.test(link)) {
      var a = el("a", null, el("code", null, w.trace_id));
      a.href = link;
      a.target = "_blank";
      a.rel = "noopener noreferrer";
      span.append(a);
    } else {
      span.append(el("code", null, w.trace_id));
    }
    return span;
  }

  // -- operator feedback: buttons on a card, POSTed to <page>/feedback with the page's token in an
  // Authorization header (never a cookie, never ?token=: the server refuses writes authorised any other way).
  // Shown only when the server accepts feedback (config.feedback) and the page was opened with its token.
  function operatorToken() {
    return state.feedback ? query().get("token") : null;
  }

  function feedbackButton(label, body, box) {
    var key = JSON.stringify(body);
    var b = el("button", "fb" + (state.sent[key] ? " sent" : ""), state.sent[key] ? "\u2713 " + label : label);
    b.type = "button";
    b.style.cssText = "font-size: 11px; line-height: 1.2; padding: 0 4px; margin: 0 1px;";  // no taller than text
    b.title = body.chunk_id !== undefined ? "chunk " + body.chunk_id + " was " + (body.chunk_relevant ? "" : "not ") + "relevant to the question"
      : body.golden ? "add this question to the replay golden set"
      : "the judge's verdict on " + (body.claim !== undefined ? "this claim" : "this answer") + " was " + body.verdict;
    b.setAttribute("data-feedback", Object.keys(body).filter(function (k) { return k !== "sample_id"; }).join(" "));
    b.addEventListener("click", function () {
      var token = operatorToken();
      if (!token) return;
      b.disabled = true;
      fetch(location.pathname.replace(/\/+$/, "") + "/feedback", {
        method: "POST",
        cache: "no-store",
        credentials: "omit",
        headers: { "Authorization": "Bearer " + token, "Content-Type": "application/json" },
        body: key,
      }).then(function (r) {
        if (!r.ok) return r.text().then(function (t) { throw new Error("HTTP " + r.status + (t ? ": " + t.trim().slice(0, 120) : "")); });
        state.sent[key] = true;
        state.feedbackSent++;
        b.className = "fb sent";
        b.textContent = "\u2713 " + label;
        box.textContent = "saved";
      }).catch(function (e) {
        state.feedbackError = e.message;
        box.textContent = "not saved (" + e.message + ")";
      }).finally(function () { b.disabled = false; });
    });
    return b;
  }

  // the card's own buttons, on the line of its retrieved chunks: the page must stay short (issue 27)
  function feedbackBar(w, box) {
    var id = w.sample_id;
    return el("span", "feedback", " \u00b7 ", el("span", "label", "operator: judge was "),
      feedbackButton("right", { sample_id: id, verdict: "right" }, box),
      feedbackButton("wrong", { sample_id: id, verdict: "wrong" }, box), " \u00b7 ",
      feedbackButton("add to golden set", { sample_id: id, golden: true }, box), " ", box);
  }

  function sampleCard(group, data) {
    var w = group.sample;
    var th = data.thresholds[w.metric];
    var card = el("article", "sample");
    card.setAttribute("data-sample-id", w.sample_id);
    card.append(el("div", "sample-head",
      el("span", "score " + status(w.score, th, direction(data, w.metric)), num(w.score, 2)),
      el("span", "metric", w.metric),
      group.count > 1 ? el("span", "count", group.count + " samples asked this and failed") : null,
      w.diagnoses.map(function (d) { return el("span", "diag", d); }).reduce(function (f, n) { f.append(n); return f; }, document.createDocumentFragment()),
      w.route ? el("span", "tagline", "route " + w.route) : null,
      w.model ? el("span", "tagline", "model " + w.model) : null,
      el("span", "tagline", when(w.created_at)),
      traceRef(w),
      el("code", "sid", w.sample_id)));
    card.append(el("p", "question", el("span", "label", "Q "), w.question === null ? "(no question stored)" : w.question));
    card.append(highlighted(w.answer, w.claims));
    var operator = !!operatorToken();
    var saved = el("span", "fb-status muted");
    if (w.claims.length) {
      var list = el("ul", "claims");
      w.claims.forEach(function (c) {
        list.append(el("li", "claim-row " + c.verdict.toLowerCase(),
          operator ? el("span", "fb-claim",
            feedbackButton("right", { sample_id: w.sample_id, verdict: "right", claim: c.text }, saved),
            feedbackButton("wrong", { sample_id: w.sample_id, verdict: "wrong", claim: c.text }, saved)) : null,
          el("span", "verdict", c.verdict.toLowerCase()),
          el("span", "claim-text", c.text),
          c.evidence !== null || c.chunk_id !== null
            ? el("div", "evidence",
                el("span", "muted", "evidence from "), el("code", null, c.chunk_id === null ? "no chunk" : c.chunk_id),
                c.evidence !== null ? el("q", null, c.evidence) : null,
                c.rule ? el("span", "rule", "rule: " + c.rule) : null)
            : null));
      });
      card.append(list);
    }
    var chunks = w.chunks.length || operator ? el("div", "chunks", w.chunks.length ? el("span", "label", "retrieved ") : null) : null;
    if (w.chunks.length) {
      w.chunks.forEach(function (c, i) {
        var chip = el("span", "chunk" + (c.used ? " used" : ""), "#" + (i + 1) + " ", el("code", null, c.id),
          c.relevance === null ? null : el("span", "rel " + (c.relevance >= 0.5 ? "hi" : "lo"), " " + num(c.relevance, 2)));
        chip.title = (c.used ? "used by the answer \u00b7 " : "") + "relevance " + num(c.relevance, 2);
        if (operator) {
          chip.append(" ", feedbackButton("relevant", { sample_id: w.sample_id, chunk_id: c.id, chunk_relevant: true }, saved),
            feedbackButton("not", { sample_id: w.sample_id, chunk_id: c.id, chunk_relevant: false }, saved));
        }
        chunks.append(chip);
      });
    }
    if (operator) chunks.append(feedbackBar(w, saved));
    if (chunks) card.append(chunks);
    if (group.others.length) {
      card.append(el("p", "others muted", "also: " + group.others.slice(0, 4).map(function (o) {
        return o.sample_id + " (" + o.metric + " " + num(o.score, 2) + ")";
      }).join(", ") + (group.count - 1 > Math.min(4, group.others.length) ? ", \u2026" : "")));
    }
    return card;
  }

  function worstSection(data) {
    var groups = data.worst;
    var pages = Math.max(1, Math.ceil(groups.length / PAGE_SIZE));
    state.page = Math.min(state.page, pages - 1);
    var s = section("Worst samples", "past a threshold, one card per question (its worst sample), most frequent first");
    if (!groups.length) {
      s.append(el("p", "muted", "No sample is past a threshold."));
      return s;
    }
    var list = el("div", "cards");
    groups.slice(state.page * PAGE_SIZE, (state.page + 1) * PAGE_SIZE).forEach(function (g) { list.append(sampleCard(g, data)); });
    s.append(list);
    if (pages > 1) {
      var prev = el("button", null, "\u2190 previous");
      prev.type = "button";
      prev.name = "prev";
      prev.disabled = state.page === 0;
      var next = el("button", null, "next \u2192");
      next.type = "button";
      next.name = "next";
      next.disabled = state.page >= pages - 1;
      prev.addEventListener("click", function () { state.page--; render(state.data); });
      next.addEventListener("click", function () { state.page++; render(state.data); });
      s.append(el("div", "pager", prev, el("span", "muted", " page " + (state.page + 1) + " of " + pages + " (" + groups.length + " questions) "), next));
    }
    return s;
  }

  function section(title, note) {
    return el("section", null, el("h2", null, title, note ? el("span", "note", note) : null));
  }

  // -- the page -------------------------------------------------------------------------------------------
  function render(data) {
    var app = document.getElementById("app");
    var scrollY = window.scrollY;
    state.charts.forEach(function (c) { c.plot.destroy(); });
    state.charts = [];
    state.data = data;
    app.replaceChildren();
    header(data).forEach(function (n) { app.append(n); });
    app.append(nowPanel(data));
    if (state.live) app.append(controls(data));
    if (!data.samples) {
      app.append(el("p", "empty", "No scored samples in this range" + (state.live ? " \u2014 try a longer one." : ".")));
      state.rendered++;
      return;
    }
    var scores = section("Scores in this range", "\u2705 on the right side of the threshold (\u2265 a floor, \u2264 a ceiling) \u00b7 \u26a0\ufe0f within " +
      WARN_BAND + " past it \u00b7 \u274c further past");
    var ops = opsPanel(data);
    if (ops) scores.append(ops);
    scores.append(metricTable(data));
    if (data.look_first) {
      scores.append(el("p", "look-first", el("strong", null, "Look first at " + data.look_first + ": "), data.advice));
    }
    if ((data.judges || []).length) {
      scores.append(el("p", "judges", "scored by " + data.judges.map(function (j) {
        return j.name + " " + j.version + " (" + j.samples + ")";
      }).join(" \u00b7 ")));
    }
    (data.mixed_judges || []).forEach(function (name) {
      scores.append(el("p", "mixed-judges", "\u26a0\ufe0f " + name + " scored this window under more than one version " +
        "(weights, threshold or relevance offset changed): scores from either side of the change do not measure the same thing."));
    });
    app.append(scores);

    var merged = Object.keys(data.merged || {});
    var over = section("Over time", "mean per " + stepLabel(data.timeline.step) + "; red bands: degraded mode" +
      (data.sla ? " (" + data.sla.metric + (data.sla.direction === "max" ? " > " : " < ") + data.sla.threshold +
        " over the window, replayed from the scores)" : "") + "; dashed lines: changes (mode, judge, service version)" +
      (merged.length ? "; " + merged.map(function (m) { return m + " equals " + data.merged[m]; }).join(", ") + " on every sample: shown once" : ""));
    var grid = el("div", "grid");
    over.append(grid);
    app.append(over);
    var columns = (grid.clientWidth || 1100) >= 1100 ? 3 : 2;
    var width = chartWidth(grid, columns);
    data.heatmap.metrics.forEach(function (m) {
      if (data.timeline.series[m] && data.timeline.series[m].count.some(Boolean)) scoreChart(grid, data, m, width);
    });
    mixChart(grid, data, width);

    var slices = section("Where", "mean score per route, model and tag");
    slices.append(heatmap(data));
    app.append(slices);

    app.append(worstSection(data));
    window.scrollTo(0, scrollY);
    state.rendered++;
  }

  function config() {
    var node = document.getElementById("rw-config");
    return node ? JSON.parse(node.textContent) : {};
  }

  function liveStatus(text, bad) {
    var node = document.getElementById("live-status");
    if (!node) return;
    node.textContent = text;
    node.className = bad ? "bad" : "";
  }

  // before the first answer: a visible wait with its seconds; a failure: a visible error, with the retry
  function loading(started) {
    if (state.data) return;
    var app = document.getElementById("app");
    var s = ((Date.now() - started) / 1000).toFixed(0);
    app.replaceChildren(el("p", "loading", "Loading scores from " + location.pathname.replace(/\/+$/, "") + ".json \u2026 " + s + " s"));
  }

  function failed(e, cfg) {
    state.error = String(e);
    var text = "Could not load the scores (" + e.message + "); retrying every " + cfg.refresh + " s";
    liveStatus("live \u00b7 update failed (" + e.message + "), retrying", true);
    if (!state.data) {
      document.getElementById("app").replaceChildren(el("p", "load-error", text));
    }
  }

  // ``chosen``: this load follows the user's choice; a refresh's answer is not drawn while the user is
  // choosing (the controls would be drawn again, losing what is being typed or picked)
  function poll(cfg, chosen) {
    if (state.inflight) return;
    var url = location.pathname.replace(/\/+$/, "") + ".json" + location.search;  // range, filters, token
    var started = Date.now();
    var ticker = setInterval(function () { loading(started); }, 500);
    loading(started);
    var ctl = window.AbortController ? new AbortController() : null;
    var timer = ctl ? setTimeout(function () { ctl.abort(); }, FETCH_TIMEOUT_MS) : null;
    state.inflight = true;
    state.loads++;
    fetch(url, { cache: "no-store", signal: ctl ? ctl.signal : undefined })
      .then(function (r) {
        if (!r.ok) {
          return r.text().then(function (t) { throw new Error("HTTP " + r.status + (t ? ": " + t.trim().slice(0, 200) : "")); });
        }
        return r.json();
      })
      .then(function (data) {
        state.error = null;
        if (!chosen && state.data && choosing()) return;
        render(data);
        liveStatus("live \u00b7 updated " + when(Date.now() / 1000) + " \u00b7 every " + cfg.refresh + " s", false);
      })
      .catch(function (e) {
        failed(e.name === "AbortError" ? new Error("no answer in " + FETCH_TIMEOUT_MS / 1000 + " s") : e, cfg);
      })
      .finally(function () {
        clearInterval(ticker);
        if (timer) clearTimeout(timer);
        state.inflight = false;
        if (state.again) {
          state.again = false;
          poll(cfg, true);
        }
      });
  }

  function start() {
    var cfg = config();
    state.live = !!cfg.live;
    state.feedback = !!(cfg.live && cfg.feedback);
    var resize = null;
    window.addEventListener("resize", function () {
      clearTimeout(resize);
      resize = setTimeout(function () { if (state.data) render(state.data); }, 200);
    });
    if (cfg.live) {
      poll(cfg);
      setInterval(function () {
        if (choosing()) return;  // never redraw under a filter being typed
        poll(cfg);
      }, Math.max(1, cfg.refresh) * 1000);
    } else {
      render(JSON.parse(document.getElementById("rw-data").textContent));
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
