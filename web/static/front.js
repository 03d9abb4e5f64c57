// swept dashboard, the charts of a sweep with several objectives (d3 v3), from
// GET /api/sweeps/ID/objectives: a scatter of two chosen objectives with the
// Pareto front highlighted (and, with two objectives, its staircase), and
// parallel coordinates of every objective for three or more. Infeasible
// trials (they violate a constraint) are drawn hollow and grey, never as
// front points. The front is the server's (store/reader.h), never recomputed
// here. Loaded after charts.js, whose frame and scales it uses.
(function (swept) {
  'use strict';

  var fmt = swept.fmt, chartFrame = swept.chartFrame, extent = swept.extent, emptyChart = swept.emptyChart;
  var tickNumber = swept.tickNumber, shorten = swept.shorten;

  // "#12 loss=0.1 acc=0.9 (infeasible: mem)": a point's tooltip.
  function pointTitle(data, p) {
    var parts = data.objectives.map(function (o, k) { return o.name + '=' + fmt(p.values[k]); });
    var text = '#' + p.trial_id + ' ' + parts.join(' ');
    if (!p.feasible) text += ' (infeasible: ' + p.violated.join(', ') + ')';
    else if (p.on_front) text += ' (on the Pareto front)';
    return text;
  }

  function pointClass(base, p) {
    return base + (p.on_front ? ' on-front' : '') + (p.feasible ? '' : ' infeasible');
  }

  // Objective xi against objective yi, one dot per trial.
  function drawFrontScatter(container, data, xi, yi) {
    var pts = data.points.filter(function (p) { return p.values[xi] !== null && p.values[yi] !== null; });
    if (!pts.length) return emptyChart(container, 'no completed trial has reported every objective yet');
    var f = chartFrame(container, { top: 18, right: 16, bottom: 34, left: 60 });
    var x = d3.scale.linear().domain(extent(pts.map(function (p) { return p.values[xi]; }))).nice().range([0, f.width]);
    var y = d3.scale.linear().domain(extent(pts.map(function (p) { return p.values[yi]; }))).nice().range([f.height, 0]);
    f.g.append('g').attr('class', 'axis').attr('transform', 'translate(0,' + f.height + ')')
      .call(d3.svg.axis().scale(x).orient('bottom').ticks(6).tickFormat(tickNumber));
    f.g.append('g').attr('class', 'axis').call(d3.svg.axis().scale(y).orient('left').ticks(5).tickFormat(tickNumber));
    var ox = data.objectives[xi], oy = data.objectives[yi];
    f.g.append('text').attr('class', 'legend front-xlabel').attr('x', f.width).attr('y', f.height + 30)
      .attr('text-anchor', 'end').text(shorten(ox.name + ' (' + ox.goal + ')', 60));
    f.g.append('text').attr('class', 'legend front-ylabel').attr('x', 4).attr('y', -6)
      .text(shorten(oy.name + ' (' + oy.goal + ')', 60));
    if (data.objectives.length === 2) {
      // Two objectives: the front as the staircase it bounds, from the best
      // end of x, each step towards worse x and better y.
      var front = pts.filter(function (p) { return p.on_front; });
      var sign = ox.goal === 'maximize' ? -1 : 1;
      front.sort(function (a, b) { return sign * (a.values[xi] - b.values[xi]); });
      // From the best x on, each corner (next x, this y) is dominated by both
      // neighbours, whichever way each objective goes: horizontal, then vertical.
      var line = d3.svg.line().interpolate('step-after')
        .x(function (p) { return x(p.values[xi]); }).y(function (p) { return y(p.values[yi]); });
      if (front.length > 1) f.g.append('path').attr('class', 'line front-line').attr('d', line(front));
    }
    // Front points last, so that they are drawn on top.
    var sorted = pts.slice().sort(function (a, b) { return a.on_front - b.on_front; });
    f.g.selectAll('circle').data(sorted).enter().append('circle')
      .attr('class', function (p) { return pointClass('dot front-dot', p); })
      .attr('data-trial-id', function (p) { return p.trial_id; })
      .attr('r', function (p) { return p.on_front ? 5 : 3.5; })
      .attr('cx', function (p) { return x(p.values[xi]); })
      .attr('cy', function (p) { return y(p.values[yi]); })
      .append('title').text(function (p) { return pointTitle(data, p); });
  }

  // Every objective as an axis, one line per trial (three or more objectives).
  function drawObjectiveParallel(container, data) {
    var pts = data.points;
    if (!pts.length) return emptyChart(container, 'no completed trial has reported every objective yet');
    var f = chartFrame(container, { top: 24, right: 40, bottom: 12, left: 70 });
    var x = d3.scale.ordinal().domain(data.objectives.map(function (o, k) { return k; })).rangePoints([0, f.width]);
    // Better is up on every axis: a maximised objective's scale runs upwards,
    // a minimised one's downwards, so that front lines run along the top.
    var scales = data.objectives.map(function (o, k) {
      var s = d3.scale.linear().domain(extent(pts.map(function (p) { return p.values[k]; })));
      return s.range(o.goal === 'maximize' ? [f.height, 0] : [0, f.height]);
    });
    var line = d3.svg.line();
    var sorted = pts.slice().sort(function (a, b) { return a.on_front - b.on_front; });
    f.g.selectAll('path.pc-line').data(sorted).enter().append('path')
      .attr('class', function (p) { return pointClass('pc-line front-pc', p); })
      .attr('data-trial-id', function (p) { return p.trial_id; })
      .attr('d', function (p) {
        return line(data.objectives.map(function (o, k) {
          return [x(k), p.values[k] === null ? f.height : scales[k](p.values[k])];
        }));
      })
      .append('title').text(function (p) { return pointTitle(data, p); });
    data.objectives.forEach(function (o, k) {
      var axis = f.g.append('g').attr('class', 'axis').attr('transform', 'translate(' + x(k) + ',0)')
        .call(d3.svg.axis().scale(scales[k]).orient('left').ticks(5).tickFormat(tickNumber));
      axis.append('text').attr('y', -10)
        .attr('text-anchor', k === 0 ? 'start' : k === data.objectives.length - 1 ? 'end' : 'middle')
        .style('font-weight', 700).text(shorten(o.name + ' (' + (o.goal === 'maximize' ? 'max' : 'min') + ')', 28))
        .append('title').text(o.name + ' (' + o.goal + ')');
    });
  }

  // The objective points as the single-metric charts take them
  // (/api/sweeps/ID/points' shape), with objective k as the metric.
  function asMetricPoints(data, k) {
    return {
      params: data.params,
      metric: { name: data.objectives[k].name, goal: data.objectives[k].goal },
      points: data.points.map(function (p) {
        return { id: p.trial_id, index: p.index, metric_value: p.values[k], params: p.params };
      })
    };
  }

  // "front of 4 trials, hypervolume 0.6": a sweep summary's front in words.
  function frontText(front) {
    return front.trial_ids.length + ' trial' + (front.trial_ids.length === 1 ? '' : 's') + ' on the front of ' +
      front.evaluated + (front.infeasible ? ' (' + front.infeasible + ' infeasible)' : '') + ', hypervolume ' +
      fmt(front.hypervolume);
  }

  swept.drawFrontScatter = drawFrontScatter;
  swept.drawObjectiveParallel = drawObjectiveParallel;
  swept.asMetricPoints = asMetricPoints;
  swept.frontText = frontText;
})(window.swept);
