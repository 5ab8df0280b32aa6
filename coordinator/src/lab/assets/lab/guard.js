// The lab page's load guard, run before every other part: a part of the script that
// fails to load is said on the page's error line (the parts themselves cannot say it).
'use strict';

window.addEventListener('error', (event) => {
  if (!(event.target instanceof HTMLScriptElement)) return;
  const box = document.getElementById('error');
  box.textContent = `the page's part ${event.target.getAttribute('src')} did not load`;
  box.hidden = false;
}, true);
