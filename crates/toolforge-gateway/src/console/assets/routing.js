// Routing explainer: a prompt and a tool call in; the selector's decision with every rule's
// evidence (what `toolforge select` prints) and the broker's offer for the prompt out.
import { h, getJSON, table, chips, note, section } from "./dom.js";

const EXAMPLE = "Look up customer Alice Nguyen's orders and sum their total";

export async function render(root, params) {
  const catalog = await getJSON("/ui/api/catalog");
  const names = new Set();
  for (const g of catalog.groups) names.add(g.name);
  for (const t of catalog.tools) { names.add(t.exposed_name); names.add(t.id); }
  const firstTool = catalog.groups.length ? catalog.groups[0].name
    : (catalog.tools.length ? catalog.tools[0].exposed_name : "");
  const field = (id, value, attrs = {}) => h("input", { id, type: "text", value, ...attrs });
  const prompt = h("textarea", { id: "routing-prompt", rows: 2, "aria-label": "Prompt" });
  prompt.value = params.get("prompt") || EXAMPLE;
  const tool = field("routing-tool", params.get("tool") ?? firstTool, { list: "routing-tools", placeholder: "server/tool or an exposed name" });
  const args = field("routing-args", params.get("args") || "{}", { placeholder: "{\"path\": \"a.txt\"}" });
  const session = field("routing-session", params.get("session") || "", { placeholder: "server/tool,server/tool" });
  const intent = field("routing-intent", params.get("intent") || "", { placeholder: "detected from the prompt when empty" });
  const options = h("datalist", { id: "routing-tools" }, [...names].sort().map((n) => h("option", { value: n })));
  const out = h("div", { id: "routing-result" });
  const run = async () => {
    out.replaceChildren(note("Deciding…"));
    const q = new URLSearchParams({ prompt: prompt.value, tool: tool.value, args: args.value, session: session.value, intent: intent.value });
    try {
      const data = await getJSON(`/ui/api/route?${q}`);
      out.replaceChildren(...explain(data));
    } catch (e) {
      out.replaceChildren(note(e.message, "error"));
    }
  };
  root.append(
    h("form", { class: "form", onsubmit: (e) => { e.preventDefault(); run(); } },
      h("label", {}, "Prompt ", prompt),
      h("label", {}, "Tool called ", tool, options),
      h("label", {}, "Arguments (JSON object) ", args),
      h("label", {}, "Earlier calls of the session ", session),
      h("label", {}, "Intent ", intent),
      h("button", { type: "submit" }, "Explain")),
    out);
  await run();
}

function explain(data) {
  const parts = [];
  const d = data.decision;
  if (d) {
    const alternatives = d.alternatives.length ? d.alternatives.join(", ") : "none";
    parts.push(section("Selector decision",
      h("p", { id: "routing-decision", class: "summary" },
        h("strong", {}, `${d.server}/${d.tool}`), " by ", h("code", {}, d.selection_rule),
        ` (alternatives: ${alternatives})`),
      h("p", {}, "Candidates: ", chips(d.candidates)),
      d.trace.length
        ? table(["rule", "outcome", "evidence"], d.trace.map((t) => ({
          attrs: { "data-rule": t.rule, class: `outcome-${t.outcome}` },
          cells: [h("code", {}, t.rule), t.outcome, t.evidence || "—"],
        })), { id: "routing-trace" })
        : note("One candidate can run this call, so no rule had to decide. "
          + "The tools of an overlap group are decided by the five rules, each with its evidence.")));
  } else {
    parts.push(note("Name a tool to see which server would run the call."));
  }
  const o = data.offer;
  parts.push(section("Broker offer",
    h("p", { class: "summary" }, `Intent `, h("code", {}, o.intent), `: ${o.tools.length} of ${o.visible} visible tools offered`),
    h("ol", { class: "rationale" }, o.rationale.map((r) => h("li", {}, r))),
    table(["offered tool", "how"], o.tools.map((t) => [t.tool, t.summarized ? "summarized" : "in full"]), { id: "routing-offer" }),
    o.left_out.length ? h("details", {}, h("summary", {}, `${o.left_out.length} left out`),
      table(["tool", "why"], o.left_out.map((l) => [l.tool, leftOutReason(l)]))) : null,
    o.override_block ? h("details", {}, h("summary", {}, "tool overrides"), h("pre", {}, o.override_block)) : null));
  return parts;
}

function leftOutReason(l) {
  switch (l.reason) {
    case "excluded_by_rule": return `excluded by rule ${l.rule}`;
    case "not_included": return "no include rule for the intent matches it";
    case "below_cap": return `ranked ${l.rank}, below the cap of ${l.cap} tools`;
    case "over_budget": return `over the budget of ${l.budget} tokens`;
    default: return l.reason;
  }
}
