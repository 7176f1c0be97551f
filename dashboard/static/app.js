// The dashboard's shell: the header with the team picker and the tabs, the
// tab router (location.hash: #board, #needs, #session/NAME, #timeline), the
// login from /login#t=TOKEN, and the one event WebSocket (/api/events)
// with reconnect. Views register with Legion.registerView(name, view):
//   view.title            the tab's label
//   view.render(el, ctx)  draw into el, an element of this showing only
//                         (called on navigation and team change); once the
//                         view is left, el is off the page (el.isConnected)
//   view.onEvent(ev, ctx) a live event while the view is shown
// ctx: {team, teams, params (the hash's parts after the name), sessions
// (Map name → session, live), api(path, init) → JSON (throws Error with
// .status), navigate(hash)}.
"use strict";

const Legion = (() => {
  const order = ["board", "needs", "session", "timeline"];
  const titles = {board: "Board", needs: "Needs you", session: "Session", timeline: "Timeline"};
  const views = {};
  const listeners = [];
  const ctx = {
    team: localStorage.getItem("legion.team") || "",
    teams: [],
    params: [],
    sessions: new Map(),
    api,
    navigate(hash) { location.hash = hash; },
  };
  let current = null; // {name, view}
  let started = false;

  async function api(path, init) {
    const res = await fetch(path, Object.assign({credentials: "same-origin"}, init || {}));
    let body = null;
    try { body = await res.json(); } catch (e) { body = null; }
    if (!res.ok) {
      const err = new Error((body && body.error) || (res.status + " " + res.statusText));
      err.status = res.status;
      throw err;
    }
    return body;
  }

  function registerView(name, view) {
    views[name] = view;
    if (!order.includes(name)) order.push(name);
    if (started) { drawTabs(); if (route().name === name) show(); }
  }

  function onEvent(fn) { listeners.push(fn); }

  function route() {
    const h = location.hash.replace(/^#\/?/, ""); // #session/x and #/session/x
    const parts = h ? h.split("/").map(decodeURIComponent) : [];
    return {name: parts[0] || "board", params: parts.slice(1)};
  }

  function drawTabs() {
    const nav = document.getElementById("tabs");
    nav.textContent = "";
    const r = route();
    for (const name of order) {
      const a = document.createElement("a");
      a.href = "#" + name;
      a.textContent = (views[name] && views[name].title) || titles[name] || name;
      a.dataset.view = name;
      if (name === r.name) a.className = "active";
      nav.appendChild(a);
    }
  }

  // show draws the routed view into an element made for this one showing:
  // a view's fetch that ends after the user moved on draws into an element
  // no longer on the page, never over the view now shown.
  function show() {
    const r = route();
    ctx.params = r.params;
    drawTabs();
    const main = document.getElementById("view");
    const view = views[r.name];
    current = view ? {name: r.name, view} : null;
    const el = document.createElement("div");
    el.className = "view-body";
    main.dataset.view = el.dataset.view = r.name;
    main.replaceChildren(el);
    if (!view) {
      const p = document.createElement("p");
      p.className = "muted";
      p.textContent = "This view is not available in this build.";
      el.appendChild(p);
      return;
    }
    try {
      view.render(el, ctx);
    } catch (e) {
      showError(el, e);
    }
  }

  function showError(el, e) {
    const p = document.createElement("p");
    p.className = "error";
    p.textContent = String(e && e.message || e);
    el.appendChild(p);
  }

  async function loadTeams() {
    const r = await api("/api/teams");
    ctx.teams = r.teams || [];
    if (!ctx.teams.includes(ctx.team)) ctx.team = ctx.teams[0] || "";
    const sel = document.getElementById("team");
    sel.textContent = "";
    for (const t of ctx.teams) {
      const o = document.createElement("option");
      o.value = t; o.textContent = t;
      if (t === ctx.team) o.selected = true;
      sel.appendChild(o);
    }
  }

  // The event socket: one per page, reconnected with a growing wait.
  let wait = 250;
  function connect() {
    const live = document.getElementById("live");
    const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/api/events");
    ws.onopen = () => { wait = 250; };
    ws.onmessage = (m) => {
      let ev;
      try { ev = JSON.parse(m.data); } catch (e) { return; }
      if (ev.type === "hello") {
        ctx.sessions = new Map((ev.sessions || []).map((s) => [s.name, s]));
        live.textContent = "live"; live.className = "live on";
        document.body.dataset.events = "open";
      } else if (ev.type === "session" && ev.session) {
        ctx.sessions.set(ev.session.name, ev.session);
      }
      Legion.lastEvent = {seq: ev.seq, type: ev.type, time: ev.time, received: Date.now()};
      for (const fn of listeners) { try { fn(ev, ctx); } catch (e) { console.error(e); } }
      if (current && current.view.onEvent) {
        try { current.view.onEvent(ev, ctx); } catch (e) { console.error(e); }
      }
    };
    ws.onclose = (c) => {
      live.textContent = "reconnecting"; live.className = "live off";
      live.title = c.reason || "connection closed";
      document.body.dataset.events = "closed";
      setTimeout(connect, wait);
      wait = Math.min(wait * 2, 5000);
    };
  }

  // A login URL carries the token in its fragment (never sent to a server,
  // so never logged); it is exchanged for a cookie and wiped from the URL.
  async function login() {
    if (location.pathname !== "/login") return;
    const m = /(?:^#|&)t=([^&]+)/.exec(location.hash);
    history.replaceState(null, "", "/#board");
    if (!m) return;
    await api("/api/login", {
      method: "POST",
      headers: {"Content-Type": "application/json"},
      body: JSON.stringify({token: decodeURIComponent(m[1])}),
    });
  }

  async function start() {
    const el = document.getElementById("view");
    try {
      await login();
      await api("/api/whoami");
    } catch (e) {
      el.textContent = "";
      const p = document.createElement("p");
      p.className = "error";
      p.id = "login-needed";
      p.textContent = (e.status === 401 ? "Not logged in. " : "") + e.message;
      el.appendChild(p);
      document.body.dataset.state = "login";
      return;
    }
    try {
      await loadTeams();
    } catch (e) {
      el.textContent = "";
      showError(el, e);
      return;
    }
    document.getElementById("team").addEventListener("change", (e) => {
      ctx.team = e.target.value;
      localStorage.setItem("legion.team", ctx.team);
      show();
    });
    window.addEventListener("hashchange", show);
    started = true;
    document.body.dataset.state = "ready";
    show();
    connect();
  }

  document.addEventListener("DOMContentLoaded", start);
  return {registerView, onEvent, ctx, api, el(tag, attrs, ...kids) { return el(tag, attrs, kids); }, lastEvent: null};

  // el builds a DOM element: attrs are properties (className, textContent,
  // dataset entries as data: {...}, on: {click: fn}); kids are nodes or
  // strings.
  function el(tag, attrs, kids) {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "data") Object.assign(n.dataset, v);
      else if (k === "on") for (const [ev, fn] of Object.entries(v)) n.addEventListener(ev, fn);
      else n[k] = v;
    }
    for (const k of kids.flat()) {
      if (k == null) continue;
      n.appendChild(typeof k === "string" ? document.createTextNode(k) : k);
    }
    return n;
  }
})();
window.Legion = Legion;
