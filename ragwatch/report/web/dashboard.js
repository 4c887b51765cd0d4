/* ragwatch dashboard: draws the view data (ragwatch/view.py) with uPlot.
 *
 * One file for both views: the static HTML report carries its data in <script type="application/json"
 * id="rw-data">; the live page fetches "<its own path>.json" every few seconds. All user text (questions,
 * answers, claims, chunk ids, routes, models, tags) reaches the page through text nodes only: nothing here
 * sets innerHTML, href or src, so planted markup shows as the characters it is made of.
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
  var DIAG_ORDER = ["healthy", "off_topic", "hallucination", "noisy_retrieval", "retrieval_miss", "unknown"];
  var ICON = { ok: "\u2705", warn: "\u26a0\ufe0f", fail: "\u274c", "no data": "\u2013" };
  var WARN_BAND = 0.05;

  var state = { charts: [], data: null, rendered: 0, error: null };
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

  function delta(x) {
    return x === null || x === undefined ? "\u2013" : (x >= 0 ? "+" : "") + Number(x).toFixed(3);
  }

  function pad(n) {
    return (n < 10 ? "0" : "") + n;
  }

  function when(t) {
    if (t === null || t === undefined) return "\u2013";
    var d = new Date(t * 1000);
    return (
      d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds())
    );
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

  function chartWidth(container, columns) {
    var w = container.clientWidth || 1100;
    return Math.max(280, Math.floor((w - (columns - 1) * 16) / columns) - 12);  // minus the frame: padding + border
  }

  function scoreChart(host, data, metric, width) {
    var s = data.timeline.series[metric];
    var t = xs(data);
    var threshold = data.thresholds[metric];
    var series = [
      {},
      {
        label: "samples / " + stepLabel(data.timeline.step),
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
    var opts = {
      width: width,
      height: 210,
      title: metric,
      scales: {
        x: { time: true, range: xRange(data) },
        y: { range: [0, 1] },
        n: { range: function (u, min, max) { return [0, Math.max(1, max) * 3]; } },
      },
      axes: [
        { stroke: "#475569" },
        { scale: "y", stroke: "#475569", size: 52 },
        { scale: "n", side: 1, stroke: "#94a3b8", grid: { show: false }, size: 36 },
      ],
      series: series,
      hooks: { drawClear: [shade(data.degraded_periods || [])] },
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
    var series = [{}];
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
      height: 210,
      title: "diagnosis mix (share of scored samples)",
      scales: { x: { time: true, range: xRange(data) }, y: { range: [0, 100] } },
      axes: [{ stroke: "#475569" }, { stroke: "#475569", size: 52, values: function (u, vals) { return vals.map(function (v) { return v + "%"; }); } }],
      series: series,
      hooks: { drawClear: [shade(data.degraded_periods || [])] },
    };
    var wrap = el("div", "chart", null);
    wrap.setAttribute("data-metric", "diagnosis_mix");
    host.append(wrap);
    var u = new uPlot(opts, columns, wrap);
    state.charts.push({ name: "diagnosis_mix", kind: "mix", points: totals.filter(Boolean).length, plot: u });
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
    var facts = el(
      "p", "facts",
      data.samples + " scored samples",
      data.first_at ? " \u00b7 " + when(data.first_at) + " \u2192 " + when(data.last_at) : "",
      " \u00b7 generated " + when(data.generated_at),
      data.source ? " \u00b7 from " + data.source : "",
      data.previous_at ? " \u00b7 \u0394 against " + when(data.previous_at) : ""
    );
    var out = [head, facts];
    var judges = data.judges || [];
    if (judges.length) {
      out.push(el("p", "judges", "scored by " + judges.map(function (j) {
        return j.name + " " + j.version + " (" + j.samples + ")";
      }).join(" \u00b7 ")));
    }
    (data.mixed_judges || []).forEach(function (name) {
      out.push(el("p", "mixed-judges", "\u26a0\ufe0f " + name + " scored this window under more than one version " +
        "(weights, threshold or relevance offset changed): scores from either side of the change do not measure the same thing."));
    });
    if (mode && mode.degraded && mode.reason) out.push(el("p", "reason", "Degraded since " + when(mode.since) + ": " + mode.reason));
    if (data.look_first) {
      out.push(el("p", "look-first", el("strong", null, "Look first at " + data.look_first + ": "), data.advice));
    }
    return out;
  }

  function metricTable(data) {
    var table = el("table", "metrics");
    table.append(el("thead", null, el("tr", null, el("th", null, "metric"), el("th", "n", "samples"), el("th", "n", "mean"),
      el("th", "n", "std"), el("th", "n", "\u0394"), el("th", "n", "threshold"), el("th", null, "status"))));
    var body = el("tbody");
    data.metrics.forEach(function (r) {
      var tr = el("tr", "status-" + r.status.replace(" ", "-"),
        el("td", null, r.metric), el("td", "n", r.samples), el("td", "n", num(r.mean)), el("td", "n", num(r.std)),
        el("td", "n", delta(r.delta)), el("td", "n", r.threshold === null ? "\u2013" : bound(r.direction) + num(r.threshold)),
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

  function sampleCard(w, data) {
    var th = data.thresholds[w.metric];
    var card = el("article", "sample");
    card.setAttribute("data-sample-id", w.sample_id);
    card.append(el("div", "sample-head",
      el("span", "score " + status(w.score, th, direction(data, w.metric)), num(w.score, 2)),
      el("span", "metric", w.metric),
      w.diagnosis ? el("span", "diag", w.diagnosis) : null,
      w.route ? el("span", "tagline", "route " + w.route) : null,
      w.model ? el("span", "tagline", "model " + w.model) : null,
      el("span", "tagline", when(w.created_at)),
      el("code", "sid", w.sample_id)));
    card.append(el("p", "question", el("span", "label", "Q "), w.question === null ? "(no question stored)" : w.question));
    card.append(highlighted(w.answer, w.claims));
    if (w.claims.length) {
      var list = el("ul", "claims");
      w.claims.forEach(function (c) {
        list.append(el("li", "claim-row " + c.verdict.toLowerCase(),
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
    if (w.chunks.length) {
      var chunks = el("div", "chunks", el("span", "label", "retrieved "));
      w.chunks.forEach(function (c, i) {
        var chip = el("span", "chunk" + (c.used ? " used" : ""), "#" + (i + 1) + " ", el("code", null, c.id),
          c.relevance === null ? null : el("span", "rel " + (c.relevance >= 0.5 ? "hi" : "lo"), " " + num(c.relevance, 2)));
        chip.title = (c.used ? "used by the answer \u00b7 " : "") + "relevance " + num(c.relevance, 2);
        chunks.append(chip);
      });
      card.append(chunks);
    }
    return card;
  }

  function section(title, note) {
    var s = el("section", null, el("h2", null, title, note ? el("span", "note", note) : null));
    return s;
  }

  // -- the page -------------------------------------------------------------------------------------------
  function render(data) {
    var app = document.getElementById("app");
    state.charts.forEach(function (c) { c.plot.destroy(); });
    state.charts = [];
    state.data = data;
    app.replaceChildren();
    header(data).forEach(function (n) { app.append(n); });
    if (!data.samples) {
      app.append(el("p", "empty", "No scored samples in this source yet."));
      state.rendered++;
      return;
    }
    var scores = section("Scores", "\u2705 on the right side of the threshold (\u2265 a floor, \u2264 a ceiling) \u00b7 \u26a0\ufe0f within " +
      WARN_BAND + " past it \u00b7 \u274c further past");
    scores.append(metricTable(data));
    app.append(scores);

    var over = section("Over time", "mean per " + stepLabel(data.timeline.step) + "; red bands: degraded mode" +
      (data.sla ? " (" + data.sla.metric + (data.sla.direction === "max" ? " > " : " < ") + data.sla.threshold +
        " over the window, replayed from the scores)" : ""));
    var grid = el("div", "grid");
    over.append(grid);
    app.append(over);
    var width = chartWidth(grid, 2);
    data.heatmap.metrics.forEach(function (m) {
      if (data.timeline.series[m] && data.timeline.series[m].count.some(Boolean)) scoreChart(grid, data, m, width);
    });
    mixChart(grid, data, width);

    var slices = section("Where", "mean score per route, model and tag");
    slices.append(heatmap(data));
    app.append(slices);

    var worst = section("Worst samples", "scores past their threshold, per metric, worst first");
    if (!data.worst.length) worst.append(el("p", "muted", "No sample is past a threshold."));
    data.worst.forEach(function (w) { worst.append(sampleCard(w, data)); });
    app.append(worst);
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

  function poll(cfg) {
    var url = location.pathname.replace(/\/+$/, "") + ".json";
    fetch(url, { cache: "no-store" })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .then(function (data) {
        state.error = null;
        render(data);
        liveStatus("live \u00b7 updated " + when(Date.now() / 1000) + " \u00b7 every " + cfg.refresh + " s", false);
      })
      .catch(function (e) {
        state.error = String(e);
        liveStatus("live \u00b7 update failed (" + e.message + "), retrying", true);
      });
  }

  function start() {
    var cfg = config();
    var resize = null;
    window.addEventListener("resize", function () {
      clearTimeout(resize);
      resize = setTimeout(function () { if (state.data) render(state.data); }, 200);
    });
    if (cfg.live) {
      poll(cfg);
      setInterval(function () { poll(cfg); }, Math.max(1, cfg.refresh) * 1000);
    } else {
      render(JSON.parse(document.getElementById("rw-data").textContent));
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
