// swept dashboard, the trial view (#/trials/ID): a trial's run, parameters,
// final metrics, metric charts, environment, attempts and log tail, with its
// cancel button when the server offers cancel, and a pbt member's parameter
// schedule. Returns { onChange(event), dispose() } for app.js. Loaded after
// util.js, charts.js and pbt.js.
(function (swept) {
  'use strict';

  var el = swept.el, fmt = swept.fmt, fmtTime = swept.fmtTime;
  var api = swept.api, post = swept.post, showError = swept.showError, throttle = swept.throttle;
  var stateBadge = swept.stateBadge, TRIAL_FINAL = swept.TRIAL_FINAL;
  var drawLines = swept.drawLines;

  function trialView(root, trialId) {
    var body = el('div');
    root.replaceChildren(body);
    function render(t) {
      var kv = el('dl', { className: 'kv' });
      function row(k, v) { kv.appendChild(el('dt', { text: k })); kv.appendChild(el('dd', null, v)); }
      row('sweep', el('a', { href: '#/sweeps/' + Number(t.sweep_id), text: t.sweep_name }));
      row('state', stateBadge('trial', t.state, t.stopping));
      // A completed trial of a sweep with constraints: whether it keeps them all.
      if (t.feasible !== undefined)
        row('constraints', el('span', { id: 'feasibility', className: t.feasible ? '' : 'infeasible-tag',
          text: t.feasible ? 'feasible' : 'infeasible: violates ' + t.violated.join(', ') }));
      row('reason', t.reason || '—');
      row('exit code', t.exit_code === null ? '—' : String(t.exit_code));
      row('agent', t.agent || '—');
      if (t.nodes) {  // a multi-node trial: each node's agent and GPUs (node 0 reports the metrics)
        row('nodes', t.nodes.map(function (n, i) {
          return 'node ' + i + ': ' + n.agent + (n.gpus.length ? ' (GPUs ' + n.gpus.join(',') + ')' : '');
        }).join('; '));
      }
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
      if (swept.info.cancel && TRIAL_FINAL[t.state] === false) {
        actions = el('button', { className: 'danger', text: 'Cancel trial', onclick: function () {
          post('/api/trials/' + Number(t.id) + '/cancel').then(load).catch(function (e) { window.alert(e.message); });
        } });
      }
      // A pbt member: the parameters in force from each step on, and whose
      // checkpoint each round resumed from (its lineage; pbt.js draws it).
      var schedule = null;
      if (t.schedule) {
        var scheduleTable = el('table', { id: 'trial-schedule', className: 'schedule' });
        swept.scheduleTable(scheduleTable, t);
        schedule = el('section', { className: 'panel wide' }, el('h2', { text: 'Parameter schedule' }), scheduleTable);
      }
      body.replaceChildren(
        el('div', null, el('a', { href: '#/sweeps/' + Number(t.sweep_id), text: '← sweep' })), header, actions || el('div'),
        el('div', { className: 'grid' },
          el('section', { className: 'panel' }, el('h2', { text: 'Run' }), kv),
          el('section', { className: 'panel' }, el('h2', { text: 'Parameters' }), params, el('h2', { text: 'Final metrics', style: 'margin-top:12px' }), metrics),
          schedule,
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

  swept.trialView = trialView;
})(window.swept);
