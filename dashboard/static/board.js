// The Board view: the team's issues by phase (Todo, In Progress, Needs
// Review, Retro, Done), each card with its live session: the session's and
// the agent's state, labels, last activity, restarts, tokens and cost. Drawn from
// /api/board; a session event updates its card at once, a board event
// fetches the board again.
"use strict";
(() => {
  const h = (tag, attrs, ...kids) => Legion.el(tag, attrs, ...kids);
  let root = null;      // the view's element while shown
  let fetching = null;  // the board fetch in flight
  let again = false;    // another fetch was asked for meanwhile

  function ago(t) {
    if (!t) return "";
    const s = Math.max(0, Math.round((Date.now() - new Date(t).getTime()) / 1000));
    if (s < 60) return s + "s ago";
    if (s < 3600) return Math.round(s / 60) + "m ago";
    if (s < 86400) return Math.round(s / 3600) + "h ago";
    return Math.round(s / 86400) + "d ago";
  }

  // stateOf is what a card says the session is doing: the agent's state
  // when it has one and runs, else the session's.
  function stateOf(s) {
    if (!s) return null;
    if (s.agent && !["exited", "failed", "lost"].includes(s.state)) return s.agent.state;
    return s.state;
  }

  function sessionLine(s) {
    const st = stateOf(s);
    return h("div", {className: "meta session-line"},
      h("a", {className: "session", href: "#session/" + encodeURIComponent(s.name), textContent: s.mode}),
      h("span", {className: "state " + st, textContent: st.replace(/_/g, " "), data: {state: st}}),
      s.restarts ? h("span", {className: "restarts", textContent: s.restarts + " restart" + (s.restarts > 1 ? "s" : "")}) : null,
      s.last_activity ? h("span", {className: "activity", textContent: ago(s.last_activity), title: s.last_activity}) : null);
  }

  // usageLine is the tokens (and cost, when the agent reported one) that
  // the issue's agents used so far.
  // With a budget, it says against the issue's limits, "over" once one is
  // reached.
  function usageLine(u, bud) {
    const n = u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_creation_tokens;
    let text = n.toLocaleString() + " tokens";
    if (bud && bud.issue_tokens) text += " of " + bud.issue_tokens.toLocaleString();
    if (u.cost_usd != null) text += " · $" + u.cost_usd.toFixed(2);
    if (bud && bud.issue_usd) text += " of $" + bud.issue_usd.toFixed(2);
    const over = bud && ((bud.issue_tokens && n >= bud.issue_tokens) || (bud.issue_usd && u.cost_usd != null && u.cost_usd >= bud.issue_usd));
    return h("div", {className: "meta usage" + (over ? " over" : ""), textContent: text,
      title: "input " + u.input_tokens + ", output " + u.output_tokens +
        ", cache read " + u.cache_read_tokens + ", cache write " + u.cache_creation_tokens});
  }

  // budgetLine is the team's spend today against its daily budget.
  function budgetLine(bud) {
    const t = bud.today || {tokens: 0, usd: 0};
    let text = "today " + t.tokens.toLocaleString() + " tokens";
    if (bud.day_tokens) text += " of " + bud.day_tokens.toLocaleString();
    text += " · $" + t.usd.toFixed(2) + (t.unpriced ? "+" : "");
    if (bud.day_usd) text += " of $" + bud.day_usd.toFixed(2);
    const over = (bud.day_tokens && t.tokens >= bud.day_tokens) || (bud.day_usd && t.usd >= bud.day_usd);
    return h("span", {className: "budget" + (over ? " over error" : ""), textContent: text + (over ? ": no new agent today" : ""),
      title: bud.problem || "the team's agents since midnight (budget.day_tokens, budget.day_usd)"});
  }

  function card(is, budget) {
    const s = is.session;
    const c = h("div", {className: "card", data: {issue: is.id, session: s ? s.name : ""}},
      h("div", {className: "id", textContent: is.id}),
      h("div", {className: "title", textContent: is.title}),
      is.labels.length ? h("div", {className: "meta"}, is.labels.map((l) => h("span", {className: "label", textContent: l}))) : null,
      s ? sessionLine(s) : null,
      is.usage ? usageLine(is.usage, budget) : null,
      (is.failed || []).map((f) => h("div", {className: "meta"},
        h("span", {className: "state failed", textContent: f.mode + " failed", title: f.cause || ""}))),
      is.room ? h("div", {className: "meta room", textContent: "waiting for room: " + is.room.text, title: "not stalled: dispatched once there is room"}) : null,
      is.action && !["none", "skip"].includes(is.action) ? h("div", {className: "meta next", textContent: "next: " + is.action.replace(/_/g, " "), title: is.reason || ""}) : null);
    return c;
  }

  function draw(b) {
    if (!root || !root.isConnected) return; // the user moved on
    const cols = b.columns.map((col) => h("section", {className: "column", data: {status: col.status}},
      h("h2", {}, col.status, h("span", {className: "count", textContent: String(col.issues.length)})),
      col.issues.map((is) => card(is, b.budget))));
    const board = h("div", {className: "board", data: {team: b.team}}, cols);
    const head = h("div", {className: "board-head meta"},
      b.live ? null : h("span", {className: "error", textContent: "sessions not live (is the helper reachable?)"}),
      b.error ? h("span", {className: "error", textContent: b.error}) : null,
      b.budget ? budgetLine(b.budget) : null,
      h("span", {className: "muted", textContent: "tracker read " + ago(b.refreshed)}));
    root.textContent = "";
    root.appendChild(head);
    root.appendChild(board);
    if (b.other && b.other.length) {
      root.appendChild(h("section", {className: "column other"}, h("h2", {textContent: "Other"}), b.other.map(card)));
    }
    root.dataset.loaded = String(Date.now());
    // When the data is on screen (the frame after the DOM change), in ms
    // since the navigation started: the bench's time to first paint.
    const el = root;
    requestAnimationFrame(() => requestAnimationFrame(() => {
      if (!el.dataset.painted) el.dataset.painted = String(performance.now());
    }));
  }

  async function load(ctx) {
    if (fetching) { again = true; return fetching; }
    fetching = (async () => {
      try {
        if (!ctx.team) {
          root.textContent = "";
          root.appendChild(h("p", {className: "muted", textContent: "No team in legion.toml: legion team add NAME --workspace DIR"}));
          return;
        }
        draw(await ctx.api("/api/board?team=" + encodeURIComponent(ctx.team)));
      } catch (e) {
        if (root && root.isConnected) { root.textContent = ""; root.appendChild(h("p", {className: "error", textContent: e.message})); }
      } finally {
        fetching = null;
        if (again) { again = false; load(ctx); }
      }
    })();
    return fetching;
  }

  // patch updates the card of a changed session in place, before the
  // board is fetched again.
  function patch(s) {
    if (!root || !s.issue) return;
    const c = root.querySelector('.card[data-issue="' + CSS.escape(s.issue) + '"]');
    if (!c) return;
    const old = c.querySelector(".session-line");
    const line = sessionLine(s);
    if (old) old.replaceWith(line); else c.appendChild(line);
    c.dataset.session = s.name;
  }

  Legion.registerView("board", {
    title: "Board",
    render(el, ctx) {
      root = el;
      el.appendChild(h("p", {className: "muted", textContent: "Loading the board…"}));
      load(ctx);
    },
    onEvent(ev, ctx) {
      if (!root || !root.isConnected) { root = null; return; }
      if (ev.type === "session" && ev.session && ev.session.team === ctx.team) {
        patch(ev.session);
        root.dataset.event = String(ev.seq);
      } else if (ev.type === "hello" || (ev.type === "board" && ev.team === ctx.team)) {
        load(ctx);
      }
    },
  });
})();
