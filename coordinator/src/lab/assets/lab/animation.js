// The lab page's animation part: a run's flow as hops and deliveries in time, each
// frame drawn on the topology's overlay (marks on links, busy links as heat, rings
// round nodes) and the space-time diagram's cursor; play, pause, seek and step.
'use strict';

(() => {
  const lab = window.topocommLab;
  const { state, dom, el, micros, count, edgeKey, stepColour } = lab;
  // Wall seconds a whole flow takes to play at 1x.
  const PLAY_SECONDS = 8;

  function buildAnimation(doc, view, spacetime) {
    const hops = [];
    const deliveries = [];
    const times = new Set([0, doc.flow.span_ns]);
    doc.flow.messages.forEach((message, m) => {
      message.hops.forEach(([from, to, t0, t1], h) => {
        hops.push({ m, from, to, t0, t1, forwarded: h > 0, edge: view.edgeIndex.get(edgeKey(from, to)), colour: stepColour(message.step) });
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
    dom.clock.textContent = micros(t);
    dom.clock.dataset.us = (t / 1000).toFixed(3);
    dom.delivered.dataset.count = delivered;
    dom.delivered.dataset.total = anim.deliveries.length;
    dom.delivered.textContent = `${delivered} of ${count(anim.deliveries.length, 'message')} delivered`;
    if (anim.spacetime) {
      const cx = anim.spacetime.x(t);
      anim.spacetime.cursor.setAttribute('x1', cx); anim.spacetime.cursor.setAttribute('x2', cx);
    }
    dom.scrub.value = Math.round((t / anim.span) * 1000);
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
    dom.play.textContent = playing ? '❚❚ pause' : '▶ play';
    dom.play.setAttribute('aria-label', playing ? 'pause' : 'play');
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

  Object.assign(lab, { buildAnimation, walker, render, seek, setPlaying, step });
  lab.parts.push('animation');
})();
