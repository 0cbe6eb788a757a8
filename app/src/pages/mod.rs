//! One module per page.

mod account;
mod approvals;
mod audit;
mod credentials;
mod enroll;
mod grants;
mod live;
mod login;
mod not_found;
mod operators;
mod overview;
mod screenshots;
mod session;
mod sessions;
mod task;
mod tasks;
mod tenants;

pub use account::Account;
pub use approvals::Approvals;
pub use audit::Audit;
pub use credentials::Credentials;
pub use enroll::Enroll;
pub use grants::Grants;
pub use live::Live;
pub use login::Login;
pub use not_found::NotFound;
pub use operators::Operators;
pub use overview::Overview;
pub use screenshots::Screenshots;
pub use session::Session;
pub use sessions::Sessions;
pub use task::Task;
pub use tasks::Tasks;
pub use tenants::Tenants;
