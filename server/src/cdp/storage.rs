//! Reading a tab's web storage: the origins its frames show, and one
//! origin's localStorage (`DOMStorage`). Items carry values: callers keep
//! them in memory and never log them.

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::dom_storage::{GetDomStorageItemsParams, StorageId};
use chromiumoxide::cdp::browser_protocol::page::{FrameTree, GetFrameTreeParams};

use super::CdpError;
use crate::domain::StorageItem;

/// The security origins of `page`'s frames (`Page.getFrameTree`), the main
/// frame's first, each once. Opaque ones come as the browser spells them
/// (`null`, `://`).
pub async fn frame_origins(page: &Page) -> Result<Vec<String>, CdpError> {
    let tree = page
        .execute(GetFrameTreeParams::default())
        .await?
        .result
        .frame_tree;
    let mut out = Vec::new();
    collect(&tree, &mut out);
    Ok(out)
}

fn collect(tree: &FrameTree, out: &mut Vec<String>) {
    let origin = &tree.frame.security_origin;
    if !out.contains(origin) {
        out.push(origin.clone());
    }
    for child in tree.child_frames.iter().flatten() {
        collect(child, out);
    }
}

/// `origin`'s localStorage items, read on a tab showing it
/// (`DOMStorage.getDOMStorageItems`, by security origin; by storage key,
/// `origin/`, where the browser no longer accepts the origin alone). Needs
/// no `DOMStorage.enable`, whose change events would carry values.
pub async fn local_storage(page: &Page, origin: &str) -> Result<Vec<StorageItem>, CdpError> {
    let id = |by_key: bool| {
        let b = StorageId::builder().is_local_storage(true);
        let b = if by_key {
            b.storage_key(format!("{origin}/"))
        } else {
            b.security_origin(origin)
        };
        b.build().map_err(CdpError::Protocol)
    };
    let entries = match page
        .execute(GetDomStorageItemsParams::new(id(false)?))
        .await
    {
        Ok(r) => r.result.entries,
        Err(_) => {
            page.execute(GetDomStorageItemsParams::new(id(true)?))
                .await?
                .result
                .entries
        }
    };
    Ok(entries
        .into_iter()
        .filter_map(|item| match item.inner().as_slice() {
            [name, value] => Some(StorageItem {
                name: name.clone(),
                value: value.clone(),
            }),
            _ => None,
        })
        .collect())
}
