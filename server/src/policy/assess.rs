//! The pure part of the gate: what a tool call risks, given the facts the
//! gate gathered (`sessions/tool/gate.rs`) and the tenant's [`Rules`].

use crate::sessions::Tool;

use super::rules::{Level, Rule, Rules};

/// What the gate learnt about the element a tool acts on (the node
/// Chromium's hit test finds under a click, the target, or the focused
/// element for keys and typing without one): see `cdp/facts.rs`.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(default)]
pub struct ElementFacts {
    /// The name shown to operators: the accessibility tree's name of the
    /// nearest acting ancestor, at most 200 chars.
    pub name: String,
    /// Every name the element goes by (the browser's accessible name, its
    /// rendered text with generated content, aria-label, value, title…):
    /// a rule's words are looked for in each.
    pub names: Vec<String>,
    /// Its role in the accessibility tree.
    pub role: Option<String>,
    /// Why the gate could not see what the action would act on (a
    /// cross-origin frame, a canvas, a closed shadow root): never harmless.
    pub unknown: Option<String>,
    /// Enter or Space on it acts (a button, a link, a checkbox…).
    pub activates: bool,
    /// A field text is typed into (Enter there submits its form).
    pub text_entry: bool,
    /// The names of the button that submits its form (what Enter in a
    /// field of the form presses), if it has one.
    pub submitter: Option<Vec<String>>,
    /// An `<input type=password>`.
    pub password: bool,
    /// Inside a `<form>` (or owned by one).
    pub in_form: bool,
    /// A button or input that submits its form.
    pub submits: bool,
    /// A link with a `download` attribute.
    pub download: bool,
    /// The host an http(s) link leads to.
    #[serde(default)]
    pub link_host: Option<String>,
    /// Its box in viewport CSS pixels (left, top, width, height), for the
    /// outline on the approval's screenshot.
    pub rect: Option<[f64; 4]>,
    /// A `<select>`'s options, (value, text) each.
    #[serde(default)]
    pub options: Option<Vec<(String, String)>>,
}

/// Everything `assess` looks at besides the tool.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// The session's domains (none: navigation is not restricted).
    pub domains: Vec<String>,
    /// The active page's host.
    pub page_host: Option<String>,
    /// The element acted on, when a rule needed it.
    pub element: Option<ElementFacts>,
    /// Where `back` or `forward` would go (operator sessions with domains).
    pub history_url: Option<String>,
}

/// The gate's verdict on one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assessment {
    /// The highest level of the rules that matched (`low` when none did).
    pub level: Level,
    /// One line per matched rule (`destructive_click: "Delete account" …`).
    pub reasons: Vec<String>,
    /// Refused outright, whatever the levels say (typing into a password
    /// field: credentials come only from the vault).
    pub forbidden: bool,
    /// The host outside the session's domains the action would go to: if
    /// it runs (approved, or not held), the navigation guard lets the tab
    /// load it.
    pub leaves_for: Option<String>,
}

impl Assessment {
    fn add(&mut self, rules: &Rules, rule: Rule, why: String) {
        self.level = self.level.max(rules.level(rule));
        let name = serde_json::to_value(rule)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        self.reasons.push(format!("{name}: {why}"));
    }

    /// Whether the call must wait for an operator.
    pub fn waits(&self) -> bool {
        !self.forbidden && self.level.waits()
    }
}

/// Whether `host` is `domain` or one of its subdomains.
pub fn covered(host: &str, domain: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let domain = domain.trim_end_matches('.').to_ascii_lowercase();
    host == domain
        || host
            .strip_suffix(&domain)
            .is_some_and(|rest| rest.ends_with('.'))
}

fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The first of `list` found in `name` as whole words (a phrase as
/// consecutive words), ignoring case: "pay" matches "Pay now", not "Display".
pub fn matching<'a>(name: &str, list: &'a [String]) -> Option<&'a str> {
    let name = words(name);
    list.iter()
        .find(|phrase| {
            let p = words(phrase);
            !p.is_empty() && name.windows(p.len()).any(|w| w == p.as_slice())
        })
        .map(String::as_str)
}

/// Whether `key` activates the focused element (a button, a link) or
/// submits the form of the focused field.
pub fn activation_key(key: &str) -> bool {
    matches!(key, "Enter" | " " | "Space" | "Spacebar")
}

/// Whether a key pastes at the focus what the clipboard holds (typing
/// text the gate never saw: copied from a plain field, pasted into a
/// password field): Ctrl or Meta with V, Shift with Insert, the Paste
/// key. Blink binds them by the key's Windows code, so that is read too
/// (`code` may be empty, `vk` absent). Modifiers: Alt 1, Ctrl 2, Meta 4,
/// Shift 8.
pub fn pastes(key: &str, code: &str, vk: Option<i64>, modifiers: i64) -> bool {
    let ctrl_or_meta = modifiers & 0b0110 != 0;
    let shift = modifiers & 0b1000 != 0;
    let v = key.eq_ignore_ascii_case("v") || code == "KeyV" || vk == Some(86);
    let insert = key == "Insert" || code == "Insert" || vk == Some(45);
    (v && ctrl_or_meta) || (insert && shift) || key == "Paste" || code == "Paste"
}

/// What `select` with `values` chooses on `el`: the texts and values of
/// the options it matches (by value or text, as the tool does), or the
/// values themselves when the options are not known.
fn chosen<'a>(el: &'a ElementFacts, values: &'a [String]) -> Vec<&'a str> {
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    match &el.options {
        Some(options) => options
            .iter()
            .filter(|(value, text)| values.iter().any(|v| v == value || squash(v) == *text))
            .flat_map(|(value, text)| [text.as_str(), value.as_str()])
            .collect(),
        None => values.iter().map(String::as_str).collect(),
    }
}

/// A checkbox, radio button or switch: Space toggles it, Enter does not
/// (Chromium leaves Enter to the form, which it submits).
fn checkable(el: &ElementFacts) -> bool {
    matches!(
        el.role.as_deref(),
        Some("checkbox" | "radio" | "switch" | "menuitemcheckbox" | "menuitemradio")
    )
}

impl ElementFacts {
    /// Every name, the shown one first.
    fn all_names(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.name.as_str())
            .chain(self.names.iter().map(String::as_str))
            .filter(|n| !n.is_empty())
    }
}

/// The first of `names` that holds a phrase of `list`, with the phrase.
fn matching_any<'a, 'b>(
    names: impl Iterator<Item = &'a str>,
    list: &'b [String],
) -> Option<(&'a str, &'b str)> {
    names
        .into_iter()
        .find_map(|n| matching(n, list).map(|w| (n, w)))
}

/// Whether assessing `tool` needs the page's facts (an element, the
/// page's host): tools no rule looks at cost no browser call.
pub fn needs_page(tool: &Tool, rules: &Rules) -> bool {
    let words = !rules.destructive.is_empty() || !rules.payment.is_empty();
    match tool {
        // The password rule always applies.
        Tool::Type { .. } => true,
        // Typing (the password rule), and keys that act on the focus.
        Tool::Press { key } => key.chars().count() == 1 || activation_key(key),
        // Download links are checked too (cheap, the same call).
        Tool::Click(_) => true,
        Tool::Select { .. } => words,
        // Files set on an input fire its `change`, on which a page may
        // submit the input's form.
        Tool::Upload { .. } => words || !rules.sensitive_domains.is_empty(),
        // What OK on a dialog does is what its message asks.
        Tool::Dialog { accept, .. } => *accept,
        _ => false,
    }
}

fn sensitive_page(facts: &Facts, rules: &Rules) -> Option<String> {
    let host = facts.page_host.as_deref()?;
    rules
        .sensitive_domains
        .iter()
        .any(|d| covered(host, d))
        .then(|| host.to_owned())
}

/// What `tool` risks, given `facts`, under `rules`.
pub fn assess(tool: &Tool, facts: &Facts, rules: &Rules) -> Assessment {
    let mut a = Assessment {
        level: Level::Low,
        reasons: Vec::new(),
        forbidden: false,
        leaves_for: None,
    };
    let el = facts.element.as_ref();
    // Where the call would take the tab: a URL, a link, the history.
    let history_host = facts
        .history_url
        .as_deref()
        .and_then(|u| url::Url::parse(u).ok())
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .and_then(|u| u.host_str().map(str::to_owned));
    let goes_to = match (tool, el) {
        (Tool::Navigate { url, .. } | Tool::TabOpen { url: Some(url) }, _) => {
            Some((url.host().to_owned(), ""))
        }
        (
            Tool::Click(_) | Tool::Press { .. },
            Some(ElementFacts {
                link_host: Some(h), ..
            }),
        ) if !matches!(tool, Tool::Press { key } if !activation_key(key)) => {
            Some((h.clone(), "a link to "))
        }
        (Tool::Back | Tool::Forward, _) => history_host.map(|h| (h, "the history entry on ")),
        _ => None,
    };
    if let Some((host, what)) = goes_to
        && !facts.domains.is_empty()
        && !facts.domains.iter().any(|d| covered(&host, d))
    {
        a.add(
            rules,
            Rule::OffListNavigation,
            format!("{what}{host} is outside the session's domains"),
        );
        a.leaves_for = Some(host);
    }
    // The element the action presses: a click's or a select's target, or
    // the focus that Enter or Space activates.
    // Enter reaches the element: pressed, or `type`'s submit, or a
    // newline in its text (Chromium submits a field's form on a typed
    // "\n" as on Enter).
    let enter = match tool {
        Tool::Press { key } => key == "Enter",
        Tool::Type { submit, text, .. } => *submit || text.contains(['\r', '\n']),
        _ => false,
    };
    let presses = match (tool, el) {
        (Tool::Click(_) | Tool::Select { .. }, Some(_)) => true,
        // OK on a dialog: judged by its message, as a button by its name.
        (Tool::Dialog { accept: true, .. }, Some(_)) => true,
        // The file input's own names ("Replace the production database").
        (Tool::Upload { .. }, Some(_)) => true,
        (Tool::Press { key }, Some(el)) => activation_key(key) && el.activates,
        // `type` on a button: its Enter presses it.
        (Tool::Type { .. }, Some(el)) => enter && el.activates,
        _ => false,
    };
    // Enter in a field (or `type` with `submit`) submits the field's form
    // through its submit button, whatever that button says; so does Enter
    // on a checkbox or radio button (Space toggles them, Enter is left to
    // the form).
    let implicit_submit = match el {
        Some(el) if enter => el.in_form && (!el.activates || checkable(el)),
        // A page may submit the form on the files' `change`: an upload is
        // judged as that submit too.
        Some(el) if matches!(tool, Tool::Upload { .. }) => el.in_form,
        _ => false,
    };
    if let Some(el) = el {
        let mut words = |names: Vec<&str>, how: &str| {
            if let Some((n, w)) = matching_any(names.iter().copied(), &rules.destructive) {
                a.add(
                    rules,
                    Rule::DestructiveClick,
                    format!("{how}{n:?} matches {w:?}"),
                );
            }
            if let Some((n, w)) = matching_any(names.iter().copied(), &rules.payment) {
                a.add(
                    rules,
                    Rule::PaymentClick,
                    format!("{how}{n:?} matches {w:?}"),
                );
            }
        };
        if presses {
            let mut names: Vec<&str> = el.all_names().collect();
            // A select chooses options: they are what it acts with (the
            // page's `change` handler reads them), judged by their texts.
            if let Tool::Select { values, .. } = tool {
                names.extend(chosen(el, values));
            }
            words(names, "");
        }
        if implicit_submit && let Some(button) = &el.submitter {
            words(
                button.iter().map(String::as_str).collect(),
                "submits its form with ",
            );
        }
    }
    let submits = match (tool, el) {
        (Tool::Click(_), Some(el)) => el.submits,
        (Tool::Press { .. } | Tool::Type { .. }, Some(el)) if presses => el.submits,
        _ => implicit_submit,
    };
    if submits && let Some(host) = sensitive_page(facts, rules) {
        a.add(
            rules,
            Rule::SensitiveSubmit,
            format!("submits a form on {host}"),
        );
    }
    if let (Tool::Click(_) | Tool::Press { .. }, Some(el)) = (tool, el)
        && el.download
        && presses
    {
        a.add(rules, Rule::Download, "a download link".into());
    }
    let typing = match tool {
        Tool::Type { .. } => true,
        Tool::Press { key } => key.chars().count() == 1,
        _ => false,
    };
    // What the gate could not see acts all the same: never taken for
    // harmless.
    if let Some(why) = el.and_then(|e| e.unknown.as_deref())
        && (presses
            || typing
            || implicit_submit
            || matches!(tool, Tool::Press { key } if activation_key(key)))
    {
        a.add(rules, Rule::UnknownTarget, format!("the target is {why}"));
    }
    if typing && el.is_some_and(|e| e.password) {
        a.forbidden = true;
        a.level = Level::Critical;
        a.reasons.push(
            "password_field: typing into a password field is never allowed; credentials come only from the vault"
                .into(),
        );
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdp::WaitUntil;
    use crate::domain::TargetUrl;
    use crate::sessions::tool::ElementTarget;
    use std::collections::BTreeMap;
    use std::time::Duration;

    fn rules() -> Rules {
        Rules {
            destructive: super::super::rules::defaults::destructive_words(),
            payment: super::super::rules::defaults::payment_words(),
            sensitive_domains: vec!["bank.test".into()],
            levels: BTreeMap::new(),
            timeout: Duration::from_secs(60),
            dry_run: false,
        }
    }

    fn click() -> Tool {
        Tool::Click(ElementTarget::Selector("#x".into()))
    }

    fn on(name: &str) -> Facts {
        Facts {
            element: Some(ElementFacts {
                name: name.into(),
                ..ElementFacts::default()
            }),
            ..Facts::default()
        }
    }

    fn nav(url: &str) -> Tool {
        Tool::Navigate {
            url: TargetUrl::parse(url).unwrap(),
            wait: WaitUntil::Load,
        }
    }

    #[test]
    fn levels_are_ordered_and_only_high_and_critical_wait() {
        assert!(Level::Low < Level::Medium && Level::Medium < Level::High);
        assert!(Level::High < Level::Critical);
        assert!(!Level::Medium.waits() && Level::High.waits() && Level::Critical.waits());
    }

    #[test]
    fn words_match_whole_words_and_phrases_ignoring_case() {
        let list = vec!["pay".to_owned(), "close account".to_owned()];
        assert_eq!(matching("Pay now", &list), Some("pay"));
        assert_eq!(matching("DISPLAY settings", &list), None);
        assert_eq!(matching("PayPal", &list), None);
        assert_eq!(matching("Close  account!", &list), Some("close account"));
        assert_eq!(matching("Close the account", &list), None);
    }

    #[test]
    fn a_click_on_a_destructive_name_is_high() {
        let a = assess(&click(), &on("Delete account"), &rules());
        assert_eq!(a.level, Level::High);
        assert!(a.waits() && !a.forbidden);
        assert!(a.reasons[0].starts_with("destructive_click:"), "{a:?}");
    }

    #[test]
    fn ok_on_a_dialog_is_judged_by_its_message_and_cancel_never_waits() {
        let ok = Tool::Dialog {
            accept: true,
            text: None,
            tab: None,
        };
        let cancel = Tool::Dialog {
            accept: false,
            text: None,
            tab: None,
        };
        let r = rules();
        assert!(needs_page(&ok, &r) && !needs_page(&cancel, &r));
        let a = assess(&ok, &on("Delete repository acme/site?"), &r);
        assert!(a.waits(), "{a:?}");
        assert!(a.reasons[0].starts_with("destructive_click:"), "{a:?}");
        assert!(!assess(&cancel, &on("Delete repository acme/site?"), &r).waits());
        assert!(!assess(&ok, &on("Saved."), &r).waits());
        // A dialog the gate did not see is never harmless.
        let unseen = Facts {
            element: Some(ElementFacts {
                unknown: Some("a dialog Cordon did not see open".into()),
                ..ElementFacts::default()
            }),
            ..Facts::default()
        };
        assert!(assess(&ok, &unseen, &r).waits());
    }

    #[test]
    fn an_upload_is_judged_by_its_input_and_the_form_its_change_may_submit() {
        let upload = Tool::Upload {
            target: ElementTarget::Selector("#f".into()),
            files: Vec::new(),
        };
        let r = rules();
        assert!(needs_page(&upload, &r));
        let input = |in_form: bool, submitter: &str, name: &str| Facts {
            element: Some(ElementFacts {
                name: name.into(),
                in_form,
                submitter: Some(vec![submitter.into()]),
                ..ElementFacts::default()
            }),
            page_host: Some("bank.test".into()),
            ..Facts::default()
        };
        let a = assess(&upload, &input(true, "Delete repository", "Attachment"), &r);
        assert!(a.waits(), "{a:?}");
        assert!(
            a.reasons
                .iter()
                .any(|w| w.contains("submits its form with")),
            "{a:?}"
        );
        // On a sensitive host, a form's upload is a submit there too.
        assert!(
            a.reasons.iter().any(|w| w.starts_with("sensitive_submit")),
            "{a:?}"
        );
        let off = Facts {
            page_host: Some("shop.test".into()),
            ..input(false, "Delete repository", "Avatar")
        };
        assert!(!assess(&upload, &off, &r).waits());
        let named = Facts {
            page_host: None,
            ..input(false, "", "Replace and delete all records")
        };
        assert!(assess(&upload, &named, &r).waits());
    }

    #[test]
    fn a_click_on_a_payment_name_is_critical() {
        let a = assess(&click(), &on("Place order"), &rules());
        assert_eq!(a.level, Level::Critical);
        assert!(a.reasons[0].starts_with("payment_click:"), "{a:?}");
    }

    #[test]
    fn an_ordinary_click_is_low() {
        let a = assess(&click(), &on("Next page"), &rules());
        assert_eq!(a.level, Level::Low);
        assert!(a.reasons.is_empty() && !a.waits());
    }

    #[test]
    fn levels_from_settings_replace_the_defaults() {
        let mut r = rules();
        r.levels.insert(Rule::DestructiveClick, Level::Medium);
        let a = assess(&click(), &on("Remove item"), &r);
        assert_eq!(a.level, Level::Medium);
        assert!(!a.waits());
    }

    #[test]
    fn navigation_outside_the_sessions_domains_is_high_and_without_a_list_is_low() {
        let facts = Facts {
            domains: vec!["example.com".into()],
            ..Facts::default()
        };
        assert_eq!(
            assess(&nav("https://www.example.com/a"), &facts, &rules()).level,
            Level::Low
        );
        let a = assess(&nav("https://evil.test/"), &facts, &rules());
        assert_eq!(a.level, Level::High);
        assert!(a.reasons[0].contains("evil.test"), "{a:?}");
        assert_eq!(
            assess(&nav("https://notexample.com/"), &facts, &rules()).level,
            Level::High
        );
        assert_eq!(
            assess(&nav("https://evil.test/"), &Facts::default(), &rules()).level,
            Level::Low
        );
        let tab = Tool::TabOpen {
            url: Some(TargetUrl::parse("https://evil.test/").unwrap()),
        };
        assert_eq!(assess(&tab, &facts, &rules()).level, Level::High);
    }

    #[test]
    fn a_link_or_history_entry_leading_outside_the_domains_is_high() {
        let link = |host: &str| Facts {
            domains: vec!["example.com".into()],
            element: Some(ElementFacts {
                name: "more".into(),
                link_host: Some(host.into()),
                ..ElementFacts::default()
            }),
            ..Facts::default()
        };
        let click = Tool::Click(ElementTarget::Selector("a".into()));
        assert_eq!(
            assess(&click, &link("www.example.com"), &rules()).level,
            Level::Low
        );
        let a = assess(&click, &link("evil.test"), &rules());
        assert_eq!(a.level, Level::High, "{a:?}");
        assert!(a.reasons[0].contains("a link to evil.test"), "{a:?}");
        let history = |url: &str| Facts {
            domains: vec!["example.com".into()],
            history_url: Some(url.into()),
            ..Facts::default()
        };
        assert_eq!(
            assess(&Tool::Back, &history("https://example.com/a"), &rules()).level,
            Level::Low
        );
        assert_eq!(
            assess(&Tool::Forward, &history("https://evil.test/"), &rules()).level,
            Level::High
        );
        // about:blank and the like go nowhere outside.
        assert_eq!(
            assess(&Tool::Back, &history("about:blank"), &rules()).level,
            Level::Low
        );
        // Without a list, nothing is outside.
        assert_eq!(
            assess(
                &Tool::Back,
                &Facts {
                    domains: Vec::new(),
                    ..history("https://evil.test/")
                },
                &rules()
            )
            .level,
            Level::Low
        );
    }

    #[test]
    fn typing_into_a_password_field_is_forbidden_whatever_the_levels() {
        let mut r = rules();
        for rule in [Rule::DestructiveClick, Rule::SensitiveSubmit] {
            r.levels.insert(rule, Level::Low);
        }
        let facts = Facts {
            element: Some(ElementFacts {
                password: true,
                ..ElementFacts::default()
            }),
            ..Facts::default()
        };
        let typed = Tool::Type {
            text: "hunter2".into(),
            target: None,
            submit: false,
        };
        let a = assess(&typed, &facts, &r);
        assert!(a.forbidden && !a.waits());
        assert!(!format!("{a:?}").contains("hunter2"));
        let key = Tool::Press { key: "x".into() };
        assert!(assess(&key, &facts, &r).forbidden);
        let tab = Tool::Press { key: "Tab".into() };
        assert!(!assess(&tab, &facts, &r).forbidden);
    }

    #[test]
    fn submitting_a_form_on_a_sensitive_domain_is_high() {
        let facts = |host: &str| Facts {
            page_host: Some(host.into()),
            element: Some(ElementFacts {
                in_form: true,
                ..ElementFacts::default()
            }),
            ..Facts::default()
        };
        let typed = |submit| Tool::Type {
            text: "42".into(),
            target: None,
            submit,
        };
        let a = assess(&typed(true), &facts("online.bank.test"), &rules());
        assert_eq!(a.level, Level::High);
        assert!(a.reasons[0].starts_with("sensitive_submit:"), "{a:?}");
        assert_eq!(
            assess(&typed(false), &facts("bank.test"), &rules()).level,
            Level::Low
        );
        assert_eq!(
            assess(&typed(true), &facts("shop.test"), &rules()).level,
            Level::Low
        );
        let enter = Tool::Press {
            key: "Enter".into(),
        };
        assert_eq!(
            assess(&enter, &facts("bank.test"), &rules()).level,
            Level::High
        );
        let mut button = facts("bank.test");
        button.element.as_mut().unwrap().submits = true;
        assert_eq!(assess(&click(), &button, &rules()).level, Level::High);
    }

    #[test]
    fn a_download_link_is_critical() {
        let facts = Facts {
            element: Some(ElementFacts {
                name: "report.pdf".into(),
                download: true,
                ..ElementFacts::default()
            }),
            ..Facts::default()
        };
        let a = assess(&click(), &facts, &rules());
        assert_eq!(a.level, Level::Critical);
        assert!(a.reasons[0].starts_with("download:"), "{a:?}");
    }

    fn press(key: &str) -> Tool {
        Tool::Press { key: key.into() }
    }

    #[test]
    fn enter_or_space_on_a_destructive_button_is_judged_as_its_click() {
        let focus = Facts {
            element: Some(ElementFacts {
                name: "Delete repository".into(),
                activates: true,
                ..ElementFacts::default()
            }),
            ..Facts::default()
        };
        for key in ["Enter", " "] {
            let a = assess(&press(key), &focus, &rules());
            assert_eq!(a.level, Level::High, "{key:?}: {a:?}");
            assert!(a.reasons[0].starts_with("destructive_click:"), "{a:?}");
        }
        // Tab and arrows only move: nothing is pressed.
        assert_eq!(assess(&press("Tab"), &focus, &rules()).level, Level::Low);
        // The same name on something that does not act on Enter.
        let mut text = focus.clone();
        text.element.as_mut().unwrap().activates = false;
        assert_eq!(assess(&press("Enter"), &text, &rules()).level, Level::Low);
    }

    #[test]
    fn enter_in_a_field_and_type_with_submit_are_judged_by_the_forms_submit_button() {
        let field = Facts {
            element: Some(ElementFacts {
                name: "Repository name".into(),
                text_entry: true,
                in_form: true,
                submitter: Some(vec!["Delete repository".into()]),
                ..ElementFacts::default()
            }),
            ..Facts::default()
        };
        let a = assess(&press("Enter"), &field, &rules());
        assert_eq!(a.level, Level::High, "{a:?}");
        assert!(a.reasons[0].contains("submits its form with"), "{a:?}");
        let typed = |submit| Tool::Type {
            text: "acme/site".into(),
            target: None,
            submit,
        };
        assert_eq!(assess(&typed(true), &field, &rules()).level, Level::High);
        // Typing alone submits nothing.
        assert_eq!(assess(&typed(false), &field, &rules()).level, Level::Low);
        // A payment button behind the field is critical.
        let mut pay = field.clone();
        pay.element.as_mut().unwrap().submitter = Some(vec!["Pay now".into()]);
        assert_eq!(
            assess(&press("Enter"), &pay, &rules()).level,
            Level::Critical
        );
    }

    #[test]
    fn every_name_an_element_goes_by_is_matched() {
        // The accessible name says "Next"; the rendered text says otherwise.
        let facts = Facts {
            element: Some(ElementFacts {
                name: "Next".into(),
                names: vec!["Next".into(), "Delete organization".into()],
                ..ElementFacts::default()
            }),
            ..Facts::default()
        };
        let a = assess(&click(), &facts, &rules());
        assert_eq!(a.level, Level::High, "{a:?}");
        assert!(a.reasons[0].contains("Delete organization"), "{a:?}");
    }

    #[test]
    fn what_the_gate_cannot_see_is_unknown_never_low() {
        let unseen = Facts {
            element: Some(ElementFacts {
                unknown: Some("a canvas".into()),
                ..ElementFacts::default()
            }),
            ..Facts::default()
        };
        for tool in [
            click(),
            press("Enter"),
            press("x"),
            Tool::Type {
                text: "x".into(),
                target: None,
                submit: false,
            },
        ] {
            let a = assess(&tool, &unseen, &rules());
            assert_eq!(a.level, Level::High, "{tool:?}: {a:?}");
            assert!(a.reasons[0].starts_with("unknown_target:"), "{a:?}");
        }
        // A key that acts on nothing stays low.
        assert_eq!(assess(&press("Tab"), &unseen, &rules()).level, Level::Low);
        // Its level is the tenant's to set.
        let mut r = rules();
        r.levels.insert(Rule::UnknownTarget, Level::Medium);
        assert!(!assess(&click(), &unseen, &r).waits());
    }

    #[test]
    fn an_off_list_destination_is_named_for_the_navigation_guard() {
        let facts = Facts {
            domains: vec!["example.com".into()],
            ..Facts::default()
        };
        let a = assess(&nav("https://evil.test/x"), &facts, &rules());
        assert_eq!(a.leaves_for.as_deref(), Some("evil.test"));
        let a = assess(&nav("https://www.example.com/"), &facts, &rules());
        assert_eq!(a.leaves_for, None);
    }

    #[test]
    fn only_tools_a_rule_looks_at_need_the_page() {
        let r = rules();
        assert!(needs_page(&click(), &r));
        assert!(needs_page(
            &Tool::Type {
                text: String::new(),
                target: None,
                submit: false
            },
            &r
        ));
        assert!(!needs_page(&nav("https://example.com/"), &r));
        assert!(!needs_page(&Tool::Press { key: "Tab".into() }, &r));
        assert!(!needs_page(&Tool::TabsList, &r));
        assert!(!needs_page(
            &Tool::Hover(ElementTarget::Point(1.0, 1.0)),
            &r
        ));
    }

    #[test]
    fn the_keys_that_paste_are_known_by_name_place_or_code() {
        assert!(pastes("v", "KeyV", None, 2));
        assert!(pastes("V", "", None, 4 | 8));
        // AZERTY or any layout: Blink binds by the key's code.
        assert!(pastes("q", "", Some(86), 2));
        assert!(pastes("Insert", "Insert", Some(45), 8));
        assert!(pastes("Paste", "", None, 0));
        assert!(!pastes("v", "KeyV", Some(86), 0));
        assert!(!pastes("Insert", "Insert", Some(45), 2));
        assert!(!pastes("c", "KeyC", Some(67), 2));
    }
}
