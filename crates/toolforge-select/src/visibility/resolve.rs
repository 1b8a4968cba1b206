//! The merge of the channels over a catalog: [`resolve`], the one pure function of DESIGN §3,
//! and its forms over a [`VisibilityIndex`] built once per catalog.

use super::channels::{Channel, Channels, Enabled, ListKind};
use super::matching::Matcher;
use super::policy::Policy;
use super::search::{apply_search, search_members, search_order};
use super::verdicts::{Reason, Verdicts, Visible};
use crate::catalog::{Catalog, Tool};
use crate::visibility_index::{VisibilityIndex, query_terms};

/// Resolves what one caller may see: the one pure function of DESIGN §3.
///
/// A search query is ranked over the tools that survived the other filters, indexing only
/// those. A caller that resolves many requests over one catalog should build a
/// [`VisibilityIndex`] once and call [`resolve_with_index`]: same answer, without indexing
/// tools per request.
pub fn resolve(catalog: &Catalog, channels: &Channels, policy: &Policy) -> Visible {
    resolve_inner(catalog, None, channels, policy).into_visible(catalog)
}

/// [`resolve`] with a search index built once for `catalog` ([`VisibilityIndex::new`]): the
/// same answer, but a query only computes its term statistics over the surviving tools instead
/// of indexing them. An index whose length differs from the catalog's was not built for it and
/// is not used (the answer is then [`resolve`]'s, at its cost).
pub fn resolve_with_index(
    catalog: &Catalog,
    index: &VisibilityIndex,
    channels: &Channels,
    policy: &Policy,
) -> Visible {
    verdicts_with_index(catalog, index, channels, policy).into_visible(catalog)
}

/// [`resolve_with_index`] without naming the tools: each one's verdict by catalog position,
/// for a caller that keeps the catalog (the gateway, per request). The same decisions, without
/// the cost of building an id for every tool of a large catalog.
pub fn verdicts_with_index(
    catalog: &Catalog,
    index: &VisibilityIndex,
    channels: &Channels,
    policy: &Policy,
) -> Verdicts {
    let index = (index.len() == catalog.len()).then_some(index);
    resolve_inner(catalog, index, channels, policy)
}

pub(super) fn resolve_inner<'a>(
    catalog: &'a Catalog,
    index: Option<&VisibilityIndex>,
    channels: &'a Channels,
    policy: &Policy,
) -> Verdicts {
    let tools: Vec<&Tool> = catalog.tools().collect();
    let mut warnings = Vec::new();
    let mut operator_invalid = None;
    for error in &channels.errors {
        let channel = error.channel;
        if channel.is_request() {
            warnings.push(format!(
                "{channel} channel ignored, its denies still apply: {error}"
            ));
        } else {
            operator_invalid.get_or_insert(channel);
            warnings.push(format!(
                "{channel} channel is invalid, nothing is visible: {error}"
            ));
        }
    }
    if let Some(channel) = operator_invalid {
        return Verdicts {
            reasons: vec![Some(Reason::OperatorChannelInvalid { channel }); tools.len()],
            warnings,
            query_matched: None,
        };
    }
    // A failed channel's enabled lists and query are ignored; its (salvaged) denies are not.
    let usable = |channel: Channel| {
        if channels.failed(channel) {
            None
        } else {
            channels.get(channel)
        }
    };

    // Deny lists in precedence order; empty ones are skipped (they deny nothing).
    let mut denies: Vec<(Channel, Option<Matcher>, Option<Matcher>)> = Vec::new();
    for channel in Channel::PRECEDENCE {
        let Some(input) = channels.get(channel) else {
            continue;
        };
        let list = |kind, list: &'a [String]| {
            (!list.is_empty()).then(|| Matcher::new(catalog, index, kind, list))
        };
        let by_name = list(ListKind::Tools, &input.disabled_tools);
        let by_tag = list(ListKind::Tags, &input.disabled_tags);
        if by_name.is_some() || by_tag.is_some() {
            denies.push((channel, by_name, by_tag));
        }
    }

    // Enabled lists: within a scope the highest channel that gave one wins. With the lock the
    // operator's and the request's scopes both apply (intersection); without it there is one.
    let scopes: &[&[Channel]] = if policy.allow_request_widening {
        &[&[Channel::Header, Channel::Query, Channel::Cli, Channel::Env]]
    } else {
        &[
            &[Channel::Cli, Channel::Env],
            &[Channel::Header, Channel::Query],
        ]
    };
    let mut constraints: Vec<(Channel, ListKind, Matcher)> = Vec::new();
    for scope in scopes {
        for kind in [ListKind::Tools, ListKind::Tags] {
            let winner = scope
                .iter()
                .find_map(|&c| usable(c).and_then(|i| i.enabled(kind)).map(|e| (c, e)));
            if let Some((channel, Enabled::Only(list))) = winner {
                constraints.push((channel, kind, Matcher::new(catalog, index, kind, list)));
            }
        }
    }

    let mut reasons: Vec<Option<Reason>> = tools
        .iter()
        .enumerate()
        .map(|(i, tool)| {
            for (channel, by_name, by_tag) in &denies {
                if let Some(name) = by_name.as_ref().and_then(|m| m.hit(i, tool)) {
                    return Some(Reason::DisabledTool {
                        channel: *channel,
                        name: name.to_owned(),
                    });
                }
                if let Some(tag) = by_tag.as_ref().and_then(|m| m.hit(i, tool)) {
                    return Some(Reason::DisabledTag {
                        channel: *channel,
                        tag: tag.to_owned(),
                    });
                }
            }
            constraints
                .iter()
                .find(|(_, _, matcher)| matcher.hit(i, tool).is_none())
                .map(|(channel, list, _)| Reason::NotEnabled {
                    channel: *channel,
                    list: *list,
                })
        })
        .collect();

    // The query narrows what survived the filters; a query that matches nothing is dropped.
    let query = [Channel::Header, Channel::Query]
        .into_iter()
        .find_map(|c| usable(c).and_then(|i| i.query.as_deref()).map(|q| (c, q)));
    let mut query_matched = None;
    if let Some((channel, text)) = query {
        let allowed: Vec<usize> = (0..tools.len()).filter(|&i| reasons[i].is_none()).collect();
        let members = search_members(&tools, &allowed, text);
        let ranked = match index {
            Some(index) => index.search(&members, text, members.len()),
            // Index only the matching tools, and only the query's terms of them.
            None => VisibilityIndex::for_query(&tools, &members, &query_terms(text)).search(
                &members,
                text,
                members.len(),
            ),
        };
        let order = search_order(&members, &ranked, policy.search_min_score);
        query_matched = Some(!order.is_empty());
        apply_search(&mut reasons, &allowed, &order, channel, policy);
    }

    Verdicts {
        reasons,
        warnings,
        query_matched,
    }
}
