//! Pieces every page uses.

mod changes;
mod error_view;
pub mod layout;
pub mod time;

pub use changes::on_change;
pub use error_view::{ActionError, ErrorView};
pub use layout::Shell;
