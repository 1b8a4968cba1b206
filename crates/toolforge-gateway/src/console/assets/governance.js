// GOVERNANCE: reserved for the governance work (quarantined tools with their diff, approve for
// an admin principal). That work adds its API under /ui/api/governance and renders here; until
// it lands, this page only says so. The console stays read-only without it.
import { note } from "./dom.js";

export async function render(root) {
  root.append(
    note("Quarantined tools, with what changed in their definitions, and approval by an admin "
      + "will appear here once tool governance is part of this gateway."),
  );
}
