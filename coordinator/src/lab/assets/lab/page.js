// The lab page's shared base, run after the load guard: the namespace the parts register in
// (window.topocommLab), the page's state, the one map of the elements the parts look up,
// the builders of SVG and HTML elements and of a table's rows, the number formats, and
// the error line every failure is shown on. The parts, in their order: guard, page, api,
// charts, animation, ui (each a plain script, no build step; a saved page holds them
// inline, in the same order).
'use strict';

(() => {
  const SVGNS = 'http://www.w3.org/2000/svg';

  // Every element a part reads or writes, by one name: looked up once, here. A selector
  // that finds nothing is an error at load (the page and its script out of step).
  const SELECTORS = {
    clusterLine: '#cluster-line', connection: '#connection', tokenButton: '#token-button',
    tokenDialog: '#token-dialog', tokenForm: '#token-form', token: '#token',
    nodesBody: '#nodes tbody', runForm: '#run-form', words: '#words', run: '#run', error: '#error',
    progress: '#progress', progressText: '#progress-text', cancel: '#cancel', history: '#history',
    collective: '#collective', algorithm: '#algorithm', topology: '#topology', dims: '#dims',
    nodesCount: '#nodes-count', size: '#size', sizes: '#sizes', dtype: '#dtype', op: '#op', root: '#root',
    routing: '#routing', ports: '#ports', routes: '#routes', placement: '#placement', ts: '#ts', th: '#th', tw: '#tw', iterations: '#iterations', dilation: '#dilation',
    stageTitle: '#stage-title', stageSource: '#stage-source', verdict: '#verdict', pictures: '.pictures',
    picture: '#picture', pictureOverlay: '#picture-overlay', heatCaption: '#heat-caption',
    spacetime: '#spacetime', spacetimeOverlay: '#spacetime-overlay',
    controls: '#controls', back: '#back', play: '#play', forward: '#forward', scrub: '#scrub', speed: '#speed',
    clock: '#clock', delivered: '#delivered', resultButtons: '#result-buttons', savePage: '#save-page',
    saveJson: '#save-json', statsBody: '#stats tbody',
  };
  const dom = {};
  const missing = [];
  for (const [name, selector] of Object.entries(SELECTORS)) {
    dom[name] = document.querySelector(selector);
    if (!dom[name]) missing.push(selector);
  }
  // The form's mode radios, a group.
  dom.modes = [...document.querySelectorAll('input[name="mode"]')];
  if (!dom.modes.length) missing.push('input[name="mode"]');

  function el(name, attributes = {}, parent = null, ns = SVGNS) {
    const node = ns ? document.createElementNS(ns, name) : document.createElement(name);
    for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
    if (parent) parent.appendChild(node);
    return node;
  }
  function html(name, attributes = {}, parent = null) { return el(name, attributes, parent, null); }

  // The one table builder: `body`'s rows replaced by `rows`, each a list of cells; row
  // `i` gets the attributes `rowAttributes(i)`.
  function tableRows(body, rows, rowAttributes = () => ({})) {
    body.replaceChildren();
    for (const [i, cells] of rows.entries()) {
      const tr = html('tr', rowAttributes(i), body);
      for (const cell of cells) html('td', {}, tr).textContent = cell;
    }
  }

  function bytes(n) {
    if (n == null) return '–';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0; let v = n;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
    return `${i ? v.toFixed(1) : v} ${units[i]}`;
  }
  function micros(ns) { return `${(ns / 1000).toFixed(1)} µs`; }
  // A count and its noun as people write them: "1 step", "3 steps" (render::quantity::count).
  function count(n, noun) { return `${n} ${n === 1 ? noun : `${noun}s`}`; }

  // The one key of an undirected link.
  function edgeKey(a, b) { return a < b ? `${a}-${b}` : `${b}-${a}`; }

  // The error line: `text` shown (empty: hidden). `from` names who showed it, so that
  // what a later success of the same source clears is only its own error.
  let shownFrom = null;
  function showError(text, from = null) {
    dom.error.textContent = text || '';
    dom.error.hidden = !text;
    shownFrom = text ? from : null;
  }
  function clearError(from) { if (shownFrom === from) showError(''); }

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
    // Whether the form was set to the switched network the lab started for, once.
    formAtLabsShape: false,
  };

  // Whatever escapes a part's own handling is shown too, not only logged.
  window.addEventListener('error', (event) => { if (event.message) showError(`the page failed: ${event.message}`); });
  window.addEventListener('unhandledrejection', (event) => {
    showError(`the page failed: ${event.reason && event.reason.message ? event.reason.message : event.reason}`);
  });

  window.topocommLab = {
    parts: ['page'],
    state, dom, el, html, tableRows, bytes, micros, count, edgeKey, showError, clearError,
    embedded: document.getElementById('lab-data'),
  };
  if (missing.length) throw new Error(`the page lacks ${missing.join(', ')}`);
})();
