// DOM helpers. Data from the gateway (tool names, descriptions, errors) is hostile input: it
// only ever becomes text nodes or attribute values set by name, never markup.

/** An element: `attrs` by name (`class`, `on<event>` for listeners), children as nodes or text. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/** An SVG element, the same way. */
export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (name === "class") {
      el.setAttribute("class", String(value));
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** GET `url` as JSON; throws an Error with the gateway's message when it answers an error. */
export async function getJSON(url, headers = {}) {
  const response = await fetch(url, { headers, credentials: "same-origin", cache: "no-store" });
  let body = null;
  try {
    body = await response.json();
  } catch {
    // not JSON: the status says enough
  }
  if (!response.ok) {
    const message = body && body.error && body.error.message;
    throw new Error(message || `the gateway answered ${response.status}`);
  }
  return body;
}

/** A table: `columns` are header texts, `rows` arrays of cells (nodes or text) or `{cells, attrs}`. */
export function table(columns, rows, attrs = {}) {
  return h("table", attrs,
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", {}, c)))),
    h("tbody", {}, rows.map((row) => {
      const cells = Array.isArray(row) ? row : row.cells;
      const rowAttrs = Array.isArray(row) ? {} : row.attrs;
      return h("tr", rowAttrs, cells.map((c) => h("td", {}, c)));
    })));
}

/** Small labels (tags, annotations). */
export function chips(items, kind = "") {
  return h("span", { class: "chips" }, items.map((t) => h("span", { class: `chip ${kind}` }, t)));
}

/** A message box. */
export function note(text, kind = "info") {
  return h("p", { class: `note ${kind}`, role: kind === "error" ? "alert" : null }, text);
}

/** A section with a heading. */
export function section(title, ...children) {
  return h("section", {}, h("h2", {}, title), ...children);
}

/** US dollars, at the precision the trace keeps. */
export function usd(value) {
  const n = Number(value) || 0;
  return `$${n.toFixed(n !== 0 && Math.abs(n) < 0.01 ? 6 : 4)}`;
}

/** Milliseconds, rounded. */
export function ms(value) {
  return `${(Number(value) || 0).toFixed(1)} ms`;
}
