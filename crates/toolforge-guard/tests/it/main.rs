//! The guards against a hostile corpus assembled from public write-ups (every item must be
//! caught) and against the real tool catalogs toolforge is tested with (false positives are
//! counted and must stay at zero).

mod benign;
mod corpus;
