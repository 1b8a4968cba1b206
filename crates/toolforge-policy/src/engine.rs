//! The Cedar engine: load a policy file, check it against toolforge's schema, decide.
//!
//! Schema (the entity types and actions a policy may name):
//! - principal `User::"<id>"` (`User::"anonymous"` without identity);
//! - actions `Action::"list"`, `"call"`, `"search"` (on tools), `"read"` (resources),
//!   `"prompt"` (prompts);
//! - resources `Tool::"server/name"` with `server`, `name`, `tags` (a set of strings) and
//!   `annotations` (`readOnly`, `destructive`, `idempotent`, `openWorld`: booleans),
//!   `Resource::"<uri>"` with `server` and `uri`, `Prompt::"server/name"` with `server` and
//!   `name`;
//! - context: `arguments`, the call's arguments (for `"call"`; an empty record otherwise).
//!
//! Policies may carry `@id("...")`: that id names the policy in decisions and errors;
//! otherwise `policy0`, `policy1`, ... in file order.

use std::collections::{HashMap, HashSet};
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use cedar_policy::{
    ActionConstraint, Authorizer, Context, Entities, Entity, EntityId, EntityTypeName, EntityUid,
    PolicyId, PolicySet, PrincipalConstraint, ResourceConstraint, RestrictedExpression,
};
use serde_json::Value;

use crate::error::PolicyError;
use crate::request::{Action, Request, Target};

/// Most (principal, target) entity sets kept built; past it the cache starts over.
const MAX_CACHED_ENTITIES: usize = 4096;

/// Arguments nested deeper than this are left out of `context.arguments` (a hostile call
/// cannot make the conversion recurse without bound).
const MAX_ARGUMENT_DEPTH: usize = 16;

/// The outcome of one decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// The ids of the policies that decided: the `permit`s that allowed, or the `forbid`s that
    /// denied. Empty on a deny means no policy permits the request (Cedar's default deny).
    pub policies: Vec<String>,
    /// Policies that could not be evaluated for this request (for example an attribute the
    /// arguments lack, or a comparison of values of another type). Any such error denies the
    /// request, and `policies` then names the policies that erred.
    pub errors: Vec<String>,
}

impl Decision {
    /// An allow decided by nothing (no policy configured).
    #[must_use]
    pub fn allow() -> Self {
        Self {
            allowed: true,
            policies: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// The deciding policy ids joined with `,` (`"default-deny"` for a deny no policy
    /// decided), for errors and trace records.
    #[must_use]
    pub fn deciding(&self) -> String {
        if self.policies.is_empty() {
            if self.allowed {
                String::new()
            } else {
                DEFAULT_DENY.to_owned()
            }
        } else {
            self.policies.join(",")
        }
    }

    /// The text a denied caller reads: what was denied and by which policy.
    #[must_use]
    pub fn denial(&self, action: Action, what: &str) -> String {
        if self.policies.is_empty() {
            format!("{action} of {what} denied by policy: no policy permits it ({DEFAULT_DENY})")
        } else if !self.errors.is_empty() {
            let ids: Vec<String> = self.policies.iter().map(|p| format!("\"{p}\"")).collect();
            format!(
                "{action} of {what} denied: policy {} could not be evaluated for this request, and a policy that errors denies ({})",
                ids.join(", "),
                self.errors.join("; ")
            )
        } else {
            let ids: Vec<String> = self.policies.iter().map(|p| format!("\"{p}\"")).collect();
            format!("{action} of {what} denied by policy {}", ids.join(", "))
        }
    }
}

/// The name of a deny that no policy decided.
pub const DEFAULT_DENY: &str = "default-deny";

/// A loaded, checked policy set.
pub struct Policies {
    set: PolicySet,
    authorizer: Authorizer,
    user: EntityTypeName,
    action: EntityTypeName,
    tool: EntityTypeName,
    resource: EntityTypeName,
    prompt: EntityTypeName,
    actions: [EntityUid; 5],
    ids: Vec<String>,
    /// The entities of a (principal, target) pair, built once: a decision then only builds its
    /// context and asks the authorizer. Keyed by everything the entities hold, so a changed
    /// tag or annotation is a new key, never a stale entity.
    entities: Mutex<HashMap<String, Arc<Entities>>>,
}

impl std::fmt::Debug for Policies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policies")
            .field("ids", &self.ids)
            .finish_non_exhaustive()
    }
}

fn type_name(name: &str) -> EntityTypeName {
    // The five names are valid Cedar identifiers.
    EntityTypeName::from_str(name).unwrap_or_else(|_| unreachable!("{name} is a valid type name"))
}

impl Policies {
    /// Parses Cedar policies from `source` (the text of a policy file) and checks that they
    /// name only the schema's entity types and actions.
    pub fn parse(source: &str) -> Result<Self, PolicyError> {
        let parsed = PolicySet::from_str(source).map_err(|e| PolicyError::Syntax(e.to_string()))?;
        if parsed.templates().next().is_some() {
            return Err(PolicyError::Invalid(
                "templates (policies with ?principal or ?resource) are not supported".to_owned(),
            ));
        }
        let user = type_name("User");
        let action = type_name("Action");
        let tool = type_name("Tool");
        let resource = type_name("Resource");
        let prompt = type_name("Prompt");
        let actions = Action::ALL
            .map(|a| EntityUid::from_type_name_and_id(action.clone(), EntityId::new(a.id())));

        let mut set = PolicySet::new();
        let mut ids = Vec::new();
        let mut seen = HashSet::new();
        for (n, policy) in parsed.policies().enumerate() {
            let id = policy
                .annotation("id")
                .map_or_else(|| format!("policy{n}"), str::to_owned);
            if !seen.insert(id.clone()) {
                return Err(PolicyError::Invalid(format!(
                    "two policies have the id \"{id}\""
                )));
            }
            let check =
                |problem: String| PolicyError::Invalid(format!("policy \"{id}\": {problem}"));
            match policy.principal_constraint() {
                PrincipalConstraint::Any => {}
                PrincipalConstraint::Is(t) | PrincipalConstraint::IsIn(t, _) if t != user => {
                    return Err(check(format!("principal must be a User, not {t}")));
                }
                PrincipalConstraint::Eq(uid) | PrincipalConstraint::In(uid)
                    if *uid.type_name() != user =>
                {
                    return Err(check(format!(
                        "principal must be a User (User::\"id\"), not {uid}"
                    )));
                }
                _ => {}
            }
            let named = match policy.action_constraint() {
                ActionConstraint::Any => Vec::new(),
                ActionConstraint::Eq(uid) => vec![uid],
                ActionConstraint::In(uids) => uids,
            };
            for uid in named {
                if !actions.contains(&uid) {
                    return Err(check(format!(
                        "unknown action {uid}; the actions are Action::\"list\", \"call\", \"search\", \"read\" and \"prompt\""
                    )));
                }
            }
            let known = |t: &EntityTypeName| *t == tool || *t == resource || *t == prompt;
            match policy.resource_constraint() {
                ResourceConstraint::Any => {}
                ResourceConstraint::Is(t) | ResourceConstraint::IsIn(t, _) if !known(&t) => {
                    return Err(check(format!(
                        "resource must be a Tool, Resource or Prompt, not {t}"
                    )));
                }
                ResourceConstraint::Eq(uid) | ResourceConstraint::In(uid)
                    if !known(uid.type_name()) =>
                {
                    return Err(check(format!(
                        "resource must be a Tool, Resource or Prompt, not {uid}"
                    )));
                }
                _ => {}
            }
            let renamed = policy.new_id(PolicyId::new(&id));
            set.add(renamed)
                .map_err(|e| check(format!("cannot be added: {e}")))?;
            ids.push(id);
        }
        if ids.is_empty() {
            return Err(PolicyError::Invalid(
                "the file has no policies (with none, every request would be denied)".to_owned(),
            ));
        }
        Ok(Self {
            set,
            authorizer: Authorizer::new(),
            entities: Mutex::new(HashMap::new()),
            user,
            action,
            tool,
            resource,
            prompt,
            actions,
            ids,
        })
    }

    /// The policy ids, in file order.
    #[must_use]
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    /// Decides one request. Never fails: a request the engine cannot express is denied, with
    /// the reason in `errors`.
    #[must_use]
    pub fn decide(&self, request: &Request<'_>) -> Decision {
        match self.try_decide(request) {
            Ok(decision) => decision,
            Err(problem) => Decision {
                allowed: false,
                policies: Vec::new(),
                errors: vec![problem],
            },
        }
    }

    fn try_decide(&self, request: &Request<'_>) -> Result<Decision, String> {
        let principal =
            EntityUid::from_type_name_and_id(self.user.clone(), EntityId::new(request.principal));
        let action_index = Action::ALL
            .iter()
            .position(|a| *a == request.action)
            .unwrap_or(0);
        let action = self.actions[action_index].clone();
        debug_assert_eq!(*action.type_name(), self.action);
        let (uid, entities) = self.entities_of(request, &principal)?;
        let arguments = match request.arguments {
            Some(value) => to_cedar(value, 0).unwrap_or_else(empty_record),
            None => empty_record(),
        };
        let context = Context::from_pairs([("arguments".to_owned(), arguments)])
            .map_err(|e| e.to_string())?;
        let cedar_request = cedar_policy::Request::new(principal, action, uid, context, None)
            .map_err(|e| e.to_string())?;
        let response = self
            .authorizer
            .is_authorized(&cedar_request, &self.set, &entities);
        let diagnostics = response.diagnostics();
        let errors: Vec<String> = diagnostics.errors().map(ToString::to_string).collect();
        if !errors.is_empty() {
            // Cedar skips a policy whose evaluation errors, so a `forbid` over an argument of
            // a type it did not expect (`1000.0`, `"1000"`, 2^63 against `> 100`) would let
            // the call through. A policy that errors denies instead: the decision names it.
            return Ok(Decision {
                allowed: false,
                policies: diagnostics
                    .errors()
                    .map(|e| match e {
                        cedar_policy::AuthorizationError::PolicyEvaluationError(e) => {
                            e.policy_id().to_string()
                        }
                    })
                    .collect(),
                errors,
            });
        }
        Ok(Decision {
            allowed: response.decision() == cedar_policy::Decision::Allow,
            policies: diagnostics.reason().map(ToString::to_string).collect(),
            errors,
        })
    }

    /// The target's uid, and the principal's and target's entities (built once per pair).
    fn entities_of(
        &self,
        request: &Request<'_>,
        principal: &EntityUid,
    ) -> Result<(EntityUid, Arc<Entities>), String> {
        let key = cache_key(request);
        if let Some(entities) = self
            .entities
            .lock()
            .ok()
            .and_then(|cache| cache.get(&key).cloned())
        {
            return Ok((self.target_uid(&request.target), entities));
        }
        let (uid, attrs) = self.target(&request.target);
        let resource =
            Entity::new(uid.clone(), attrs, HashSet::new()).map_err(|e| e.to_string())?;
        let entities = Arc::new(
            Entities::from_entities(
                [
                    Entity::new_no_attrs(principal.clone(), HashSet::new()),
                    resource,
                ],
                None,
            )
            .map_err(|e| e.to_string())?,
        );
        if let Ok(mut cache) = self.entities.lock() {
            if cache.len() >= MAX_CACHED_ENTITIES {
                cache.clear();
            }
            cache.insert(key, entities.clone());
        }
        Ok((uid, entities))
    }

    fn target_uid(&self, target: &Target<'_>) -> EntityUid {
        match target {
            Target::Tool(tool) => EntityUid::from_type_name_and_id(
                self.tool.clone(),
                EntityId::new(format!("{}/{}", tool.server, tool.name)),
            ),
            Target::Resource { uri, .. } => {
                EntityUid::from_type_name_and_id(self.resource.clone(), EntityId::new(uri))
            }
            Target::Prompt { server, name } => EntityUid::from_type_name_and_id(
                self.prompt.clone(),
                EntityId::new(format!("{server}/{name}")),
            ),
        }
    }

    fn target(&self, target: &Target<'_>) -> (EntityUid, HashMap<String, RestrictedExpression>) {
        let string = |s: &str| RestrictedExpression::new_string(s.to_owned());
        match target {
            Target::Tool(tool) => {
                let id = format!("{}/{}", tool.server, tool.name);
                let uid = EntityUid::from_type_name_and_id(self.tool.clone(), EntityId::new(id));
                let a = tool.annotations;
                let annotations = RestrictedExpression::new_record([
                    (
                        "readOnly".to_owned(),
                        RestrictedExpression::new_bool(a.read_only),
                    ),
                    (
                        "destructive".to_owned(),
                        RestrictedExpression::new_bool(a.destructive),
                    ),
                    (
                        "idempotent".to_owned(),
                        RestrictedExpression::new_bool(a.idempotent),
                    ),
                    (
                        "openWorld".to_owned(),
                        RestrictedExpression::new_bool(a.open_world),
                    ),
                ])
                .unwrap_or_else(|_| empty_record());
                let attrs = HashMap::from([
                    ("server".to_owned(), string(tool.server)),
                    ("name".to_owned(), string(tool.name)),
                    (
                        "tags".to_owned(),
                        RestrictedExpression::new_set(tool.tags.iter().map(|t| string(t))),
                    ),
                    ("annotations".to_owned(), annotations),
                ]);
                (uid, attrs)
            }
            Target::Resource { server, uri } => {
                let uid =
                    EntityUid::from_type_name_and_id(self.resource.clone(), EntityId::new(uri));
                let attrs = HashMap::from([
                    ("server".to_owned(), string(server)),
                    ("uri".to_owned(), string(uri)),
                ]);
                (uid, attrs)
            }
            Target::Prompt { server, name } => {
                let id = format!("{server}/{name}");
                let uid = EntityUid::from_type_name_and_id(self.prompt.clone(), EntityId::new(id));
                let attrs = HashMap::from([
                    ("server".to_owned(), string(server)),
                    ("name".to_owned(), string(name)),
                ]);
                (uid, attrs)
            }
        }
    }
}

/// Everything the entities of `request` hold, as one string (fields separated by a byte no
/// name or tag contains).
fn cache_key(request: &Request<'_>) -> String {
    let mut key = String::with_capacity(96);
    key.push_str(request.principal);
    key.push('\u{1}');
    match &request.target {
        Target::Tool(tool) => {
            let a = tool.annotations;
            key.push('t');
            for part in [tool.server, tool.name] {
                key.push('\u{1}');
                key.push_str(part);
            }
            for tag in tool.tags {
                key.push('\u{2}');
                key.push_str(tag);
            }
            key.push('\u{1}');
            for flag in [a.read_only, a.destructive, a.idempotent, a.open_world] {
                key.push(if flag { '1' } else { '0' });
            }
        }
        Target::Resource { server, uri } => {
            key.push('r');
            for part in [*server, *uri] {
                key.push('\u{1}');
                key.push_str(part);
            }
        }
        Target::Prompt { server, name } => {
            key.push('p');
            for part in [*server, *name] {
                key.push('\u{1}');
                key.push_str(part);
            }
        }
    }
    key
}

fn empty_record() -> RestrictedExpression {
    RestrictedExpression::new_record(std::iter::empty::<(String, RestrictedExpression)>())
        .unwrap_or_else(|_| unreachable!("an empty record is valid"))
}

/// JSON as a Cedar value: strings, booleans, integers, sets and records as they are; a number
/// with an integral value that fits 64 bits (`1000`, `1000.0`, `1e3`) as that integer, any other
/// number as its text (so a comparison with it errors, and the erring policy denies); `null` and
/// anything deeper than [`MAX_ARGUMENT_DEPTH`] left out.
fn to_cedar(value: &Value, depth: usize) -> Option<RestrictedExpression> {
    if depth > MAX_ARGUMENT_DEPTH {
        return None;
    }
    Some(match value {
        Value::Null => return None,
        Value::Bool(b) => RestrictedExpression::new_bool(*b),
        Value::Number(n) => match integral(n) {
            Some(i) => RestrictedExpression::new_long(i),
            None => RestrictedExpression::new_string(n.to_string()),
        },
        Value::String(s) => RestrictedExpression::new_string(s.clone()),
        Value::Array(items) => {
            RestrictedExpression::new_set(items.iter().filter_map(|v| to_cedar(v, depth + 1)))
        }
        Value::Object(map) => RestrictedExpression::new_record(
            map.iter()
                .filter_map(|(k, v)| Some((k.clone(), to_cedar(v, depth + 1)?))),
        )
        .ok()?,
    })
}

/// The 64-bit integer a JSON number is, if it is one: `1000`, `1000.0` and `1e3` are 1000;
/// `1000.5`, 2^63 and beyond are not.
fn integral(n: &serde_json::Number) -> Option<i64> {
    if let Some(i) = n.as_i64() {
        return Some(i);
    }
    let f = n.as_f64()?;
    // -2^63 is exact in f64; 2^63 is the first value past i64::MAX.
    (f.fract() == 0.0 && (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&f))
        .then_some(f as i64)
}
