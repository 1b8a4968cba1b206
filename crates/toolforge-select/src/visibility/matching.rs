//! Matching a tool against a list: names ([`NameMatcher`]: plain, `server/tool`,
//! `server__tool`, server, overlap group) and tags ([`TagMatcher`]), built once per list.

use std::cell::Cell;

use super::channels::ListKind;
use crate::catalog::{Catalog, Tool};
use crate::presentation::SEP;
use crate::visibility_index::{FastMap, FastSet, VisibilityIndex, splits};

/// A list of tool names, ready to match without building a tool's name forms: a listed name
/// matches a tool when it equals the tool's plain name, its server, `server/tool`,
/// `server__tool`, or the key of a declared overlap group the tool belongs to.
pub(super) struct NameMatcher<'a> {
    set: FastSet<&'a str>,
    /// What the list says about the tools of each server it concerns.
    servers: FastMap<&'a str, usize>,
    by_server: Vec<ServerNames<'a>>,
    /// The last server looked up and its entry: a catalog lists a server's tools together.
    last: Cell<Option<(&'a str, Option<usize>)>>,
}

/// What a list says about one server's tools, by tool name.
#[derive(Default)]
pub(super) struct ServerNames<'a> {
    /// The list names the server itself.
    listed: bool,
    /// Tool -> the listed name that is `server/tool`.
    slash: FastMap<&'a str, &'a str>,
    /// Tool -> the listed name that is `server__tool`.
    sep: FastMap<&'a str, &'a str>,
    /// Tool -> the first listed key (catalog order) of an overlap group it belongs to.
    groups: FastMap<&'a str, &'a str>,
}

impl<'a> NameMatcher<'a> {
    pub(super) fn new(catalog: &'a Catalog, list: &'a [String]) -> Self {
        let set: FastSet<&str> = list.iter().map(String::as_str).collect();
        let mut servers: FastMap<&'a str, usize> = FastMap::default();
        let mut by_server: Vec<ServerNames<'a>> = Vec::new();
        let mut entry = |server: &'a str| -> usize {
            *servers.entry(server).or_insert_with(|| {
                by_server.push(ServerNames::default());
                by_server.len() - 1
            })
        };
        let mut add: Vec<(usize, u8, &'a str, &'a str)> = Vec::new();
        for name in list {
            add.push((entry(name), 0, "", name));
            for (server, tool) in splits(name, "/") {
                add.push((entry(server), 1, tool, name));
            }
            for (server, tool) in splits(name, SEP) {
                add.push((entry(server), 2, tool, name));
            }
        }
        for (key, members) in &catalog.overlaps {
            if set.contains(key.as_str()) {
                for member in members {
                    add.push((entry(&member.server), 3, &member.name, key));
                }
            }
        }
        for (i, form, tool, name) in add {
            let names = &mut by_server[i];
            let map = match form {
                0 => {
                    names.listed = true;
                    continue;
                }
                1 => &mut names.slash,
                2 => &mut names.sep,
                _ => &mut names.groups,
            };
            map.entry(tool).or_insert(name);
        }
        Self {
            set,
            servers,
            by_server,
            last: Cell::new(None),
        }
    }

    /// The first of the tool's names (plain, server, `server/tool`, `server__tool`, group keys
    /// in catalog order) that the list holds, if any.
    pub(super) fn hit(&self, tool: &'a Tool) -> Option<&'a str> {
        if self.set.is_empty() {
            return None;
        }
        if self.set.contains(tool.name.as_str()) {
            return Some(&tool.name);
        }
        let server = match self.last.get() {
            Some((server, entry)) if server == tool.server => entry,
            _ => {
                let entry = self.servers.get(tool.server.as_str()).copied();
                self.last.set(Some((&tool.server, entry)));
                entry
            }
        };
        let names = &self.by_server[server?];
        if names.listed {
            return Some(&tool.server);
        }
        let name = tool.name.as_str();
        [&names.slash, &names.sep, &names.groups]
            .into_iter()
            .find_map(|map| map.get(name).copied())
    }
}

/// A list of tags, matched ASCII case-insensitively: a short one by scanning it, a longer one
/// through a set of its lower-cased tags.
pub(super) struct TagMatcher {
    list: Vec<String>,
    set: FastSet<String>,
}

/// Up to this many tags a list is scanned rather than hashed.
pub(super) const SCAN_TAGS: usize = 8;

impl TagMatcher {
    pub(super) fn new(list: &[String]) -> Self {
        let list: Vec<String> = list.iter().map(|t| t.to_ascii_lowercase()).collect();
        let set = if list.len() > SCAN_TAGS {
            list.iter().cloned().collect()
        } else {
            FastSet::default()
        };
        Self { list, set }
    }

    /// The first of the tool's tags (as the tool spells it) that the list holds, if any.
    pub(super) fn hit<'t>(&self, tool: &'t Tool) -> Option<&'t str> {
        if self.list.is_empty() {
            return None;
        }
        tool.tags.iter().map(String::as_str).find(|t| {
            if self.set.is_empty() {
                self.list.iter().any(|l| l.eq_ignore_ascii_case(t))
            } else if t.bytes().any(|b| b.is_ascii_uppercase()) {
                self.set.contains(&t.to_ascii_lowercase())
            } else {
                self.set.contains(*t)
            }
        })
    }
}

/// A list of names or tags, ready to match.
pub(super) enum Matcher<'a> {
    Names(NameMatcher<'a>),
    Tags(TagMatcher),
    /// Each tool's hit, found through a [`VisibilityIndex`].
    IndexedNames(Vec<Option<&'a str>>),
    /// Each tool's first listed tag (its position), found through a [`VisibilityIndex`].
    IndexedTags(Vec<u32>),
}

impl<'a> Matcher<'a> {
    pub(super) fn new(
        catalog: &'a Catalog,
        index: Option<&VisibilityIndex>,
        kind: ListKind,
        list: &'a [String],
    ) -> Self {
        match (kind, index) {
            (ListKind::Tools, None) => Matcher::Names(NameMatcher::new(catalog, list)),
            (ListKind::Tags, None) => Matcher::Tags(TagMatcher::new(list)),
            (ListKind::Tools, Some(index)) => Matcher::IndexedNames(index.name_hits(catalog, list)),
            (ListKind::Tags, Some(index)) => Matcher::IndexedTags(index.tag_hits(list)),
        }
    }

    /// The name or tag of the tool (the `i`th of the catalog) that the list holds, if any.
    pub(super) fn hit(&self, i: usize, tool: &'a Tool) -> Option<&'a str> {
        match self {
            Matcher::Names(m) => m.hit(tool),
            Matcher::Tags(m) => m.hit(tool),
            Matcher::IndexedNames(hits) => hits[i],
            Matcher::IndexedTags(hits) => tool.tags.get(hits[i] as usize).map(String::as_str),
        }
    }
}
