//! `cordon audit verify`: recompute the chain and name the first broken seq.

use crate::store::Store;

use super::GENESIS_HASH;

/// Rows read per round trip while verifying.
const PAGE: i64 = 1000;

/// The result of walking the chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verification {
    /// Every event links to the one before and the head matches the last.
    Intact {
        /// Number of events checked.
        events: i64,
    },
    /// The chain breaks at `seq`.
    Broken {
        /// The first seq that does not verify.
        seq: i64,
        /// What is wrong there.
        reason: String,
    },
}

/// Walks the whole chain in seq order.
#[tracing::instrument(skip_all)]
pub async fn verify(store: &Store) -> anyhow::Result<Verification> {
    let mut expected_seq = 1;
    let mut prev_hash = GENESIS_HASH.to_string();
    loop {
        let page = store.audit_page(expected_seq - 1, PAGE).await?;
        let done = (page.len() as i64) < PAGE;
        for event in page {
            if event.seq != expected_seq {
                return Ok(Verification::Broken {
                    seq: expected_seq,
                    reason: format!(
                        "event {expected_seq} is missing (next stored is {})",
                        event.seq
                    ),
                });
            }
            if event.prev_hash != prev_hash {
                return Ok(Verification::Broken {
                    seq: event.seq,
                    reason: "prev_hash does not match the previous event's hash".into(),
                });
            }
            if event.compute_hash() != event.hash {
                return Ok(Verification::Broken {
                    seq: event.seq,
                    reason: "contents do not match the stored hash".into(),
                });
            }
            prev_hash = event.hash;
            expected_seq += 1;
        }
        if done {
            break;
        }
    }
    let (head_seq, head_hash) = store.audit_head().await?;
    let last = expected_seq - 1;
    if head_seq != last || head_hash != prev_hash {
        return Ok(Verification::Broken {
            seq: last.min(head_seq) + 1,
            reason: format!(
                "the chain ends at {last} but its head records {head_seq}: events were removed or added outside the log"
            ),
        });
    }
    Ok(Verification::Intact { events: last })
}
