// Governance: the tools held in quarantine (a definition changed since it was pinned, a rename,
// or poisoning markers), each with what changed field by field and the fingerprint of the
// pending definition, and approval for an admin principal (the operator names admins with
// `serve --console-admin`; nobody is by default). An approval names the fingerprint shown, so a
// definition the server changed after the page was drawn is not approved (409).
import { getJSON, h, note, section, table } from "./dom.js";

function shown(value) {
  return value === undefined || value === null ? "(absent)" : JSON.stringify(value);
}

async function approve(server, tool, fingerprint, status) {
  status.hidden = false;
  status.textContent = `approving ${server}/${tool}…`;
  const response = await fetch("/ui/api/governance/approve", {
    method: "POST",
    credentials: "same-origin",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ server, tool, fingerprint }),
  });
  let body = null;
  try {
    body = await response.json();
  } catch {
    // the status says enough
  }
  status.textContent = response.ok
    ? `approved ${server}/${tool}: the gateway offers it again within seconds`
    : (body && body.error && body.error.message) || `the gateway answered ${response.status}`;
}

export async function render(root) {
  const data = await getJSON("/ui/api/governance");
  const held = data.quarantined || [];
  const status = h("p", { class: "note info", role: "status", "aria-live": "polite", hidden: true });
  root.append(section("Quarantined tools",
    note(held.length === 0
      ? "No tool is quarantined: every tool's definition matches its pin."
      : `${held.length} tool(s) held back: neither listed nor callable until approved.`),
    note(data.can_approve
      ? `You (${data.principal}) may approve.`
      : `Read-only for ${data.principal}: approve with "toolforge tools approve server/tool FINGERPRINT", `
        + "or ask the operator to name you with \"serve --console-admin\"."),
    status,
    held.map((q) => h("article", { class: "quarantined", "data-tool": `${q.server}/${q.tool}` },
      h("h3", {}, `${q.server}/${q.tool}`),
      note(`why: ${q.reason || "changed"}${q.first_seen ? " (never approved: every field is new)" : ""}`),
      note(h("span", {}, "fingerprint ", h("code", {}, q.fingerprint || ""))),
      table(["field", "before", "after"], (q.changes || []).map((c) => [
        h("code", {}, c.field), h("code", {}, shown(c.before)), h("code", {}, shown(c.after)),
      ])),
      data.can_approve
        ? h("button", { type: "button", onclick: () => approve(q.server, q.tool, q.fingerprint, status) }, "Approve")
        : null,
    )),
  ));
}
