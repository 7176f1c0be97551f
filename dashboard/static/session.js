// The Session view (#session/NAME, also #/session/NAME): one session's live
// terminal (xterm.js over /api/sessions/NAME/term: the screen snapshot, then
// the stream; read-only until "Take control", then keys and size go to the
// agent), its state and resources (/api/sessions/NAME), its transcript
// (/api/sessions/NAME/transcript, followed by offset), its unit's journal
// lines (/api/sessions/NAME/journal, followed by cursor) and, for an issue's session, the
// issue's diff against the default branch with the files a merge would
// leave in conflict (/api/issues/TEAM/ID/diff). Without a name it lists the
// sessions to pick from.
"use strict";
(() => {
  const h = (tag, attrs, ...kids) => Legion.el(tag, attrs, ...kids);
  let live = null; // the shown session's resources: {dispose()}
  let listEl = null; // the list's element while the list is shown

  // Leaving the view (or showing another session) ends its socket and
  // timers.
  window.addEventListener("hashchange", () => {
    if (live && location.hash.replace(/^#\/?/, "") !== "session/" + encodeURIComponent(live.name)) dispose();
  });
  function dispose() {
    if (live) { live.dispose(); live = null; }
  }

  Legion.registerView("session", {
    title: "Session",
    render(el, ctx) {
      dispose();
      const name = ctx.params[0];
      listEl = null;
      if (!name) { listEl = el; renderList(el, ctx); return; }
      live = open(el, ctx, name);
    },
    onEvent(ev, ctx) {
      if (live && ev.type === "session" && ev.session && ev.session.name === live.name) live.sessionChanged(ev.session);
      if (!live && ev.type === "session" && listEl && listEl.isConnected) renderList(listEl, ctx);
    },
  });

  // renderList draws the sessions as links, grouped by team.
  function renderList(el, ctx) {
    el.textContent = "";
    const all = [...ctx.sessions.values()].sort((a, b) => (a.team + a.name).localeCompare(b.team + b.name));
    if (!all.length) { el.appendChild(h("p", {className: "muted"}, "No sessions.")); return; }
    const rows = all.map((s) => h("tr", {},
      h("td", {}, h("a", {className: "session", href: "#session/" + encodeURIComponent(s.name)}, s.name)),
      h("td", {}, s.team || ""), h("td", {}, s.issue || ""), h("td", {}, s.mode || ""),
      h("td", {}, h("span", {className: "state " + stateClass(s)}, stateText(s)))));
    el.appendChild(h("table", {className: "sessions"},
      h("thead", {}, h("tr", {}, ...["Session", "Team", "Issue", "Mode", "State"].map((t) => h("th", {}, t)))),
      h("tbody", {}, ...rows)));
  }

  function stateClass(s) { return (s.agent && s.agent.state) || s.state; }
  function stateText(s) { return s.agent && s.agent.state ? s.state + " · " + s.agent.state : s.state; }

  // open draws one session and starts its terminal and refreshes.
  function open(el, ctx, name) {
    const timers = [];
    const every = (ms, fn) => timers.push(setInterval(fn, ms));
    el.textContent = "";

    const title = h("h1", {className: "session-name"}, name);
    const badge = h("span", {className: "state"}, "…");
    const facts = h("dl", {className: "facts"});
    const res = h("dl", {className: "facts resources", id: "resources"});
    const control = h("button", {id: "take-control", className: "control", type: "button", textContent: "Take control"});
    const termState = h("span", {id: "term-state", className: "muted"}, "connecting…");
    const termBox = h("div", {id: "terminal", className: "terminal"});
    const transcript = h("pre", {id: "transcript", className: "transcript"});
    const journal = h("div", {id: "journal", className: "journal"});
    const diff = h("div", {id: "diff", className: "diff"});
    // What the agent was told: its phase's instructions (its prompt).
    const told = h("pre", {id: "instructions", className: "transcript"}, "");

    const panels = {transcript, journal, diff, instructions: told};
    const tabs = h("div", {className: "panel-tabs"});
    const panelBox = h("div", {className: "panel"}, transcript, journal, diff, told);
    let shownPanel = "transcript";
    function showPanel(p) {
      shownPanel = p;
      for (const [k, node] of Object.entries(panels)) node.hidden = k !== p;
      for (const b of tabs.children) b.classList.toggle("active", b.dataset.panel === p);
      if (p === "journal") loadJournal();
      if (p === "diff") loadDiff();
    }
    for (const [p, label] of [["transcript", "Transcript"], ["journal", "Journal"], ["diff", "Diff"], ["instructions", "Instructions"]]) {
      tabs.appendChild(h("button", {type: "button", data: {panel: p}, textContent: label, on: {click: () => showPanel(p)}}));
    }

    el.appendChild(h("div", {className: "session-view"},
      h("div", {className: "session-head"}, title, badge),
      facts,
      h("div", {className: "session-main"},
        h("section", {className: "term-pane"},
          h("div", {className: "term-bar"}, control, termState),
          termBox),
        h("aside", {className: "side"}, h("h2", {}, "Resources"), res)),
      h("section", {className: "panels"}, tabs, panelBox)));
    showPanel("transcript");

    let session = ctx.sessions.get(name) || null;

    // Detail: state, facts, resources.
    async function loadDetail() {
      try {
        const r = await Legion.api("/api/sessions/" + encodeURIComponent(name));
        drawDetail(r.session);
      } catch (e) {
        badge.textContent = e.status === 404 ? "gone" : "error";
        badge.className = "state failed";
        badge.title = e.message;
      }
    }
    function drawDetail(s) {
      const issueChanged = !session || session.issue !== s.issue;
      session = s;
      badge.textContent = stateText(s);
      badge.className = "state " + stateClass(s);
      badge.title = s.cause || (s.question ? "asks: " + s.question : "");
      facts.textContent = "";
      const fact = (k, v) => { if (v !== undefined && v !== null && v !== "") facts.append(h("dt", {}, k), h("dd", {}, String(v))); };
      fact("Unit", s.unit);
      fact("Team", s.team);
      fact("Issue", s.issue);
      fact("Mode", s.mode);
      fact("PID", s.pid || "");
      fact("Restarts", s.restarts);
      fact("Last activity", s.last_activity ? new Date(s.last_activity).toLocaleTimeString() : "");
      if (s.exit) fact("Last exit", exitText(s.exit));
      if (s.cause) fact("Cause", s.cause);
      res.textContent = "";
      const r = s.resources || {};
      const row = (k, v) => res.append(h("dt", {}, k), h("dd", {}, v));
      row("Memory", r.memory_bytes != null ? bytes(r.memory_bytes) : "—");
      row("Memory limit", r.memory_max != null ? bytes(r.memory_max) : "none");
      row("CPU time", r.cpu_nsec != null ? (r.cpu_nsec / 1e9).toFixed(2) + " s" : "—");
      row("CPU weight", r.cpu_weight != null ? String(r.cpu_weight) : "default (100)");
      if (r.not_accounted) res.append(h("dd", {className: "muted note"}, r.not_accounted));
      told.textContent = s.instructions || "This session was started with no instructions from Legion (legion spawn, or a custom command).";
      if (issueChanged && shownPanel === "diff") loadDiff();
    }

    // Transcript: the tail, then what follows, every 2 s.
    let next = null;
    const maxText = 512 * 1024;
    async function loadTranscript() {
      try {
        const q = next == null ? "" : "?offset=" + next;
        const r = await Legion.api("/api/sessions/" + encodeURIComponent(name) + "/transcript" + q);
        if (next == null && r.truncated) transcript.textContent = "[earlier output not shown]\n";
        next = r.next;
        if (r.data) {
          const stick = transcript.scrollTop + transcript.clientHeight >= transcript.scrollHeight - 4;
          let text = transcript.textContent + plain(r.data);
          if (text.length > maxText) text = "[earlier output not shown]\n" + text.slice(text.length - maxText);
          transcript.textContent = text;
          if (stick) transcript.scrollTop = transcript.scrollHeight;
        }
      } catch (e) {
        if (next == null) transcript.textContent = e.message;
      }
    }

    // Journal: the unit's last lines when the panel opens, then, while it
    // is shown, the lines after the last one every 3 s and on state
    // changes (?after=its cursor).
    const maxJournal = 2000;
    let journalCursor = null; // the last line's; null: load the last lines anew
    let journalBusy = false;
    let journalAgain = false; // asked for while a request was out
    function journalLine(e) {
      return h("div", {className: "jline p" + e.priority},
        h("span", {className: "jtime"}, new Date(e.time).toLocaleTimeString()), " ",
        h("span", {className: "jsrc"}, e.ident || e.unit || ""), " ",
        e.message);
    }
    async function loadJournal() {
      journalCursor = null;
      await pollJournal();
    }
    async function pollJournal() {
      if (journalBusy) {
        journalAgain = true; // once the answer out now is drawn
        return;
      }
      journalBusy = true;
      const fresh = journalCursor == null;
      try {
        const q = fresh ? "?lines=200" : "?after=" + encodeURIComponent(journalCursor);
        const r = await Legion.api("/api/sessions/" + encodeURIComponent(name) + "/journal" + q);
        // The panel was opened anew meanwhile: this answer holds only the
        // lines since, and the next request (journalAgain) loads them all.
        if (!fresh && journalCursor == null) return;
        const stick = journal.scrollTop + journal.clientHeight >= journal.scrollHeight - 4;
        if (fresh) {
          journal.textContent = "";
          if (!r.entries.length) journal.appendChild(h("p", {className: "muted empty"}, "No journal lines for " + r.unit + "."));
        } else if (r.entries.length) {
          for (const n of journal.querySelectorAll(".empty, .error")) n.remove();
        }
        for (const e of r.entries) journal.appendChild(journalLine(e));
        while (journal.childElementCount > maxJournal) journal.firstElementChild.remove();
        if (r.entries.length) journalCursor = r.entries[r.entries.length - 1].cursor;
        if (stick) journal.scrollTop = journal.scrollHeight;
      } catch (e) {
        if (fresh) journal.textContent = "";
        for (const n of journal.querySelectorAll(".error")) n.remove();
        journal.appendChild(h("p", {className: "error"}, e.message));
      } finally {
        journalBusy = false;
        if (journalAgain) {
          journalAgain = false;
          pollJournal();
        }
      }
    }

    // Diff: the issue's branch against the default branch.
    async function loadDiff() {
      diff.textContent = "";
      if (!session || !session.issue) {
        diff.appendChild(h("p", {className: "muted"}, "This session works on no issue, so there is no branch to compare."));
        return;
      }
      try {
        const d = await Legion.api("/api/issues/" + encodeURIComponent(session.team) + "/" + encodeURIComponent(session.issue) + "/diff");
        drawDiff(d);
      } catch (e) {
        diff.appendChild(h("p", {className: "error"}, e.message));
      }
    }
    function drawDiff(d) {
      diff.textContent = "";
      const conflicted = new Set((d.conflicts || []).map((c) => c.path));
      diff.appendChild(h("p", {className: "diff-sum"},
        h("code", {}, d.branch), " vs ", h("code", {}, d.base), ": ",
        d.ahead + " commit" + (d.ahead === 1 ? "" : "s") + " ahead, " + d.behind + " behind",
        d.dirty ? " · uncommitted changes in the worktree (not shown)" : ""));
      if (d.conflicts_unknown) {
        diff.appendChild(h("p", {className: "warn"}, "Would-be conflicts unknown: " + d.conflicts_unknown));
      } else if (conflicted.size) {
        const box = h("div", {className: "conflicts", id: "conflicts"},
          h("h3", {}, "A merge into " + d.base + " now would conflict in " + conflicted.size + " file" + (conflicted.size === 1 ? "" : "s")));
        for (const c of d.conflicts) {
          const pre = h("pre", {className: "conflict-text"});
          for (const line of (c.text || "").split("\n")) {
            const marker = /^(<<<<<<<|=======|>>>>>>>)/.test(line);
            pre.appendChild(h("span", {className: marker ? "marker" : ""}, line + "\n"));
          }
          box.appendChild(h("details", {open: true}, h("summary", {}, h("span", {className: "conflict-badge"}, "conflict"), " ", c.path),
            c.text ? pre : h("p", {className: "muted"}, "not a text conflict (or too long to show)")));
        }
        diff.appendChild(box);
      } else {
        diff.appendChild(h("p", {className: "ok"}, "No conflicts: the branch would merge into " + d.base + " cleanly."));
      }
      const pre = h("pre", {className: "patch"});
      for (const line of d.patch.split("\n")) {
        let cls = "";
        if (line.startsWith("diff --git")) {
          cls = "file";
          const m = / b\/(.*)$/.exec(line);
          if (m && conflicted.has(m[1])) {
            pre.append(h("span", {className: "file conflicted"}, line, " ", h("span", {className: "conflict-badge"}, "conflict")), "\n");
            continue;
          }
        } else if (line.startsWith("@@")) cls = "hunk";
        else if (line.startsWith("+") && !line.startsWith("+++")) cls = "add";
        else if (line.startsWith("-") && !line.startsWith("---")) cls = "del";
        pre.appendChild(h("span", {className: cls}, line + "\n"));
      }
      if (!d.patch) pre.appendChild(h("span", {className: "muted"}, "The branch changes nothing yet.\n"));
      if (d.truncated) pre.appendChild(h("span", {className: "muted"}, "[the diff is longer than shown]\n"));
      diff.appendChild(pre);
    }

    // The terminal.
    const term = new Terminal({scrollback: 5000, cursorBlink: false, fontSize: 13, convertEol: false});
    const fit = new FitAddon.FitAddon();
    term.loadAddon(fit);
    term.open(termBox);
    let ws = null;
    let inControl = false;
    let closed = false;
    let retry = null;
    function say(text, cls) { termState.textContent = text; termState.className = cls || "muted"; }
    function send(m) { if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(m)); }
    function sendSize() {
      if (!inControl) return;
      fit.fit();
      send({type: "resize", cols: term.cols, rows: term.rows});
    }
    function connect() {
      retry = null;
      ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/api/sessions/" + encodeURIComponent(name) + "/term");
      ws.binaryType = "arraybuffer";
      const mine = ws;
      ws.onopen = () => { if (inControl) send({type: "control"}); };
      ws.onmessage = (m) => {
        if (typeof m.data !== "string") {
          const b = new Uint8Array(m.data);
          if (b[0] === 83) term.reset(); // 'S': a snapshot redraws the screen
          term.write(b.subarray(1));
          return;
        }
        const msg = JSON.parse(m.data);
        switch (msg.type) {
          case "attached":
            if (msg.session) drawDetail(msg.session);
            if (inControl) sendSize();
            else if (msg.cols && msg.rows) term.resize(msg.cols, msg.rows);
            say(inControl ? "in control: your keys go to the agent" : "watching (read-only)", inControl ? "ok" : "muted");
            break;
          case "control":
            inControl = true;
            control.textContent = "In control";
            control.disabled = true;
            termBox.classList.add("in-control");
            say("in control: your keys go to the agent", "ok");
            sendSize();
            term.focus();
            break;
          case "exit":
            say("the agent's run " + msg.run + " ended (" + (msg.signal || "code " + msg.code) + (msg.reason ? ", " + msg.reason : "") + ")", "warn");
            break;
          case "waiting":
            say("waiting for systemd to restart the agent…", "warn");
            break;
          case "ended":
            closed = true;
            say("the session has ended" + (msg.session && msg.session.exit ? ": " + exitText(msg.session.exit) : ""), "muted");
            control.disabled = true;
            if (msg.session) drawDetail(msg.session);
            break;
          case "error":
            say(msg.error, "warn");
            break;
        }
      };
      ws.onclose = (c) => {
        if (ws !== mine) return;
        ws = null;
        if (closed || !live || live.term !== term) return;
        if (c.code === 1000) { say(c.reason || "closed", "muted"); return; }
        say("disconnected" + (c.reason ? ": " + c.reason : "") + "; reconnecting…", "warn");
        retry = setTimeout(connect, 1000);
      };
    }
    control.addEventListener("click", () => {
      inControl = true; // kept across reconnects
      send({type: "control"});
    });
    term.onData((d) => {
      if (inControl) send({type: "input", data: d});
      else say("read-only: press Take control to type", "warn");
    });
    const onResize = () => { clearTimeout(onResize.t); onResize.t = setTimeout(sendSize, 150); };
    window.addEventListener("resize", onResize);

    connect();
    if (session) drawDetail(session);
    loadDetail();
    loadTranscript();
    every(2000, loadTranscript);
    every(3000, () => { if (shownPanel === "journal") pollJournal(); });
    every(5000, loadDetail);

    return {
      name, term,
      sessionChanged(s) {
        drawDetail(Object.assign({}, s, {resources: session && session.resources, instructions: session && session.instructions}));
        if (shownPanel === "journal") pollJournal();
      },
      dispose() {
        closed = true;
        for (const t of timers) clearInterval(t);
        if (retry) clearTimeout(retry);
        window.removeEventListener("resize", onResize);
        if (ws) ws.close(1000, "view closed");
        term.dispose();
      },
    };
  }

  function exitText(e) {
    let s = e.signal ? "killed by " + e.signal : e.code != null ? "exit code " + e.code : "ended";
    if (e.reason) s += " (" + e.reason + ")";
    return s;
  }

  function bytes(n) {
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : String(n)) + " " + u[i];
  }

  // plain turns terminal output into text: escape sequences dropped,
  // carriage returns before a newline dropped, a lone one starting the
  // line over.
  function plain(s) {
    s = s.replace(/\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)/g, "")
      .replace(/\x1b\[[0-?]*[ -\/]*[@-~]/g, "")
      .replace(/\x1b[()][0-9A-Za-z]/g, "")
      .replace(/\x1b[@-Z\\-_=>]/g, "")
      .replace(/\r+\n/g, "\n");
    return s.split("\n").map((l) => { const i = l.lastIndexOf("\r"); return i >= 0 ? l.slice(i + 1) : l; })
      .join("\n").replace(/[\x00-\x08\x0b-\x1f\x7f]/g, "");
  }
})();
