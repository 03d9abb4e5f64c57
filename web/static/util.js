// swept dashboard, shared helpers: the state tables from the server, DOM
// building, number and time formats, the API calls, throttling, and the
// progress bar. Loaded first (index.html); the other scripts take these from
// `window.swept`, the one name the dashboard's scripts add to the page.
//
// The dashboard's invariants (every script keeps them):
// - Text that comes from users (sweep, parameter and metric names, values,
//   logs, agent names) reaches the page only through textContent (el(), d3's
//   .text()) or attribute values, never as HTML.
// - A view owns its DOM under #view; navigating replaces it and drops the
//   view's state, so a page left open for hours holds one view's data only.
// - Refreshes triggered by live events are throttled (one per second per
//   view) and replace content in place inside fixed-size boxes.
(function (swept) {
  'use strict';

  // The states of trials, sweeps and agents come from the server's tables
  // (GET /api/info: trial_states, sweep_states, agent_states, built from
  // common/states.h; app.js fills these at start). No script spells a
  // state's name: they act on the tables' flags (`final`) and show each
  // state in its `tone`, the class `tone-NAME` that app.css styles (app.css
  // names no state either). The tables are filled in place, never replaced.
  var STATES = [];        // trial state names, in display order
  var STATE_LABELS = {};  // trial state name -> label shown to people
  var TRIAL_FINAL = {};   // trial state name -> true when it will not run again
  var SWEEP_FINAL = {};   // sweep state name -> true when the sweep is over
  // kind ('trial', 'sweep', 'agent') -> state name -> tone. By kind, since a
  // name may be a state of two tables.
  var TONES = { trial: {}, sweep: {}, agent: {} };
  // GET /api/info's answer (app.js replaces it once loaded): `cancel` says
  // whether the cancel buttons are shown.
  swept.info = { cancel: false };

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

  // `stopping`: a trial the user stopped whose process is still ending (its
  // grace): the stopped tone, labelled so.
  function stateBadge(kind, state, stopping) {
    return el('span', { className: toneClass(kind, state),
      text: stopping ? 'stopping' : (kind === 'trial' && STATE_LABELS[state]) || state });
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

  swept.STATES = STATES;
  swept.STATE_LABELS = STATE_LABELS;
  swept.TRIAL_FINAL = TRIAL_FINAL;
  swept.SWEEP_FINAL = SWEEP_FINAL;
  swept.TONES = TONES;
  swept.el = el;
  swept.fmt = fmt;
  swept.fmtTime = fmtTime;
  swept.fmtBytes = fmtBytes;
  swept.stateBadge = stateBadge;
  swept.trialLink = trialLink;
  swept.api = api;
  swept.post = post;
  swept.showError = showError;
  swept.throttle = throttle;
  swept.progressBar = progressBar;
  swept.countsText = countsText;
})(window.swept = {});
