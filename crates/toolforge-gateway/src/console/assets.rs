//! The console's files, embedded in the binary: one page, its style sheet and its modules.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

/// Name, media type and content of every file the console serves.
const FILES: &[(&str, &str, &str)] = &[
    ("index.html", HTML, include_str!("assets/index.html")),
    ("style.css", CSS, include_str!("assets/style.css")),
    ("app.js", JS, include_str!("assets/app.js")),
    ("dom.js", JS, include_str!("assets/dom.js")),
    ("charts.js", JS, include_str!("assets/charts.js")),
    ("catalog.js", JS, include_str!("assets/catalog.js")),
    ("visibility.js", JS, include_str!("assets/visibility.js")),
    ("routing.js", JS, include_str!("assets/routing.js")),
    ("trace.js", JS, include_str!("assets/trace.js")),
    ("spend.js", JS, include_str!("assets/spend.js")),
    ("governance.js", JS, include_str!("assets/governance.js")),
    ("favicon.svg", SVG, include_str!("assets/favicon.svg")),
];

const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const SVG: &str = "image/svg+xml";

/// The file called `name`, if the console has one.
pub(super) fn response(name: &str) -> Option<Response> {
    let (_, media, body) = FILES.iter().find(|(n, _, _)| *n == name)?;
    Some(
        (
            [(header::CONTENT_TYPE, HeaderValue::from_static(media))],
            *body,
        )
            .into_response(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_the_page_imports_is_served() {
        let names: Vec<&str> = FILES.iter().map(|(n, _, _)| *n).collect();
        for (name, _, body) in FILES {
            for line in body.lines() {
                let Some(from) = line.split(" from \"./").nth(1) else {
                    continue;
                };
                let module = from.split('"').next().unwrap_or_default();
                assert!(names.contains(&module), "{name} imports {module}");
            }
        }
        assert!(response("nope.js").is_none());
    }

    #[test]
    fn no_file_puts_data_in_markup() {
        for (name, _, body) in FILES {
            for bad in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "document.write",
                "eval(",
            ] {
                assert!(!body.contains(bad), "{name} uses {bad}");
            }
        }
    }
}
