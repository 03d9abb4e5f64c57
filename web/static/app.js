// swept dashboard, the entry point: loads the state tables (GET /api/info),
// routes the hash (#/, #/sweeps/ID, #/trials/ID, #/agents) to its view, and
// follows live changes over Server-Sent Events (/api/events), passing each
// to the view on screen. Loaded last: util.js, charts.js, sweeps.js,
// trial.js and agents.js define what it calls (window.swept).
(function (swept) {
  'use strict';

  var api = swept.api, throttle = swept.throttle;
  var sweepsView = swept.sweepsView, sweepView = swept.sweepView;
  var trialView = swept.trialView, agentsView = swept.agentsView;
  var STATES = swept.STATES, STATE_LABELS = swept.STATE_LABELS, TRIAL_FINAL = swept.TRIAL_FINAL;
  var SWEEP_FINAL = swept.SWEEP_FINAL, TONES = swept.TONES;
  var current = null; // the active view: { onChange(event), dispose() }

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
    swept.info = r;
    (r.trial_states || []).forEach(function (s) {
      STATES.push(s.name); STATE_LABELS[s.name] = s.label; TRIAL_FINAL[s.name] = s.final; TONES.trial[s.name] = s.tone;
    });
    (r.sweep_states || []).forEach(function (s) { SWEEP_FINAL[s.name] = s.final; TONES.sweep[s.name] = s.tone; });
    (r.agent_states || []).forEach(function (s) { TONES.agent[s.name] = s.tone; });
  }).catch(function () {}).then(function () {
    route();
    connectLive();
  });
})(window.swept);
