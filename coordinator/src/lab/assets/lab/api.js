// The lab page's API part: requests to the lab's own JSON API with the token, the
// token's dialog, downloads, and the server-sent events read through fetch (so the
// token goes in a header), reconnecting with the cause shown.
'use strict';

(() => {
  const lab = window.topocommLab;
  const { state, dom, html, showError } = lab;
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  function authHeaders(extra = {}) {
    return state.token ? { ...extra, Authorization: `Bearer ${state.token}` } : extra;
  }

  function askToken() {
    dom.tokenButton.hidden = false;
    if (!dom.tokenDialog.open) dom.tokenDialog.showModal();
  }

  // The JSON answer to `path`; throws the API's error text, or says the answer was no JSON.
  async function api(path, options = {}) {
    const response = await fetch(path, { ...options, headers: authHeaders(options.headers || {}) });
    if (response.status === 401) { askToken(); throw new Error('the cluster token is needed'); }
    const text = await response.text();
    let body;
    try { body = text ? JSON.parse(text) : {}; } catch (error) {
      throw new Error(`${path}: ${response.ok ? 'the answer is not JSON' : `${response.status} ${response.statusText}`} (${error.message})`);
    }
    if (!response.ok) { const error = new Error(body.error || `${path}: ${response.status} ${response.statusText}`); error.body = body; throw error; }
    return body;
  }

  async function download(path, name, type) {
    const response = await fetch(path, { headers: authHeaders() });
    if (!response.ok) { showError(`could not fetch ${path}: ${response.status}`); return; }
    const blob = new Blob([await response.arrayBuffer()], { type });
    const link = html('a', { href: URL.createObjectURL(blob), download: name });
    link.click();
    setTimeout(() => URL.revokeObjectURL(link.href), 5000);
  }

  // Reads the event stream until it ends or fails, then says why and reconnects after a
  // second; `onEvent` gets each event's JSON.
  async function listen(onEvent) {
    for (;;) {
      let cause;
      try {
        const response = await fetch('/api/events', { headers: authHeaders() });
        if (response.status === 401) { dom.connection.textContent = 'needs the cluster token'; askToken(); return; }
        if (!response.ok) throw new Error(`the events answered ${response.status}`);
        dom.connection.textContent = 'live';
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
        cause = 'the events ended';
      } catch (error) { cause = error.message; }
      dom.connection.textContent = `reconnecting… (${cause})`;
      await sleep(1000);
    }
  }

  Object.assign(lab, { api, askToken, authHeaders, download, listen });
  lab.parts.push('api');
})();
