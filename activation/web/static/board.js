// The Board view: per team, the issues by phase. Drawn from /api/board.
"use strict";
Legion.registerView("board", {
  title: "Board",
  render(el, ctx) {},
  onEvent(ev, ctx) {},
});
