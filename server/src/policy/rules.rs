//! The risk rules as settings declare them (`risk_*`, `tenant_risk`) and as
//! the gate uses them: word lists lower-cased, levels filled in, one
//! [`Rules`] per tenant resolved once at start.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How risky an action is; `high` and `critical` wait for an operator.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Runs at once.
    Low,
    /// Runs at once (recorded in the assessment only).
    Medium,
    /// Waits for an operator's decision.
    High,
    /// Waits for an operator's decision.
    Critical,
}

impl Level {
    /// `low`, `medium`, `high`, `critical`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::Critical => "critical",
        }
    }

    /// Whether an action at this level waits for an operator.
    pub fn waits(self) -> bool {
        self >= Self::High
    }
}

/// One rule of the gate, named in settings (`[risk_levels]`) and reasons.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// Navigation to a host outside the session's `domains`.
    OffListNavigation,
    /// Click/select on an element whose accessible name holds a destructive word.
    DestructiveClick,
    /// Click/select on an element whose accessible name holds a payment word.
    PaymentClick,
    /// Submitting a form (typing with `submit`, Enter, a submit button) on a sensitive domain.
    SensitiveSubmit,
    /// A click on a download link (the engine refuses downloads anyway).
    Download,
    /// An action on something the gate cannot see into (a cross-origin
    /// frame, a canvas, a plugin, a focus inside a closed shadow root).
    UnknownTarget,
}

impl Rule {
    /// The level when settings say nothing.
    pub fn default_level(self) -> Level {
        match self {
            Self::OffListNavigation
            | Self::DestructiveClick
            | Self::SensitiveSubmit
            | Self::UnknownTarget => Level::High,
            Self::PaymentClick | Self::Download => Level::Critical,
        }
    }
}

/// Default `risk_destructive_words`.
pub const DESTRUCTIVE_WORDS: &[&str] = &[
    "delete",
    "remove",
    "destroy",
    "erase",
    "revoke",
    "close account",
    "deactivate",
    "cancel subscription",
    "unsubscribe",
];

/// Default `risk_payment_words`.
pub const PAYMENT_WORDS: &[&str] = &[
    "pay",
    "pay now",
    "purchase",
    "buy",
    "checkout",
    "check out",
    "transfer",
    "send money",
    "confirm payment",
    "place order",
];

/// One tenant's own risk rules; unset fields are the `risk_*` settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantRisk {
    /// Replaces `risk_destructive_words`.
    pub destructive_words: Option<Vec<String>>,
    /// Replaces `risk_payment_words`.
    pub payment_words: Option<Vec<String>>,
    /// Replaces `risk_sensitive_domains`.
    pub sensitive_domains: Option<Vec<String>>,
    /// Levels of single rules, over `risk_levels`.
    #[serde(default)]
    pub levels: BTreeMap<Rule, Level>,
    /// Replaces `approval_timeout_s`.
    pub approval_timeout_s: Option<u64>,
    /// Replaces `risk_dry_run`.
    pub dry_run: Option<bool>,
}

/// The rules in force for one tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    /// Lower-cased words and phrases.
    pub destructive: Vec<String>,
    /// Lower-cased words and phrases.
    pub payment: Vec<String>,
    /// Lower-cased hosts (a subdomain counts too).
    pub sensitive_domains: Vec<String>,
    /// Every rule's level.
    pub levels: BTreeMap<Rule, Level>,
    /// How long a high or critical action waits for a decision.
    pub timeout: Duration,
    /// Record what would have waited, and run at once.
    pub dry_run: bool,
}

fn lower(words: &[String]) -> Vec<String> {
    words
        .iter()
        .map(|w| w.trim().to_lowercase())
        .filter(|w| !w.is_empty())
        .collect()
}

impl Rules {
    /// The level of `rule`.
    pub fn level(&self, rule: Rule) -> Level {
        self.levels
            .get(&rule)
            .copied()
            .unwrap_or(rule.default_level())
    }

    fn from_parts(s: &RiskSettings, t: Option<&TenantRisk>) -> Self {
        let pick = |own: Option<&Vec<String>>, base: &Vec<String>| lower(own.unwrap_or(base));
        let mut levels = s.levels.clone();
        if let Some(t) = t {
            levels.extend(t.levels.iter().map(|(k, v)| (*k, *v)));
        }
        Self {
            destructive: pick(
                t.and_then(|t| t.destructive_words.as_ref()),
                &s.destructive_words,
            ),
            payment: pick(t.and_then(|t| t.payment_words.as_ref()), &s.payment_words),
            sensitive_domains: pick(
                t.and_then(|t| t.sensitive_domains.as_ref()),
                &s.sensitive_domains,
            )
            .into_iter()
            .map(|d| d.trim_start_matches('.').to_owned())
            .collect(),
            levels,
            timeout: Duration::from_secs(
                t.and_then(|t| t.approval_timeout_s)
                    .unwrap_or(s.approval_timeout_s),
            ),
            dry_run: t.and_then(|t| t.dry_run).unwrap_or(s.dry_run),
        }
    }
}

/// The risk gate's settings, as `cordon.toml` and `CORDON_*` name them
/// (`risk_*`, `approval_timeout_s`, `tenant_risk`): declared and defaulted
/// here, checked by [`validate`]; `config` flattens them into `Settings`.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct RiskSettings {
    /// Risk gate: words and phrases (whole words, any case) that make a
    /// click or select on an element with that accessible name
    /// `destructive_click`.
    #[serde(
        rename = "risk_destructive_words",
        default = "defaults::destructive_words",
        deserialize_with = "crate::setting::string_or_list"
    )]
    pub destructive_words: Vec<String>,
    /// Risk gate: words and phrases that make a click or select `payment_click`.
    #[serde(
        rename = "risk_payment_words",
        default = "defaults::payment_words",
        deserialize_with = "crate::setting::string_or_list"
    )]
    pub payment_words: Vec<String>,
    /// Risk gate: hosts (and their subdomains) on which submitting a form is
    /// `sensitive_submit`.
    #[serde(
        rename = "risk_sensitive_domains",
        default,
        deserialize_with = "crate::setting::string_or_list"
    )]
    pub sensitive_domains: Vec<String>,
    /// Risk gate: the level of each rule (`[risk_levels] destructive_click =
    /// "critical"`); unset rules keep theirs (`off_list_navigation`,
    /// `destructive_click`, `sensitive_submit`: high; `payment_click`,
    /// `download`: critical). Levels: `low`, `medium`, `high`, `critical`;
    /// high and critical wait for an operator.
    #[serde(
        rename = "risk_levels",
        default,
        deserialize_with = "crate::setting::table_or_json"
    )]
    pub levels: BTreeMap<Rule, Level>,
    /// Risk gate: seconds a high or critical action waits for an operator's
    /// decision before it is denied (`approval_timed_out`); 1–3600.
    #[serde(default = "defaults::approval_timeout_s")]
    pub approval_timeout_s: u64,
    /// Risk gate: only record what would have waited (`approval.would_wait`)
    /// and run it at once.
    #[serde(rename = "risk_dry_run", default)]
    pub dry_run: bool,
    /// Risk gate: a tenant's own rules: `destructive_words`,
    /// `payment_words`, `sensitive_domains`, `levels`, `approval_timeout_s`,
    /// `dry_run` (`[tenant_risk.acme] dry_run = true`); unset ones are the
    /// `risk_*` settings.
    #[serde(
        rename = "tenant_risk",
        default,
        deserialize_with = "crate::setting::table_or_json"
    )]
    pub tenants: BTreeMap<String, TenantRisk>,
}

/// Every tenant's rules, resolved from settings once.
#[derive(Debug, Clone)]
pub struct Policy {
    default: Arc<Rules>,
    tenants: HashMap<String, Arc<Rules>>,
}

impl Policy {
    /// From the settings.
    pub fn from_settings(s: &RiskSettings) -> Self {
        Self {
            default: Arc::new(Rules::from_parts(s, None)),
            tenants: s
                .tenants
                .iter()
                .map(|(k, t)| (k.clone(), Arc::new(Rules::from_parts(s, Some(t)))))
                .collect(),
        }
    }

    /// The rules for `tenant`.
    pub fn rules(&self, tenant: &str) -> &Rules {
        self.tenants.get(tenant).unwrap_or(&self.default)
    }
}

/// Checks the risk settings at load; errors name the key.
pub fn validate(s: &RiskSettings) -> anyhow::Result<()> {
    let timeout_ok = |t: u64| (1..=3600).contains(&t);
    if !timeout_ok(s.approval_timeout_s) {
        anyhow::bail!("approval_timeout_s: must be between 1 and 3600");
    }
    let words_ok = |w: &[String]| w.iter().all(|w| !w.trim().is_empty() && w.len() <= 100);
    if !words_ok(&s.destructive_words) || !words_ok(&s.payment_words) {
        anyhow::bail!(
            "risk_destructive_words / risk_payment_words: words must be 1 to 100 characters"
        );
    }
    for (tenant, t) in &s.tenants {
        if tenant.parse::<crate::domain::TenantId>().is_err() {
            anyhow::bail!("tenant_risk: {tenant:?} is not a tenant id");
        }
        if t.approval_timeout_s.is_some_and(|v| !timeout_ok(v)) {
            anyhow::bail!("tenant_risk.{tenant}.approval_timeout_s: must be between 1 and 3600");
        }
        for w in [&t.destructive_words, &t.payment_words]
            .into_iter()
            .flatten()
        {
            if !words_ok(w) {
                anyhow::bail!("tenant_risk.{tenant}: words must be 1 to 100 characters");
            }
        }
    }
    Ok(())
}

/// Defaults of the `risk_*` settings.
pub mod defaults {
    /// `risk_destructive_words`.
    pub fn destructive_words() -> Vec<String> {
        super::DESTRUCTIVE_WORDS
            .iter()
            .map(|s| (*s).to_owned())
            .collect()
    }
    /// `risk_payment_words`.
    pub fn payment_words() -> Vec<String> {
        super::PAYMENT_WORDS
            .iter()
            .map(|s| (*s).to_owned())
            .collect()
    }
    /// `approval_timeout_s`.
    pub fn approval_timeout_s() -> u64 {
        60
    }
}
