// swept dashboard, charts (d3 v3, Debian's libjs-d3): learning curves,
// parallel coordinates, metric against each parameter, optimisation history
// and parameter importance. Each draw function replaces a container's
// content with its chart, sized to the container; user text goes in as
// d3's .text() only. Loaded after util.js.
(function (swept) {
  'use strict';

  var el = swept.el, fmt = swept.fmt;

  var color = d3.scale.category10();

  function chartFrame(container, margin) {
    container.replaceChildren();
    var w = Math.max(container.clientWidth, 200), h = Math.max(container.clientHeight, 120);
    var svg = d3.select(container).append('svg').attr('viewBox', '0 0 ' + w + ' ' + h)
      .attr('preserveAspectRatio', 'none');
    var g = svg.append('g').attr('transform', 'translate(' + margin.left + ',' + margin.top + ')');
    return { svg: svg, g: g, width: w - margin.left - margin.right, height: h - margin.top - margin.bottom };
  }

  function emptyChart(container, text) {
    container.replaceChildren(el('div', { className: 'empty', text: text }));
  }

  // Tick labels: short numbers ("100", "0.002"), long text cut with an ellipsis.
  function tickNumber(v) { return String(Number(Number(v).toPrecision(4))); }
  function shorten(text, n) { text = String(text); return text.length > n ? text.slice(0, n - 1) + '…' : text; }

  function extent(values) {
    var e = d3.extent(values.filter(function (v) { return v !== null && isFinite(v); }));
    if (e[0] === undefined) return [0, 1];
    if (e[0] === e[1]) return [e[0] - 1, e[1] + 1];
    return e;
  }

  // Lines: series = [{label, steps[], values[], stopped?: {step, reason}}]. A
  // series with `stopped` (an early-stopped trial) gets a mark (class
  // stop-mark) at the last point at or before that step. Returns the frame,
  // its scales and the colour of each label, for marks drawn on top
  // (pbt.js), or nothing when there was nothing to draw.
  function drawLines(container, series, yLabel) {
    series = series.filter(function (s) { return s.steps.length > 0; });
    if (!series.length) return emptyChart(container, 'no metric values yet');
    var f = chartFrame(container, { top: 10, right: series.length > 1 ? 90 : 16, bottom: 28, left: 56 });
    var xs = [], ys = [];
    series.forEach(function (s) { xs = xs.concat(s.steps); ys = ys.concat(s.values); });
    var x = d3.scale.linear().domain(extent(xs)).range([0, f.width]);
    var y = d3.scale.linear().domain(extent(ys)).nice().range([f.height, 0]);
    f.g.append('g').attr('class', 'axis').attr('transform', 'translate(0,' + f.height + ')')
      .call(d3.svg.axis().scale(x).orient('bottom').ticks(6));
    f.g.append('g').attr('class', 'axis').call(d3.svg.axis().scale(y).orient('left').ticks(5));
    f.g.append('text').attr('class', 'legend').attr('x', 4).attr('y', 10).text(shorten(yLabel || '', 60));
    var line = d3.svg.line().defined(function (d) { return d[1] !== null; })
      .x(function (d) { return x(d[0]); }).y(function (d) { return y(d[1]); });
    series.forEach(function (s, i) {
      var pts = s.steps.map(function (st, k) { return [st, s.values[k]]; });
      f.g.append('path').attr('class', 'line').attr('d', line(pts)).style('stroke', color(s.label));
      if (s.stopped) {
        var at = null;
        pts.forEach(function (p) { if (p[0] <= s.stopped.step && p[1] !== null) at = p; });
        if (at) {
          f.g.append('path').attr('class', 'stop-mark').attr('data-trial', s.label)
            .attr('d', d3.svg.symbol().type('cross').size(70)())
            .attr('transform', 'translate(' + x(at[0]) + ',' + y(at[1]) + ') rotate(45)')
            .style('stroke', color(s.label))
            .append('title').text(s.label + ' early-stopped at step ' + s.stopped.step + ': ' + s.stopped.reason);
        }
      }
      if (series.length > 1) {
        f.g.append('text').attr('class', 'legend').attr('x', f.width + 8).attr('y', 12 + i * 15)
          .style('fill', color(s.label)).text(shorten(s.label, 18));
      }
    });
    return { frame: f, x: x, y: y, color: color };
  }

  // A point of /points that violates a constraint (docs/api.md): drawn apart,
  // hollow or dashed grey, never coloured as good nor marked best.
  function infeasible(t) { return t.feasible === false; }
  function pointTitle(t, name, value) {
    return '#' + t.id + ' ' + name + '=' + fmt(value) + (infeasible(t) ? ' (infeasible: violates ' + t.violated.join(', ') + ')' : '');
  }

  // Parallel coordinates over params + metric; numeric axes linear, others ordinal.
  function drawParallel(container, data, bestId) {
    var points = data.points;
    if (!points.length) return emptyChart(container, 'no trials with a metric value yet');
    var metricName = data.metric.name || 'metric';
    var dims = data.params.map(function (p) { return { key: p, get: function (t) { return t.params[p]; } }; });
    dims.push({ key: metricName, get: function (t) { return t.metric_value; }, metric: true });
    var f = chartFrame(container, { top: 24, right: 40, bottom: 12, left: 70 });
    var x = d3.scale.ordinal().domain(dims.map(function (d, i) { return i; })).rangePoints([0, f.width]);
    dims.forEach(function (d) {
      var vals = points.map(d.get);
      var numeric = vals.every(function (v) { return typeof v === 'number' || v === undefined || v === null; });
      if (numeric) {
        d.scale = d3.scale.linear().domain(extent(vals)).range([f.height, 0]);
      } else {
        var cats = [];
        vals.forEach(function (v) { var k = fmt(v); if (cats.indexOf(k) < 0) cats.push(k); });
        cats.sort();
        d.scale = d3.scale.ordinal().domain(cats).rangePoints([f.height, 0], 0.5);
        d.cat = true;
      }
    });
    // The colour scale spans the feasible trials only: an infeasible trial's
    // better value must not read as the best colour.
    var feasible = points.filter(function (t) { return !infeasible(t); });
    var mvals = (feasible.length ? feasible : points).map(function (t) { return t.metric_value; });
    var goodHigh = data.metric.goal === 'maximize';
    var c = d3.scale.linear().domain(extent(mvals)).range(goodHigh ? ['#c7d2fe', '#1e3a8a'] : ['#1e3a8a', '#c7d2fe']);
    var line = d3.svg.line();
    function path(t) {
      return line(dims.map(function (d, i) {
        var v = d.get(t);
        var yv = d.cat ? d.scale(fmt(v)) : (v === null || v === undefined ? f.height : d.scale(v));
        return [x(i), yv];
      }));
    }
    // Infeasible lines first (underneath), the best last (on top).
    var rank = function (t) { return t.id === bestId ? 2 : infeasible(t) ? 0 : 1; };
    var sorted = points.slice().sort(function (a, b) { return rank(a) - rank(b); });
    f.g.selectAll('path.pc-line').data(sorted).enter().append('path')
      .attr('class', function (t) { return 'pc-line' + (t.id === bestId ? ' best' : '') + (infeasible(t) ? ' infeasible' : ''); })
      .attr('data-trial-id', function (t) { return t.id; })
      .attr('d', path).style('stroke', function (t) { return infeasible(t) ? null : c(t.metric_value); })
      .append('title').text(function (t) { return pointTitle(t, metricName, t.metric_value); });
    dims.forEach(function (d, i) {
      var ax = d3.svg.axis().scale(d.scale).orient('left').ticks(5)
        .tickFormat(d.cat ? function (v) { return shorten(v, 14); } : tickNumber);
      var axis = f.g.append('g').attr('class', 'axis').attr('transform', 'translate(' + x(i) + ',0)').call(ax);
      axis.append('text').attr('y', -10).attr('text-anchor', i === 0 ? 'start' : i === dims.length - 1 ? 'end' : 'middle')
        .style('font-weight', d.metric ? 700 : 400).text(shorten(d.key, 28)).append('title').text(d.key);
    });
  }

  // Metric vs one parameter.
  function drawScatter(container, data, param, bestId) {
    var pts = data.points.filter(function (t) { return t.params[param] !== undefined && t.metric_value !== null; });
    if (!pts.length) return emptyChart(container, 'no values');
    var f = chartFrame(container, { top: 18, right: 12, bottom: 28, left: 52 });
    var vals = pts.map(function (t) { return t.params[param]; });
    var numeric = vals.every(function (v) { return typeof v === 'number'; });
    var x;
    if (numeric) {
      var e = extent(vals);
      var logScale = e[0] > 0 && e[1] / e[0] >= 100;
      x = (logScale ? d3.scale.log() : d3.scale.linear()).domain(e).range([0, f.width]);
      if (!logScale) x.nice();
    } else {
      var cats = [];
      vals.forEach(function (v) { var k = fmt(v); if (cats.indexOf(k) < 0) cats.push(k); });
      cats.sort();
      x = d3.scale.ordinal().domain(cats).rangePoints([0, f.width], 0.5);
    }
    var y = d3.scale.linear().domain(extent(pts.map(function (t) { return t.metric_value; }))).nice().range([f.height, 0]);
    var xAxis = d3.svg.axis().scale(x).orient('bottom').ticks(5);
    if (!numeric) xAxis.tickFormat(function (v) { return shorten(v, 12); });
    else if (x.base) xAxis.tickFormat(function (v) { var l = Math.log(v) / Math.LN10; return Math.abs(l - Math.round(l)) < 1e-9 ? tickNumber(v) : ''; });
    else xAxis.tickFormat(tickNumber);
    f.g.append('g').attr('class', 'axis').attr('transform', 'translate(0,' + f.height + ')').call(xAxis);
    f.g.append('g').attr('class', 'axis').call(d3.svg.axis().scale(y).orient('left').ticks(4));
    f.g.append('text').attr('class', 'legend').attr('x', 4).attr('y', -6).text(shorten(param, 40)).append('title').text(param);
    f.g.selectAll('circle').data(pts).enter().append('circle')
      .attr('class', function (t) { return 'dot' + (t.id === bestId ? ' best' : '') + (infeasible(t) ? ' infeasible' : ''); })
      .attr('data-trial-id', function (t) { return t.id; })
      .attr('r', function (t) { return t.id === bestId ? 5 : 3; })
      .attr('cx', function (t) { return numeric ? x(t.params[param]) : x(fmt(t.params[param])); })
      .attr('cy', function (t) { return y(t.metric_value); })
      .style('fill', function (t) { return infeasible(t) ? null : '#2563eb'; })
      .append('title').text(function (t) { return pointTitle(t, param + '=' + fmt(t.params[param]) + ' → metric', t.metric_value); });
  }

  // Optimisation history (GET /api/sweeps/ID/history): each trial's value as a
  // dot and the best value so far as a staircase, against the trial's index
  // (mode 'index') or the time it ended, in seconds since the sweep started
  // (mode 'time'). The best values come from the server (the one definition
  // of best, over every trial even when the points are a sample).
  function drawHistory(container, data, mode, bestId) {
    var byTime = mode === 'time';
    var pts = data.points.filter(function (p) { return p.value !== null && (!byTime || p.ended_at !== null); });
    if (!data.metric.name) return emptyChart(container, 'the sweep names no metric');
    if (!pts.length) return emptyChart(container, 'no completed trial has reported ' + data.metric.name + ' yet');
    var xOf = byTime ? function (p) { return p.ended_at - data.created_at; } : function (p) { return p.index; };
    var bestOf = byTime ? function (p) { return p.best_by_time; } : function (p) { return p.best_by_index; };
    pts = pts.slice().sort(function (a, b) { return xOf(a) - xOf(b) || a.trial_id - b.trial_id; });
    var f = chartFrame(container, { top: 14, right: 16, bottom: 30, left: 56 });
    var x = d3.scale.linear().domain(extent(pts.map(xOf))).range([0, f.width]);
    var y = d3.scale.linear().domain(extent(pts.map(function (p) { return p.value; }))).nice().range([f.height, 0]);
    f.g.append('g').attr('class', 'axis').attr('transform', 'translate(0,' + f.height + ')')
      .call(d3.svg.axis().scale(x).orient('bottom').ticks(6).tickFormat(tickNumber));
    f.g.append('g').attr('class', 'axis').call(d3.svg.axis().scale(y).orient('left').ticks(5));
    f.g.append('text').attr('class', 'legend hist-xlabel').attr('x', f.width).attr('y', 0).attr('text-anchor', 'end')
      .text(byTime ? 'seconds since the sweep started' : 'trial index');
    f.g.append('text').attr('class', 'legend').attr('x', 4).attr('y', 0)
      .text(shorten(data.metric.name + ' (' + (data.metric.goal || 'minimize') + '): best so far and each trial', 80));
    var line = d3.svg.line().interpolate('step-after')
      .x(function (p) { return x(xOf(p)); }).y(function (p) { return y(bestOf(p)); });
    f.g.append('path').attr('class', 'line hist-best').attr('d', line(pts)).style('stroke', '#e0a800');
    f.g.selectAll('circle').data(pts).enter().append('circle')
      .attr('class', function (p) { return 'dot hist-dot' + (p.trial_id === bestId ? ' best' : ''); })
      .attr('r', function (p) { return p.trial_id === bestId ? 5 : 3; })
      .attr('cx', function (p) { return x(xOf(p)); })
      .attr('cy', function (p) { return y(p.value); })
      .style('fill', '#2563eb')
      .append('title').text(function (p) {
        return '#' + p.trial_id + ' [' + p.index + '] ' + data.metric.name + '=' + fmt(p.value) + ', best so far ' + fmt(bestOf(p));
      });
  }

  function drawImportance(container, report) {
    var params = report.params.filter(function (p) { return p.trials > 0; });
    if (!params.length) return emptyChart(container, 'needs trials with a metric value');
    var f = chartFrame(container, { top: 6, right: 50, bottom: 6, left: 130 });
    var y = d3.scale.ordinal().domain(params.map(function (p) { return p.name; })).rangeBands([0, Math.min(f.height, params.length * 28)], 0.25);
    var x = d3.scale.linear().domain([0, 1]).range([0, f.width]);
    var rows = f.g.selectAll('g.row').data(params).enter().append('g')
      .attr('transform', function (p) { return 'translate(0,' + y(p.name) + ')'; });
    rows.append('rect').attr('class', 'bar').attr('height', y.rangeBand()).attr('width', function (p) { return Math.max(1, x(p.eta_squared)); });
    rows.append('text').attr('class', 'legend').attr('x', -6).attr('y', y.rangeBand() / 2 + 4).attr('text-anchor', 'end')
      .text(function (p) { return p.name.length > 20 ? p.name.slice(0, 19) + '…' : p.name; })
      .append('title').text(function (p) { return p.name; });
    rows.append('text').attr('class', 'legend').attr('x', function (p) { return x(p.eta_squared) + 4; })
      .attr('y', y.rangeBand() / 2 + 4).text(function (p) { return 'η² ' + p.eta_squared.toFixed(2); });
  }

  // Shared with front.js (the charts of several objectives).
  swept.chartFrame = chartFrame;
  swept.extent = extent;
  swept.tickNumber = tickNumber;
  swept.shorten = shorten;
  swept.emptyChart = emptyChart;
  swept.drawLines = drawLines;
  swept.drawParallel = drawParallel;
  swept.drawScatter = drawScatter;
  swept.drawHistory = drawHistory;
  swept.drawImportance = drawImportance;
})(window.swept);
