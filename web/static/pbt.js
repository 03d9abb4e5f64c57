// swept dashboard, a population-based-training sweep (method pbt, issue 29)
// on its sweep page: the population's curves of the sweep's metric with each
// exploit marked (a diamond where the member resumed from another member's
// checkpoint, and a dashed link from the member it copied, at the step of
// the copy), and the best member's parameter schedule (the parameters in
// force from each step on). Both come from the members' lineage, the
// `schedule` of their trial rows (docs/api.md); nothing is recomputed here.
// Loaded after charts.js (drawLines) and before sweeps.js, which places the
// panel and asks it to load, and trial.js, which shows a member's schedule.
(function (swept) {
  'use strict';

  var el = swept.el, fmt = swept.fmt, api = swept.api, showError = swept.showError;
  var emptyChart = swept.emptyChart, drawLines = swept.drawLines, trialLink = swept.trialLink;
  // /api/series takes at most 50 trials a request, so the population's
  // curves come in pages of 50, asked at once; the points per member shrink
  // as the population grows, so that a page of 1000 members (the trials
  // page's limit) stays near 40,000 points to draw.
  var SERIES_PAGE = 50, MAX_MEMBERS = 1000, TOTAL_POINTS = 40000;

  // The series of `ids` (/api/series' `series`, in one list), fetched 50 at a time.
  function memberSeries(ids, metric) {
    var points = Math.max(20, Math.min(400, Math.floor(TOTAL_POINTS / ids.length)));
    var pages = [];
    for (var i = 0; i < ids.length; i += SERIES_PAGE) {
      pages.push(api('/api/series?points=' + points + '&metric=' + encodeURIComponent(metric) + '&trials=' +
        ids.slice(i, i + SERIES_PAGE).join(',')));
    }
    return Promise.all(pages).then(function (answers) {
      return answers.reduce(function (all, r) { return all.concat(r.series); }, []);
    });
  }

  // The [step, value] of `series` at the last point at or before `step`
  // (`after`: the first point after it), or null.
  function pointAt(series, step, after) {
    var found = null;
    for (var k = 0; k < series.steps.length; k++) {
      var st = series.steps[k], v = series.values[k];
      if (v === null) continue;
      if (after && st > step) return [st, v];
      if (!after && st <= step) found = [st, v];
    }
    return found;
  }

  // "#4 resumed from #2's checkpoint (segment 2) at step 20: lr: 0.8 -> 1.6 (x2)".
  function exploitText(memberId, s) {
    return '#' + memberId + ' resumed from #' + s.donor_trial_id + '\'s checkpoint' +
      (s.donor_segment !== null ? ' (segment ' + s.donor_segment + ')' : '') + ' at step ' + s.from_step +
      (s.changes.length ? ': ' + s.changes.join('; ') : '');
  }

  // The exploits of `members` on the curves `drawn` (drawLines' answer),
  // each between the donor's value at the step of the copy and the
  // member's first value after it. Returns how many were drawn.
  function drawExploits(drawn, members, byId) {
    var g = drawn.frame.g, x = drawn.x, y = drawn.y, marks = 0;
    members.forEach(function (m) {
      var own = byId[m.id];
      if (!own) return;
      (m.schedule || []).forEach(function (s) {
        if (s.donor_trial_id === null) return;
        var to = pointAt(own, s.from_step, true) || pointAt(own, s.from_step, false);
        if (!to) return;
        var donor = byId[s.donor_trial_id];
        var from = donor ? pointAt(donor, s.from_step, false) : null;
        if (from) {
          g.append('path').attr('class', 'exploit-link')
            .attr('d', 'M' + x(from[0]) + ',' + y(from[1]) + 'L' + x(to[0]) + ',' + y(to[1]));
        }
        g.append('path').attr('class', 'exploit-mark').attr('data-trial', m.id).attr('data-donor', s.donor_trial_id)
          .attr('data-step', s.from_step).attr('d', d3.svg.symbol().type('diamond').size(80)())
          .attr('transform', 'translate(' + x(to[0]) + ',' + y(to[1]) + ')')
          .style('fill', drawn.color('#' + m.id))
          .append('title').text(exploitText(m.id, s));
        marks++;
      });
    });
    return marks;
  }

  // The schedule of `member` as a table: one row per round, the step it
  // starts at, every parameter (those that changed in bold), and where its
  // checkpoint came from.
  function scheduleTable(table, member) {
    var names = [];
    member.schedule.forEach(function (s) {
      Object.keys(s.params).forEach(function (k) { if (names.indexOf(k) < 0) names.push(k); });
    });
    names.sort();
    var head = el('tr', null, el('th', { text: 'from step' }));
    names.forEach(function (n) { head.appendChild(el('th', { text: n })); });
    head.appendChild(el('th', { text: 'checkpoint' }));
    head.appendChild(el('th', { text: 'changes' }));
    var body = el('tbody'), previous = null;
    member.schedule.forEach(function (s) {
      var tr = el('tr', { 'data-round': s.round }, el('td', { className: 'num', text: String(s.from_step) }));
      names.forEach(function (n) {
        var changed = previous !== null && fmt(previous.params[n]) !== fmt(s.params[n]);
        tr.appendChild(el('td', { className: changed ? 'changed' : null, text: fmt(s.params[n]) }));
      });
      tr.appendChild(el('td', null, s.donor_trial_id === null ? (s.round === 0 ? 'first parameters' : 'its own') :
        el('span', null, 'copied from ', trialLink(s.donor_trial_id),
          s.donor_segment !== null ? ' (segment ' + s.donor_segment + ')' : '')));
      tr.appendChild(el('td', { className: 'muted', text: s.changes.join('; ') }));
      body.appendChild(tr);
      previous = s;
    });
    table.replaceChildren(el('thead', null, head), body);
  }

  // The panel: `node` to place (hidden until the page shows it), and
  // load(sweep) to (re)draw it from the sweep's summary.
  function populationPanel(sweepId) {
    var chart = el('div', { className: 'chart tall', id: 'population' });
    var note = el('div', { className: 'note' });
    var scheduleTitle = el('h2', { text: 'Schedule of the best member' });
    var table = el('table', { id: 'schedule', className: 'schedule' });
    var node = el('section', { className: 'panel wide', id: 'population-panel', hidden: 'hidden' },
      el('h2', { text: 'Population' }), chart, note, scheduleTitle, el('div', { className: 'table-wrap short' }, table));

    function load(sweep) {
      var metric = sweep.metric.name;
      if (!metric) return emptyChart(chart, 'the sweep names no metric');
      return api('/api/sweeps/' + Number(sweepId) + '/trials?limit=1000&sort=idx').then(function (page) {
        var members = page.trials.filter(function (t) { return t.index >= 0; }).slice(0, MAX_MEMBERS);
        var best = sweep.best ? page.trials.filter(function (t) { return t.id === sweep.best.trial_id; })[0] : null;
        scheduleTitle.replaceChildren('Schedule of the best member ', best ? trialLink(best.id) : '(none yet)',
          best ? ' (' + metric + ' ' + fmt(sweep.best.value) + ')' : '');
        if (best && best.schedule) scheduleTable(table, best);
        else table.replaceChildren(el('tbody', null, el('tr', null, el('td', { className: 'muted', text: 'no schedule yet' }))));
        if (!members.length) return emptyChart(chart, 'no members yet');
        var ids = members.map(function (m) { return m.id; });
        return memberSeries(ids, metric)
          .then(function (series) {
            var byId = {};
            series.forEach(function (s) { byId[s.trial_id] = s; });
            var drawn = drawLines(chart, series.map(function (s) {
              return { label: '#' + s.trial_id, steps: s.steps, values: s.values };
            }), metric + ' of each member');
            var marks = drawn ? drawExploits(drawn, members, byId) : 0;
            note.textContent = members.length + ' member' + (members.length === 1 ? '' : 's') +
              (page.total > members.length ? ' (the first ' + members.length + ')' : '') + ', ' + marks + ' exploit' +
              (marks === 1 ? '' : 's') + ': a diamond where a member resumed from another\'s checkpoint, the dashed ' +
              'line from the member it copied, at the step of the copy (hover for the parameters that changed).';
          });
      }).catch(function (e) { showError(chart, e); });
    }
    return { node: node, load: load };
  }

  swept.populationPanel = populationPanel;
  swept.scheduleTable = scheduleTable;  // also on a member's own page (trial.js)
})(window.swept);
