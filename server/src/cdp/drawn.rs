//! Whether the page has drawn since an input: two animation frames awaited
//! in the gate's isolated world. The first runs at the start of the frame
//! that holds everything the page did before it (the input's handlers
//! ran before the call), the second once that frame has gone to the
//! compositor; a screencast frame of a change in it arrives within a few
//! milliseconds of the second (measured: `BENCH_ONLY=framesignal`).
//!
//! In the isolated world the page's own `requestAnimationFrame` (which it
//! could replace or stall on purpose) is not the one called. A page that
//! keeps its main thread busy delays the answer; callers bound the wait.

use chromiumoxide::Page;
use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;

use super::CdpError;

const TWO_FRAMES: &str =
    "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))";

/// Answers once the page's main frame has drawn a frame made after this
/// call started. An error when it cannot tell (the document went away, a
/// hidden tab, which runs no animation frames, never answers).
pub async fn frame_drawn(page: &Page) -> Result<(), CdpError> {
    let ctx = super::facts::isolated_context(page, None).await?;
    let res = page
        .execute(
            EvaluateParams::builder()
                .expression(TWO_FRAMES)
                .context_id(ctx)
                .await_promise(true)
                .return_by_value(true)
                .build()
                .map_err(CdpError::Protocol)?,
        )
        .await?;
    if res.result.exception_details.is_some() {
        return Err(CdpError::Failed(
            "the page could not wait for a frame".into(),
        ));
    }
    Ok(())
}
