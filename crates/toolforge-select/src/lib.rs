//! The pure selection core of toolforge: the tool catalog, overlap groups and their
//! presentation, the visibility merge, the broker (rules, intents, ranking, token budget,
//! hints), the five-rule selector and grading against labelled cases, joined in one pipeline by
//! [`Selection`] (visible → offer → route), the one decision point every caller goes through.
//!
//! This crate never does I/O, never spawns, never reads a clock or the environment: every input
//! (scores, session recency, token counts, the time) arrives as data and every answer is a value
//! that explains itself. That is what makes selection deterministic and cheap to test.

pub mod apps;
pub mod broker;
pub mod catalog;
pub mod compact_json;
pub mod grade;
pub mod overlap;
pub mod pins;
pub mod presentation;
pub mod rank;
pub mod schema;
pub mod search;
pub mod selection;
pub mod selector;
pub mod visibility;
pub mod visibility_index;

pub use catalog::{Catalog, CatalogError, ServerEntry, Tool, ToolId};
pub use presentation::{ExposedTool, Namespace, Presentation, Resolved};
pub use schema::InputSchema;
pub use selection::{
    Call, LeftOut, LeftOutReason, Limits, Offer, OfferRequest, Offered, Selection,
};
pub use visibility::{Channel, ChannelInput, Channels, Policy, VisibilityError, Visible, resolve};
