//! One module per page.

mod audit;
mod not_found;
mod overview;

pub use audit::Audit;
pub use not_found::NotFound;
pub use overview::Overview;
