// The console's shell: one page per hash (#catalog, #visibility?tools=..., ...). Each page
// module exports render(root, params) (a promise, resolved once its data is shown) and may
// export leave() to close what it opened.
import { h, note } from "./dom.js";
import * as catalog from "./catalog.js";
import * as visibility from "./visibility.js";
import * as routing from "./routing.js";
import * as trace from "./trace.js";
import * as spend from "./spend.js";
import * as governance from "./governance.js";

const PAGES = [
  { id: "catalog", title: "Catalog", module: catalog },
  { id: "visibility", title: "Visibility", module: visibility },
  { id: "routing", title: "Routing", module: routing },
  { id: "trace", title: "Live trace", module: trace },
  { id: "spend", title: "Spend and cache", module: spend },
  { id: "governance", title: "Governance", module: governance },
];

const nav = document.getElementById("nav");
const main = document.getElementById("main");
let current = null;
let generation = 0;

nav.append(...PAGES.map((p) => h("a", { href: `#${p.id}`, "data-page": p.id }, p.title)));

async function show() {
  const hash = location.hash.slice(1);
  const cut = hash.indexOf("?");
  const id = cut < 0 ? hash : hash.slice(0, cut);
  const params = new URLSearchParams(cut < 0 ? "" : hash.slice(cut + 1));
  const page = PAGES.find((p) => p.id === id) || PAGES[0];
  if (current && current.module.leave) current.module.leave();
  current = page;
  const mine = ++generation;
  for (const link of nav.querySelectorAll("a")) {
    if (link.dataset.page === page.id) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  document.title = `${page.title} · toolforge`;
  main.dataset.page = page.id;
  main.dataset.ready = "false";
  const root = h("div", { class: "page" });
  main.replaceChildren(h("h1", {}, page.title), root);
  try {
    await page.module.render(root, params);
    if (mine === generation) main.dataset.ready = "true";
  } catch (e) {
    if (mine !== generation) return;
    root.append(note(`Could not load this page: ${e.message}`, "error"));
    main.dataset.ready = "error";
  }
}

window.addEventListener("hashchange", show);
show();
