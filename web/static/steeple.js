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

// One stream per browser: an HTTP/1.1 browser has six connections per host and each
// Server-Sent Events stream holds one. One tab follows /events/stream (a lease in
// localStorage, renewed every 5 s) and relays each event to the other tabs on a
// BroadcastChannel; a message is {seq, type, data, relayed}. start() is called once per
// page with the stream's URL, the types to listen for, what a tab without the stream does
// each beat and what it does once it holds the stream; listen() adds a callback for every
// message (own and relayed).
const liveFeed = (() => {
  const KEY = "steeple-events-leader";
  const BEAT_MS = 5000;
  const LEASE_MS = 15000;
  const me = `${Date.now()}-${Math.random()}`;
  const relay = "BroadcastChannel" in window ? new BroadcastChannel("steeple-events") : null;
  const listeners = [];
  let source = null;
  let refused = false;

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
  const deliver = (message) => {
    for (const listener of listeners) listener(message);
  };
  if (relay) {
    relay.addEventListener("message", (event) => {
      if (!source) deliver({ ...event.data, relayed: true });
    });
  }
  const stream = (url, types) => {
    source = new EventSource(url);
    const arrived = (event) => {
      const message = { seq: Number(event.lastEventId), type: event.type, data: event.data };
      deliver({ ...message, relayed: false });
      if (relay) relay.postMessage(message);
    };
    for (const type of types.split(" ")) {
      if (type) source.addEventListener(type, arrived);
    }
    source.addEventListener("error", () => {
      if (source && source.readyState === EventSource.CLOSED) {
        source = null; // refused (signed out, suspended): not again from this tab
        refused = true;
        release();
      }
    });
  };
  const start = (url, types, without, began) => {
    const tick = () => {
      if (source) {
        claim(); // renew the lease
      } else if (url && !refused && window.EventSource && claim()) {
        stream(url, types);
        began();
      } else {
        without();
      }
    };
    tick();
    setInterval(tick, BEAT_MS);
    window.addEventListener("pagehide", () => {
      if (source) source.close();
      release();
    });
  };
  return { start, listen: (listener) => listeners.push(listener) };
})();

// The event feed (/events): count what arrives after the newest row shown and offer a
// "N new events" link rather than moving rows under the reader. The tab holding the
// stream counts its own messages; other tabs, and a tab whose stream was refused, ask
// /events/new every 5 s instead (a relayed message may predate this page's newest row).
(() => {
  const bar = document.getElementById("new-events");
  if (!bar || !bar.dataset.poll) return;
  let count = 0;

  const show = (text) => {
    const link = document.createElement("a");
    link.href = "/events";
    link.textContent = text;
    bar.replaceChildren(link);
  };
  liveFeed.listen((message) => {
    if (message.relayed) return;
    count += 1;
    show(`${count} new event${count === 1 ? "" : "s"}: show`);
  });
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
  liveFeed.start(bar.dataset.stream, bar.dataset.types || "", poll, () => {
    bar.dataset.mode = "stream";
  });
})();

// Live pages (<main data-live-stream>: a schedule's page, a run's): on an event of the
// page's schedule (or, on a run page, of its run) after the newest the page shows, fetch
// the same URL and swap each [data-live-region] for the fetched one of the same id. The
// HTML is the server's own, same origin, escaped by its templates: nothing is built here.
// One fetch at a time; events arriving meanwhile cost one more. Without EventSource,
// nothing happens (a reload shows the same).
(() => {
  const main = document.querySelector("main[data-live-stream]");
  if (!main || !window.EventSource) return;
  const { liveSchedule: schedule, liveRun: run } = main.dataset;
  let seen = Number(main.dataset.liveAfter) || 0;
  let busy = false;
  let again = false;

  // The focused element of a swapped region is found again in the fresh one by what
  // names it (its id, link, copy target or label), so a keyboard user keeps their place.
  const handle = (element) => {
    for (const name of ["id", "href", "data-copy", "aria-label"]) {
      const value = element.getAttribute(name);
      if (value) return `${element.localName}[${name}="${CSS.escape(value)}"]`;
    }
    return null;
  };
  const swap = (fetched) => {
    for (const region of document.querySelectorAll("[data-live-region][id]")) {
      const fresh = fetched.getElementById(region.id);
      if (!fresh) continue;
      const focused = region.contains(document.activeElement) ? document.activeElement : null;
      const key = focused && handle(focused);
      const adopted = document.importNode(fresh, true);
      region.replaceWith(adopted);
      labelTables(adopted);
      if (window.htmx) window.htmx.process(adopted); // any hx-* attributes in the fresh HTML
      const refocus = key && adopted.querySelector(key);
      if (refocus) refocus.focus();
    }
    main.dataset.liveRefreshed = String(seen);
  };
  const refresh = () => {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
      .then((answer) => (answer.ok ? answer.text() : null))
      .then((html) => {
        if (html) swap(new DOMParser().parseFromString(html, "text/html"));
      })
      .catch(() => {})
      .finally(() => {
        busy = false;
        if (again) {
          again = false;
          refresh();
        }
      });
  };
  liveFeed.listen((message) => {
    if (!(message.seq > seen)) return; // a relay from an older stream, or a repeat
    seen = message.seq;
    let event;
    try {
      event = JSON.parse(message.data);
    } catch (error) {
      return;
    }
    if (run ? event.run_id === run : event.schedule_id === schedule) refresh();
  });
  main.dataset.liveMode = "relay";
  liveFeed.start(main.dataset.liveStream, main.dataset.liveTypes || "", () => {}, () => {
    main.dataset.liveMode = "stream";
  });
})();
