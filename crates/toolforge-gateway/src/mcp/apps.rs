//! MCP Apps through the gateway: the `ui://` resources tools link (`_meta.ui.resourceUri` and
//! the older keys, `toolforge_select::apps`), kept apart per server.
//!
//! Two servers may hold the same `ui://` URI (two fastmcp app servers both serve
//! `ui://widget/card.html`). Each such URI is held first by the servers whose tools link it, in
//! configuration order, then by those that only list it; the first holder keeps it, and every
//! other holder's copy is exposed as `ui://{server}/{the rest}` (the server's name in lower case,
//! characters other than letters, digits and `-` as `-`; a number appended if that is taken).
//! Its tools link that URI, `resources/list` lists it, and reading it reads the backend's
//! original URI on that server, so each tool leads to its own server's HTML. A `ui://` URI
//! that only tools link (apps may leave their HTML out of `resources/list`) is read from the
//! server whose tool links it.
//!
//! Which tools link what is fixed by the catalog, so the tools' rewritten links are too (they
//! are built once per catalog generation, like the rest of `tools/list`); the resources' side
//! is decided with the resource lists of the moment.

use std::collections::HashMap;

use toolforge_select::Catalog;
use toolforge_select::apps::{is_ui_uri, links};

/// Where every held `ui://` URI lives, and what clients see of it.
#[derive(Debug, Default)]
pub(crate) struct AppUris {
    /// (server, URI in its one spelling) -> the URI clients see, for the copies rewritten.
    exposed: HashMap<(String, String), String>,
    /// A rewritten URI -> (server, the URI as that server spells it).
    rewritten: HashMap<String, (String, String)>,
    /// A held URI (in its one spelling) -> its first holder, and how it spells it.
    first: HashMap<String, (String, String)>,
}

/// The one spelling of `uri` (`crate::resource_uri`), or `uri` when it has none.
fn spelling(uri: &str) -> String {
    crate::resource_uri::normalise(uri).unwrap_or_else(|_| uri.to_owned())
}

/// `server` as the first segment of a URI: lower case, `[a-z0-9-]` only.
fn slug(server: &str) -> String {
    let slug: String = server
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if slug.is_empty() {
        "server".into()
    } else {
        slug
    }
}

impl AppUris {
    /// The `ui://` URIs each server's tools link, in configuration order.
    pub(crate) fn links_of(catalog: &Catalog) -> Vec<(String, String)> {
        catalog
            .servers
            .iter()
            .flat_map(|s| {
                s.tools.iter().flat_map(move |t| {
                    links(&t.definition)
                        .into_iter()
                        .map(move |uri| (s.name.clone(), uri.to_owned()))
                })
            })
            .collect()
    }

    /// The table for these links (from [`AppUris::links_of`]) and these listed resources
    /// (server, URI), both in configuration order. Only `links` decide what happens to a
    /// linked URI: a tool's link stays what it is as the resource lists change.
    pub(crate) fn new(links: &[(String, String)], listed: &[(String, String)]) -> Self {
        let mut table = Self::default();
        table.hold(links.iter());
        table.hold(listed.iter().filter(|(_, uri)| is_ui_uri(uri)));
        table
    }

    /// Adds these holders, each URI kept by its first holder and rewritten for the others.
    fn hold<'a>(&mut self, holders: impl Iterator<Item = &'a (String, String)>) {
        let mut held: Vec<(String, Vec<(String, String)>)> = Vec::new();
        for (server, uri) in holders {
            let key = spelling(uri);
            let known = |s: &String| {
                self.first.get(&key).is_some_and(|(f, _)| f == s)
                    || self.exposed.contains_key(&(s.clone(), key.clone()))
            };
            if known(server) {
                continue;
            }
            match held.iter_mut().find(|(k, _)| *k == key) {
                Some((_, servers)) => {
                    if !servers.iter().any(|(s, _)| s == server) {
                        servers.push((server.clone(), uri.clone()));
                    }
                }
                None => held.push((key, vec![(server.clone(), uri.clone())])),
            }
        }
        // Every URI's first holder before any rewritten name is chosen, so that no name is
        // one a holder of this pass keeps.
        for (key, servers) in &mut held {
            if !self.first.contains_key(key.as_str()) && !servers.is_empty() {
                self.first.insert(key.clone(), servers.remove(0));
            }
        }
        for (key, servers) in held {
            for (server, uri) in servers {
                let rest = &key["ui://".len().min(key.len())..];
                let base = slug(&server);
                let mut n = 1;
                let exposed = loop {
                    let name = if n == 1 {
                        base.clone()
                    } else {
                        format!("{base}-{n}")
                    };
                    let candidate = format!("ui://{name}/{rest}");
                    if !self.first.contains_key(&candidate)
                        && !self.rewritten.contains_key(&candidate)
                    {
                        break candidate;
                    }
                    n += 1;
                };
                self.exposed
                    .insert((server.clone(), key.clone()), exposed.clone());
                self.rewritten.insert(exposed, (server, uri));
            }
        }
    }

    /// Whether any server holds a `ui://` URI.
    pub(crate) fn is_empty(&self) -> bool {
        self.first.is_empty()
    }

    /// The URI clients see for `server`'s `uri` (`None`: `uri` itself).
    pub(crate) fn exposed(&self, server: &str, uri: &str) -> Option<&str> {
        if self.exposed.is_empty() || !is_ui_uri(uri) {
            return None;
        }
        self.exposed
            .get(&(server.to_owned(), spelling(uri)))
            .map(String::as_str)
    }

    /// Where a client's URI (in its one spelling) lives: (server, the URI that server reads),
    /// for a rewritten URI, or for a held one (its first holder).
    pub(crate) fn target(&self, uri: &str) -> Option<(&str, &str)> {
        self.rewritten
            .get(uri)
            .or_else(|| self.first.get(uri))
            .map(|(server, original)| (server.as_str(), original.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(s, u)| ((*s).to_owned(), (*u).to_owned()))
            .collect()
    }

    #[test]
    fn the_first_linker_keeps_a_uri_and_the_others_get_their_own() {
        let links = pairs(&[
            ("alpha", "ui://widget/card.html"),
            ("Beta Server", "ui://widget/card.html"),
            ("gamma", "ui://widget/card.html"),
            ("gamma", "ui://gamma-only.html"),
        ]);
        let listed = pairs(&[
            ("alpha", "ui://widget/card.html"),
            ("Beta Server", "UI://widget/card.html"),
            ("delta", "ui://widget/card.html"),
            ("delta", "https://not-an-app"),
        ]);
        let t = AppUris::new(&links, &listed);
        assert_eq!(t.exposed("alpha", "ui://widget/card.html"), None);
        assert_eq!(
            t.exposed("Beta Server", "ui://widget/card.html"),
            Some("ui://beta-server/widget/card.html")
        );
        assert_eq!(
            t.exposed("gamma", "ui://widget/card.html"),
            Some("ui://gamma/widget/card.html")
        );
        assert_eq!(
            t.exposed("delta", "ui://widget/card.html"),
            Some("ui://delta/widget/card.html"),
            "a server that only lists it gets its own too"
        );
        assert_eq!(t.exposed("gamma", "ui://gamma-only.html"), None);
        assert_eq!(
            t.target("ui://beta-server/widget/card.html"),
            Some(("Beta Server", "ui://widget/card.html"))
        );
        assert_eq!(
            t.target("ui://widget/card.html"),
            Some(("alpha", "ui://widget/card.html"))
        );
        assert_eq!(
            t.target("ui://gamma-only.html"),
            Some(("gamma", "ui://gamma-only.html")),
            "a URI only a tool links lives on that tool's server"
        );
        assert_eq!(t.target("ui://nobody.html"), None);
    }

    #[test]
    fn a_linker_keeps_a_uri_another_server_only_lists_and_a_taken_name_is_numbered() {
        let links = pairs(&[("beta", "ui://w.html")]);
        let listed = pairs(&[
            ("alpha", "ui://w.html"),
            ("alpha", "ui://beta/w.html"),
            ("beta", "ui://w.html"),
        ]);
        let t = AppUris::new(&links, &listed);
        assert_eq!(t.target("ui://w.html"), Some(("beta", "ui://w.html")));
        assert_eq!(t.exposed("beta", "ui://w.html"), None);
        assert_eq!(t.exposed("alpha", "ui://w.html"), Some("ui://alpha/w.html"));
        // A rewritten name never shadows a URI someone holds.
        let links = pairs(&[("a", "ui://w.html"), ("b", "ui://w.html")]);
        let listed = pairs(&[("c", "ui://b/w.html")]);
        let t = AppUris::new(&links, &listed);
        assert_eq!(t.exposed("b", "ui://w.html"), Some("ui://b/w.html"));
        assert_eq!(
            t.target("ui://b/w.html"),
            Some(("b", "ui://w.html")),
            "the linker's rewritten URI is decided by the links alone"
        );
    }
}
