// Legion's opencode plugin (agent.kind = "opencode"; package agent's
// Opencode writes it, with the two constants above, for one conversation).
// It relays opencode's events to the session's worker as Claude Code's hook
// payloads, each through one run of `legion hook` (payload on stdin), in
// the order opencode emitted them; a permission.asked waits for the hook's
// decision and answers opencode through its own API (opencode FACTS O8, O9).
// The conversation's id (ses_…) is written to SESSION_FILE once it appears:
// its existence makes the next start resume (--continue). Each assistant
// message's tokens and cost (the main session's and its subagents') are
// appended to USAGE_FILE as they change, for the dashboard: opencode keeps
// them only in its SQLite database (opencode FACTS O27).
import { spawn } from "node:child_process"
import { appendFileSync, readFileSync, renameSync, writeFileSync } from "node:fs"

// log notes what the plugin did in LOG (no payloads, no secrets).
const log = (...words) => {
  try {
    appendFileSync(LOG, new Date().toISOString() + " " + words.join(" ") + "\n", { mode: 0o600 })
  } catch {}
}

const toolNames = {
  bash: "Bash", edit: "Edit", write: "Write", read: "Read", glob: "Glob", grep: "Grep",
  list: "LS", webfetch: "WebFetch", websearch: "WebSearch", task: "Task", todowrite: "TodoWrite",
  todoread: "TodoRead", patch: "Edit", multiedit: "MultiEdit",
}
const toolName = (t) => toolNames[t] || t

// hook runs `legion hook` with payload and resolves to its stdout ("" on
// any failure: a failed hook never stops opencode).
function hook(payload) {
  return new Promise((resolve) => {
    let out = ""
    let child
    try {
      // Not in opencode's cwd: the finisher's worktree goes away while it
      // runs, and a spawn in a removed directory fails.
      child = spawn(LEGION, ["hook"], { cwd: HOME_DIR, stdio: ["pipe", "pipe", "inherit"] })
    } catch {
      resolve("")
      return
    }
    child.on("error", () => resolve(""))
    child.stdout.on("data", (b) => { out += b })
    child.on("close", () => resolve(out))
    child.stdin.on("error", () => {})
    child.stdin.end(JSON.stringify(payload))
  })
}

export const Legion = async (ctx) => {
  let sessionID = ""
  try {
    sessionID = readFileSync(SESSION_FILE, "utf8").trim()
  } catch {}
  const resumed = sessionID !== ""
  const children = new Set() // sessions of subagents (parentID set)
  const seenUser = new Set()
  let lastText = ""
  let queue = Promise.resolve()
  const send = (name, fields) => {
    const payload = { session_id: sessionID, cwd: ctx.directory, hook_event_name: name, ...fields }
    const p = queue.then(() => hook(payload))
    queue = p.catch(() => {})
    return p
  }
  const record = (id) => {
    if (!id || id === sessionID) return
    sessionID = id
    try {
      writeFileSync(SESSION_FILE + ".tmp", id + "\n", { mode: 0o600 })
      renameSync(SESSION_FILE + ".tmp", SESSION_FILE)
    } catch {}
  }
  const main = (id) => id && !children.has(id)
  // usage appends an assistant message's tokens and cost to USAGE_FILE
  // when they differ from what was last written for it (message.updated
  // comes several times per message); a reader keeps each id's last line.
  const written = new Map()
  const usage = (info) => {
    if (info.role !== "assistant" || !info.id || !info.tokens) return
    const line = JSON.stringify({ id: info.id, sessionID: info.sessionID, tokens: info.tokens, cost: info.cost })
    if (written.get(info.id) === line) return
    written.set(info.id, line)
    try {
      appendFileSync(USAGE_FILE, line + "\n", { mode: 0o600 })
    } catch {}
  }

  // post sends body to opencode's own server through ctx.client's
  // in-process fetch (ctx.serverUrl is only a base, http://localhost:4096/,
  // where nothing of this opencode listens: O11) and reports whether it
  // took it. Without that fetch it sends nothing: the TUI's dialog stays
  // for a person at the terminal.
  const post = async (path, body) => {
    const url = new URL(path, ctx.serverUrl)
    url.searchParams.set("directory", ctx.directory)
    const f = ctx.client?._client?.getConfig?.().fetch
    if (typeof f !== "function") {
      log("POST", path, "skipped: no in-process client")
      return false
    }
    try {
      const r = await f(new Request(url, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) }))
      log("POST", path, "->", r.status)
      return r.ok
    } catch (e) {
      log("POST", path, "failed:", String(e))
      return false
    }
  }
  const reply = (requestID, answer, message) => {
    const body = { reply: answer }
    if (message) body.message = message
    return post("/permission/" + encodeURIComponent(requestID) + "/reply", body)
  }

  // A resumed TUI ignores --prompt (O7): the plugin sends the prompt
  // Legion left in PROMPT_FILE once opencode's server answers.
  const resumePrompt = async () => {
    let text = ""
    try {
      text = readFileSync(PROMPT_FILE, "utf8")
    } catch {}
    if (text === "") return
    for (let i = 0; i < 120; i++) {
      await new Promise((r) => setTimeout(r, 500))
      if (await post("/session/" + encodeURIComponent(sessionID) + "/prompt_async", { parts: [{ type: "text", text }] })) return
    }
  }

  log("loaded", resumed ? "resume of " + sessionID : "new", "server", String(ctx.serverUrl))
  if (resumed) {
    send("SessionStart", { source: "resume" })
    resumePrompt()
  }

  return {
    "chat.message": async (input, output) => {
      if (!main(input.sessionID)) return
      record(input.sessionID)
      const text = (output.parts || []).filter((p) => p.type === "text").map((p) => p.text).join("\n")
      const id = output.message?.id
      if (id) seenUser.add(id)
      send("UserPromptSubmit", { prompt: text })
    },
    "tool.execute.before": async (input, output) => {
      if (!main(input.sessionID)) return
      send("PreToolUse", { tool_name: toolName(input.tool), tool_input: output.args || {}, tool_use_id: input.callID })
    },
    "tool.execute.after": async (input, output) => {
      if (!main(input.sessionID)) return
      send("PostToolUse", { tool_name: toolName(input.tool), tool_use_id: input.callID, tool_response: { output: String(output?.output ?? "").slice(0, 4000) } })
    },
    event: async ({ event }) => {
      const p = event.properties || {}
      switch (event.type) {
        case "session.created": {
          const info = p.info || {}
          if (info.parentID) {
            children.add(info.id)
            return
          }
          if (!resumed && !sessionID) {
            record(info.id)
            send("SessionStart", { source: "startup" })
          }
          return
        }
        case "message.part.updated": {
          const part = p.part || {}
          if (part.type === "text" && main(part.sessionID) && !seenUser.has(part.messageID)) lastText = part.text || ""
          return
        }
        case "message.updated": {
          const info = p.info || {}
          if (info.role === "user" && info.id) seenUser.add(info.id)
          usage(info)
          return
        }
        case "permission.asked": {
          if (!main(p.sessionID)) return
          const m = p.metadata || {}
          const input = { ...m }
          if (typeof m.command !== "string") input.command = (p.patterns || []).join(" ")
          if (p.permission === "external_directory") input.command = "access " + (p.patterns || []).join(" ")
          const out = await send("PermissionRequest", { tool_name: toolName(p.permission), tool_input: input })
          let d
          try {
            d = JSON.parse(out).hookSpecificOutput.decision
          } catch {
            return // no decision: opencode's own dialog asks at the terminal
          }
          if (d?.behavior === "allow") await reply(p.id, "once")
          else if (d?.behavior === "deny") await reply(p.id, "reject", d.message)
          return
        }
        case "session.idle": {
          if (!main(p.sessionID)) return
          send("Stop", { stop_hook_active: false, last_assistant_message: lastText })
          return
        }
        case "session.status": {
          // opencode retries a failed model request by itself, for ever,
          // 429s of any kind included (opencode FACTS O28): each retry is
          // a StopFailure whose reset_at is the retry's time, so that the
          // worker sees the agent stopped at a limit until it moves on.
          const st = p.status || {}
          if (st.type !== "retry" || !main(p.sessionID)) return
          const msg = String(st.message || "")
          let kind = "server_error"
          if (/exceeded your current quota|insufficient.quota|billing/i.test(msg)) kind = "billing_error"
          else if (/rate.limit|usage limit|too many requests|\b429\b|resource.exhausted|quota/i.test(msg)) kind = "rate_limit"
          const fields = { error: kind, error_message: msg, attempt: st.attempt }
          if (kind === "rate_limit" && Number.isFinite(st.next)) fields.reset_at = new Date(st.next).toISOString()
          send("StopFailure", fields)
          return
        }
        case "session.error": {
          if (p.sessionID && !main(p.sessionID)) return
          const e = p.error || {}
          // An abort is an interruption (a SIGINT, Esc), not the API's
          // failure: seen when a run was ended in a hung stream.
          if (e.name === "MessageAbortedError") return
          send("StopFailure", { error: e.name || "error", error_message: e.data?.message || e.message || "" })
          return
        }
      }
    },
  }
}
