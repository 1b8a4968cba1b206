// Visibility preview: a query string and x-mcp-* headers in, what that request would see out,
// each tool, resource, template and prompt with the reason it is in or out.
import { h, getJSON, table, note, section } from "./dom.js";

const MAX_HEADERS = 20;

export async function render(root, params) {
  const query = h("input", {
    id: "visibility-query", type: "text", value: params.toString(),
    placeholder: "tools=sql_query&tags=read-only&q=orders", "aria-label": "Query string",
  });
  const headers = h("textarea", {
    id: "visibility-headers", rows: 3, "aria-label": "Headers",
    placeholder: "x-mcp-enabled-tags: read-only\nx-mcp-query: customers",
  });
  const showHidden = h("input", { type: "checkbox", id: "visibility-show-hidden", checked: true });
  const out = h("div", { id: "visibility-result" });
  const run = async () => {
    out.replaceChildren(note("Resolving…"));
    try {
      const headerMap = parseHeaders(headers.value);
      const q = query.value.trim().replace(/^\?/, "");
      const data = await getJSON(`/ui/api/visibility${q ? `?${q}` : ""}`, headerMap);
      out.replaceChildren(...result(data));
      out.classList.toggle("only-visible", !showHidden.checked);
      if (location.hash !== `#visibility${q ? `?${q}` : ""}`) {
        history.replaceState(null, "", `#visibility${q ? `?${q}` : ""}`);
      }
    } catch (e) {
      out.replaceChildren(note(e.message, "error"));
    }
  };
  const form = h("form", { class: "form", onsubmit: (e) => { e.preventDefault(); run(); } },
    h("label", {}, "Query string of the request ", query),
    h("label", {}, "Headers, one per line (x-mcp-* only) ", headers),
    h("label", { class: "inline" }, showHidden, " show what is hidden"),
    h("button", { type: "submit" }, "Preview"));
  showHidden.addEventListener("change", () => out.classList.toggle("only-visible", !showHidden.checked));
  root.append(
    note("What a request to /mcp, /tools or /chat with these query parameters and headers would see. "
      + "The operator's settings (environment, flags) apply first; a request can only narrow them "
      + "unless the gateway allows widening."),
    form, out);
  await run();
}

function parseHeaders(text) {
  const headers = {};
  const lines = text.split("\n").map((l) => l.trim()).filter(Boolean);
  if (lines.length > MAX_HEADERS) throw new Error(`at most ${MAX_HEADERS} headers`);
  for (const line of lines) {
    const cut = line.indexOf(":");
    const name = (cut < 0 ? "" : line.slice(0, cut)).trim().toLowerCase();
    if (!name.startsWith("x-mcp-")) throw new Error(`"${line}" is not an x-mcp-* header (name: value)`);
    headers[name] = line.slice(cut + 1).trim();
  }
  return headers;
}

function verdictRows(items, name) {
  return items.map((item) => ({
    attrs: { "data-visible": String(item.visible), class: item.visible ? "in" : "out" },
    cells: [h("span", { class: item.visible ? "yes" : "no" }, item.visible ? "in" : "out"), name(item), item.server, item.reason],
  }));
}

function result(data) {
  const parts = [];
  const total = data.tools.length;
  let summary = `${data.visible_tools} of ${total} tools visible`;
  if (data.query_matched === false) summary += "; the search query matched nothing, so it was dropped";
  parts.push(h("p", { id: "visibility-summary", class: "summary" }, summary));
  for (const w of data.warnings || []) parts.push(note(`Ignored: ${w}`, "warn"));
  parts.push(section("Tools", table(["", "tool", "server", "why"], verdictRows(data.tools, (t) => t.name), { id: "visibility-tools" })));
  for (const [title, key, id] of [["Resources", "resources", "visibility-resources"], ["Resource templates", "templates", "visibility-templates"], ["Prompts", "prompts", "visibility-prompts"]]) {
    const items = data[key] || [];
    parts.push(section(title, items.length
      ? table(["", "name", "server", "why"], verdictRows(items, (c) => c.label), { id })
      : note(`No ${title.toLowerCase()} in the pool.`)));
  }
  return parts;
}
