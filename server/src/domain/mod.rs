//! Domain types parsed once at the edge; the rest of the code trusts them.

pub mod audit;
mod cookie;
mod database_kind;
mod download_guid;
mod file_name;
mod grant_state;
pub mod pattern;
pub mod schema;
mod session_id;
mod session_state;
mod target_url;
mod tenant_id;

pub use crate::ids::random_id;
pub use cookie::{
    Cookie, Origin, PartitionKey, SameSite, StorageItem, StorageState, earliest_expiry,
    storage_items,
};
pub use database_kind::DatabaseKind;
pub use download_guid::{DownloadGuid, DownloadGuidError};
pub use file_name::{FileName, FileNameError, MAX_FILE_NAME, MAX_NUMBERED};
pub use grant_state::GrantState;
pub use session_id::{
    ApiKeyId, DeploymentId, EnrollmentId, GrantRequestId, GrantTokenId, InstanceId, LiveLinkId,
    MalformedId, OperatorId, PasskeyId, SandboxId, SessionId, SessionIdError, TaskId, TotpId,
};
pub use session_state::{CloseReason, SessionState, UnknownValue};
pub use target_url::{MAX_URL_LEN, TargetUrl, TargetUrlError};
pub use tenant_id::{TenantId, TenantIdError};
