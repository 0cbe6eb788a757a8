//! The append-only, hash-chained audit log: its types and the chain's
//! arithmetic are core ([`crate::domain::audit`], named here too, as
//! before); checking a stored chain against the store is here.

mod export;
mod verify;

pub use crate::domain::audit::*;
pub use export::{Bound, ExportFilter, FileVerification, Pages, export, verify_file};
pub use verify::{Verification, verify};

/// The redaction helpers (a core module; named here too, as before).
pub use crate::redact;
