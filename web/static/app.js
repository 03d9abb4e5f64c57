// swept dashboard: renders the views from the JSON API (docs/api.md) with d3
// (Debian's libjs-d3, version 3) and follows live changes over Server-Sent
// Events (/api/events).
//
// Invariants:
// - Text that comes from users (sweep, parameter and metric names, values,
//   logs, agent names) reaches the page only through textContent (el(), d3's
//   .text()) or attribute values, never as HTML.
// - A view owns its DOM under #view; navigating replaces it and drops the
//   view's state, so a page left open for hours holds one view's data only.
// - Refreshes triggered by live events are throttled (one per second per
//   view) and replace content in place inside fixed-size boxes.
(function () {
  'use strict';

  // The states of trials, sweeps and agents come from the server's tables
  // (GET /api/info: trial_states, sweep_states, agent_states, built from
  // common/states.h). This file spells no state's name: it acts on the
  // tables' flags (`final`) and shows each state in its `tone`, the class
  // `tone-NAME` that app.css styles (app.css names no state either).
  var STATES = [];        // trial state names, in display order
  var STATE_LABELS = {};  // trial state name -> label shown to people
  var TRIAL_FINAL = {};   // trial state name -> true when it will not run again
  var SWEEP_FINAL = {};   // sweep state name -> true when the sweep is over
  // kind ('trial', 'sweep', 'agent') -> state name -> tone. By kind, since a
  // name may be a state of two tables.
  var TONES = { trial: {}, sweep: {}, agent: {} };
  var PAGE_SIZE = 50;
  var info = { cancel: false };
  var current = null; // the active view: { onChange(event), dispose() }

  // ---- small helpers -------------------------------------------------------

  // Creates an element; `attrs` values become attributes (or properties for
  // 'text' / 'className' / 'on*'); children are nodes or strings (as text).
  function el(tag, attrs) {
    var node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        var v = attrs[k];
        if (v === undefined || v === null) return;
        if (k === 'text') node.textContent = String(v);
        else if (k === 'className') node.className = v;
        else if (k.indexOf('on') === 0) node.addEventListener(k.slice(2), v);
        else node.setAttribute(k, String(v));
      });
    }
    for (var i = 2; i < arguments.length; i++) {
      var c = arguments[i];
      if (c === null || c === undefined) continue;
      node.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
    }
    return node;
  }

  function fmt(v) {
    if (v === null || v === undefined) return '—';
    if (typeof v === 'number') {
      if (Number.isInteger(v)) return String(v);
      var a = Math.abs(v);
      if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(3);
      return String(Number(v.toPrecision(5)));
    }
    if (typeof v === 'string') return v;
    return JSON.stringify(v);
  }

  function fmtTime(t) {
    if (!t) return '—';
    return new Date(t * 1000).toLocaleString();
  }

  function fmtBytes(b) {
    if (!b) return '—';
    return (b / Math.pow(1024, 3)).toFixed(1) + ' GiB';
  }

  // The class of a `kind` state's badge: its tone's, or none for a state
  // the server's tables do not know.
  function toneClass(kind, state) {
    var tone = TONES[kind][state];
    return 'state' + (tone ? ' tone-' + tone : '');
  }

  function stateBadge(kind, state) {
    return el('span', { className: toneClass(kind, state),
      text: (kind === 'trial' && STATE_LABELS[state]) || state });
  }

  function trialLink(id) {
    return el('a', { href: '#/trials/' + Number(id), text: '#' + Number(id) });
  }

  function api(path) {
    return fetch(path, { credentials: 'same-origin', headers: { 'Accept': 'application/json' } }).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (body) {
        if (!r.ok) {
          var msg = body && body.error ? body.error.message : 'HTTP ' + r.status;
          throw new Error(msg);
        }
        return body;
      });
    });
  }

  function post(path) {
    return fetch(path, { method: 'POST', credentials: 'same-origin', headers: { 'X-Requested-With': 'swept' } })
      .then(function (r) {
        return r.json().catch(function () { return {}; }).then(function (body) {
          if (!r.ok) throw new Error(body && body.error ? body.error.message : 'HTTP ' + r.status);
          return body;
        });
      });
  }

  function showError(container, err) {
    container.replaceChildren(el('div', { className: 'error', text: 'Error: ' + err.message }));
  }

  // Calls fn at most once per `ms`, the last call winning.
  function throttle(fn, ms) {
    var timer = null, pending = false, last = 0;
    function run() {
      timer = null; pending = false; last = Date.now(); fn();
    }
    var wrapped = function () {
      if (timer) { pending = true; return; }
      var wait = Math.max(0, last + ms - Date.now());
      timer = setTimeout(run, wait);
    };
    wrapped.cancel = function () { if (timer) clearTimeout(timer); timer = null; };
    return wrapped;
  }

  function progressBar(counts) {
    var total = 0;
    STATES.forEach(function (s) { total += counts[s] || 0; });
    var bar = el('div', { className: 'progress', title: STATES.map(function (s) { return STATE_LABELS[s] + ' ' + (counts[s] || 0); }).join(', ') });
    STATES.forEach(function (s) {
      if (!total || !counts[s]) return;
      var span = el('span', { className: toneClass('trial', s) });
      span.style.width = (100 * counts[s] / total) + '%';
      bar.appendChild(span);
    });
    return bar;
  }

  // "3 completed · 1 running · 2 early-stopped": every state with trials.
  function countsText(counts) {
    var parts = [];
    STATES.forEach(function (s) { if (counts[s]) parts.push(counts[s] + ' ' + STATE_LABELS[s]); });
    return parts.length ? parts.join(' · ') : 'no trials yet';
  }

  // ---- charts (d3 v3) --------------------------------------------------------

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
  // stop-mark) at the last point at or before that step.
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
    var mvals = points.map(function (t) { return t.metric_value; });
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
    var sorted = points.slice().sort(function (a, b) { return (a.id === bestId) - (b.id === bestId); });
    f.g.selectAll('path.pc-line').data(sorted).enter().append('path')
      .attr('class', function (t) { return 'pc-line' + (t.id === bestId ? ' best' : ''); })
      .attr('d', path).style('stroke', function (t) { return c(t.metric_value); })
      .append('title').text(function (t) { return '#' + t.id + ' ' + metricName + '=' + fmt(t.metric_value); });
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
      .attr('class', function (t) { return 'dot' + (t.id === bestId ? ' best' : ''); })
      .attr('r', function (t) { return t.id === bestId ? 5 : 3; })
      .attr('cx', function (t) { return numeric ? x(t.params[param]) : x(fmt(t.params[param])); })
      .attr('cy', function (t) { return y(t.metric_value); })
      .style('fill', '#2563eb')
      .append('title').text(function (t) { return '#' + t.id + ' ' + param + '=' + fmt(t.params[param]) + ' → ' + fmt(t.metric_value); });
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

  // ---- views -----------------------------------------------------------------

  function sweepsView(root) {
    var table = el('table');
    var wrap = el('div', { className: 'panel table-wrap' }, table);
    root.replaceChildren(el('h1', { text: 'Sweeps' }), wrap);
    function render(sweeps) {
      var head = el('tr', null, el('th', { text: 'id' }), el('th', { text: 'name' }), el('th', { text: 'method' }),
        el('th', { text: 'metric' }), el('th', { text: 'state' }), el('th', { text: 'progress' }),
        el('th', { text: 'trials' }), el('th', { text: 'best' }));
      var rows = [el('thead', null, head)];
      var body = el('tbody');
      if (!sweeps.length) {
        body.appendChild(el('tr', null, el('td', { colspan: 8, className: 'muted', text: 'No sweeps yet: submit one with swept submit or swept run.' })));
      }
      sweeps.forEach(function (s) {
        var best = s.best ? el('span', null, fmt(s.best.value) + ' ', trialLink(s.best.trial_id)) :
          s.metric_missing ? el('span', { className: 'warning-text', text: 'never reported', title: metricMissingText(s) }) : '—';
        body.appendChild(el('tr', { 'data-sweep-id': s.id },
          el('td', null, el('a', { href: '#/sweeps/' + Number(s.id), text: String(s.id) })),
          el('td', null, el('a', { href: '#/sweeps/' + Number(s.id), text: s.name })),
          el('td', { text: s.method }),
          el('td', { text: s.metric.name ? s.metric.name + ' (' + (s.metric.goal || '') + ')' : '—' }),
          el('td', null, stateBadge('sweep', s.state)),
          el('td', null, progressBar(s.counts)),
          el('td', { className: 'muted counts', text: countsText(s.counts) + (s.total_trials !== null ? ' of ' + s.total_trials : '') }),
          el('td', null, best)));
      });
      rows.push(body);
      table.replaceChildren.apply(table, rows);
    }
    function load() { api('/api/sweeps').then(function (r) { render(r.sweeps); }).catch(function (e) { showError(wrap, e); }); }
    var refresh = throttle(load, 1000);
    load();
    return { onChange: function (ev) { if (ev.resync || ev.sweeps.length) refresh(); }, dispose: refresh.cancel };
  }

  // The warning for a sweep whose metric no trial reports (docs/api.md,
  // metric_missing), or null.
  function metricMissingText(s) {
    var m = s.metric_missing;
    if (!m) return null;
    return 'No trial has reported the metric ' + s.metric.name + ': ' + m.completed + ' completed trial' +
      (m.completed === 1 ? '' : 's') + ' reported ' + (m.reported.length ? m.reported.join(', ') : 'no metrics at all') +
      '. Check the sweep\'s metric.name against the trials\' metric lines (docs/metrics.md).';
  }

  function sweepView(root, sweepId) {
    var state = { sort: 'idx', order: 'asc', states: [], offset: 0, selected: null, metric: null, page: null, sweep: null,
      historyMode: 'index', history: null };
    var title = el('h1', { text: 'Sweep ' + sweepId });
    var summary = el('div', { className: 'summary' });
    var warning = el('div', { id: 'metric-warning', className: 'warning', role: 'alert', hidden: 'hidden' });
    var toolbar = el('div', { className: 'toolbar' });
    var curves = el('div', { className: 'chart', id: 'curves' });
    var importance = el('div', { className: 'chart' });
    var parallel = el('div', { className: 'chart tall', id: 'parallel' });
    var history = el('div', { className: 'chart', id: 'history' });
    var historyNote = el('div', { className: 'note' });
    var historyModes = el('span', { className: 'modes' });
    var scatters = el('div', { className: 'scatters' });
    var metricSelect = el('select', { 'aria-label': 'curve metric' });
    var importanceNote = el('div', { className: 'note' });
    var table = el('table', { id: 'trials' });
    var pager = el('div', { className: 'pager' });
    root.replaceChildren(
      el('div', null, el('a', { href: '#/', text: '← sweeps' })), title, summary, warning,
      el('div', { className: 'grid' },
        el('section', { className: 'panel' }, el('h2', null, 'Learning curves ', metricSelect), curves,
          el('div', { className: 'note', text: 'Tick trials in the table to compare them.' })),
        el('section', { className: 'panel' }, el('h2', { text: 'Parameter importance' }), importance, importanceNote),
        el('section', { className: 'panel wide' }, el('h2', null, 'Optimisation history ', historyModes), history, historyNote),
        el('section', { className: 'panel wide' }, el('h2', { text: 'Parallel coordinates' }), parallel),
        el('section', { className: 'panel wide' }, el('h2', { text: 'Metric vs each parameter' }), scatters)),
      el('section', { className: 'panel' }, toolbar, el('div', { className: 'table-wrap' }, table), pager));

    metricSelect.addEventListener('change', function () { state.metric = metricSelect.value; loadCurves(); });

    function renderSummary(s) {
      state.sweep = s;
      title.textContent = s.name + ' (sweep ' + s.id + ')';
      var items = [el('span', null, stateBadge('sweep', s.state)), el('span', null, 'method ', el('b', { text: s.method })),
        el('span', null, 'metric ', el('b', { text: s.metric.name ? s.metric.name + ' (' + s.metric.goal + ')' : '—' })),
        el('span', null, progressBar(s.counts)), el('span', { className: 'muted', text: countsText(s.counts) }),
        el('span', null, 'best ', el('b', { text: s.best ? fmt(s.best.value) : '—' }), ' ', s.best ? trialLink(s.best.trial_id) : '')];
      if (info.cancel && SWEEP_FINAL[s.state] === false) {
        items.push(el('button', { className: 'danger', text: 'Cancel sweep', onclick: function () {
          if (!window.confirm('Cancel sweep ' + s.id + ' and stop its running trials?')) return;
          post('/api/sweeps/' + Number(s.id) + '/cancel').then(loadAll).catch(function (e) { window.alert(e.message); });
        } }));
      }
      summary.replaceChildren.apply(summary, items);
      var missing = metricMissingText(s);
      warning.textContent = missing || '';
      warning.hidden = !missing;
    }

    function renderToolbar() {
      var chips = [el('span', { className: 'muted', text: 'state:' })];
      STATES.forEach(function (s) {
        var on = state.states.indexOf(s) >= 0;
        chips.push(el('button', { className: 'chip' + (on ? ' on' : ''), text: STATE_LABELS[s], 'data-state': s, onclick: function () {
          if (on) state.states.splice(state.states.indexOf(s), 1); else state.states.push(s);
          state.offset = 0; renderToolbar(); loadTable();
        } }));
      });
      toolbar.replaceChildren.apply(toolbar, chips);
    }

    function sortHeader(label, key, numeric) {
      var th = el('th', { className: 'sortable' + (state.sort === key ? ' sorted' + (state.order === 'desc' ? ' desc' : '') : ''),
        text: label, title: 'sort by ' + label, 'data-sort': key });
      th.addEventListener('click', function () {
        if (state.sort === key) state.order = state.order === 'asc' ? 'desc' : 'asc';
        else { state.sort = key; state.order = 'asc'; }
        state.offset = 0; loadTable();
      });
      if (numeric) th.classList.add('num');
      return th;
    }

    function renderTable(page) {
      state.page = page;
      if (state.selected === null) {
        // First load: compare the best trial and the first few of the page.
        state.selected = [];
        if (page.best_trial_id) state.selected.push(page.best_trial_id);
        page.trials.slice(0, 4).forEach(function (t) { if (state.selected.indexOf(t.id) < 0) state.selected.push(t.id); });
      }
      if (state.metric === null) {
        var sw = state.sweep && state.sweep.metric.name;
        state.metric = sw && page.columns.metrics.indexOf(sw) >= 0 ? sw : (page.columns.metrics[0] || '');
      }
      metricSelect.replaceChildren.apply(metricSelect, page.columns.metrics.map(function (m) {
        var o = el('option', { value: m, text: m });
        if (m === state.metric) o.selected = true;
        return o;
      }));
      var head = el('tr', null, el('th', { text: '' }), sortHeader('trial', 'idx', true), sortHeader('state', 'state'),
        sortHeader('agent', 'agent'), el('th', { text: 'gpus' }), sortHeader('attempts', 'attempts', true));
      page.columns.params.forEach(function (p) { head.appendChild(sortHeader(p, 'param:' + p, false)); });
      page.columns.metrics.forEach(function (m) { head.appendChild(sortHeader(m, 'metric:' + m, true)); });
      var body = el('tbody');
      page.trials.forEach(function (t) {
        var box = el('input', { type: 'checkbox', 'aria-label': 'compare trial ' + t.id });
        box.checked = state.selected.indexOf(t.id) >= 0;
        box.addEventListener('change', function () {
          var i = state.selected.indexOf(t.id);
          if (box.checked && i < 0) state.selected.push(t.id);
          if (!box.checked && i >= 0) state.selected.splice(i, 1);
          if (state.selected.length > 20) state.selected.shift();
          loadCurves();
        });
        var gpus = t.gpus.length ? t.gpus.join(',') + (t.gpu_fraction !== null ? ' (' + fmt(t.gpu_fraction) + ')' : '') : '—';
        var tr = el('tr', { 'data-trial-id': t.id, className: t.id === page.best_trial_id ? 'best' : '' },
          el('td', null, box), el('td', { className: 'num' }, trialLink(t.id), ' ', el('span', { className: 'muted', text: '[' + t.index + ']' })),
          el('td', null, stateBadge('trial', t.state)), el('td', { text: t.agent || '—' }), el('td', { text: gpus }),
          el('td', { className: 'num', text: String(t.attempts) }));
        page.columns.params.forEach(function (p) { tr.appendChild(el('td', { text: fmt(t.params[p]), title: fmt(t.params[p]) })); });
        page.columns.metrics.forEach(function (m) { tr.appendChild(el('td', { className: 'num', text: fmt(t.metrics[m]) })); });
        body.appendChild(tr);
      });
      if (!page.trials.length) body.appendChild(el('tr', null, el('td', { colspan: 6 + page.columns.params.length + page.columns.metrics.length, className: 'muted', text: 'No trials match.' })));
      table.replaceChildren(el('thead', null, head), body);
      var from = page.total ? page.offset + 1 : 0, to = page.offset + page.trials.length;
      pager.replaceChildren(
        el('button', { text: '← prev', disabled: page.offset === 0 ? 'disabled' : null, onclick: function () { state.offset = Math.max(0, state.offset - PAGE_SIZE); loadTable(); } }),
        el('span', { className: 'muted', text: from + '–' + to + ' of ' + page.total }),
        el('button', { text: 'next →', disabled: to >= page.total ? 'disabled' : null, onclick: function () { state.offset += PAGE_SIZE; loadTable(); } }));
    }

    function loadTable() {
      var q = '?limit=' + PAGE_SIZE + '&offset=' + state.offset + '&sort=' + encodeURIComponent(state.sort) + '&order=' + state.order;
      if (state.states.length) q += '&state=' + state.states.join(',');
      return api('/api/sweeps/' + sweepId + '/trials' + q).then(function (page) {
        renderTable(page);
        return loadCurves();
      }).catch(function (e) { showError(table, e); });
    }

    function loadCurves() {
      if (!state.selected || !state.selected.length || !state.metric) return emptyChart(curves, 'select trials with metrics');
      return api('/api/series?points=400&metric=' + encodeURIComponent(state.metric) + '&trials=' + state.selected.join(','))
        .then(function (r) {
          drawLines(curves, r.series.map(function (s) {
            return { label: '#' + s.trial_id, steps: s.steps, values: s.values, stopped: s.stopped };
          }), state.metric);
        }).catch(function (e) { showError(curves, e); });
    }

    function renderHistoryModes() {
      historyModes.replaceChildren.apply(historyModes, [['index', 'by trial'], ['time', 'by time']].map(function (m) {
        return el('button', { className: 'chip' + (state.historyMode === m[0] ? ' on' : ''), text: m[1], 'data-history-mode': m[0],
          onclick: function () { state.historyMode = m[0]; renderHistoryModes(); renderHistory(); } });
      }));
    }

    function renderHistory() {
      if (!state.history) return;
      var h = state.history;
      drawHistory(history, h, state.historyMode, h.best ? h.best.trial_id : null);
      historyNote.textContent = h.total + ' completed trial' + (h.total === 1 ? '' : 's') + ' with a value' +
        (h.stride > 1 ? ' (every ' + h.stride + 'th shown, and each that improved the best)' : '') + '.';
    }

    function loadCharts() {
      api('/api/sweeps/' + sweepId + '/history').then(function (h) { state.history = h; renderHistory(); })
        .catch(function (e) { showError(history, e); });
      var best = state.sweep && state.sweep.best ? state.sweep.best.trial_id : null;
      api('/api/sweeps/' + sweepId + '/points?limit=1000').then(function (data) {
        drawParallel(parallel, data, best);
        scatters.replaceChildren();
        data.params.forEach(function (p) {
          var box = el('div', { className: 'chart' });
          scatters.appendChild(box);
          drawScatter(box, data, p, best);
        });
        if (!data.params.length) scatters.appendChild(el('div', { className: 'muted', text: 'no parameters' }));
      }).catch(function (e) { showError(parallel, e); });
      api('/api/sweeps/' + sweepId + '/importance').then(function (r) {
        drawImportance(importance, r);
        importanceNote.textContent = 'Method: ' + r.method + '. Sampled ' + r.sampled + ' of ' + r.population + ' trials.';
      }).catch(function (e) { showError(importance, e); });
    }

    function loadAll() {
      return api('/api/sweeps/' + sweepId).then(function (s) {
        renderSummary(s);
        loadTable();
        loadCharts();
      }).catch(function (e) { showError(root, e); });
    }

    var refreshTable = throttle(function () {
      api('/api/sweeps/' + sweepId).then(renderSummary).catch(function () {});
      loadTable();
    }, 1000);
    var refreshCharts = throttle(loadCharts, 5000);
    renderToolbar();
    renderHistoryModes();
    loadAll();
    return {
      onChange: function (ev) {
        if (ev.resync) { refreshTable(); refreshCharts(); return; }
        var mine = ev.sweeps.some(function (s) { return s.id === sweepId; }) ||
          ev.running.concat(ev.finished).some(function (t) { return t.sweep_id === sweepId; });
        if (!mine) return;
        refreshTable();
        if (ev.finished.length || ev.sweeps.length) refreshCharts();
      },
      dispose: function () { refreshTable.cancel(); refreshCharts.cancel(); },
      resize: function () { loadCurves(); loadCharts(); }
    };
  }

  function trialView(root, trialId) {
    var body = el('div');
    root.replaceChildren(body);
    function render(t) {
      var kv = el('dl', { className: 'kv' });
      function row(k, v) { kv.appendChild(el('dt', { text: k })); kv.appendChild(el('dd', null, v)); }
      row('sweep', el('a', { href: '#/sweeps/' + Number(t.sweep_id), text: t.sweep_name }));
      row('state', stateBadge('trial', t.state));
      row('reason', t.reason || '—');
      row('exit code', t.exit_code === null ? '—' : String(t.exit_code));
      row('agent', t.agent || '—');
      row('GPUs', t.gpus.length ? t.gpus.join(', ') + (t.gpu_fraction !== null ? ' (share ' + fmt(t.gpu_fraction) + ')' : '') : 'none (CPU)');
      row('attempts', String(t.attempts));
      row('started', fmtTime(t.started_at));
      row('ended', fmtTime(t.ended_at));
      row('command', el('code', { text: t.command.join(' ') }));
      var params = el('table');
      params.appendChild(el('tr', null, el('th', { text: 'parameter' }), el('th', { text: 'value' })));
      Object.keys(t.params).forEach(function (k) { params.appendChild(el('tr', null, el('td', { text: k }), el('td', { text: fmt(t.params[k]) }))); });
      var metrics = el('table');
      metrics.appendChild(el('tr', null, el('th', { text: 'metric' }), el('th', { text: 'last value' })));
      Object.keys(t.metrics).forEach(function (k) { metrics.appendChild(el('tr', null, el('td', { text: k }), el('td', { className: 'num', text: fmt(t.metrics[k]) }))); });
      var env = el('table');
      Object.keys(t.env).forEach(function (k) { env.appendChild(el('tr', null, el('td', { text: k }), el('td', { text: t.env[k] }))); });
      var attempts = el('table');
      attempts.appendChild(el('tr', null, el('th', { text: '#' }), el('th', { text: 'agent' }), el('th', { text: 'gpus' }), el('th', { text: 'state' }), el('th', { text: 'reason' }), el('th', { text: 'started' })));
      t.attempt_history.forEach(function (a) {
        attempts.appendChild(el('tr', null, el('td', { text: String(a.attempt) }), el('td', { text: a.agent }), el('td', { text: a.gpus.join(',') || '—' }),
          el('td', null, stateBadge('trial', a.state)), el('td', { text: a.reason || '—' }), el('td', { text: fmtTime(a.started_at) })));
      });
      var charts = el('div', { className: 'scatters' });
      var header = el('h1', null, 'Trial ' + t.id + ' ', el('span', { className: 'muted', text: '(index ' + t.index + ' of ' + t.sweep_name + ')' }));
      var actions = null;
      if (info.cancel && TRIAL_FINAL[t.state] === false) {
        actions = el('button', { className: 'danger', text: 'Cancel trial', onclick: function () {
          post('/api/trials/' + Number(t.id) + '/cancel').then(load).catch(function (e) { window.alert(e.message); });
        } });
      }
      body.replaceChildren(
        el('div', null, el('a', { href: '#/sweeps/' + Number(t.sweep_id), text: '← sweep' })), header, actions || el('div'),
        el('div', { className: 'grid' },
          el('section', { className: 'panel' }, el('h2', { text: 'Run' }), kv),
          el('section', { className: 'panel' }, el('h2', { text: 'Parameters' }), params, el('h2', { text: 'Final metrics', style: 'margin-top:12px' }), metrics),
          el('section', { className: 'panel wide' }, el('h2', { text: 'Metrics' }), charts),
          el('section', { className: 'panel' }, el('h2', { text: 'Environment' }), env),
          el('section', { className: 'panel' }, el('h2', { text: 'Attempts' }), attempts),
          el('section', { className: 'panel wide' }, el('h2', { text: 'Log tail' }), el('pre', { id: 'log', text: t.log_tail || '(no output yet)' }))));
      t.series.forEach(function (s) {
        var box = el('div', { className: 'chart' });
        charts.appendChild(box);
        drawLines(box, [{ label: s.name, steps: s.steps, values: s.values }], s.name + (s.total_points > s.steps.length ? ' (' + s.total_points + ' points, downsampled)' : ''));
      });
      if (!t.series.length) charts.appendChild(el('div', { className: 'muted', text: 'no metrics yet' }));
    }
    function load() { return api('/api/trials/' + trialId).then(render).catch(function (e) { showError(body, e); }); }
    var refresh = throttle(load, 2000);
    load();
    return {
      onChange: function (ev) {
        if (ev.resync || ev.running.concat(ev.finished).some(function (t) { return t.id === trialId; })) refresh();
      },
      dispose: refresh.cancel
    };
  }

  function agentsView(root) {
    var list = el('div', { className: 'agents' });
    root.replaceChildren(el('h1', { text: 'Agents' }), list);
    function render(agents) {
      if (!agents.length) return list.replaceChildren(el('div', { className: 'muted', text: 'No agents have registered yet.' }));
      list.replaceChildren.apply(list, agents.map(function (a) {
        var gpus = el('table');
        gpus.appendChild(el('tr', null, el('th', { text: 'GPU' }), el('th', { text: 'name' }), el('th', { text: 'memory' }), el('th', { text: 'trials' })));
        a.gpus.forEach(function (g) {
          var holders = el('td');
          if (!g.trials.length) holders.appendChild(el('span', { className: 'muted', text: 'idle' }));
          g.trials.forEach(function (h) {
            var share = h.fraction === null ? 1 : h.fraction;
            var bar = el('span', { className: 'share' });
            bar.style.width = Math.round(40 * share) + 'px';
            holders.appendChild(el('div', null, bar, trialLink(h.trial_id), ' ', el('span', { className: 'muted', text: h.fraction === null ? 'whole GPU' : 'share ' + fmt(h.fraction) })));
          });
          gpus.appendChild(el('tr', null, el('td', { text: String(g.index) }), el('td', { text: g.name, title: g.uuid }), el('td', { text: fmtBytes(g.memory_bytes) }), holders));
        });
        var cpu = el('div', { className: 'note' }, 'CPU trials: ');
        if (!a.cpu_trials.length) cpu.appendChild(document.createTextNode('none'));
        a.cpu_trials.forEach(function (id) { cpu.appendChild(trialLink(id)); cpu.appendChild(document.createTextNode(' ')); });
        return el('section', { className: 'panel', 'data-agent': a.name },
          el('h2', null, a.name + ' ', stateBadge('agent', a.state)),
          el('div', { className: 'muted', text: 'host ' + a.host + ' · ' + a.slots + ' CPU slots · last seen ' + fmtTime(a.last_seen) + ' · state ' + a.state + (a.containment ? ' · containment ' + a.containment : '') }),
          a.quarantine ? el('div', { className: 'note quarantine' }, el('span', { className: 'state tone-warn', text: 'quarantined' }), ' ' + a.quarantine + ' (no work is sent to it; swept agents --release ' + a.name + ' lifts it)') : null,
          a.gpus.length ? gpus : el('div', { className: 'muted', text: 'no GPUs' }), cpu);
      }));
    }
    function load() { api('/api/agents').then(function (r) { render(r.agents); }).catch(function (e) { showError(list, e); }); }
    var refresh = throttle(load, 1000);
    load();
    return { onChange: function () { refresh(); }, dispose: refresh.cancel };
  }

  // ---- routing and live updates ---------------------------------------------

  function route() {
    if (current && current.dispose) current.dispose();
    var root = document.getElementById('view');
    var hash = location.hash || '#/';
    var m;
    var nav = 'sweeps';
    if ((m = hash.match(/^#\/sweeps\/(\d+)$/))) current = sweepView(root, Number(m[1]));
    else if ((m = hash.match(/^#\/trials\/(\d+)$/))) current = trialView(root, Number(m[1]));
    else if (hash === '#/agents') { current = agentsView(root); nav = 'agents'; }
    else current = sweepsView(root);
    document.querySelectorAll('[data-nav]').forEach(function (a) { a.classList.toggle('active', a.getAttribute('data-nav') === nav); });
  }

  function connectLive() {
    var badge = document.getElementById('live');
    var source = new EventSource('/api/events');
    source.addEventListener('hello', function () { badge.textContent = 'live'; badge.className = 'live on'; });
    source.addEventListener('change', function (e) {
      var ev;
      try { ev = JSON.parse(e.data); } catch (err) { return; }
      ev.sweeps = ev.sweeps || []; ev.running = ev.running || []; ev.finished = ev.finished || [];
      badge.textContent = 'live · updated ' + new Date().toLocaleTimeString();
      if (current && current.onChange) current.onChange(ev);
    });
    source.onerror = function () { badge.textContent = 'reconnecting…'; badge.className = 'live off'; };
  }

  var onResize = throttle(function () { if (current && current.resize) current.resize(); }, 300);
  window.addEventListener('resize', onResize);
  window.addEventListener('hashchange', route);
  api('/api/info').then(function (r) {
    info = r;
    (r.trial_states || []).forEach(function (s) {
      STATES.push(s.name); STATE_LABELS[s.name] = s.label; TRIAL_FINAL[s.name] = s.final; TONES.trial[s.name] = s.tone;
    });
    (r.sweep_states || []).forEach(function (s) { SWEEP_FINAL[s.name] = s.final; TONES.sweep[s.name] = s.tone; });
    (r.agent_states || []).forEach(function (s) { TONES.agent[s.name] = s.tone; });
  }).catch(function () {}).then(function () {
    route();
    connectLive();
  });
})();
