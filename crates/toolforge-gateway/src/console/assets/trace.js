// Live trace: the agent's most recent trace records, then each one as it is emitted (server-sent
// events), filterable by session, server, tool and rule; each session's steps with cost and
// latency. The stream opens with the records the server kept; after a reconnection, those this
// page already shows are not added again.
import { h, table, note, section, usd, ms } from "./dom.js";

const MAX_RECORDS = 2000;
const SHOWN_RECORDS = 200;

let source = null;

export function leave() {
  if (source) source.close();
  source = null;
}

export async function render(root) {
  const records = [];
  const shownKeys = new Set();
  let caughtUp = false;
  let chosen = null;
  let skipped = 0;
  const status = h("span", { id: "trace-status", "data-state": "connecting", class: "status" }, "connecting…");
  const filters = {};
  const inputs = ["session", "server", "tool", "rule"].map((name) => {
    const input = h("input", { type: "search", id: `trace-filter-${name}`, placeholder: name, "aria-label": `Filter by ${name}` });
    filters[name] = input;
    input.addEventListener("input", () => draw());
    return input;
  });
  const sessions = h("div", { id: "trace-sessions" });
  const steps = h("div", { id: "trace-steps" });
  const latest = h("div", { id: "trace-records" });
  root.append(
    h("div", { class: "toolbar" }, status, ...inputs),
    section("Sessions", sessions),
    section("Steps of the chosen session", steps),
    section("Latest records", latest));

  const keep = (r) => {
    const want = (name, have) => {
      const w = filters[name].value.trim();
      return !w || String(have ?? "").includes(w);
    };
    return want("session", r.session_id) && want("server", r.server) && want("tool", r.tool) && want("rule", r.selection_rule);
  };

  function draw() {
    const shown = records.filter(keep);
    const bySession = new Map();
    for (const r of shown) {
      const s = bySession.get(r.session_id) || { id: r.session_id, steps: 0, cost: 0, latency: 0, last: "", failed: 0 };
      s.steps += 1;
      s.cost += Number(r.cost_usd) || 0;
      s.latency += Number(r.latency_ms) || 0;
      s.failed += r.success ? 0 : 1;
      s.last = r.timestamp;
      bySession.set(r.session_id, s);
    }
    const list = [...bySession.values()].reverse();
    sessions.replaceChildren(list.length
      ? table(["session", "records", "cost", "latency", "failed", "last"], list.map((s) => ({
        attrs: { "data-session": s.id, class: s.id === chosen ? "chosen clickable" : "clickable", tabindex: 0 },
        cells: [h("code", {}, s.id), String(s.steps), usd(s.cost), ms(s.latency), String(s.failed), s.last],
      })), { id: "trace-session-table" })
      : note(records.length ? "No record matches the filters." : "Waiting for records: run a /chat or an agent request."));
    for (const row of sessions.querySelectorAll("tr[data-session]")) {
      row.addEventListener("click", () => { chosen = row.dataset.session; draw(); });
    }
    const session = chosen ?? (list[0] && list[0].id);
    const own = shown.filter((r) => r.session_id === session);
    steps.replaceChildren(own.length ? stepTable(own) : note("No session yet."));
    latest.replaceChildren(shown.length ? recordTable(shown.slice(-SHOWN_RECORDS).reverse()) : note("Nothing yet."));
    if (skipped) latest.prepend(note(`${skipped} records were skipped because this page fell behind.`, "warn"));
  }

  leave();
  source = new EventSource("/ui/api/trace/stream");
  source.addEventListener("open", () => { caughtUp = false; });
  source.addEventListener("ready", () => {
    caughtUp = true;
    status.dataset.state = "live";
    status.textContent = "live";
  });
  source.addEventListener("record", (e) => {
    const record = JSON.parse(e.data);
    const id = recordKey(record);
    // Before `ready` the server replays what it kept: after a reconnection, some are here.
    if (!caughtUp && shownKeys.has(id)) return;
    records.push(record);
    shownKeys.add(id);
    if (records.length > MAX_RECORDS) {
      for (const old of records.splice(0, records.length - MAX_RECORDS)) shownKeys.delete(recordKey(old));
    }
    draw();
  });
  source.addEventListener("lagged", (e) => {
    skipped += Number(JSON.parse(e.data).skipped) || 0;
    draw();
  });
  source.addEventListener("error", () => {
    status.dataset.state = "reconnecting";
    status.textContent = "reconnecting…";
  });
  draw();
}

function recordKey(r) {
  return [r.timestamp, r.kind, r.session_id, r.step, r.server, r.tool, r.attempt].join("|");
}

function what(r) {
  return r.kind === "model_call" ? "(answer)" : `${r.server ?? "—"}/${r.tool}`;
}

function outcome(r) {
  if (r.error) return h("span", { class: "no" }, r.error);
  if (r.dry_run) return "planned (dry run)";
  return r.success ? h("span", { class: "yes" }, "ok") : h("span", { class: "no" }, "failed");
}

function stepTable(list) {
  return table(["step", "call", "rule", "latency", "cost", "tokens in/out", "outcome"], list.map((r) => [
    String(r.step), what(r), r.selection_rule || "—", ms(r.latency_ms), usd(r.cost_usd),
    `${r.tokens_in}/${r.tokens_out}`, outcome(r),
  ]), { id: "trace-step-table" });
}

function recordTable(list) {
  return table(["time", "session", "step", "call", "rule", "latency", "cost", "outcome"], list.map((r) => ({
    attrs: { "data-session": r.session_id, "data-tool": r.tool },
    cells: [r.timestamp, h("code", {}, r.session_id), String(r.step), what(r), r.selection_rule || "—", ms(r.latency_ms), usd(r.cost_usd), outcome(r)],
  })), { id: "trace-record-table" });
}
