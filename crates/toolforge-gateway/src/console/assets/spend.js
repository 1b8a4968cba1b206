// Spend and cache: the daily cost (what `toolforge cost-report` computes from the trace file)
// and the catalog cache's figures, as bar charts.
import { h, getJSON, table, note, section, usd } from "./dom.js";
import { barChart } from "./charts.js";

export async function render(root) {
  const data = await getJSON("/ui/api/spend");
  root.append(spend(data.report, data.error), cache(data.cache));
}

function spend(report, error) {
  if (!report) return section("Daily cost", note(error || "No spend report.", "warn"));
  const days = report.days || [];
  const t = report.total || {};
  const parts = [
    h("p", { id: "spend-total", class: "summary" },
      `${usd(t.cost_usd)} over ${days.length} day(s): ${t.sessions ?? 0} sessions, ${t.calls ?? 0} tool calls, `
      + `${t.model_calls ?? 0} answers, ${t.tokens_in ?? 0} tokens in, ${t.tokens_out ?? 0} tokens out`),
    barChart({
      id: "spend-chart",
      bars: days.slice(-31).map((d) => ({ label: d.date.slice(5), value: d.cost_usd })),
      format: usd,
      caption: "Cost per UTC day (the last 31 days)",
    }),
    table(["date", "sessions", "calls", "answers", "executed", "dry run", "failed", "tokens in", "tokens out", "cost"],
      days.map((d) => [d.date, d.sessions, d.calls, d.model_calls, d.executed, d.dry_run, d.failed, d.tokens_in, d.tokens_out, usd(d.cost_usd)].map(String)),
      { id: "spend-days" }),
  ];
  if (report.skipped_lines) parts.push(note(`${report.skipped_lines} malformed trace line(s) were skipped.`, "warn"));
  if (report.unknown_schema_lines) parts.push(note(`${report.unknown_schema_lines} record(s) of a newer trace schema were skipped.`, "warn"));
  return section("Daily cost", ...parts);
}

function cache(status) {
  if (!status || status.backend === "none") {
    return section("Catalog cache", note("No catalog cache is configured."), servers(status));
  }
  const figures = ["hits", "stale_served", "misses", "writes", "refreshes", "errors"];
  return section("Catalog cache",
    h("p", { class: "summary" }, `Backend ${status.backend}, lists kept ${status.ttl_seconds} s`),
    barChart({
      id: "cache-chart",
      bars: figures.map((f) => ({ label: f.replace("_", " "), value: status[f] || 0 })),
      caption: "Catalog-cache lookups since start",
    }),
    status.last_error ? note(`Last error: ${status.last_error}`, "error") : null,
    servers(status));
}

function servers(status) {
  const entries = Object.entries((status && status.servers) || {});
  if (!entries.length) return null;
  return table(["server", "tools listed from", "age"], entries.map(([name, s]) => [
    name, s.source, s.age_seconds == null ? "—" : `${s.age_seconds} s`,
  ]), { id: "cache-servers" });
}
