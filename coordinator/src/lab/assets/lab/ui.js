// The lab page's ui part, loaded last: the cluster's table, the form and the command it
// stands for, runs followed by their POST's id and their events (whichever comes
// first), the history with its cancel buttons, and the stage showing a document (a flow
// to play, or a chart); then the page starts, once every part has loaded.
'use strict';

(() => {
  // The parts before this one, in their order (the page's script tags').
  const BEFORE = ['page', 'api', 'charts', 'animation'];
  const lab = window.topocommLab;
  const absent = BEFORE.filter((part) => !(lab && lab.parts.includes(part)));
  if (absent.length) {
    const box = document.getElementById('error');
    box.textContent = `the page's parts ${absent.join(', ')} did not load: it cannot run`;
    box.hidden = false;
    return;
  }
  const {
    state, dom, html, tableRows, bytes, count, showError, clearError, embedded, api, askToken, download, listen,
    drawTopology, drawSpaceTime, plotLogLog, drawSteps, buildAnimation, walker, render, seek, setPlaying, step,
  } = lab;
  const FINISHED = ['verified', 'failed', 'cancelled'];

  // ---- showing things ----
  function showTopology(topology, traffic, title, source) {
    dom.stageTitle.textContent = title;
    dom.stageSource.textContent = source || '';
    state.view = drawTopology(dom.picture, dom.pictureOverlay, topology, traffic, walker);
  }

  // Whether `doc` is something the stage shows (a finished run's document, not its entry).
  function showable(doc) { return doc.flow || ['scaling', 'sweep', 'steps'].includes(doc.kind); }

  function showDocument(doc, id) {
    if (doc.kind === 'scaling') { showScaling(doc, id); return; }
    if (doc.kind === 'sweep') { showSweep(doc, id, state.history.get(id)?.status); return; }
    if (doc.kind === 'steps') { showSteps(doc, id); return; }
    dom.pictures.classList.remove('single');
    dom.controls.hidden = false;
    dom.heatCaption.textContent = 'links: thicker and red while busy; nodes: yellow once they have received, ringed red while they send';
    state.doc = doc; state.docId = id;
    setPlaying(false);
    showTopology(doc.topology, null, doc.title, `${doc.kind}: ${doc.flow.source}`);
    const spacetime = drawSpaceTime(dom.spacetime, dom.spacetimeOverlay, doc, seek);
    state.anim = buildAnimation(doc, state.view, spacetime);
    showResult(doc);
    render();
  }

  function showVerdict(text, ok) {
    dom.verdict.textContent = text;
    dom.verdict.className = ok ? 'ok' : 'bad';
  }
  const showSaveButtons = () => { dom.resultButtons.hidden = embedded != null || state.docId == null; };
  // A field of a result as the statistics show it: its name without underscores, and
  // an object as its JSON.
  const field = (key, value) => [key.replace(/_/g, ' '), typeof value === 'object' ? JSON.stringify(value) : String(value)];

  function showResult(doc) {
    const result = doc.result || {};
    if (doc.kind === 'explain') {
      showVerdict(`schedule explained (nothing run): model ${Number(result.model_us).toFixed(1)} µs, ${count(result.steps, 'step')}`, true);
    } else if (result.verified) {
      const where = doc.kind === 'simulate' ? 'simulated, every result verified' : `verified on all ${result.nodes} nodes`;
      showVerdict(`${where}: ${result.collective} (${result.algorithm}) on ${result.topology}`, true);
    } else if (doc.kind === 'simulate') {
      showVerdict('simulated with lengths only: nothing verified', true);
    } else {
      showVerdict(`NOT verified: ${result.error || 'see the statistics'}`, false);
    }
    const rows = [];
    const time = result.time_us;
    if (time) rows.push(['time (µs)', `min ${time.min.toFixed(1)} · median ${time.median.toFixed(1)} · mean ${time.mean.toFixed(1)} · max ${time.max.toFixed(1)} · p90 ${time.p90.toFixed(1)} · p99 ${time.p99.toFixed(1)}`]);
    if (result.model_us != null) rows.push(['model (µs)', `${Number(result.model_us).toFixed(1)}${result.model_ratio != null ? ` · measured median / model ${result.model_ratio.toFixed(3)}` : ''}`]);
    if (result.closed_form_us != null) rows.push(['closed form (µs)', `${result.closed_form_us.toFixed(1)} (${result.closed_form})`]);
    for (const [key, value] of Object.entries(result)) {
      if (['time_us', 'model_us', 'model_ratio', 'schedule', 'iteration_us', 'closed_form_us', 'closed_form', 'schema_version'].includes(key)) continue;
      if (value == null) continue;
      rows.push(field(key, value));
    }
    rows.push(['messages in the flow', `${doc.flow.messages.length} (${doc.flow.source})`]);
    tableRows(dom.statsBody, rows);
    showSaveButtons();
  }

  // The stage given to one chart (no flow to play): its title and captions set, the
  // other layers cleared; returns the picture to draw the chart in.
  function chartStage(doc, id, source, caption) {
    setPlaying(false);
    state.doc = doc; state.docId = id; state.anim = null; state.view = null;
    dom.stageTitle.textContent = doc.title;
    dom.stageSource.textContent = source;
    for (const layer of [dom.pictureOverlay, dom.spacetime, dom.spacetimeOverlay]) layer.replaceChildren();
    dom.pictures.classList.add('single');
    dom.controls.hidden = true;
    dom.heatCaption.textContent = caption;
    return dom.picture;
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

  // Simulations at several points: time against p, a line per topology and algorithm.
  function showScaling(doc, id) {
    const points = doc.result.points;
    const series = grouped(points, (q) => `${q.topology} (${q.algorithm})`, (q, name) => ({
      x: q.nodes, y: q.time_us.median, model: q.closed_form_us,
      title: `${name}, p = ${q.nodes}: ${q.time_us.median.toFixed(1)} µs` +
        (q.closed_form_us != null ? `; closed form ${q.closed_form_us.toFixed(1)} µs (${q.closed_form})` : '') +
        `; ${count(q.steps, 'step')}, ${count(q.frames_sent, 'message')}${q.verified ? ', verified' : ', lengths only'}`,
    }));
    const svg = chartStage(doc, id, 'time against p, log-log; hover a point for its numbers; dashed: the textbook\'s closed form',
      'solid: simulated time; dashed: the closed form; hover a point for its numbers');
    plotLogLog(svg, series, { xLabel: 'p (nodes)', xTick: String });
    showSaveButtons();
    const failures = doc.result.failures || [];
    const verified = points.every((q) => q.verified);
    showVerdict(`${count(points.length, 'point')} simulated${verified ? ', every result verified' : ' (some with lengths only)'}` +
      (failures.length ? `; ${failures.length} failed` : ''), !failures.length);
    tableRows(dom.statsBody, points.map((q) => [`${q.topology} (${q.algorithm}), p = ${q.nodes}`, `${q.time_us.median.toFixed(1)} µs` +
      (q.closed_form_us != null ? ` · closed form ${q.closed_form_us.toFixed(1)} µs` : '') + ` · ${count(q.steps, 'step')}`]));
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
        `; algbw ${gbps(q.algbw_gbps)}, busbw ${gbps(q.busbw_gbps)}; ${count(q.iterations, 'iteration')}, verified`,
    }));
    const svg = chartStage(doc, id, 'mean time against size, log-log; hover a point for its numbers; dashed: the cost model',
      'solid: measured mean time, every point verified; dashed: the cost model');
    plotLogLog(svg, series, { xLabel: 'bytes per node', xTick: bytes });
    showSaveButtons();
    const failed = status === 'failed';
    showVerdict(`${count(points.length, 'point')} measured on ${count(result.nodes, 'node')}, every one verified` +
      (failed ? '; the sweep stopped at a failed point' : ''), !failed);
    const rows = [];
    const l = result.links;
    if (l) rows.push(['links', `${l.emulated ? 'emulated' : 'full-speed, the model from the calibration'}: ${l.routing.toUpperCase()}${l.ports === 'one' ? ', one-port' : ''}, t_s ${l.ts_us} µs, t_h ${l.th_us} µs, t_w ${l.tw_ns_per_byte} ns/B`]);
    if (result.dilation) rows.push(['dilation', result.dilation]);
    for (const skipped of doc.skipped || []) rows.push(['left out', skipped]);
    for (const q of points) {
      rows.push([`${q.algorithm}, ${bytes(q.size_bytes)}`, `mean ${q.avg_us.toFixed(1)} µs` +
        (q.model_us != null ? ` · model ${q.model_us.toFixed(1)} µs` : '') + ` · busbw ${gbps(q.busbw_gbps)}`]);
    }
    tableRows(dom.statsBody, rows);
  }

  // A simulation of more nodes than the page animates: the step chart; the table holds
  // the figures.
  function showSteps(doc, id) {
    const steps = doc.steps || [];
    const svg = chartStage(doc, id, `${doc.note}; ${doc.source}`,
      'bars: each step across the time its messages took, as high as the bytes they carried; hover a step for its numbers');
    drawSteps(svg, steps);
    const result = doc.result;
    showVerdict(`simulated on ${count(result.nodes, 'node')}${result.verified ? ', every result verified' : ' with lengths only: nothing verified'}`, true);
    const rows = [['time (µs)', `${result.time_us.median.toFixed(1)}` + (result.closed_form_us != null ? ` · closed form ${result.closed_form_us.toFixed(1)} (${result.closed_form})` : '')]];
    for (const key of ['steps', 'frames_sent', 'frames_forwarded', 'busiest_link', 'cost']) {
      if (result[key] != null) rows.push(field(key, result[key]));
    }
    for (const s of steps) {
      rows.push([`step ${s.step}`, `${count(s.messages, 'message')} · ${bytes(s.bytes)} · ${lab.micros(s.start_ns)} to ${lab.micros(s.end_ns)}` +
        (s.busiest_link ? ` · busiest ${s.busiest_link[0]}→${s.busiest_link[1]}` : '')]);
    }
    tableRows(dom.statsBody, rows);
  }

  function showCluster(cluster) {
    state.cluster = cluster;
    // A lab started with the switches of a network: the form starts at that network.
    if (cluster.started_for && !state.formAtLabsShape && dom.topology.options.length) {
      state.formAtLabsShape = true;
      dom.topology.value = cluster.started_for.topology;
      dom.dims.value = cluster.started_for.dims;
      showWords();
    }
    const connected = cluster.nodes.filter((n) => n.connected).length;
    const wired = cluster.topology ? `wired as ${cluster.topology.layout.title}` : 'not wired yet';
    dom.clusterLine.textContent = `${connected} of ${cluster.expected} nodes connected · ${wired}`;
    tableRows(dom.nodesBody,
      cluster.nodes.map((node) => [node.id ?? '–', node.name, node.address, node.memory_bytes ? bytes(node.memory_bytes) : 'unknown']),
      (i) => ({ class: cluster.nodes[i].connected ? '' : 'gone' }));
    if (!state.doc) {
      if (cluster.topology) showTopology(cluster.topology, cluster.traffic, 'The cluster', 'the wiring in force; link width: bytes of the last run');
      else previewShape();
    }
  }

  // The form's topology drawn before the cluster is wired; why it cannot be, on the
  // error line (cleared by the next preview that works).
  async function previewShape() {
    if (state.doc || !state.cluster) return;
    const topology = dom.topology.value || 'hypercube';
    // A run or a sweep goes to the lab's daemons (the ranks, and a switched network's
    // switches); an explanation or a simulation to the form's nodes.
    const onCluster = ['run', 'sweep'].includes(currentMode());
    const nodes = onCluster ? state.cluster.expected : Number(dom.nodesCount.value || state.cluster.expected);
    // More nodes than the page draws: no preview (a simulation of them is shown by step).
    if (nodes > 1024) return;
    const query = new URLSearchParams({ topology, [onCluster ? 'daemons' : 'nodes']: String(nodes), dims: dom.dims.value.trim() });
    try {
      const topologyDoc = await api(`/api/layout?${query}`);
      clearError('preview');
      if (!state.doc) showTopology(topologyDoc, null, 'The cluster (not wired yet)', `as the form's topology would wire it`);
    } catch (error) { showError(`drawing the form's topology: ${error.message}`, 'preview'); }
  }

  // ---- the form ----
  function currentMode() { return dom.modes.find((radio) => radio.checked).value; }

  function fillSelect(select, values, keep) {
    select.replaceChildren();
    for (const [value, text] of values) { const option = html('option', { value }, select); option.textContent = text; }
    if (keep != null && values.some(([value]) => value === keep)) select.value = keep;
  }

  function fillAlgorithms() {
    const collective = state.catalogue.collectives.find((c) => c.name === dom.collective.value);
    const keep = dom.algorithm.value;
    // A sweep takes several algorithms ("all"), not the choice by size ("auto").
    const choose = currentMode() === 'sweep' ? ['all', 'all of them'] : ['auto', 'auto (by size and p)'];
    fillSelect(dom.algorithm, [['', 'made for the topology (default)'], choose,
      ...collective.algorithms.map((a) => [a, a])], keep);
    dom.root.disabled = !collective.rooted;
    dom.op.disabled = !collective.reduces;
  }

  function words() {
    const mode = currentMode();
    const value = (name) => dom[name].value.trim();
    const list = [value('collective')];
    const add = (flag, v) => { if (v !== '' && v != null) list.push(flag, v); };
    add('--topology', value('topology'));
    add('--dims', value('dims'));
    // Runs and sweeps go to the lab's cluster, whose size is fixed.
    if (mode === 'explain' || mode === 'simulate') add('--nodes', value('nodesCount'));
    add('--algorithm', value('algorithm'));
    if (mode === 'sweep') add('--sizes', value('sizes')); else add('--size', value('size'));
    add('--dtype', value('dtype'));
    if (!dom.op.disabled) add('--op', value('op'));
    if (!dom.root.disabled) add('--root', value('root'));
    add('--ts', value('ts')); add('--th', value('th')); add('--tw', value('tw'));
    if (value('routing') !== 'sf') add('--routing', value('routing'));
    if (value('ports') !== 'all') add('--ports', value('ports'));
    add('--routes', value('routes'));
    add('--placement', value('placement'));
    if (mode === 'run' || mode === 'sweep') { add('--iterations', value('iterations')); add('--dilation', value('dilation')); }
    return list;
  }

  function showWords() {
    const mode = currentMode();
    dom.words.textContent = `topocomm ${mode} ${words().join(' ')}`;
    dom.run.textContent = { run: 'Run', explain: 'Explain', simulate: 'Simulate', sweep: 'Sweep' }[mode];
    const onCluster = mode === 'run' || mode === 'sweep';
    dom.iterations.disabled = !onCluster;
    dom.dilation.disabled = !onCluster;
    dom.nodesCount.disabled = onCluster;
    dom.size.disabled = mode === 'sweep';
    dom.sizes.disabled = mode !== 'sweep';
    if (state.cluster) dom.nodesCount.placeholder = `${state.cluster.expected} (the cluster's)`;
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
    if (text == null) { dom.progress.hidden = true; clearInterval(progressTimer); progressTimer = null; return; }
    dom.progress.hidden = false;
    const began = performance.now();
    clearInterval(progressTimer);
    const show = () => { dom.progressText.textContent = `${text} · ${((performance.now() - began) / 1000).toFixed(0)} s`; };
    show();
    progressTimer = setInterval(show, 500);
  }

  // The document of run `id`, shown when it is one the stage shows (else `whyNot`, when
  // given, on the error line); a failure to fetch it, on the error line.
  async function openRun(id, whyNot = null) {
    try {
      const doc = await api(`/api/runs/${id}`);
      if (showable(doc)) showDocument(doc, id); else if (whyNot != null) showError(whyNot);
    } catch (error) { showError(error.message); }
  }

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
      await openRun(run.id);
    } else {
      // A sweep's point ("point 2 of 6: ring at 1.0 KiB"); the dilation's announcement up
      // to its reason ("dilation ×K (--dilation auto)").
      const note = !run.note ? '' : ` — ${run.kind === 'sweep' ? run.note : run.note.split(':')[0]}`;
      progress(`${run.kind} ${run.id}: ${run.status}${note}`);
    }
  }

  function drawHistory() {
    dom.history.replaceChildren();
    for (const run of [...state.history.values()].sort((a, b) => b.id - a.id)) {
      const item = html('li', { class: run.status, 'data-run': run.id }, dom.history);
      const button = html('button', { type: 'button' }, item);
      button.textContent = `#${run.id} ${run.kind} ${run.args.join(' ')} — ${run.status}`;
      button.onclick = () => openRun(run.id, run.note || 'not finished');
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

  function onEvent(event) {
    if (event.type === 'cluster') showCluster(event);
    else if (event.type === 'run') onRun(event.run);
  }

  // ---- start ----
  function wireControls() {
    dom.play.onclick = () => setPlaying(!(state.anim && state.anim.playing));
    dom.back.onclick = () => step(-1);
    dom.forward.onclick = () => step(1);
    dom.scrub.oninput = (event) => { if (state.anim) { setPlaying(false); seek((event.target.value / 1000) * state.anim.span); } };
    dom.speed.onchange = (event) => { if (state.anim) state.anim.speed = Number(event.target.value); };
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
      dom.clusterLine.textContent = 'saved run (plays offline)';
      showDocument(JSON.parse(embedded.textContent), null);
      return;
    }
    dom.savePage.onclick = () => download(`/api/runs/${state.docId}/page`, `topocomm-run-${state.docId}.html`, 'text/html');
    // A sweep's JSON is what `topocomm sweep --json` writes.
    dom.saveJson.onclick = () => (state.doc && state.doc.kind === 'sweep'
      ? download(`/api/sweeps/${state.docId}`, `topocomm-sweep-${state.docId}.json`, 'application/json')
      : download(`/api/runs/${state.docId}`, `topocomm-run-${state.docId}.json`, 'application/json'));
    dom.tokenButton.onclick = askToken;
    dom.tokenForm.onsubmit = () => {
      state.token = dom.token.value.trim();
      sessionStorage.setItem('topocomm-token', state.token);
      dom.tokenButton.hidden = true;
      boot();
    };
    dom.runForm.onsubmit = submit;
    dom.cancel.onclick = () => cancelRun(state.watching);
    dom.runForm.oninput = () => { showWords(); };
    dom.collective.onchange = () => { fillAlgorithms(); showWords(); };
    dom.topology.onchange = () => { showWords(); previewShape(); };
    for (const radio of dom.modes) radio.onchange = () => { fillAlgorithms(); showWords(); };
    await boot();
  }

  async function boot() {
    try {
      state.catalogue = await api('/api/catalogue');
    } catch (error) { dom.connection.textContent = error.message; showError(`reading the catalogue: ${error.message}`); return; }
    const c = state.catalogue;
    fillSelect(dom.collective, c.collectives.map((x) => [x.name, x.name]), dom.collective.value || 'allreduce');
    fillSelect(dom.topology, c.topologies.map((x) => [x, x]), dom.topology.value || 'hypercube');
    fillSelect(dom.dtype, c.dtypes.map((x) => [x, x]), dom.dtype.value || 'f64');
    fillSelect(dom.op, c.ops.map((x) => [x, x]), dom.op.value || 'sum');
    fillSelect(dom.routing, c.routings.map((x) => [x, x]), dom.routing.value || 'sf');
    fillSelect(dom.ports, c.ports.map((x) => [x, x]), dom.ports.value || 'all');
    fillAlgorithms();
    showWords();
    try {
      const runs = await api('/api/runs');
      for (const run of runs.runs) state.history.set(run.id, run);
    } catch (error) { showError(`reading this session's runs: ${error.message}`); }
    drawHistory();
    listen(onEvent);
  }

  lab.parts.push('ui');
  start();
})();
