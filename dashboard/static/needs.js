// The Needs-you view: one queue of everything that waits for a person,
// across the teams, from GET /api/needs. Each answer is POSTed to
// /api/needs/TEAM/ISSUE/answer, which answers in the tracker as a person
// would (a comment and user-feedback-given); the controller relays it.
// Live: refetched on the event socket's needs, session and board events.
"use strict";
(() => {
  const E = (tag, attrs, ...kids) => Legion.el(tag, attrs, ...kids);
  const kindTitles = {
    question: "asks a question",
    permission: "asks permission",
    turn: "stopped without finishing its phase",
    rate_limit: "failed at the model's API",
    input: "waits for your input",
    failed: "failed for good",
  };
  let root = null;
  let timer = null;
  let drawn = ""; // the queue last drawn, as JSON: an unchanged queue is not drawn again (a click must not land on a replaced button)
  let busy = false; // a text box has focus or an answer is in flight: do not redraw under the person

  function tokens(u) {
    if (!u) return null;
    const n = u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_creation_tokens;
    let s = n.toLocaleString() + " tokens";
    if (u.cost_usd != null) s += " · $" + u.cost_usd.toFixed(2);
    return E("span", {className: "usage", title: "input " + u.input_tokens + ", output " + u.output_tokens +
      ", cache read " + u.cache_read_tokens + ", cache write " + u.cache_creation_tokens}, s);
  }

  async function send(card, n, body) {
    const status = card.querySelector(".answer-status");
    busy = true;
    for (const b of card.querySelectorAll("button, input, textarea")) b.disabled = true;
    status.className = "answer-status muted";
    status.textContent = "Sending…";
    try {
      const res = await Legion.api("/api/needs/" + encodeURIComponent(n.team) + "/" + encodeURIComponent(n.issue) + "/answer", {
        method: "POST",
        headers: {"Content-Type": "application/json"},
        body: JSON.stringify(Object.assign({kind: n.kind}, body)),
      });
      card.classList.add("answered");
      status.className = "answer-status ok";
      status.textContent = res.reset ? "Reset: " + res.reset.name + " is " + res.reset.state + "; the controller starts it again."
        : "Answered in the tracker as " + res.author + ": “" + res.comment + "” (+" + (res.labels || []).join(", ") + ")";
    } catch (e) {
      status.className = "answer-status error";
      status.textContent = e.message;
      for (const b of card.querySelectorAll("button, input, textarea")) b.disabled = false;
    } finally {
      busy = false;
      later(1500);
    }
  }

  function textBox(placeholder, multi) {
    const t = E(multi ? "textarea" : "input", {className: "answer-text", placeholder, rows: 3});
    t.addEventListener("focus", () => { busy = true; });
    t.addEventListener("blur", () => { busy = false; });
    return t;
  }

  function body(card, n) {
    const parts = [];
    switch (n.kind) {
    case "question":
      for (const q of n.questions || []) {
        parts.push(E("p", {className: "question"}, q.header ? E("b", {}, q.header + ": ") : null, q.question));
        const choices = E("div", {className: "choices"});
        for (const o of q.options || []) {
          choices.appendChild(E("button", {className: "choice", textContent: o, data: {choice: o},
            on: {click: () => send(card, n, {choice: o})}}));
        }
        parts.push(choices);
      }
      {
        const t = textBox("…or answer in your own words", false);
        parts.push(E("div", {className: "row"}, t, E("button", {className: "answer primary", textContent: "Answer",
          on: {click: () => t.value.trim() && send(card, n, {text: t.value})}})));
      }
      break;
    case "permission": {
      parts.push(E("p", {}, "The agent wants to use ", E("b", {}, n.tool || "a tool"), ":"));
      parts.push(E("pre", {className: "command"}, n.command || ""));
      const t = textBox("why (optional; with Deny the agent reads it)", false);
      parts.push(E("div", {className: "row"},
        E("button", {className: "approve primary", textContent: "Approve", on: {click: () => send(card, n, {decision: "approve"})}}),
        E("button", {className: "deny danger", textContent: "Deny", on: {click: () => send(card, n, {decision: "deny", text: t.value})}}),
        t));
      break;
    }
    case "turn":
    case "rate_limit":
    case "input": {
      if (n.kind === "rate_limit") {
        parts.push(E("p", {className: "error"}, n.message || "The turn failed at the API."));
        if (n.reset_at) parts.push(E("p", {className: "muted"}, "The limit lifts at " + new Date(n.reset_at).toLocaleString() + "."));
        if (n.paused_until) {
          parts.push(E("p", {className: "paused"}, "Paused until " + new Date(n.paused_until).toLocaleString() +
            ": Legion then prompts it to go on by itself."));
          const status = E("span", {className: "muted"});
          parts.push(E("div", {className: "row"}, E("button", {className: "resume", textContent: "Resume now",
            title: "legion limits resume " + n.team + ": end the pause; the controller prompts the paused agents",
            on: {click: () => Legion.api("/api/limits/" + encodeURIComponent(n.team) + "/resume", {method: "POST", headers: {"Content-Type": "application/json"}, body: "{}"}).then(
              (r) => { status.textContent = (r.resumed || []).length ? "resumed: " + r.resumed.join(", ") : "nothing was paused"; },
              (e) => { status.textContent = String(e); })}}), status));
        }
      } else {
        parts.push(E("p", {className: "muted"}, n.kind === "turn" ? "Its last message:" : "The controller asked:"));
        parts.push(E("pre", {className: "message"}, n.message || "(nothing)"));
      }
      const t = textBox(n.kind === "rate_limit" ? "what it should do when it can go on, e.g. continue" : "your reply: its next prompt", true);
      parts.push(E("div", {className: "row"}, t, E("button", {className: "reply primary", textContent: "Reply",
        on: {click: () => t.value.trim() && send(card, n, {kind: "turn", text: t.value})}})));
      break;
    }
    case "failed":
      parts.push(E("p", {}, "Unit ", E("code", {}, n.unit || ""), ": ", n.cause || "systemd gave up on it"));
      if (n.journal && n.journal.length) {
        parts.push(E("p", {className: "muted"}, "Last lines (" + (n.journal_source || "log") + "):"));
        parts.push(E("pre", {className: "journal"}, n.journal.join("\n")));
      }
      parts.push(E("div", {className: "row"}, E("button", {className: "reset danger", textContent: "Reset",
        title: "systemctl --user reset-failed " + (n.unit || "") + ": the controller starts it again",
        on: {click: () => send(card, n, {session: n.session})}})));
      break;
    }
    parts.push(E("p", {className: "answer-status"}));
    return parts;
  }

  // cards are the cards drawn, by need (team, issue, kind), with the need
  // they show: a need that did not change keeps its card, so a click in
  // progress never lands on a replaced button; only its tokens are
  // brought up to date. What a card does not show is no change: the
  // issue's status, and whether the controller has escalated the wait in
  // the tracker, which it does while the person may be clicking.
  let cards = new Map();

  function needKey(n) { return n.team + "\u0000" + n.issue + "\u0000" + n.kind; }
  function needSig(n) { return JSON.stringify(Object.assign({}, n, {usage: null, status: null, escalated: null})); }

  function newCard(n) {
    const card = E("section", {className: "need card " + n.kind, data: {team: n.team, issue: n.issue, kind: n.kind}});
    const head = E("div", {className: "need-head"},
      E("span", {className: "kind " + n.kind}, n.kind.replace("_", " ")),
      E("span", {className: "id"}, n.team + " · " + n.issue),
      E("span", {className: "title"}, n.title || ""),
      E("span", {className: "muted"}, (n.mode ? "the " + n.mode + " agent " : "") + (kindTitles[n.kind] || "")),
      n.since ? E("span", {className: "muted since"}, "since " + new Date(n.since).toLocaleTimeString()) : null,
      n.session ? E("a", {className: "session", href: "#session/" + encodeURIComponent(n.session), textContent: n.session}) : null,
      tokens(n.usage));
    card.appendChild(head);
    for (const p of body(card, n)) card.appendChild(p);
    return card;
  }

  function draw(res) {
    if (!root || !root.isConnected) return;
    const needs = res.needs || [];
    let title = root.querySelector(".view-title");
    if (!title) {
      root.textContent = "";
      title = root.appendChild(E("h1", {className: "view-title"}));
    }
    title.replaceChildren("Needs you ", E("span", {className: "count"}, String(needs.length)));
    for (const old of root.querySelectorAll(":scope > .error, :scope > .empty")) old.remove();
    for (const err of res.errors || []) title.after(E("p", {className: "error"}, err));
    let list = root.querySelector(":scope > .needs");
    if (!needs.length) {
      if (list) list.remove();
      cards = new Map();
      root.appendChild(E("p", {className: "muted empty"}, "Nothing waits for you."));
      return;
    }
    if (!list) list = root.appendChild(E("div", {className: "needs"}));
    const next = new Map();
    const order = [];
    for (const n of needs) {
      const key = needKey(n), sig = needSig(n);
      let c = cards.get(key);
      if (!c || c.sig !== sig) {
        c = {sig, el: newCard(n)};
      } else {
        const t = c.el.querySelector(".need-head .usage"), u = tokens(n.usage);
        if (t && u) t.replaceWith(u);
        else if (u) c.el.querySelector(".need-head").appendChild(u);
      }
      next.set(key, c);
      order.push(c.el);
    }
    cards = next;
    // Put the cards in order, moving only those out of place.
    order.forEach((el, i) => {
      if (list.children[i] !== el) list.insertBefore(el, list.children[i] || null);
    });
    while (list.children.length > order.length) list.lastElementChild.remove();
  }

  async function refresh() {
    timer = null;
    if (!root || !root.isConnected) return; // another view took the page
    if (busy) { later(1000); return; }
    try {
      const res = await Legion.api("/api/needs");
      const text = JSON.stringify(res);
      if (text !== drawn || !root.querySelector(".view-title")) {
        drawn = text;
        draw(res);
      }
      focusLinked();
      document.body.dataset.needs = "loaded";
    } catch (e) {
      root.textContent = "";
      root.appendChild(E("p", {className: "error"}, e.message));
    }
  }

  // focusLinked scrolls to the card a notification links to
  // (#needs/TEAM/ISSUE), once per link followed.
  let focused = "";
  function focusLinked() {
    const p = Legion.ctx.params || [];
    if (p.length < 2 || focused === location.hash) return;
    const c = root.querySelector('.need.card[data-team="' + CSS.escape(p[0]) + '"][data-issue="' + CSS.escape(p[1]) + '"]');
    if (!c) return;
    focused = location.hash;
    c.classList.add("linked");
    c.scrollIntoView({block: "center"});
  }

  function later(ms) {
    if (timer) return;
    timer = setTimeout(refresh, ms);
  }

  Legion.registerView("needs", {
    title: "Needs you",
    render(el) {
      root = el;
      root.appendChild(E("p", {className: "muted"}, "Loading…"));
      refresh();
    },
    onEvent(ev) {
      if (ev.type === "needs" || ev.type === "session" || ev.type === "board" || ev.type === "hello") later(250);
    },
  });
})();
