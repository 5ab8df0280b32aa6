// The lab page's charts part: the one chart frame (a picture's size, margins and
// layers), the one palette, and the drawings made in it: the topology (its layout from
// render::topology_svg, sent by the lab), the space-time diagram beside the animation,
// the log-log plot of sweeps and scaling simulations, and the step chart of a
// simulation too large to animate. Why these are drawn here and not served as the
// pictures render/ draws: docs/lab.md, "The page's pictures and render/'s".
'use strict';

(() => {
  const lab = window.topocommLab;
  const { el, bytes, micros, count, edgeKey } = lab;

  // render::picture::PALETTE, colour by colour (a test in lab/assets.rs holds them equal):
  // a step's colour, and a plot's series colour, as in the CLI's pictures.
  const PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];
  const colour = (i) => PALETTE[i % PALETTE.length];
  const stepColour = (step) => colour(Math.max(0, step - 1));

  // The size of the stage's charts, in user units.
  const CHART = { width: 900, height: 420 };

  // The one chart frame: `layers` (a picture and its overlays) emptied and given a
  // `width` by `height` box, stretched to their element or kept in proportion; the
  // plotting area inside `margin`, and the maps from 0..1 across and up onto it.
  function chartFrame(layers, { width = CHART.width, height = CHART.height, margin = {}, stretch = false }) {
    for (const layer of layers) {
      layer.replaceChildren();
      layer.setAttribute('viewBox', `0 0 ${width} ${height}`);
      layer.setAttribute('preserveAspectRatio', stretch ? 'none' : 'xMidYMid meet');
    }
    const { left = 0, right = 0, top = 0, bottom = 0 } = margin;
    const area = { left, right: width - right, top, bottom: height - bottom };
    return {
      width, height, ...area,
      across: (f) => area.left + (area.right - area.left) * f,
      up: (f) => area.bottom - (area.bottom - area.top) * f,
      down: (f) => area.top + (area.bottom - area.top) * f,
      // The x and y axes along the plotting area's bottom and left.
      axes(svg) {
        el('line', { x1: area.left, x2: area.right, y1: area.bottom, y2: area.bottom, class: 'axis' }, svg);
        el('line', { x1: area.left, x2: area.left, y1: area.top, y2: area.bottom, class: 'axis' }, svg);
      },
    };
  }

  // ---- the topology picture ----
  // Draws `topology` (its layout from topology_svg) into `svg`: the outlines of a
  // switched network's pods, groups or machines, the links, every vertex (a rank's disc,
  // a switch's square) and the legend; returns what the animation needs: edge paths and
  // their lengths, vertex groups, the marks' layer.
  // The picture is two layers: the drawing, which stays still while the animation
  // plays (thousands of links are painted once), and an overlay of what moves (marks,
  // busy links, rings round nodes), which alone is painted again at each frame.
  function drawTopology(svg, overlay, topology, traffic, walker) {
    const layout = topology.layout;
    chartFrame([svg, overlay], { width: layout.width, height: layout.height });
    el('text', { x: 20, y: 32, 'font-size': 19, 'font-weight': 'bold', fill: '#222' }, svg).textContent = layout.title;
    el('text', { x: 20, y: 52, 'font-size': 12.5, fill: '#555' }, svg).textContent = layout.subtitle;
    const load = new Map();
    for (const [from, to, amount] of traffic || []) {
      const key = edgeKey(from, to);
      load.set(key, (load.get(key) || 0) + amount);
    }
    const regionsLayer = el('g', { class: 'regions' }, svg);
    for (const region of layout.regions || []) {
      const group = el('g', { class: 'region', 'data-testid': 'region', 'data-members': region.members.length }, regionsLayer);
      if (region.round) {
        el('ellipse', { cx: region.x + region.width / 2, cy: region.y + region.height / 2, rx: region.width / 2, ry: region.height / 2 }, group);
      } else {
        el('rect', { x: region.x, y: region.y, width: region.width, height: region.height, rx: 8 }, group);
      }
      el('text', { x: region.label_x, y: region.label_y, 'font-size': 11.5 }, group).textContent = region.label;
    }
    const edgesLayer = el('g', { class: 'edges' }, svg);
    const edges = [];
    const edgeIndex = new Map();
    layout.links.forEach((link, i) => {
      const path = el('path', {
        d: link.path, fill: 'none', stroke: link.colour, 'stroke-width': 2, class: 'edge',
        'data-testid': 'edge', 'data-from': link.from, 'data-to': link.to,
      }, edgesLayer);
      if (link.dashed) path.setAttribute('stroke-dasharray', '7 4');
      const key = edgeKey(link.from, link.to);
      const carried = load.get(key);
      el('title', {}, path).textContent = `${link.from} ↔ ${link.to}` + (carried != null ? `: ${bytes(carried)} in the last run` : '');
      if (carried) path.setAttribute('stroke-width', 2 + Math.min(4, Math.log10(1 + carried) / 2));
      edges.push({ path, from: link.from, to: link.to, colour: link.colour, at: walker(link.path), busy: 0 });
      edgeIndex.set(key, i);
    });
    const font = topology.p > 99 ? 10 : 12.5;
    const r = layout.node_radius;
    // A switch's square: as wide as topology_svg draws it.
    const side = 2 * r * 0.85;
    const nodes = layout.nodes.map((node) => {
      const group = el('g', {
        class: node.switch ? 'switch' : 'node', 'data-testid': 'vertex', 'data-node': node.id, 'data-switch': node.switch,
      }, svg);
      if (node.switch) {
        el('rect', { x: node.x - side / 2, y: node.y - side / 2, width: side, height: side }, group);
        el('text', { x: node.x, y: node.y + 3.6, 'font-size': 10 }, group).textContent = node.id;
      } else {
        el('circle', { cx: node.x, cy: node.y, r }, group);
        el('text', { x: node.x, y: node.y + font * 0.36, 'font-size': font }, group).textContent = node.id;
      }
      if (layout.binary_digits) {
        const label = node.id.toString(2).padStart(layout.binary_digits, '0');
        el('text', { x: node.x + r + 3, y: node.y - r + 1, 'font-size': 11, class: 'label' }, group).textContent = `(${label})`;
      }
      return { group, x: node.x, y: node.y, got: false, sending: false, ring: null };
    });
    for (const entry of layout.legend) {
      const line = el('line', { x1: entry.x, y1: entry.y, x2: entry.x + 30, y2: entry.y, stroke: entry.colour, 'stroke-width': 2 }, svg);
      if (entry.dashed) line.setAttribute('stroke-dasharray', '7 4');
      el('text', { x: entry.x + 36, y: entry.y + 4.5, 'font-size': 12.5, fill: '#222' }, svg).textContent = entry.text;
    }
    const heat = el('g', { class: 'heat' }, overlay);
    const rings = el('g', { class: 'rings' }, overlay);
    const marks = el('g', { class: 'marks' }, overlay);
    const markRadius = Math.max(5, Math.min(9, layout.width / 120));
    return { svg, overlay, edges, edgeIndex, nodes, heat, rings, marks, pool: [], markRadius, r, p: topology.p };
  }

  // ---- the space-time diagram ----
  // Time across, a line per vertex (the ranks, then a switched network's switches, whose
  // lines a message's hops through them cross), each hop coloured by its step; its
  // cursor on the overlay; a click on it calls `seek` with the time there.
  function drawSpaceTime(svg, overlay, doc, seek) {
    const vertices = doc.topology.layout.nodes.length;
    const span = Math.max(1, doc.flow.span_ns);
    const frame = chartFrame([svg, overlay], {
      width: 640, height: 420, stretch: true, margin: { left: vertices <= 64 ? 34 : 10, right: 8, top: 8, bottom: 26 },
    });
    const x = (t) => frame.across(t / span);
    const y = (node) => frame.down(vertices === 1 ? 0.5 : node / (vertices - 1));
    if (vertices <= 64) {
      for (let node = 0; node < vertices; node += 1) {
        el('line', { x1: frame.left, x2: frame.right, y1: y(node), y2: y(node), stroke: '#eee' }, svg);
        if (vertices <= 32 || node % 4 === 0) el('text', { x: 2, y: y(node) + 3, class: 'tick' }, svg).textContent = node;
      }
    }
    el('line', { x1: frame.left, x2: frame.right, y1: frame.bottom + 4, y2: frame.bottom + 4, class: 'axis' }, svg);
    for (let i = 0; i <= 4; i += 1) {
      const t = (span * i) / 4;
      el('text', { x: Math.min(x(t), frame.width - 60), y: frame.height - 6, class: 'tick' }, svg).textContent = micros(t);
    }
    const lines = el('g', {}, svg);
    for (const message of doc.flow.messages) {
      const ink = stepColour(message.step);
      for (const [from, to, t0, t1] of message.hops) {
        el('line', { x1: x(t0), y1: y(from), x2: x(t1), y2: y(to), stroke: ink, 'stroke-width': 1.4 }, lines);
      }
      if (message.delivered_ns != null && vertices <= 64) {
        el('circle', { cx: x(message.delivered_ns), cy: y(message.dst), r: 2.2, fill: ink }, lines);
      }
    }
    const cursor = el('line', { x1: frame.left, x2: frame.left, y1: frame.top, y2: frame.bottom + 4, class: 'cursor' }, overlay);
    svg.onclick = (event) => {
      const box = svg.getBoundingClientRect();
      const fx = ((event.clientX - box.left) / box.width) * frame.width;
      seek(Math.max(0, Math.min(span, ((fx - frame.left) / (frame.right - frame.left)) * span)));
    };
    return { cursor, x };
  }

  // ---- plots: time against p (simulations) or against size (sweeps), log-log ----
  // Draws `series`, each {name, points: [{x, y, model, title}]}, into `svg`: a solid
  // line through (x, y), the model's (x, model) dashed, a dot per point with its
  // numbers on hover.
  function plotLogLog(svg, series, { xLabel, xTick }) {
    const frame = chartFrame([svg], { margin: { left: 64, right: 230, top: 16, bottom: 40 } });
    const points = series.flatMap((s) => s.points);
    const times = points.flatMap((q) => [q.y, q.model]).filter((v) => v > 0);
    const xs = points.map((q) => q.x);
    const lx = (v) => Math.log10(v);
    const [x0, x1] = [lx(Math.min(...xs)), lx(Math.max(...xs)) + 1e-9];
    const [t0, t1] = [Math.floor(lx(Math.min(...times))), Math.ceil(lx(Math.max(...times)) + 1e-9)];
    const x = (v) => frame.across((lx(v) - x0) / Math.max(x1 - x0, 1e-9));
    const y = (t) => frame.up((lx(t) - t0) / Math.max(t1 - t0, 1e-9));
    frame.axes(svg);
    const ticks = [...new Set(xs)].sort((a, b) => a - b);
    // At most about twelve labels along x; every point still has its dot.
    const every = Math.max(1, Math.ceil(ticks.length / 12));
    ticks.forEach((v, i) => { if (i % every === 0) el('text', { x: x(v) - 8, y: frame.bottom + 16, class: 'tick' }, svg).textContent = xTick(v); });
    el('text', { x: frame.right / 2, y: frame.height - 6, class: 'tick' }, svg).textContent = xLabel;
    for (let e = t0; e <= t1; e += 1) {
      el('line', { x1: frame.left, x2: frame.right, y1: y(10 ** e), y2: y(10 ** e), stroke: '#eee' }, svg);
      el('text', { x: 4, y: y(10 ** e) + 4, class: 'tick' }, svg).textContent = `${10 ** e} µs`;
    }
    series.forEach(({ name, points: list }, i) => {
      const ink = colour(i);
      list.sort((a, b) => a.x - b.x);
      el('polyline', { points: list.map((q) => `${x(q.x)},${y(q.y)}`).join(' '), fill: 'none', stroke: ink, 'stroke-width': 2, 'data-testid': 'series', 'data-name': name, 'data-points': list.length }, svg);
      const modelled = list.filter((q) => q.model > 0);
      if (modelled.length) {
        el('polyline', { points: modelled.map((q) => `${x(q.x)},${y(q.model)}`).join(' '), fill: 'none', stroke: ink, 'stroke-width': 1.5, 'stroke-dasharray': '6 4', 'data-testid': 'model' }, svg);
      }
      for (const q of list) {
        const dot = el('circle', { cx: x(q.x), cy: y(q.y), r: 4.5, fill: ink, 'data-testid': 'point' }, svg);
        el('title', {}, dot).textContent = q.title;
      }
      el('line', { x1: frame.right + 10, x2: frame.right + 34, y1: frame.top + 10 + 18 * i, y2: frame.top + 10 + 18 * i, stroke: ink, 'stroke-width': 2 }, svg);
      el('text', { x: frame.right + 38, y: frame.top + 14 + 18 * i, class: 'tick' }, svg).textContent = name;
    });
  }

  // ---- the step chart ----
  // Each step a bar across the time its messages took, as high as the bytes they
  // carried; hovering a step gives its messages, bytes, busiest link and span.
  function drawSteps(svg, steps) {
    const frame = chartFrame([svg], { margin: { left: 84, right: 20, top: 16, bottom: 40 } });
    frame.axes(svg);
    const span = Math.max(1, ...steps.map((s) => s.end_ns));
    const most = Math.max(1, ...steps.map((s) => s.bytes));
    const x = (ns) => frame.across(ns / span);
    const y = (b) => frame.up(b / most);
    for (const f of [0, 0.5, 1]) {
      const anchor = f === 0 ? 'start' : f === 1 ? 'end' : 'middle';
      el('text', { x: x(f * span), y: frame.bottom + 16, class: 'tick', 'text-anchor': anchor }, svg).textContent = micros(f * span);
      el('text', { x: 4, y: y(f * most) + 4, class: 'tick' }, svg).textContent = bytes(Math.round(f * most));
    }
    el('text', { x: frame.right / 2, y: frame.height - 6, class: 'tick' }, svg).textContent = 'simulated time';
    steps.forEach((s, i) => {
      const bar = el('rect', {
        x: x(s.start_ns), y: y(s.bytes), width: Math.max(1, x(s.end_ns) - x(s.start_ns)), height: Math.max(1, frame.bottom - y(s.bytes)),
        fill: colour(i % 2), 'fill-opacity': 0.7, 'data-testid': 'step-bar', 'data-step': s.step, 'data-messages': s.messages,
      }, svg);
      const busiest = s.busiest_link ? `; busiest link ${s.busiest_link[0]}→${s.busiest_link[1]} (${bytes(s.busiest_link[2])})` : '';
      el('title', {}, bar).textContent = `step ${s.step}: ${count(s.messages, 'message')}, ${bytes(s.bytes)}${busiest}; ${micros(s.start_ns)} to ${micros(s.end_ns)}`;
    });
  }

  Object.assign(lab, { PALETTE, stepColour, chartFrame, drawTopology, drawSpaceTime, plotLogLog, drawSteps });
  lab.parts.push('charts');
})();
