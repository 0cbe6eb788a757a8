//! What tools answer. Serialised as they are for the HTTP API; other
//! callers (MCP, `run_task`) can read the fields (screenshot bytes, say).

use base64::Engine;
use serde::{Serialize, Serializer};

use crate::cdp::snapshot::SnapNode;
use crate::cdp::{ImageFormat, Navigation};
use crate::egress::Refusal;

/// A tool's result.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum ToolOutput {
    /// `navigate`, `back`, `forward`, `reload`.
    Navigated(Navigated),
    /// `screenshot`.
    Screenshot(Screenshot),
    /// `click`, `hover`, `type`, `press`, `scroll`.
    Done(Done),
    /// `select`.
    Selected(Selected),
    /// `wait_for`.
    Waited(Waited),
    /// `read_dom`.
    Dom(Dom),
    /// `snapshot`.
    Snapshot(SnapshotResult),
    /// `pdf`.
    Pdf(Pdf),
    /// `tabs` list.
    Tabs(Vec<TabInfo>),
    /// `tabs` open and focus.
    Tab(TabInfo),
    /// `tabs` close.
    TabClosed(TabClosed),
    /// `upload`.
    Uploaded(crate::sessions::files::Uploaded),
    /// `type_totp`: how many digits were typed, never which.
    TypedCode(TypedCode),
    /// An action that opened a JavaScript dialog.
    DialogOpened(DialogOpened),
    /// `dialog`.
    DialogAnswered(DialogAnswered),
}

impl ToolOutput {
    /// Hands every text of the answer a page can put a typed code into
    /// (addresses, titles, HTML, option values) to `scrub`, which blanks
    /// codes out: a site that submits its code by GET shows it in the
    /// tab's address and maybe its title. Snapshots are scrubbed where
    /// they are taken (they also withhold the field's value).
    pub(in crate::sessions) fn scrub_texts(&mut self, scrub: &mut dyn FnMut(&mut String)) {
        match self {
            Self::Navigated(n) => {
                scrub(&mut n.final_url);
                scrub(&mut n.title);
            }
            Self::Tabs(tabs) => {
                for t in tabs {
                    scrub(&mut t.url);
                    scrub(&mut t.title);
                }
            }
            Self::Tab(t) => {
                scrub(&mut t.url);
                scrub(&mut t.title);
            }
            Self::Dom(d) => scrub(&mut d.html),
            Self::Selected(s) => s.selected.iter_mut().for_each(scrub),
            Self::DialogOpened(DialogOpened { dialog_opened: d })
            | Self::DialogAnswered(DialogAnswered { dialog: d, .. }) => {
                scrub(&mut d.message);
                scrub(&mut d.url);
                if let Some(p) = &mut d.default_prompt {
                    scrub(p);
                }
            }
            Self::Screenshot(_)
            | Self::Done(_)
            | Self::Waited(_)
            | Self::Snapshot(_)
            | Self::Pdf(_)
            | Self::TabClosed(_)
            | Self::Uploaded(_)
            | Self::TypedCode(_) => {}
        }
    }
}

/// What an action that opened a JavaScript dialog answers: the dialog
/// stops the page until it is answered (`dialog`), and the action may not
/// have finished (typing stops at the key whose handler opened it).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct DialogOpened {
    /// The dialog now open in the tab.
    pub dialog_opened: crate::cdp::Dialog,
}

/// What `dialog` answers.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct DialogAnswered {
    /// OK (true) or Cancel.
    pub accepted: bool,
    /// The dialog answered.
    pub dialog: crate::cdp::Dialog,
}

/// What `type_totp` reports: that a code was typed, and of which seed.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TypedCode {
    /// Always true.
    pub ok: bool,
    /// How many digits were typed.
    pub typed_digits: usize,
    /// The seed's label.
    pub label: String,
    /// The seed's domain.
    pub domain: String,
}

/// The main frame's request the egress guard refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct EgressRefused {
    /// The host it wanted.
    pub host: String,
    /// The port it wanted.
    pub port: u16,
    /// Why not (`loopback`, `private`, `unresolved`, `metadata` …).
    pub reason: String,
}

/// What a navigation-type tool reports.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Navigated {
    /// HTTP status of the main document (after redirects), if there was one.
    pub status: Option<i64>,
    /// The URL finally shown.
    pub final_url: String,
    /// The document's title.
    pub title: String,
    /// For `back`/`forward`: whether there was an entry to go to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved: Option<bool>,
    /// Set when the egress guard refused the main frame's document (the
    /// URL asked for, or a redirect or refresh hop of it): the page shown
    /// is the guard's refusal, not the site.
    pub egress_refused: Option<EgressRefused>,
    /// Requests of the page's subresources (images, scripts, frames …) the
    /// egress guard refused during the call.
    pub egress_refused_subresources: u64,
    /// Set when the URL turned out to be a download and the session allows
    /// downloads: the tab shows `about:blank`, the file is being saved (see
    /// `GET /api/sessions/{id}/downloads`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub download_started: Option<bool>,
    /// Set when the navigation failed; it is answered as an error unless
    /// the failure was the guard's refusal of the main frame.
    #[serde(skip)]
    #[schemars(skip)]
    pub(super) failure: Option<String>,
}

impl Navigated {
    /// From a finished navigation.
    pub fn from_navigation(nav: Navigation, moved: Option<bool>) -> Self {
        Self {
            status: nav.status,
            final_url: nav.final_url,
            title: nav.title,
            moved,
            egress_refused: None,
            egress_refused_subresources: 0,
            download_started: None,
            failure: None,
        }
    }

    /// Sorts the guard's refusals during the call into the main frame's
    /// (a refusal for the host now shown, which then shows the guard's
    /// page) and the subresources' (the rest).
    pub(super) fn note_refusals(&mut self, (count, refused): (u64, Vec<Refusal>)) {
        let shown = url::Url::parse(&self.final_url).ok().and_then(|u| {
            let host = u.host_str()?.trim_matches(['[', ']']).to_ascii_lowercase();
            Some((host, u.port_or_known_default()?))
        });
        let main = shown
            .and_then(|(host, port)| {
                refused
                    .iter()
                    .rev()
                    .find(|r| r.host.trim_matches(['[', ']']) == host && r.port == port)
            })
            // A navigation that failed on a refused tunnel after a redirect
            // shows the URL asked for: the hop refused last is the one. Any
            // other failure (a certificate error, say) is not the guard's.
            .or_else(|| {
                self.failure
                    .as_deref()
                    .filter(|f| f.contains("ERR_TUNNEL_CONNECTION_FAILED"))
                    .and_then(|_| refused.last())
            });
        // A refused CONNECT leaves Chromium's error page at the URL asked
        // for; a refused plain request leaves the guard's 403 there.
        let main_frame_failed = self.status.is_none_or(|s| s == 403);
        match main {
            Some(r) if main_frame_failed => {
                self.egress_refused = Some(EgressRefused {
                    host: r.host.clone(),
                    port: r.port,
                    reason: r.reason.clone(),
                });
                self.egress_refused_subresources = count.saturating_sub(1);
            }
            _ => self.egress_refused_subresources = count,
        }
    }
}

/// What `screenshot` returns.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Screenshot {
    /// The image, base64.
    #[serde(rename = "image_base64", serialize_with = "base64_bytes")]
    #[schemars(with = "String")]
    pub bytes: Vec<u8>,
    /// `png` or `jpeg`.
    pub format: ImageFormat,
    /// Pixels.
    pub width: u32,
    /// Pixels.
    pub height: u32,
    /// RFC 3339.
    pub captured_at: String,
    /// Where the recorder kept it, relative to Cordon's data (or shared)
    /// folder: `sessions/<tenant>/<session>/<seq>.<ext>` (absent when
    /// recording is off). Never the host's own path.
    pub persisted_path: Option<String>,
    /// The kept screenshot's id in the archive (`<tenant>:<session>:<seq>`):
    /// an operator opens it at `/ui/screenshots/<id>`. Absent when
    /// recording is off.
    pub screenshot_id: Option<String>,
}

fn base64_bytes<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// `{ "success": true }`
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Done {
    /// Always true.
    pub success: bool,
}

/// What `select` returns.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Selected {
    /// The values now selected.
    pub selected: Vec<String>,
}

/// What `wait_for` returns.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Waited {
    /// How long it waited.
    pub waited_ms: u64,
}

/// What `read_dom` returns.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Dom {
    /// The HTML.
    pub html: String,
    /// Set when the HTML was cut to this many characters.
    pub truncated_to: Option<usize>,
}

/// What `snapshot` returns.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SnapshotResult {
    /// The tree.
    pub nodes: Vec<SnapNode>,
    /// Whether nodes were left out.
    pub truncated: bool,
    /// Nodes included.
    pub count: usize,
}

/// What `pdf` returns.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Pdf {
    /// The document, base64.
    #[serde(rename = "pdf_base64", serialize_with = "base64_bytes")]
    #[schemars(with = "String")]
    pub bytes: Vec<u8>,
}

/// One tab.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TabInfo {
    /// Id to focus or close it with.
    pub tab_id: String,
    /// Current URL.
    pub url: String,
    /// Title.
    pub title: String,
    /// Whether tools act on it.
    pub active: bool,
}

/// What closing a tab returns.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TabClosed {
    /// The closed tab's id.
    pub closed: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nav(status: Option<i64>, url: &str) -> Navigated {
        Navigated::from_navigation(
            Navigation {
                status,
                final_url: url.into(),
                title: String::new(),
            },
            None,
        )
    }

    fn refused(host: &str, port: u16) -> Refusal {
        Refusal {
            host: host.into(),
            port,
            reason: "loopback".into(),
        }
    }

    #[test]
    fn a_refused_main_document_is_named_and_the_rest_counted() {
        let mut n = nav(Some(403), "http://internal.test:8080/x");
        n.note_refusals((
            3,
            vec![
                refused("cdn.test", 443),
                refused("internal.test", 8080),
                refused("img.test", 80),
            ],
        ));
        let main = n.egress_refused.expect("main frame refused");
        assert_eq!((main.host.as_str(), main.port), ("internal.test", 8080));
        assert_eq!(n.egress_refused_subresources, 2);
    }

    #[test]
    fn a_page_that_loaded_only_counts_its_refused_subresources() {
        let mut n = nav(Some(200), "http://site.test/");
        n.note_refusals((2, vec![refused("site.test", 80), refused("x.test", 80)]));
        assert!(n.egress_refused.is_none());
        assert_eq!(n.egress_refused_subresources, 2);
    }

    #[test]
    fn every_address_and_title_of_an_answer_is_scrubbed() {
        let tab = |url: &str, title: &str| TabInfo {
            tab_id: "T".into(),
            url: url.into(),
            title: title.into(),
            active: true,
        };
        let mut blank = |s: &mut String| *s = s.replace("314159", "••••••");
        let mut n = nav(Some(200), "http://site.test/verify?code=314159");
        n.title = "code 314159 accepted".into();
        let mut out = ToolOutput::Navigated(n);
        out.scrub_texts(&mut blank);
        let ToolOutput::Navigated(n) = &out else {
            unreachable!()
        };
        assert_eq!(n.final_url, "http://site.test/verify?code=••••••");
        assert_eq!(n.title, "code •••••• accepted");
        let mut out = ToolOutput::Tabs(vec![
            tab("http://site.test/?code=314159", "314159"),
            tab("http://site.test/?n=271828", "271828"),
        ]);
        out.scrub_texts(&mut blank);
        let ToolOutput::Tabs(tabs) = &out else {
            unreachable!()
        };
        assert_eq!(
            (tabs[0].url.as_str(), tabs[0].title.as_str()),
            ("http://site.test/?code=••••••", "••••••")
        );
        assert_eq!(
            (tabs[1].url.as_str(), tabs[1].title.as_str()),
            ("http://site.test/?n=271828", "271828")
        );
        let mut out = ToolOutput::Tab(tab("http://site.test/?code=314159", "x"));
        out.scrub_texts(&mut blank);
        let ToolOutput::Tab(t) = &out else {
            unreachable!()
        };
        assert_eq!(t.url, "http://site.test/?code=••••••");
    }

    #[test]
    fn an_ipv6_literal_host_matches_its_refusal() {
        let mut n = nav(None, "https://[::1]:9443/");
        n.note_refusals((1, vec![refused("::1", 9443)]));
        assert_eq!(n.egress_refused.expect("refused").host, "::1");
    }
}
