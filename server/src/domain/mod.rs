//! Domain types parsed once at the edge; the rest of the code trusts them.

mod tenant_id;

pub use tenant_id::TenantId;
