// swept dashboard, the sweep views: the list of sweeps (#/) and one sweep
// (#/sweeps/ID: its summary, charts and trials table). Each view returns
// { onChange(event), dispose(), resize()? } for app.js. Loaded after
// util.js and charts.js.
(function (swept) {
  'use strict';

  var el = swept.el, fmt = swept.fmt, api = swept.api, post = swept.post, showError = swept.showError;
  var throttle = swept.throttle, stateBadge = swept.stateBadge, trialLink = swept.trialLink;
  var progressBar = swept.progressBar, countsText = swept.countsText;
  var STATES = swept.STATES, STATE_LABELS = swept.STATE_LABELS, SWEEP_FINAL = swept.SWEEP_FINAL;
  var emptyChart = swept.emptyChart, drawLines = swept.drawLines, drawParallel = swept.drawParallel;
  var drawScatter = swept.drawScatter, drawHistory = swept.drawHistory, drawImportance = swept.drawImportance;
  var drawFrontScatter = swept.drawFrontScatter, drawObjectiveParallel = swept.drawObjectiveParallel;
  var asMetricPoints = swept.asMetricPoints, frontText = swept.frontText;
  var PAGE_SIZE = 50;  // trials per page of the table

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
        var best = s.front ? el('span', { text: 'front of ' + s.front.trial_ids.length }) :
          s.best ? el('span', null, fmt(s.best.value) + ' ', trialLink(s.best.trial_id)) :
          s.metric_missing ? el('span', { className: 'warning-text', text: 'never reported', title: metricMissingText(s) }) : '—';
        body.appendChild(el('tr', { 'data-sweep-id': s.id },
          el('td', null, el('a', { href: '#/sweeps/' + Number(s.id), text: String(s.id) })),
          el('td', null, el('a', { href: '#/sweeps/' + Number(s.id), text: s.name })),
          el('td', { text: s.method }),
          el('td', { text: metricText(s) }),
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

  // The sweep's metric, or its objectives: "loss (minimize), acc (maximize)".
  function metricText(s) {
    if (s.front) return s.front.objectives.map(function (o) { return o.name + ' (' + o.goal + ')'; }).join(', ');
    return s.metric.name ? s.metric.name + ' (' + (s.metric.goal || '') + ')' : '—';
  }

  // A sweep's constraints: "mem ≤ 8, acc ≥ 0.5".
  function constraintsText(constraints) {
    var parts = [];
    constraints.forEach(function (c) {
      if (c.min !== null) parts.push(c.name + ' ≥ ' + fmt(c.min));
      if (c.max !== null) parts.push(c.name + ' ≤ ' + fmt(c.max));
    });
    return parts.join(', ');
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
      historyMode: 'index', history: null, frontX: 0, frontY: 1, objectives: null, importance: null,
      importanceObjective: 0 };
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
    var importanceSelect = el('select', { 'aria-label': 'importance objective', hidden: 'hidden' });
    // A sweep with several objectives: its Pareto front (shown once the summary says so).
    var frontX = el('select', { 'aria-label': 'front x objective' }), frontY = el('select', { 'aria-label': 'front y objective' });
    var frontChart = el('div', { className: 'chart tall', id: 'front' });
    var frontParallel = el('div', { className: 'chart tall', id: 'front-parallel', hidden: 'hidden' });
    var frontNote = el('div', { className: 'note' });
    var frontPanel = el('section', { className: 'panel wide', id: 'front-panel', hidden: 'hidden' },
      el('h2', null, 'Pareto front ', frontX, ' against ', frontY), frontChart, frontParallel, frontNote);
    var table = el('table', { id: 'trials' });
    var pager = el('div', { className: 'pager' });
    // A pbt sweep: the population's curves and the best member's schedule (pbt.js).
    var population = swept.populationPanel(sweepId);
    root.replaceChildren(
      el('div', null, el('a', { href: '#/', text: '← sweeps' })), title, summary, warning,
      el('div', { className: 'grid' }, frontPanel, population.node,
        el('section', { className: 'panel' }, el('h2', null, 'Learning curves ', metricSelect), curves,
          el('div', { className: 'note', text: 'Tick trials in the table to compare them.' })),
        el('section', { className: 'panel' }, el('h2', null, 'Parameter importance ', importanceSelect), importance, importanceNote),
        el('section', { className: 'panel wide' }, el('h2', null, 'Optimisation history ', historyModes), history, historyNote),
        el('section', { className: 'panel wide' }, el('h2', { text: 'Parallel coordinates' }), parallel),
        el('section', { className: 'panel wide' }, el('h2', { text: 'Metric vs each parameter' }), scatters)),
      el('section', { className: 'panel' }, toolbar, el('div', { className: 'table-wrap' }, table), pager));

    metricSelect.addEventListener('change', function () { state.metric = metricSelect.value; loadCurves(); });
    frontX.addEventListener('change', function () { state.frontX = Number(frontX.value); renderFront(); });
    frontY.addEventListener('change', function () { state.frontY = Number(frontY.value); renderFront(); });
    importanceSelect.addEventListener('change', function () {
      state.importanceObjective = Number(importanceSelect.value); renderImportance();
    });

    function renderSummary(s) {
      state.sweep = s;
      title.textContent = s.name + ' (sweep ' + s.id + ')';
      var items = [el('span', null, stateBadge('sweep', s.state)), el('span', null, 'method ', el('b', { text: s.method })),
        el('span', null, s.front ? 'objectives ' : 'metric ', el('b', { text: metricText(s) })),
        el('span', null, progressBar(s.counts)), el('span', { className: 'muted', text: countsText(s.counts) }),
        s.front ? el('span', { id: 'front-summary' }, 'Pareto front ', el('b', { text: frontText(s.front) }))
          : el('span', null, 'best ', el('b', { text: s.best ? fmt(s.best.value) : '—' }), ' ', s.best ? trialLink(s.best.trial_id) : '')];
      if (s.constraints && s.constraints.length)
        items.push(el('span', { id: 'constraints', className: 'muted', text: 'constraints: ' + constraintsText(s.constraints) }));
      frontPanel.hidden = !s.front;
      population.node.hidden = s.method !== 'pbt';
      if (swept.info.cancel && SWEEP_FINAL[s.state] === false) {
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
        var sw = state.sweep && (state.sweep.metric.name || (state.sweep.front && state.sweep.front.objectives[0].name));
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
        var agent = t.agent || '—';
        if (t.nodes) {  // a multi-node trial: every node, node 0 first
          agent = t.nodes.map(function (n) { return n.agent; }).join(' + ');
          gpus = t.nodes.map(function (n) { return n.gpus.join(',') || '—'; }).join(' + ');
        }
        // The best trial, or every trial on the Pareto front, is highlighted;
        // an infeasible one is marked with the constraints it violates.
        var rowClass = (t.id === page.best_trial_id || onFront(t.id) ? 'best' : '') + (t.feasible === false ? ' infeasible' : '') +
          (t.imported_from !== undefined ? ' warm-started' : '');
        var tr = el('tr', { 'data-trial-id': t.id, className: rowClass.trim() },
          el('td', null, box), el('td', { className: 'num' }, trialLink(t.id), ' ', el('span', { className: 'muted', text: '[' + t.index + ']' })),
          el('td', null, stateBadge('trial', t.state, t.stopping), t.feasible === false ?
            el('span', { className: 'infeasible-tag', text: 'infeasible', title: 'violates ' + t.violated.join(', ') }) : null,
            // A warm start's trial: never run here; the badge says from where.
            t.imported_from !== undefined ? el('span', { className: 'imported-tag', text: 'warm start', title: t.imported_from }) : null),
          el('td', { text: agent }), el('td', { text: gpus }),
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

    function onFront(id) {
      return !!(state.sweep && state.sweep.front && state.sweep.front.trial_ids.indexOf(id) >= 0);
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

    // The front's selectors and charts from the objective points.
    function renderFront() {
      var data = state.objectives;
      if (!data) return;
      [[frontX, state.frontX], [frontY, state.frontY]].forEach(function (pair) {
        pair[0].replaceChildren.apply(pair[0], data.objectives.map(function (o, k) {
          var opt = el('option', { value: k, text: o.name });
          if (k === pair[1]) opt.selected = true;
          return opt;
        }));
      });
      drawFrontScatter(frontChart, data, state.frontX, state.frontY);
      frontParallel.hidden = data.objectives.length < 3;
      if (data.objectives.length >= 3) drawObjectiveParallel(frontParallel, data);
      frontNote.textContent = (data.front ? frontText(data.front) + '. ' : '') + 'Large dots: the Pareto front' +
        (data.objectives.length === 2 ? ' (the line is its staircase)' : ' over every objective') +
        '; hollow grey: infeasible (violates a constraint)' +
        (data.stride > 1 ? '; every ' + data.stride + 'th trial shown, and the whole front' : '') + '.';
    }

    function renderImportance() {
      var r = state.importance;
      if (!r) return;
      var objectives = r.objectives || [];
      importanceSelect.hidden = !objectives.length;
      if (!objectives.length) return drawImportance(importance, r);
      importanceSelect.replaceChildren.apply(importanceSelect, objectives.map(function (o, k) {
        var opt = el('option', { value: k, text: o.metric });
        if (k === state.importanceObjective) opt.selected = true;
        return opt;
      }));
      drawImportance(importance, objectives[state.importanceObjective] || objectives[0]);
    }

    // Parallel coordinates and a scatter per parameter, of the one metric
    // (several objectives: the first one's).
    function drawParamCharts(data, best) {
      drawParallel(parallel, data, best);
      scatters.replaceChildren();
      data.params.forEach(function (p) {
        var box = el('div', { className: 'chart' });
        scatters.appendChild(box);
        drawScatter(box, data, p, best);
      });
      if (!data.params.length) scatters.appendChild(el('div', { className: 'muted', text: 'no parameters' }));
    }

    function loadCharts() {
      if (state.sweep && state.sweep.front) {
        emptyChart(history, 'several objectives: the Pareto front above shows what each trial traded');
        historyNote.textContent = '';
        api('/api/sweeps/' + sweepId + '/objectives?limit=1000').then(function (data) {
          state.objectives = data;
          renderFront();
          drawParamCharts(asMetricPoints(data, 0), null);
        }).catch(function (e) { showError(frontChart, e); });
      } else {
        api('/api/sweeps/' + sweepId + '/history').then(function (h) { state.history = h; renderHistory(); })
          .catch(function (e) { showError(history, e); });
        var best = state.sweep && state.sweep.best ? state.sweep.best.trial_id : null;
        api('/api/sweeps/' + sweepId + '/points?limit=1000').then(function (data) { drawParamCharts(data, best); })
          .catch(function (e) { showError(parallel, e); });
      }
      if (state.sweep && state.sweep.method === 'pbt') population.load(state.sweep);
      api('/api/sweeps/' + sweepId + '/importance').then(function (r) {
        state.importance = r;
        renderImportance();
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

  swept.sweepsView = sweepsView;
  swept.sweepView = sweepView;
})(window.swept);
