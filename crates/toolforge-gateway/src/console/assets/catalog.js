// Catalog: servers with their state, every tool with its schema, tags and annotations, the
// overlap groups with their members; a search box narrows the tools.
import { h, getJSON, table, chips, note, section } from "./dom.js";

export async function render(root, params) {
  const data = await getJSON("/ui/api/catalog");
  root.append(servers(data.servers), groups(data.groups), tools(data.tools, params.get("q") || ""));
}

function servers(list) {
  const rows = list.map((s) => ({
    attrs: { "data-server": s.name, class: `state-${s.state}` },
    cells: [
      s.name,
      h("span", { class: `state ${s.state}` }, s.state),
      s.protocol || "—",
      String(s.tools),
      String(s.restarts),
      s.last_error || "—",
      chips(s.tags || []),
    ],
  }));
  return section("Servers",
    list.length ? table(["server", "state", "protocol", "tools", "restarts", "last error", "tags"], rows, { id: "catalog-servers" })
      : note("No server is configured."));
}

function groups(list) {
  if (!list.length) return section("Overlap groups", note("No overlap groups: every tool name is unique."));
  const rows = list.map((g) => ({
    attrs: { "data-group": g.name },
    cells: [g.name, g.declared ? "declared" : "same name", chips(g.members)],
  }));
  return section("Overlap groups", table(["exposed as", "why", "members"], rows, { id: "catalog-groups" }));
}

function tools(list, initial) {
  const search = h("input", {
    type: "search", id: "catalog-search", placeholder: "Search tools by name, server, tag or description",
    value: initial, "aria-label": "Search tools",
  });
  const count = h("span", { class: "count" });
  const cards = list.map((t) => ({ tool: t, card: card(t), text: haystack(t) }));
  const holder = h("div", { id: "catalog-tools", class: "cards" }, cards.map((c) => c.card));
  const apply = () => {
    const words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    let shown = 0;
    for (const c of cards) {
      const match = words.every((w) => c.text.includes(w));
      c.card.hidden = !match;
      if (match) shown += 1;
    }
    count.textContent = `${shown} of ${cards.length} tools`;
  };
  search.addEventListener("input", apply);
  apply();
  return section("Tools", h("div", { class: "toolbar" }, search, count), holder);
}

function haystack(t) {
  return [t.server, t.name, t.exposed_name, t.title || "", t.description, ...(t.tags || [])].join(" ").toLowerCase();
}

function card(t) {
  const annotations = Object.entries(t.annotations || {}).map(([k, v]) => `${k}: ${JSON.stringify(v)}`);
  return h("article", { class: "card", "data-tool": t.id },
    h("header", {},
      h("strong", { class: "tool-name" }, t.exposed_name),
      t.exposed_name !== t.name ? h("span", { class: "muted" }, ` (${t.name})`) : null,
      h("span", { class: "server" }, t.server)),
    t.title ? h("p", { class: "title" }, String(t.title)) : null,
    h("p", { class: "description" }, t.description || "No description."),
    t.tags && t.tags.length ? h("div", {}, h("span", { class: "muted" }, "tags "), chips(t.tags)) : null,
    annotations.length ? h("div", {}, h("span", { class: "muted" }, "annotations "), chips(annotations, "annotation")) : null,
    h("details", {}, h("summary", {}, "input schema"), h("pre", {}, JSON.stringify(t.input_schema, null, 2))));
}
