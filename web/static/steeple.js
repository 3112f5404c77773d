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
// Countdowns ([data-countdown]: an instant in epoch ms, e.g. a replaced signing secret's
// end of overlap) tick down each second in the words the server wrote them in.
(() => {
  const clocks = document.querySelectorAll("[data-countdown]");
  if (!clocks.length) return;
  const words = (ms) => {
    let left = Math.max(0, Math.floor((ms - Date.now()) / 1000));
    const parts = [];
    for (const [size, unit] of [[86400, "d"], [3600, "h"], [60, "min"]]) {
      const n = Math.floor(left / size);
      left -= n * size;
      if (n) parts.push(`${n} ${unit}`);
    }
    parts.push(`${left} s`);
    return parts.join(" ");
  };
  const tick = () => {
    for (const clock of clocks) clock.textContent = words(Number(clock.dataset.countdown));
  };
  setInterval(tick, 1000);
})();
// After an htmx swap of the preview, nothing moves the focus: the region is aria-live.

// Tables with a header row: each cell gets its column's header as data-label and the
// table the class "rows", so on a phone's width steeple.css shows each row as a block of
// labelled values (a cell spanning columns keeps no label). Run again on what htmx or a
// live refresh swaps in.
const labelTables = (root) => {
  for (const table of root.querySelectorAll("table")) {
    const heads = [...table.querySelectorAll("thead th")].map((th) => th.textContent.trim());
    if (!heads.length) continue;
    table.classList.add("rows");
    for (const row of table.querySelectorAll("tbody tr")) {
      let column = 0;
      for (const cell of row.children) {
        if (cell.colSpan === 1 && heads[column]) cell.dataset.label = heads[column];
        column += cell.colSpan;
      }
    }
  }
};
labelTables(document);
document.addEventListener("htmx:afterSwap", (event) => labelTables(event.target));

// The event feed (/events): count what arrives after the newest row shown and offer a
// "N new events" link rather than moving rows under the reader. One tab per browser
// follows the Server-Sent Events stream (a lease in localStorage, renewed every 5 s): an
// HTTP/1.1 browser has six connections per host and each stream holds one. Other tabs,
// and a tab whose stream was refused, ask /events/new every 5 s instead.
(() => {
  const bar = document.getElementById("new-events");
  if (!bar || !bar.dataset.poll) return;
  const KEY = "steeple-events-leader";
  const BEAT_MS = 5000;
  const LEASE_MS = 15000;
  const me = `${Date.now()}-${Math.random()}`;
  let source = null;
  let refused = !bar.dataset.stream; // no stream offered, or it was refused: poll
  let count = 0;

  const lease = () => {
    try {
      return JSON.parse(localStorage.getItem(KEY) || "null");
    } catch (error) {
      return null;
    }
  };
  const claim = () => {
    const held = lease();
    if (held && held.id !== me && held.until > Date.now()) return false;
    try {
      localStorage.setItem(KEY, JSON.stringify({ id: me, until: Date.now() + LEASE_MS }));
    } catch (error) {
      // no storage: every tab streams
    }
    return true;
  };
  const release = () => {
    const held = lease();
    if (held && held.id === me) localStorage.removeItem(KEY);
  };
  const show = (text) => {
    const link = document.createElement("a");
    link.href = "/events";
    link.textContent = text;
    bar.replaceChildren(link);
  };
  const stream = () => {
    source = new EventSource(bar.dataset.stream);
    bar.dataset.mode = "stream";
    const arrived = () => {
      count += 1;
      show(`${count} new event${count === 1 ? "" : "s"}: show`);
    };
    for (const type of (bar.dataset.types || "").split(" ")) {
      if (type) source.addEventListener(type, arrived);
    }
    source.addEventListener("error", () => {
      if (source && source.readyState === EventSource.CLOSED) {
        source = null; // refused (signed out, suspended): poll from now on
        refused = true;
        release();
      }
    });
  };
  const poll = () => {
    bar.dataset.mode = "poll";
    fetch(bar.dataset.poll, { credentials: "same-origin", headers: { "HX-Request": "true" } })
      .then((answer) => (answer.ok ? answer.text() : ""))
      .then((html) => {
        const found = new DOMParser().parseFromString(html, "text/html").querySelector("a");
        if (found) show(found.textContent);
      })
      .catch(() => {});
  };
  const tick = () => {
    if (source) {
      claim(); // renew the lease
    } else if (!refused && claim()) {
      stream();
    } else {
      poll();
    }
  };
  tick();
  setInterval(tick, BEAT_MS);
  window.addEventListener("pagehide", () => {
    if (source) source.close();
    release();
  });
})();
