//! Setting files on an `<input type=file>` (the `upload` tool).

use std::time::Duration;

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::dom::SetFileInputFilesParams;
use chromiumoxide::cdp::js_protocol::runtime::{CallFunctionOnParams, RemoteObjectId};

use super::CdpError;
use super::tools::{Locator, bounded, object_for};

/// A file input found on the page.
#[derive(Debug, Clone)]
pub struct FileInput {
    object: RemoteObjectId,
    /// Whether it takes more than one file.
    pub multiple: bool,
}

/// What the element is: `single`, `multiple` (file inputs) or its tag.
const KIND_FN: &str = "function() { if (this.tagName === 'INPUT' && this.type === 'file') \
    return this.multiple ? 'multiple' : 'single'; \
    return this.tagName ? this.tagName.toLowerCase() + (this.type ? ' type=' + this.type : '') : 'not an element'; }";

/// The file input at `locator`, waiting for it as the other element tools
/// do; anything else is [`CdpError::NotAFileInput`].
pub async fn file_input(
    page: &Page,
    locator: &Locator,
    timeout: Duration,
) -> Result<FileInput, CdpError> {
    bounded("upload", timeout, async {
        let deadline = tokio::time::Instant::now() + timeout.mul_f64(0.75);
        loop {
            if let Some(object) = object_for(page, locator).await? {
                let res = page
                    .execute(
                        CallFunctionOnParams::builder()
                            .object_id(object.clone())
                            .function_declaration(KIND_FN)
                            .return_by_value(true)
                            .build()
                            .map_err(CdpError::Protocol)?,
                    )
                    .await?;
                let kind = res
                    .result
                    .result
                    .value
                    .as_ref()
                    .and_then(|v| v.as_str())
                    .unwrap_or("unknown")
                    .to_owned();
                return match kind.as_str() {
                    "single" | "multiple" => Ok(FileInput {
                        object,
                        multiple: kind == "multiple",
                    }),
                    other => Err(CdpError::NotAFileInput(format!(
                        "the target is not an <input type=file> (it is {})",
                        other.chars().take(60).collect::<String>()
                    ))),
                };
            }
            if matches!(locator, Locator::Node(..)) || tokio::time::Instant::now() >= deadline {
                return Err(match locator {
                    Locator::Selector(s) => {
                        CdpError::NotFound(format!("no element matches selector {s:?}"))
                    }
                    Locator::Node(_, r) => {
                        CdpError::NotFound(format!("ref {r} no longer exists; take a new snapshot"))
                    }
                    Locator::Point(..) => CdpError::NotFound("no element".into()),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
}

/// Sets `paths` (as the browser sees them) as the input's files; the page
/// gets its `input` and `change` events as from a file chooser.
pub async fn set_files(page: &Page, input: &FileInput, paths: Vec<String>) -> Result<(), CdpError> {
    page.execute(
        SetFileInputFilesParams::builder()
            .files(paths)
            .object_id(input.object.clone())
            .build()
            .map_err(CdpError::Protocol)?,
    )
    .await?;
    Ok(())
}
