// swept dashboard, the agents view (#/agents): each agent's state, GPUs and
// the trials holding each GPU's shares, its CPU trials and any quarantine.
// Returns { onChange(event), dispose() } for app.js. Loaded after util.js.
(function (swept) {
  'use strict';

  var el = swept.el, fmt = swept.fmt, fmtTime = swept.fmtTime, fmtBytes = swept.fmtBytes;
  var api = swept.api, showError = swept.showError, throttle = swept.throttle;
  var stateBadge = swept.stateBadge, trialLink = swept.trialLink;

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

  swept.agentsView = agentsView;
})(window.swept);
