// Steeple web UI: the little the pages do with JavaScript on (everything works without it).
// Served from 'self' under a CSP with no inline script. Copy buttons copy the text of the
// element their data-copy names, and say so.
"use strict";
document.addEventListener("click", (event) => {
  const button = event.target.closest("button.copy[data-copy]");
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  if (!source || !navigator.clipboard) return;
  navigator.clipboard.writeText(source.textContent.trim()).then(() => {
    button.textContent = "Copied";
  });
});
// After an htmx swap of the preview, nothing moves the focus: the region is aria-live.
