// The topocomm lab's page: the cluster on its topology, runs from a form, and every
// message of a run animated along its links with the space-time diagram beside it.
// Plain JavaScript, nothing fetched but this lab's own API. Offline (a page saved by
// `run --html` or "Save as page") it plays the document held in #lab-data.
'use strict';

(() => {
  const SVGNS = 'http://www.w3.org/2000/svg';
  const $ = (selector) => document.querySelector(selector);
  const embedded = document.getElementById('lab-data');
  // Wall seconds a whole flow takes to play at 1x.
  const PLAY_SECONDS = 8;
  const state = {
    token: sessionStorage.getItem('topocomm-token') || '',
    catalogue: null,
    cluster: null,
    doc: null,
    docId: null,
    view: null,
    anim: null,
    watching: null,
    history: new Map(),
  };

  // ---- helpers ----
  function el(name, attributes = {}, parent = null, ns = SVGNS) {
    const node = ns ? document.createElementNS(ns, name) : document.createElement(name);
    for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
    if (parent) parent.appendChild(node);
    return node;
  }
  function html(name, attributes = {}, parent = null) { return el(name, attributes, parent, null); }
  function bytes(n) {
    if (n == null) return '–';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0; let v = n;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
    return `${i ? v.toFixed(1) : v} ${units[i]}`;
  }
  function micros(ns) { return `${(ns / 1000).toFixed(1)} µs`; }
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  function authHeaders(extra = {}) {
    return state.token ? { ...extra, Authorization: `Bearer ${state.token}` } : extra;
  }
  async function api(path, options = {}) {
    const response = await fetch(path, { ...options, headers: authHeaders(options.headers || {}) });
    if (response.status === 401) { askToken(); throw new Error('the cluster token is needed'); }
    const body = await response.json().catch(() => ({}));
    if (!response.ok) { const error = new Error(body.error || response.statusText); error.body = body; throw error; }
    return body;
  }
  function askToken() {
    $('#token-button').hidden = false;
    const dialog = $('#token-dialog');
    if (!dialog.open) dialog.showModal();
  }
  function showError(text) {
    const box = $('#error');
    box.textContent = text || '';
    box.hidden = !text;
  }

  // ---- the topology picture ----
  // Draws `topology` (its layout from topology_svg) into `svg`; returns what the
  // animation needs: edge paths and their lengths, node groups, the marks' layer.
  // The picture is two layers: the drawing, which stays still while the animation
  // plays (thousands of links are painted once), and an overlay of what moves (marks,
  // busy links, rings round nodes), which alone is painted again at each frame.
  function drawTopology(svg, overlay, topology, traffic) {
    svg.replaceChildren();
    overlay.replaceChildren();
    const layout = topology.layout;
    for (const layer of [svg, overlay]) {
      layer.setAttribute('viewBox', `0 0 ${layout.width} ${layout.height}`);
      layer.setAttribute('preserveAspectRatio', 'xMidYMid meet');
    }
    el('text', { x: 20, y: 32, 'font-size': 19, 'font-weight': 'bold', fill: '#222' }, svg).textContent = layout.title;
    el('text', { x: 20, y: 52, 'font-size': 12.5, fill: '#555' }, svg).textContent = layout.subtitle;
    const load = new Map();
    for (const [from, to, amount] of traffic || []) {
      const key = from < to ? `${from}-${to}` : `${to}-${from}`;
      load.set(key, (load.get(key) || 0) + amount);
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
      const key = link.from < link.to ? `${link.from}-${link.to}` : `${link.to}-${link.from}`;
      const carried = load.get(key);
      el('title', {}, path).textContent = `${link.from} ↔ ${link.to}` + (carried != null ? `: ${bytes(carried)} in the last run` : '');
      if (carried) path.setAttribute('stroke-width', 2 + Math.min(4, Math.log10(1 + carried) / 2));
      edges.push({ path, from: link.from, to: link.to, colour: link.colour, at: walker(link.path), busy: 0 });
      edgeIndex.set(key, i);
    });
    const font = topology.p > 99 ? 10 : 12.5;
    const r = layout.node_radius;
    const nodes = layout.nodes.map((node) => {
      const group = el('g', { class: 'node', 'data-node': node.id }, svg);
      el('circle', { cx: node.x, cy: node.y, r }, group);
      el('text', { x: node.x, y: node.y + font * 0.36, 'font-size': font }, group).textContent = node.id;
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
  function drawSpaceTime(svg, overlay, doc) {
    svg.replaceChildren();
    overlay.replaceChildren();
    const p = doc.topology.p;
    const span = Math.max(1, doc.flow.span_ns);
    const W = 640; const H = 420; const left = p <= 64 ? 34 : 10; const right = 8; const top = 8; const bottom = 26;
    for (const layer of [svg, overlay]) {
      layer.setAttribute('viewBox', `0 0 ${W} ${H}`);
      layer.setAttribute('preserveAspectRatio', 'none');
    }
    const x = (t) => left + (W - left - right) * (t / span);
    const y = (node) => top + (H - top - bottom) * (p === 1 ? 0.5 : node / (p - 1));
    const palette = doc.flow.palette;
    if (p <= 64) {
      for (let node = 0; node < p; node += 1) {
        el('line', { x1: left, x2: W - right, y1: y(node), y2: y(node), stroke: '#eee' }, svg);
        if (p <= 32 || node % 4 === 0) el('text', { x: 2, y: y(node) + 3, class: 'tick' }, svg).textContent = node;
      }
    }
    el('line', { x1: left, x2: W - right, y1: H - bottom + 4, y2: H - bottom + 4, class: 'axis' }, svg);
    for (let i = 0; i <= 4; i += 1) {
      const t = (span * i) / 4;
      el('text', { x: Math.min(x(t), W - 60), y: H - 6, class: 'tick' }, svg).textContent = micros(t);
    }
    const lines = el('g', {}, svg);
    for (const message of doc.flow.messages) {
      const colour = palette[Math.max(0, message.step - 1) % palette.length];
      for (const [from, to, t0, t1] of message.hops) {
        el('line', { x1: x(t0), y1: y(from), x2: x(t1), y2: y(to), stroke: colour, 'stroke-width': 1.4 }, lines);
      }
      if (message.delivered_ns != null && p <= 64) {
        el('circle', { cx: x(message.delivered_ns), cy: y(message.dst), r: 2.2, fill: colour }, lines);
      }
    }
    const cursor = el('line', { x1: left, x2: left, y1: top, y2: H - bottom + 4, class: 'cursor' }, overlay);
    svg.onclick = (event) => {
      const box = svg.getBoundingClientRect();
      const fx = ((event.clientX - box.left) / box.width) * W;
      seek(Math.max(0, Math.min(span, ((fx - left) / (W - left - right)) * span)));
    };
    return { cursor, x };
  }

  // ---- the animation ----
  function buildAnimation(doc, view, spacetime) {
    const hops = [];
    const deliveries = [];
    const times = new Set([0, doc.flow.span_ns]);
    const palette = doc.flow.palette;
    doc.flow.messages.forEach((message, m) => {
      message.hops.forEach(([from, to, t0, t1], h) => {
        const key = from < to ? `${from}-${to}` : `${to}-${from}`;
        hops.push({ m, from, to, t0, t1, forwarded: h > 0, edge: view.edgeIndex.get(key),
          colour: palette[Math.max(0, message.step - 1) % palette.length] });
        times.add(t0); times.add(t1);
      });
      if (message.delivered_ns != null) { deliveries.push({ t: message.delivered_ns, node: message.dst }); times.add(message.delivered_ns); }
    });
    deliveries.sort((a, b) => a.t - b.t);
    return {
      hops, deliveries, times: [...times].sort((a, b) => a - b), span: Math.max(1, doc.flow.span_ns),
      t: 0, playing: false, speed: 1, last: null, spacetime, frames: 0,
    };
  }

  // A function from 0..1 to the point that far along a link's path, read from the path
  // data topology_svg writes ("M x,y L x,y", "M x,y A r,r 0 0 1 x,y" along a circle, or
  // "M x,y C x,y x,y x,y"): computed here, so that drawing a frame never makes the
  // browser lay the picture out.
  function walker(d) {
    const n = (d.match(/-?\d+(?:\.\d+)?(?:e-?\d+)?/g) || []).map(Number);
    if (d.includes('C')) {
      const [x0, y0, x1, y1, x2, y2, x3, y3] = n;
      return (t) => {
        const u = 1 - t;
        return { x: u * u * u * x0 + 3 * u * u * t * x1 + 3 * u * t * t * x2 + t * t * t * x3,
          y: u * u * u * y0 + 3 * u * u * t * y1 + 3 * u * t * t * y2 + t * t * t * y3 };
      };
    }
    const line = (x0, y0, x1, y1) => (t) => ({ x: x0 + (x1 - x0) * t, y: y0 + (y1 - y0) * t });
    if (d.includes('A')) {
      const [x0, y0, r, , , , , x1, y1] = n;
      const half = Math.hypot(x1 - x0, y1 - y0) / 2;
      if (!(r > half)) return line(x0, y0, x1, y1);
      // The small arc swept in the positive angle direction: its centre lies to the
      // left of the chord's direction, as the y axis points down.
      const ux = (x1 - x0) / (2 * half); const uy = (y1 - y0) / (2 * half);
      const off = Math.sqrt(r * r - half * half);
      const cx = (x0 + x1) / 2 - uy * off; const cy = (y0 + y1) / 2 + ux * off;
      const a0 = Math.atan2(y0 - cy, x0 - cx);
      let sweep = Math.atan2(y1 - cy, x1 - cx) - a0;
      while (sweep < 0) sweep += 2 * Math.PI;
      return (t) => ({ x: cx + r * Math.cos(a0 + sweep * t), y: cy + r * Math.sin(a0 + sweep * t) });
    }
    const [x0, y0, x1, y1] = n;
    return line(x0, y0, x1, y1);
  }

  function pointOn(edge, hop, fraction) {
    return edge.at(hop.from === edge.from ? fraction : 1 - fraction);
  }

  function render() {
    const anim = state.anim; const view = state.view;
    if (!anim || !view) return;
    const t = anim.t;
    // Messages on their links now, and how many share each link.
    const busy = new Array(view.edges.length).fill(0);
    const sending = new Set();
    let shown = 0;
    for (const hop of anim.hops) {
      if (hop.t0 > t || hop.t1 <= t || hop.edge == null) continue;
      busy[hop.edge] += 1;
      sending.add(hop.from);
      const fraction = hop.t1 > hop.t0 ? (t - hop.t0) / (hop.t1 - hop.t0) : 1;
      const point = pointOn(view.edges[hop.edge], hop, fraction);
      let mark = view.pool[shown];
      if (!mark) { mark = el('circle', { r: view.markRadius, class: 'mark' }, view.marks); view.pool.push(mark); }
      mark.setAttribute('cx', point.x); mark.setAttribute('cy', point.y); mark.setAttribute('fill', hop.colour);
      mark.setAttribute('class', hop.forwarded ? 'mark forwarded' : 'mark');
      mark.removeAttribute('visibility');
      shown += 1;
    }
    for (let i = shown; i < view.pool.length; i += 1) view.pool[i].setAttribute('visibility', 'hidden');
    // Link occupancy as heat: thicker and redder the more messages share it.
    view.edges.forEach((edge, i) => {
      if (edge.busy === busy[i]) return;
      edge.busy = busy[i];
      if (busy[i] > 0) {
        if (!edge.hot) edge.hot = el('path', { d: edge.path.getAttribute('d'), fill: 'none', class: 'hot' }, view.heat);
        edge.hot.setAttribute('stroke', busy[i] > 1 ? '#c0392b' : '#e4572e');
        edge.hot.setAttribute('stroke-width', 3 + 1.5 * Math.min(busy[i], 4));
        edge.hot.removeAttribute('visibility');
      } else if (edge.hot) {
        edge.hot.setAttribute('visibility', 'hidden');
      }
    });
    // Nodes that have received something so far, and those sending now.
    const got = new Set();
    let delivered = 0;
    for (const delivery of anim.deliveries) {
      if (delivery.t > t) break;
      delivered += 1; got.add(delivery.node);
    }
    view.nodes.forEach((node, id) => {
      const has = got.has(id); const sends = sending.has(id);
      if (node.got !== has || node.sending !== sends) {
        node.got = has; node.sending = sends;
        if (!node.ring) node.ring = el('circle', { cx: node.x, cy: node.y, r: view.r + 2, 'data-node': id }, view.rings);
        node.ring.setAttribute('class', `ring${has ? ' got' : ''}${sends ? ' sending' : ''}`);
      }
    });
    const clock = $('#clock');
    clock.textContent = micros(t);
    clock.dataset.us = (t / 1000).toFixed(3);
    const counter = $('#delivered');
    counter.dataset.count = delivered;
    counter.dataset.total = anim.deliveries.length;
    counter.textContent = `${delivered} of ${anim.deliveries.length} messages delivered`;
    if (anim.spacetime) {
      const cx = anim.spacetime.x(t);
      anim.spacetime.cursor.setAttribute('x1', cx); anim.spacetime.cursor.setAttribute('x2', cx);
    }
    $('#scrub').value = Math.round((t / anim.span) * 1000);
  }

  function seek(t) {
    if (!state.anim) return;
    state.anim.t = Math.max(0, Math.min(state.anim.span, t));
    render();
  }

  function frame(now) {
    const anim = state.anim;
    if (!anim || !anim.playing) return;
    if (anim.last != null) {
      const rate = (anim.span / (PLAY_SECONDS * 1000)) * anim.speed;
      anim.t = Math.min(anim.span, anim.t + (now - anim.last) * rate);
    }
    anim.last = now;
    anim.frames += 1;
    render();
    if (anim.t >= anim.span) { setPlaying(false); return; }
    requestAnimationFrame(frame);
  }

  function setPlaying(playing) {
    const anim = state.anim;
    if (!anim) return;
    if (playing && anim.t >= anim.span) anim.t = 0;
    anim.playing = playing;
    anim.last = null;
    $('#play').textContent = playing ? '❚❚ pause' : '▶ play';
    $('#play').setAttribute('aria-label', playing ? 'pause' : 'play');
    if (playing) requestAnimationFrame(frame);
  }

  function step(direction) {
    const anim = state.anim;
    if (!anim) return;
    setPlaying(false);
    const times = anim.times;
    const next = direction > 0 ? times.find((t) => t > anim.t + 0.5) : [...times].reverse().find((t) => t < anim.t - 0.5);
    seek(next != null ? next : direction > 0 ? anim.span : 0);
  }

  // ---- showing things ----
  function showTopology(topology, traffic, title, source) {
    $('#stage-title').textContent = title;
    $('#stage-source').textContent = source || '';
    state.view = drawTopology($('#picture'), $('#picture-overlay'), topology, traffic);
  }

  // Whether `doc` is something the stage shows (a finished run's document, not its entry).
  function showable(doc) { return doc.flow || ['scaling', 'sweep', 'steps'].includes(doc.kind); }

  function showDocument(doc, id) {
    if (doc.kind === 'scaling') { showScaling(doc, id); return; }
    if (doc.kind === 'sweep') { showSweep(doc, id, state.history.get(id)?.status); return; }
    if (doc.kind === 'steps') { showSteps(doc, id); return; }
    $('.pictures').classList.remove('single');
    $('#controls').hidden = false;
    $('#heat-caption').textContent = 'links: thicker and red while busy; nodes: yellow once they have received, ringed red while they send';
    state.doc = doc; state.docId = id;
    setPlaying(false);
    showTopology(doc.topology, null, doc.title, `${doc.kind}: ${doc.flow.source}`);
    const spacetime = drawSpaceTime($('#spacetime'), $('#spacetime-overlay'), doc);
    state.anim = buildAnimation(doc, state.view, spacetime);
    showResult(doc);
    render();
  }

  function showResult(doc) {
    const result = doc.result || {};
    const verdict = $('#verdict');
    let text; let ok;
    if (doc.kind === 'explain') {
      ok = true;
      text = `schedule explained (nothing run): model ${Number(result.model_us).toFixed(1)} µs, ${result.steps} steps`;
    } else if (result.verified) {
      ok = true;
      const where = doc.kind === 'simulate' ? 'simulated, every result verified' : `verified on all ${result.nodes} nodes`;
      text = `${where}: ${result.collective} (${result.algorithm}) on ${result.topology}`;
    } else if (doc.kind === 'simulate') {
      ok = true; text = 'simulated with lengths only: nothing verified';
    } else {
      ok = false; text = `NOT verified: ${result.error || 'see the statistics'}`;
    }
    verdict.textContent = text;
    verdict.className = ok ? 'ok' : 'bad';
    const body = $('#stats tbody');
    body.replaceChildren();
    const row = (key, value) => {
      const tr = html('tr', {}, body);
      html('td', {}, tr).textContent = key;
      html('td', {}, tr).textContent = value;
    };
    const time = result.time_us;
    if (time) row('time (µs)', `min ${time.min.toFixed(1)} · median ${time.median.toFixed(1)} · mean ${time.mean.toFixed(1)} · max ${time.max.toFixed(1)} · p90 ${time.p90.toFixed(1)} · p99 ${time.p99.toFixed(1)}`);
    if (result.model_us != null) row('model (µs)', `${Number(result.model_us).toFixed(1)}${result.model_ratio != null ? ` · measured median / model ${result.model_ratio.toFixed(3)}` : ''}`);
    if (result.closed_form_us != null) row('closed form (µs)', `${result.closed_form_us.toFixed(1)} (${result.closed_form})`);
    for (const [key, value] of Object.entries(result)) {
      if (['time_us', 'model_us', 'model_ratio', 'schedule', 'iteration_us', 'closed_form_us', 'closed_form', 'schema_version'].includes(key)) continue;
      if (value == null) continue;
      row(key.replace(/_/g, ' '), typeof value === 'object' ? JSON.stringify(value) : String(value));
    }
    row('messages in the flow', `${doc.flow.messages.length} (${doc.flow.source})`);
    $('#result-buttons').hidden = embedded != null || state.docId == null;
  }

  // ---- plots: time against p (simulations) or against size (sweeps), log-log ----
  // Takes the whole stage (there is no flow to play) and draws `series`, each
  // {name, points: [{x, y, model, title}]}: a solid line through (x, y), the model's
  // (x, model) dashed, a dot per point with its numbers on hover.
  // The stage given to one chart (no flow to play): its title and captions set, the
  // other layers cleared; returns the emptied picture, `W` by `H`.
  function chartStage(doc, id, source, caption, W, H) {
    setPlaying(false);
    state.doc = doc; state.docId = id; state.anim = null; state.view = null;
    $('#stage-title').textContent = doc.title;
    $('#stage-source').textContent = source;
    for (const layer of ['#picture-overlay', '#spacetime', '#spacetime-overlay']) $(layer).replaceChildren();
    $('.pictures').classList.add('single');
    $('#controls').hidden = true;
    $('#heat-caption').textContent = caption;
    const svg = $('#picture');
    svg.replaceChildren();
    svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
    svg.setAttribute('preserveAspectRatio', 'xMidYMid meet');
    return svg;
  }

  function plotLogLog(doc, id, series, { xLabel, xTick, source, caption }) {
    const W = 900; const H = 420; const left = 64; const right = 230; const top = 16; const bottom = 40;
    const svg = chartStage(doc, id, source, caption, W, H);
    const points = series.flatMap((s) => s.points);
    const times = points.flatMap((q) => [q.y, q.model]).filter((v) => v > 0);
    const xs = points.map((q) => q.x);
    const lx = (v) => Math.log10(v);
    const [x0, x1] = [lx(Math.min(...xs)), lx(Math.max(...xs)) + 1e-9];
    const [t0, t1] = [Math.floor(lx(Math.min(...times))), Math.ceil(lx(Math.max(...times)) + 1e-9)];
    const x = (v) => left + (W - left - right) * ((lx(v) - x0) / Math.max(x1 - x0, 1e-9));
    const y = (t) => H - bottom - (H - top - bottom) * ((lx(t) - t0) / Math.max(t1 - t0, 1e-9));
    el('line', { x1: left, x2: W - right, y1: H - bottom, y2: H - bottom, class: 'axis' }, svg);
    el('line', { x1: left, x2: left, y1: top, y2: H - bottom, class: 'axis' }, svg);
    const ticks = [...new Set(xs)].sort((a, b) => a - b);
    // At most about twelve labels along x; every point still has its dot.
    const every = Math.max(1, Math.ceil(ticks.length / 12));
    ticks.forEach((v, i) => { if (i % every === 0) el('text', { x: x(v) - 8, y: H - bottom + 16, class: 'tick' }, svg).textContent = xTick(v); });
    el('text', { x: (W - right) / 2, y: H - 6, class: 'tick' }, svg).textContent = xLabel;
    for (let e = t0; e <= t1; e += 1) {
      el('line', { x1: left, x2: W - right, y1: y(10 ** e), y2: y(10 ** e), stroke: '#eee' }, svg);
      el('text', { x: 4, y: y(10 ** e) + 4, class: 'tick' }, svg).textContent = `${10 ** e} µs`;
    }
    const palette = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];
    series.forEach(({ name, points: list }, i) => {
      const colour = palette[i % palette.length];
      list.sort((a, b) => a.x - b.x);
      el('polyline', { points: list.map((q) => `${x(q.x)},${y(q.y)}`).join(' '), fill: 'none', stroke: colour, 'stroke-width': 2, 'data-testid': 'series', 'data-name': name, 'data-points': list.length }, svg);
      const modelled = list.filter((q) => q.model > 0);
      if (modelled.length) {
        el('polyline', { points: modelled.map((q) => `${x(q.x)},${y(q.model)}`).join(' '), fill: 'none', stroke: colour, 'stroke-width': 1.5, 'stroke-dasharray': '6 4', 'data-testid': 'model' }, svg);
      }
      for (const q of list) {
        const dot = el('circle', { cx: x(q.x), cy: y(q.y), r: 4.5, fill: colour, 'data-testid': 'point' }, svg);
        el('title', {}, dot).textContent = q.title;
      }
      el('line', { x1: W - right + 10, x2: W - right + 34, y1: top + 10 + 18 * i, y2: top + 10 + 18 * i, stroke: colour, 'stroke-width': 2 }, svg);
      el('text', { x: W - right + 38, y: top + 14 + 18 * i, class: 'tick' }, svg).textContent = name;
    });
    $('#result-buttons').hidden = embedded != null || state.docId == null;
  }

  // Points grouped into series by `name(point)`, in their first appearance's order.
  function grouped(points, name, toPoint) {
    const series = new Map();
    for (const q of points) {
      const key = name(q);
      if (!series.has(key)) series.set(key, []);
      series.get(key).push(toPoint(q, key));
    }
    return [...series.entries()].map(([key, list]) => ({ name: key, points: list }));
  }

  function statsRows(rows) {
    const body = $('#stats tbody');
    body.replaceChildren();
    for (const [key, value] of rows) {
      const tr = html('tr', {}, body);
      html('td', {}, tr).textContent = key;
      html('td', {}, tr).textContent = value;
    }
  }

  // Simulations at several points: time against p, a line per topology and algorithm.
  function showScaling(doc, id) {
    const points = doc.result.points;
    const series = grouped(points, (q) => `${q.topology} (${q.algorithm})`, (q, name) => ({
      x: q.nodes, y: q.time_us.median, model: q.closed_form_us,
      title: `${name}, p = ${q.nodes}: ${q.time_us.median.toFixed(1)} µs` +
        (q.closed_form_us != null ? `; closed form ${q.closed_form_us.toFixed(1)} µs (${q.closed_form})` : '') +
        `; ${q.steps} steps, ${q.frames_sent} messages${q.verified ? ', verified' : ', lengths only'}`,
    }));
    plotLogLog(doc, id, series, {
      xLabel: 'p (nodes)', xTick: String,
      source: 'time against p, log-log; hover a point for its numbers; dashed: the textbook\'s closed form',
      caption: 'solid: simulated time; dashed: the closed form; hover a point for its numbers',
    });
    const verdict = $('#verdict');
    const failures = doc.result.failures || [];
    const verified = points.every((q) => q.verified);
    verdict.textContent = `${points.length} points simulated${verified ? ', every result verified' : ' (some with lengths only)'}` +
      (failures.length ? `; ${failures.length} failed` : '');
    verdict.className = failures.length ? 'bad' : 'ok';
    statsRows(points.map((q) => [`${q.topology} (${q.algorithm}), p = ${q.nodes}`, `${q.time_us.median.toFixed(1)} µs` +
      (q.closed_form_us != null ? ` · closed form ${q.closed_form_us.toFixed(1)} µs` : '') + ` · ${q.steps} steps`]));
  }

  // A sweep on the cluster (`sweep --json`): mean time against bytes per node, a line per
  // algorithm, the cost model dashed.
  function showSweep(doc, id, status) {
    const result = doc.result;
    const points = result.points;
    const gbps = (v) => (v == null ? '–' : `${v.toFixed(3)} GB/s`);
    const series = grouped(points, (q) => q.algorithm, (q, name) => ({
      x: q.size_bytes, y: q.avg_us, model: q.model_us,
      title: `${name}, ${bytes(q.size_bytes)} per node: mean ${q.avg_us.toFixed(1)} µs (min ${q.min_us.toFixed(1)}, p99 ${q.p99_us.toFixed(1)})` +
        (q.model_us != null ? `; model ${q.model_us.toFixed(1)} µs` : '') +
        `; algbw ${gbps(q.algbw_gbps)}, busbw ${gbps(q.busbw_gbps)}; ${q.iterations} iterations, verified`,
    }));
    plotLogLog(doc, id, series, {
      xLabel: 'bytes per node', xTick: bytes,
      source: 'mean time against size, log-log; hover a point for its numbers; dashed: the cost model',
      caption: 'solid: measured mean time, every point verified; dashed: the cost model',
    });
    const verdict = $('#verdict');
    const failed = status === 'failed';
    verdict.textContent = `${points.length} points measured on ${result.nodes} nodes, every one verified` +
      (failed ? '; the sweep stopped at a failed point' : '');
    verdict.className = failed ? 'bad' : 'ok';
    const rows = [];
    const l = result.links;
    if (l) rows.push(['links', `${l.emulated ? 'emulated' : 'full-speed, the model from the calibration'}: ${l.routing.toUpperCase()}, t_s ${l.ts_us} µs, t_h ${l.th_us} µs, t_w ${l.tw_ns_per_byte} ns/B`]);
    if (result.dilation) rows.push(['dilation', result.dilation]);
    for (const skipped of doc.skipped || []) rows.push(['left out', skipped]);
    for (const q of points) {
      rows.push([`${q.algorithm}, ${bytes(q.size_bytes)}`, `mean ${q.avg_us.toFixed(1)} µs` +
        (q.model_us != null ? ` · model ${q.model_us.toFixed(1)} µs` : '') + ` · busbw ${gbps(q.busbw_gbps)}`]);
    }
    statsRows(rows);
  }

  // A simulation of more nodes than the page animates: a step chart, each step a bar
  // across the time its messages took, as high as the bytes they carried; hovering a
  // step gives its messages, bytes, busiest link and span. The table holds the figures.
  function showSteps(doc, id) {
    const steps = doc.steps || [];
    const W = 900; const H = 420; const left = 84; const right = 20; const top = 16; const bottom = 40;
    const svg = chartStage(doc, id, `${doc.note}; ${doc.source}`,
      'bars: each step across the time its messages took, as high as the bytes they carried; hover a step for its numbers', W, H);
    el('line', { x1: left, x2: W - right, y1: H - bottom, y2: H - bottom, class: 'axis' }, svg);
    el('line', { x1: left, x2: left, y1: top, y2: H - bottom, class: 'axis' }, svg);
    const span = Math.max(1, ...steps.map((s) => s.end_ns));
    const most = Math.max(1, ...steps.map((s) => s.bytes));
    const x = (ns) => left + (W - left - right) * (ns / span);
    const y = (b) => H - bottom - (H - top - bottom) * (b / most);
    for (const f of [0, 0.5, 1]) {
      const anchor = f === 0 ? 'start' : f === 1 ? 'end' : 'middle';
      el('text', { x: x(f * span), y: H - bottom + 16, class: 'tick', 'text-anchor': anchor }, svg).textContent = micros(f * span);
      el('text', { x: 4, y: y(f * most) + 4, class: 'tick' }, svg).textContent = bytes(Math.round(f * most));
    }
    el('text', { x: (W - right) / 2, y: H - 6, class: 'tick' }, svg).textContent = 'simulated time';
    const palette = ['#1f77b4', '#ff7f0e'];
    steps.forEach((s, i) => {
      const bar = el('rect', {
        x: x(s.start_ns), y: y(s.bytes), width: Math.max(1, x(s.end_ns) - x(s.start_ns)), height: Math.max(1, H - bottom - y(s.bytes)),
        fill: palette[i % palette.length], 'fill-opacity': 0.7, 'data-testid': 'step-bar', 'data-step': s.step, 'data-messages': s.messages,
      }, svg);
      const busiest = s.busiest_link ? `; busiest link ${s.busiest_link[0]}→${s.busiest_link[1]} (${bytes(s.busiest_link[2])})` : '';
      el('title', {}, bar).textContent = `step ${s.step}: ${s.messages} messages, ${bytes(s.bytes)}${busiest}; ${micros(s.start_ns)} to ${micros(s.end_ns)}`;
    });
    const result = doc.result;
    const verdict = $('#verdict');
    verdict.textContent = `simulated on ${result.nodes} nodes${result.verified ? ', every result verified' : ' with lengths only: nothing verified'}`;
    verdict.className = 'ok';
    const rows = [['time (µs)', `${result.time_us.median.toFixed(1)}` + (result.closed_form_us != null ? ` · closed form ${result.closed_form_us.toFixed(1)} (${result.closed_form})` : '')]];
    for (const key of ['steps', 'frames_sent', 'frames_forwarded', 'busiest_link', 'cost']) {
      if (result[key] != null) rows.push([key.replace(/_/g, ' '), typeof result[key] === 'object' ? JSON.stringify(result[key]) : String(result[key])]);
    }
    for (const s of steps) {
      rows.push([`step ${s.step}`, `${s.messages} messages · ${bytes(s.bytes)} · ${micros(s.start_ns)} to ${micros(s.end_ns)}` +
        (s.busiest_link ? ` · busiest ${s.busiest_link[0]}→${s.busiest_link[1]}` : '')]);
    }
    statsRows(rows);
  }

  function showCluster(cluster) {
    state.cluster = cluster;
    const connected = cluster.nodes.filter((n) => n.connected).length;
    const wired = cluster.topology ? `wired as ${cluster.topology.layout.title}` : 'not wired yet';
    $('#cluster-line').textContent = `${connected} of ${cluster.expected} nodes connected · ${wired}`;
    const body = $('#nodes tbody');
    body.replaceChildren();
    for (const node of cluster.nodes) {
      const tr = html('tr', { class: node.connected ? '' : 'gone' }, body);
      for (const value of [node.id ?? '–', node.name, node.address, node.memory_bytes ? bytes(node.memory_bytes) : 'unknown']) {
        html('td', {}, tr).textContent = value;
      }
    }
    if (!state.doc) {
      if (cluster.topology) showTopology(cluster.topology, cluster.traffic, 'The cluster', 'the wiring in force; link width: bytes of the last run');
      else previewShape();
    }
  }

  async function previewShape() {
    if (state.doc || !state.cluster) return;
    const topology = $('#topology').value || 'hypercube';
    const nodes = ['run', 'sweep'].includes(currentMode()) ? state.cluster.expected : Number($('#nodes-count').value || state.cluster.expected);
    // More nodes than the page draws: no preview (a simulation of them is shown by step).
    if (nodes > 1024) return;
    const query = new URLSearchParams({ topology, nodes: String(nodes), dims: $('#dims').value.trim() });
    try {
      const topologyDoc = await api(`/api/layout?${query}`);
      if (!state.doc) showTopology(topologyDoc, null, 'The cluster (not wired yet)', `as the form's topology would wire it`);
    } catch (error) { /* the form shows the error when it is submitted */ }
  }

  // ---- the form ----
  function currentMode() { return document.querySelector('input[name="mode"]:checked').value; }

  function fillSelect(select, values, keep) {
    select.replaceChildren();
    for (const [value, text] of values) { const option = html('option', { value }, select); option.textContent = text; }
    if (keep != null && values.some(([value]) => value === keep)) select.value = keep;
  }

  function fillAlgorithms() {
    const collective = state.catalogue.collectives.find((c) => c.name === $('#collective').value);
    const keep = $('#algorithm').value;
    // A sweep takes several algorithms ("all"), not the choice by size ("auto").
    const choose = currentMode() === 'sweep' ? ['all', 'all of them'] : ['auto', 'auto (by size and p)'];
    fillSelect($('#algorithm'), [['', 'made for the topology (default)'], choose,
      ...collective.algorithms.map((a) => [a, a])], keep);
    $('#root').disabled = !collective.rooted;
    $('#op').disabled = !collective.reduces;
  }

  function words() {
    const mode = currentMode();
    const value = (id) => $(`#${id}`).value.trim();
    const list = [value('collective')];
    const add = (flag, v) => { if (v !== '' && v != null) list.push(flag, v); };
    add('--topology', value('topology'));
    add('--dims', value('dims'));
    // Runs and sweeps go to the lab's cluster, whose size is fixed.
    if (mode === 'explain' || mode === 'simulate') add('--nodes', value('nodes-count'));
    add('--algorithm', value('algorithm'));
    if (mode === 'sweep') add('--sizes', value('sizes')); else add('--size', value('size'));
    add('--dtype', value('dtype'));
    if (!$('#op').disabled) add('--op', value('op'));
    if (!$('#root').disabled) add('--root', value('root'));
    add('--ts', value('ts')); add('--th', value('th')); add('--tw', value('tw'));
    if (value('routing') !== 'sf') add('--routing', value('routing'));
    if (mode === 'run' || mode === 'sweep') { add('--iterations', value('iterations')); add('--dilation', value('dilation')); }
    return list;
  }

  function showWords() {
    const mode = currentMode();
    $('#words').textContent = `topocomm ${mode} ${words().join(' ')}`;
    $('#run').textContent = { run: 'Run', explain: 'Explain', simulate: 'Simulate', sweep: 'Sweep' }[mode];
    const onCluster = mode === 'run' || mode === 'sweep';
    $('#iterations').disabled = !onCluster;
    $('#dilation').disabled = !onCluster;
    $('#nodes-count').disabled = onCluster;
    $('#size').disabled = mode === 'sweep';
    $('#sizes').disabled = mode !== 'sweep';
    if (state.cluster) $('#nodes-count').placeholder = `${state.cluster.expected} (the cluster's)`;
  }

  async function submit(event) {
    event.preventDefault();
    showError('');
    const kind = currentMode();
    try {
      const answer = await api('/api/runs', {
        method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ kind, args: words() }),
      });
      state.watching = answer.id;
      // The job's events may have come before this answer (a fast run is over by now):
      // they were kept, and the latest says where it is.
      const known = state.history.get(answer.id);
      if (known) onRun(known); else progress(`${kind} ${answer.id} queued`);
    } catch (error) {
      showError(error.message);
    }
  }

  let progressTimer = null;
  function progress(text) {
    const box = $('#progress');
    if (text == null) { box.hidden = true; clearInterval(progressTimer); progressTimer = null; return; }
    box.hidden = false;
    const began = performance.now();
    clearInterval(progressTimer);
    const show = () => { $('#progress-text').textContent = `${text} · ${((performance.now() - began) / 1000).toFixed(0)} s`; };
    show();
    progressTimer = setInterval(show, 500);
  }

  const FINISHED = ['verified', 'failed', 'cancelled'];

  // Every job's news is kept, watched or not: the page follows a job by the id its POST
  // answered and by its events, whichever comes first.
  async function onRun(run) {
    state.history.set(run.id, run);
    drawHistory();
    if (run.id !== state.watching) return;
    if (FINISHED.includes(run.status)) {
      progress(null);
      state.watching = null;
      if (run.status === 'cancelled') { showError(`${run.kind} ${run.id} cancelled`); return; }
      if (run.status === 'failed' && run.note) showError(run.note);
      try {
        const doc = await api(`/api/runs/${run.id}`);
        if (showable(doc)) showDocument(doc, run.id);
      } catch (error) { showError(error.message); }
    } else {
      // A sweep's point ("point 2 of 6: ring at 1.0 KiB"); the dilation's announcement up
      // to its reason ("dilation ×K (--dilation auto)").
      const note = !run.note ? '' : ` — ${run.kind === 'sweep' ? run.note : run.note.split(':')[0]}`;
      progress(`${run.kind} ${run.id}: ${run.status}${note}`);
    }
  }

  function drawHistory() {
    const list = $('#history');
    list.replaceChildren();
    for (const run of [...state.history.values()].sort((a, b) => b.id - a.id)) {
      const item = html('li', { class: run.status, 'data-run': run.id }, list);
      const button = html('button', { type: 'button' }, item);
      button.textContent = `#${run.id} ${run.kind} ${run.args.join(' ')} — ${run.status}`;
      button.onclick = async () => {
        try { const doc = await api(`/api/runs/${run.id}`); if (showable(doc)) showDocument(doc, run.id); else showError(run.note || 'not finished'); } catch (error) { showError(error.message); }
      };
      if (!FINISHED.includes(run.status)) {
        const stop = html('button', { type: 'button', class: 'cancel', 'data-testid': 'cancel-run', 'aria-label': `cancel #${run.id}` }, item);
        stop.textContent = 'cancel';
        stop.onclick = () => cancelRun(run.id);
      }
    }
  }

  // Cancels a job waiting or running; its events say when it is over.
  async function cancelRun(id) {
    if (id == null) return;
    try { await api(`/api/runs/${id}`, { method: 'DELETE' }); } catch (error) { showError(error.message); }
  }

  async function download(path, name, type) {
    const response = await fetch(path, { headers: authHeaders() });
    if (!response.ok) { showError(`could not fetch ${path}: ${response.status}`); return; }
    const blob = new Blob([await response.arrayBuffer()], { type });
    const link = html('a', { href: URL.createObjectURL(blob), download: name });
    link.click();
    setTimeout(() => URL.revokeObjectURL(link.href), 5000);
  }

  // ---- live updates: server-sent events read through fetch (so the token goes in a header) ----
  async function listen() {
    for (;;) {
      try {
        const response = await fetch('/api/events', { headers: authHeaders() });
        if (response.status === 401) { $('#connection').textContent = 'needs the cluster token'; askToken(); return; }
        if (!response.ok) throw new Error(String(response.status));
        $('#connection').textContent = 'live';
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        let buffer = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          let end;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const chunk = buffer.slice(0, end); buffer = buffer.slice(end + 2);
            const data = chunk.split('\n').filter((line) => line.startsWith('data:')).map((line) => line.slice(5).trimStart()).join('\n');
            if (data) onEvent(JSON.parse(data));
          }
        }
      } catch (error) { /* reconnect below */ }
      $('#connection').textContent = 'reconnecting…';
      await sleep(1000);
    }
  }

  function onEvent(event) {
    if (event.type === 'cluster') showCluster(event);
    else if (event.type === 'run') onRun(event.run);
  }

  // ---- start ----
  function wireControls() {
    $('#play').onclick = () => setPlaying(!(state.anim && state.anim.playing));
    $('#back').onclick = () => step(-1);
    $('#forward').onclick = () => step(1);
    $('#scrub').oninput = (event) => { if (state.anim) { setPlaying(false); seek((event.target.value / 1000) * state.anim.span); } };
    $('#speed').onchange = (event) => { if (state.anim) state.anim.speed = Number(event.target.value); };
    document.addEventListener('keydown', (event) => {
      if (event.target.closest('input, select, textarea, button')) return;
      if (event.key === ' ') { event.preventDefault(); setPlaying(!(state.anim && state.anim.playing)); }
      if (event.key === 'ArrowRight') step(1);
      if (event.key === 'ArrowLeft') step(-1);
    });
  }

  async function start() {
    wireControls();
    if (embedded) {
      document.body.classList.add('offline');
      $('#cluster-line').textContent = 'saved run (plays offline)';
      showDocument(JSON.parse(embedded.textContent), null);
      return;
    }
    $('#save-page').onclick = () => download(`/api/runs/${state.docId}/page`, `topocomm-run-${state.docId}.html`, 'text/html');
    // A sweep's JSON is what `topocomm sweep --json` writes.
    $('#save-json').onclick = () => (state.doc && state.doc.kind === 'sweep'
      ? download(`/api/sweeps/${state.docId}`, `topocomm-sweep-${state.docId}.json`, 'application/json')
      : download(`/api/runs/${state.docId}`, `topocomm-run-${state.docId}.json`, 'application/json'));
    $('#token-button').onclick = askToken;
    $('#token-form').onsubmit = () => {
      state.token = $('#token').value.trim();
      sessionStorage.setItem('topocomm-token', state.token);
      $('#token-button').hidden = true;
      boot();
    };
    $('#run-form').onsubmit = submit;
    $('#cancel').onclick = () => cancelRun(state.watching);
    $('#run-form').oninput = () => { showWords(); };
    $('#collective').onchange = () => { fillAlgorithms(); showWords(); };
    $('#topology').onchange = () => { showWords(); previewShape(); };
    for (const radio of document.querySelectorAll('input[name="mode"]')) radio.onchange = () => { fillAlgorithms(); showWords(); };
    await boot();
  }

  async function boot() {
    try {
      state.catalogue = await api('/api/catalogue');
    } catch (error) { $('#connection').textContent = error.message; return; }
    const c = state.catalogue;
    fillSelect($('#collective'), c.collectives.map((x) => [x.name, x.name]), $('#collective').value || 'allreduce');
    fillSelect($('#topology'), c.topologies.map((x) => [x, x]), $('#topology').value || 'hypercube');
    fillSelect($('#dtype'), c.dtypes.map((x) => [x, x]), $('#dtype').value || 'f64');
    fillSelect($('#op'), c.ops.map((x) => [x, x]), $('#op').value || 'sum');
    fillSelect($('#routing'), c.routings.map((x) => [x, x]), $('#routing').value || 'sf');
    fillAlgorithms();
    showWords();
    const runs = await api('/api/runs');
    for (const run of runs.runs) state.history.set(run.id, run);
    drawHistory();
    listen();
  }

  window.topocommLab = { state, seek, setPlaying, step };
  start();
})();
