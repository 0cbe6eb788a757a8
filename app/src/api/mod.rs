//! What the dashboard asks of the control plane, by area: the data types
//! shared by server and browser and the server functions (all under
//! `/ui/fn/`). Each server function checks the caller's role through
//! [`backend::require`] and calls one method of the area's trait.

pub mod approvals;
pub mod audit;
pub mod auth;
#[cfg(feature = "ssr")]
pub mod backend;
pub mod credentials;
pub mod grants;
pub mod health;
pub mod live;
pub mod screenshots;
pub mod sessions;
pub mod tasks;
pub mod tenants;

#[cfg(feature = "ssr")]
pub use backend::{Dashboard, DashboardHandle};
