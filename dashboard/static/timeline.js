// The Timeline view: per team, each issue's phases over time and its
// agents' activity (working, idle, waiting) over the last hours, from
// GET /api/timeline/TEAM (the team picked, or #timeline/TEAM/HOURS), drawn as SVG by hand (no library: rectangles,
// lines and text).
"use strict";
(() => {
  const E = (tag, attrs, ...kids) => Legion.el(tag, attrs, ...kids);
  const NS = "http://www.w3.org/2000/svg";
  const modeColors = {plan: "#0969da", implement: "#1a7f37", review: "#8250df", retro: "#bf8700", finish: "#57606a"};
  const stateColors = {
    working: "#2da44e", idle: "#afb8c1", starting: "#d0d7de", waiting_permission: "#8250df",
    waiting_answer: "#a475f9", api_error: "#cf222e", failed: "#cf222e", running: "#2da44e", waiting_input: "#a475f9",
  };
  let root = null;
  let hours = 6;
  let timer = null;

  function S(tag, attrs, text) {
    const n = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, v);
    if (text != null) n.textContent = text;
    return n;
  }

  function draw(tl) {
    if (!root || !root.isConnected) return;
    root.textContent = "";
    const picker = E("select", {className: "hours", on: {change: (e) => { hours = Number(e.target.value); refresh(); }}});
    for (const h of [...new Set([1, 3, 6, 12, 24, 72, hours])].sort((a, b) => a - b)) picker.appendChild(E("option", {value: String(h), textContent: h + " h", selected: h === hours}));
    root.appendChild(E("div", {className: "view-head"},
      E("h1", {className: "view-title"}, "Timeline · " + tl.team), E("label", {}, "Last ", picker)));
    if (tl.note) root.appendChild(E("p", {className: "muted note"}, tl.note));
    const from = Date.parse(tl.from), to = Date.parse(tl.to);
    const labelW = 220, width = Math.max(640, (root.clientWidth || 1000) - 8), plotW = width - labelW - 12;
    const laneH = 12, rowH = 2 * laneH + 14, top = 28;
    const issues = tl.issues || [];
    const height = top + Math.max(1, issues.length) * rowH + 36;
    const x = (t) => labelW + Math.max(0, Math.min(1, (Date.parse(t) - from) / (to - from))) * plotW;
    const svg = S("svg", {width, height, viewBox: `0 0 ${width} ${height}`, class: "timeline", role: "img",
      "aria-label": "phases and agent activity of team " + tl.team});
    // Hour grid with labels.
    const span = to - from;
    const step = span <= 3 * 3600e3 ? 15 * 60e3 : span <= 12 * 3600e3 ? 3600e3 : span <= 48 * 3600e3 ? 4 * 3600e3 : 12 * 3600e3;
    for (let t = Math.ceil(from / step) * step; t <= to; t += step) {
      const gx = labelW + (t - from) / span * plotW;
      svg.appendChild(S("line", {x1: gx, x2: gx, y1: top - 6, y2: height - 30, stroke: "#dde1e7"}));
      svg.appendChild(S("text", {x: gx, y: top - 10, "text-anchor": "middle", "font-size": 11, fill: "#6b7280"},
        new Date(t).toLocaleTimeString([], {hour: "2-digit", minute: "2-digit"})));
    }
    svg.appendChild(S("line", {x1: labelW + plotW, x2: labelW + plotW, y1: top - 6, y2: height - 30, stroke: "#cf222e", "stroke-dasharray": "3 3"}));
    issues.forEach((is, i) => {
      const y = top + i * rowH;
      const g = S("g", {class: "issue", "data-issue": is.issue});
      g.appendChild(S("text", {x: 4, y: y + laneH, "font-size": 12, "font-weight": 600, fill: "#1d2330"}, is.issue));
      g.appendChild(S("text", {x: 4, y: y + 2 * laneH + 2, "font-size": 11, fill: "#6b7280"},
        ((is.status ? is.status + " · " : "") + (is.title || "")).slice(0, 34)));
      g.appendChild(S("rect", {x: labelW, y, width: plotW, height: 2 * laneH + 4, fill: i % 2 ? "#f6f7f9" : "#ffffff"}));
      for (const p of is.phases || []) {
        const x1 = x(p.from), w = Math.max(2, x(p.to) - x1);
        const r = S("rect", {x: x1, y: y + 1, width: w, height: laneH, rx: 2, fill: modeColors[p.mode] || "#57606a", class: "phase", "data-mode": p.mode});
        r.appendChild(S("title", {}, `${is.issue} ${p.mode}: ${new Date(p.from).toLocaleTimeString()} – ${p.live ? "now" : new Date(p.to).toLocaleTimeString()}`));
        g.appendChild(r);
        if (w > 44) g.appendChild(S("text", {x: x1 + 4, y: y + laneH - 2, "font-size": 10, fill: "#fff"}, p.mode));
      }
      for (const a of is.activity || []) {
        const x1 = x(a.from), w = Math.max(2, x(a.to) - x1);
        const r = S("rect", {x: x1, y: y + laneH + 3, width: w, height: laneH - 2, fill: stateColors[a.state] || "#6b7280", class: "activity", "data-state": a.state});
        r.appendChild(S("title", {}, `${is.issue} ${a.mode} agent ${a.state}: ${new Date(a.from).toLocaleTimeString()} – ${a.live ? "now" : new Date(a.to).toLocaleTimeString()}`));
        g.appendChild(r);
      }
      svg.appendChild(g);
    });
    if (!issues.length) svg.appendChild(S("text", {x: labelW, y: top + 16, fill: "#6b7280"}, "No issues."));
    // Legend.
    let lx = 4;
    const ly = height - 12;
    for (const [name, color] of [...Object.entries(modeColors), ["working", stateColors.working], ["idle", stateColors.idle],
      ["waiting", stateColors.waiting_permission], ["error/failed", stateColors.failed]]) {
      svg.appendChild(S("rect", {x: lx, y: ly - 9, width: 10, height: 10, fill: color}));
      svg.appendChild(S("text", {x: lx + 14, y: ly, "font-size": 11, fill: "#1d2330"}, name));
      lx += 22 + name.length * 6.5;
    }
    root.appendChild(svg);
    document.body.dataset.timeline = "loaded";
  }

  async function refresh() {
    timer = null;
    if (!root || !root.isConnected) return;
    const team = Legion.ctx.params[0] || Legion.ctx.team; // #timeline/TEAM[/HOURS], else the picked team
    if (Number(Legion.ctx.params[1]) > 0) hours = Number(Legion.ctx.params[1]);
    if (!team) { root.textContent = "No team configured."; return; }
    try {
      draw(await Legion.api("/api/timeline/" + encodeURIComponent(team) + "?hours=" + hours));
    } catch (e) {
      root.textContent = "";
      root.appendChild(E("p", {className: "error"}, e.message));
    }
  }

  Legion.registerView("timeline", {
    title: "Timeline",
    render(el) {
      root = el;
      root.appendChild(E("p", {className: "muted"}, "Loading…"));
      refresh();
    },
    onEvent(ev) {
      if ((ev.type === "session" || ev.type === "board") && !timer) timer = setTimeout(refresh, 2000);
    },
  });
})();
