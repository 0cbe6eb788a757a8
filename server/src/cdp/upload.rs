//! Setting files on an `<input type=file>` (the `upload` tool).

use std::time::Duration;

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::dom::SetFileInputFilesParams;
use chromiumoxide::cdp::js_protocol::runtime::{
    CallArgument, CallFunctionOnParams, RemoteObjectId,
};

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

/// Sets files on the input from inside the page, for a browser that shares
/// no directory with the control plane: each file's bytes go over CDP
/// (base64) and become a `File` in a `DataTransfer`, set as the input's
/// `files`, then `input` and `change` are dispatched as a file chooser
/// would (as script events: `isTrusted` is false). The type comes from the
/// name's extension, as Chromium's own file chooser does.
const IN_PAGE_FN: &str = "function(files) { \
    const dt = new DataTransfer(); \
    for (const f of files) { \
        const bin = atob(f.data); \
        const bytes = new Uint8Array(bin.length); \
        for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i); \
        dt.items.add(new File([bytes], f.name, { type: f.type })); \
    } \
    this.files = dt.files; \
    this.dispatchEvent(new Event('input', { bubbles: true, composed: true })); \
    this.dispatchEvent(new Event('change', { bubbles: true })); \
    return Array.from(this.files, (f) => f.name + ':' + f.size); }";

/// See [`IN_PAGE_FN`]; `files` are (name, bytes). Checks that the input
/// holds exactly those names and sizes afterwards.
pub async fn set_files_in_page(
    page: &Page,
    input: &FileInput,
    files: &[(&str, &[u8])],
    timeout: Duration,
) -> Result<(), CdpError> {
    use base64::Engine as _;
    let arg: Vec<serde_json::Value> = files
        .iter()
        .map(|(name, bytes)| {
            serde_json::json!({
                "name": name,
                "type": mime_guess::from_path(name).first_raw().unwrap_or(""),
                "data": base64::engine::general_purpose::STANDARD.encode(bytes),
            })
        })
        .collect();
    let want: Vec<String> = files
        .iter()
        .map(|(name, bytes)| format!("{name}:{}", bytes.len()))
        .collect();
    bounded("upload", timeout, async {
        let res = page
            .execute(
                CallFunctionOnParams::builder()
                    .object_id(input.object.clone())
                    .function_declaration(IN_PAGE_FN)
                    .argument(
                        CallArgument::builder()
                            .value(serde_json::Value::from(arg))
                            .build(),
                    )
                    .return_by_value(true)
                    .build()
                    .map_err(CdpError::Protocol)?,
            )
            .await?;
        if res.result.exception_details.is_some() {
            return Err(CdpError::Failed(
                "the page refused the files (its script threw while they were set)".into(),
            ));
        }
        let got: Vec<String> = res
            .result
            .result
            .value
            .clone()
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default();
        if got != want {
            return Err(CdpError::Failed(
                "the file input does not hold the files after they were set".into(),
            ));
        }
        Ok(())
    })
    .await
}
