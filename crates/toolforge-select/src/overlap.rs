//! Overlap groups: tools that do the same job on several servers.
//!
//! A group forms from (a) the same tool name on several servers and (b) groups declared in
//! config (`Catalog::overlaps`). A tool that links an MCP Apps resource (`crate::apps`) is
//! never grouped by its name alone: its results render in its own server's HTML, so one tool
//! standing for several servers could not say which to open (it is exposed as
//! `server__tool` when the name collides). Groups sharing a member merge (union), so a tool belongs to
//! at most one group. Naming: a group containing a declared group takes the key of the first
//! declared group (config order) it absorbed; a pure same-name group takes the shared name.
//! Declared members that are not in the catalog are ignored (the server may be down).

use std::collections::BTreeMap;

use crate::catalog::{Catalog, ToolId};

/// One overlap group: its name and its members in config order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverlapGroup {
    pub name: String,
    pub members: Vec<ToolId>,
    /// True when at least one declared group contributed to it.
    pub declared: bool,
}

/// Computes the overlap groups of a catalog, ordered by their first member in config order.
/// Only groups with two or more members are returned.
pub fn overlap_groups(catalog: &Catalog) -> Vec<OverlapGroup> {
    let ids: Vec<ToolId> = catalog.tools().map(|t| t.id()).collect();
    let apps: Vec<bool> = catalog
        .tools()
        .map(|t| crate::apps::links_an_app(&t.definition))
        .collect();
    let index: BTreeMap<&ToolId, usize> = ids.iter().enumerate().map(|(i, id)| (id, i)).collect();
    let mut parent: Vec<usize> = (0..ids.len()).collect();
    fn find(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    fn union(parent: &mut [usize], a: usize, b: usize) {
        let (ra, rb) = (find(parent, a), find(parent, b));
        if ra != rb {
            let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
            parent[hi] = lo;
        }
    }
    // (a) same name on several servers.
    let mut by_name: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, id) in ids.iter().enumerate().filter(|(i, _)| !apps[*i]) {
        match by_name.get(id.name.as_str()) {
            Some(&first) => union(&mut parent, first, i),
            None => {
                by_name.insert(id.name.as_str(), i);
            }
        }
    }
    // (b) declared groups; remember the first declared key touching each member.
    let mut declared_key: BTreeMap<usize, (usize, &str)> = BTreeMap::new();
    for (order, (key, members)) in catalog.overlaps.iter().enumerate() {
        let present: Vec<usize> = members
            .iter()
            .filter_map(|m| index.get(m).copied())
            .collect();
        for &m in &present {
            declared_key.entry(m).or_insert((order, key.as_str()));
        }
        for pair in present.windows(2) {
            union(&mut parent, pair[0], pair[1]);
        }
    }
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for i in 0..ids.len() {
        let root = find(&mut parent, i);
        groups.entry(root).or_default().push(i);
    }
    groups
        .into_values()
        .filter(|members| members.len() >= 2)
        .map(|members| {
            let key = members
                .iter()
                .filter_map(|m| declared_key.get(m))
                .min_by_key(|(order, _)| *order)
                .map(|(_, key)| (*key).to_string());
            OverlapGroup {
                declared: key.is_some(),
                name: key.unwrap_or_else(|| ids[members[0]].name.clone()),
                members: members.iter().map(|&m| ids[m].clone()).collect(),
            }
        })
        .collect()
}
