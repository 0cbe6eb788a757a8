//! Reading the layers: `CORDON_*` variables as a figment provider, the
//! refusal of a key no section declares, figment's errors on one line.

/// `CORDON_*` variables as a figment layer. Values stay strings (figment's own
/// `Env` would turn `CORDON_LOG_LEVEL=1` into a number), and errors name the
/// variable.
pub(super) struct EnvVars(pub(super) Vec<(String, String)>);

const ENV_SOURCE: &str = "environment";

impl figment::Provider for EnvVars {
    fn metadata(&self) -> figment::Metadata {
        figment::Metadata::named(ENV_SOURCE)
    }

    fn data(
        &self,
    ) -> Result<figment::value::Map<figment::Profile, figment::value::Dict>, figment::Error> {
        let dict = self
            .0
            .iter()
            .map(|(k, v)| {
                // Numbers stay strings when they do not parse, so the error
                // names the variable and shows what was given.
                let value = match (v.trim().parse::<u64>(), v.trim().parse::<bool>()) {
                    (Ok(n), _) if super::keys::KEYS.numeric.contains(k) => {
                        figment::value::Value::from(n)
                    }
                    (_, Ok(b)) if super::keys::KEYS.boolean.contains(k) => {
                        figment::value::Value::from(b)
                    }
                    _ => figment::value::Value::from(v.clone()),
                };
                (k.clone(), value)
            })
            .collect();
        Ok(figment::Profile::Default.collect(dict))
    }
}

/// Figment errors can span lines; startup reports one.
pub(super) fn one_line(err: &figment::Error) -> String {
    err.clone()
        .into_iter()
        .map(|e| {
            let key = if e.path.is_empty() {
                String::new()
            } else {
                format!("{}: ", e.path.join("."))
            };
            let source = e
                .metadata
                .as_ref()
                .map(|m| match &m.source {
                    _ if m.name == ENV_SOURCE => {
                        format!(" (from CORDON_{})", e.path.join("_").to_ascii_uppercase())
                    }
                    Some(src) => format!(" (from {src})"),
                    None => format!(" (from {})", m.name),
                })
                .unwrap_or_default();
            // TOML parse errors come with a source snippet drawn over several
            // lines; keep the message lines only.
            let kind = e.kind.to_string();
            let kind = kind
                .lines()
                .map(str::trim)
                .filter(|l| {
                    !l.is_empty()
                        && !l.starts_with('|')
                        && !l.starts_with(|c: char| c.is_ascii_digit() && l.contains(" | "))
                })
                .collect::<Vec<_>>()
                .join(": ");
            format!("{key}{kind}{source}")
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Every key `cordon.toml` gives must name a setting. (The sections are
/// flattened into `Settings` and read one by one, so serde's
/// `deny_unknown_fields` cannot apply; this is its check, with its message
/// and the file the key came from.)
pub(super) fn refuse_unknown_keys(figment: &figment::Figment) -> Result<(), Box<figment::Error>> {
    static EXPECTED: std::sync::LazyLock<Vec<&'static str>> = std::sync::LazyLock::new(|| {
        super::keys::KEYS
            .all
            .iter()
            .map(|k| &*Box::leak(k.clone().into_boxed_str()))
            .collect()
    });
    let given: figment::value::Dict = figment.extract()?;
    match given.keys().find(|k| !super::keys::KEYS.all.contains(k)) {
        None => Ok(()),
        Some(key) => {
            let expected: &'static [&'static str] = EXPECTED.as_slice();
            let mut err =
                figment::Error::from(figment::error::Kind::UnknownField(key.clone(), expected));
            err.metadata = figment.find_metadata(key).cloned();
            err.path = vec![key.clone()];
            Err(Box::new(err))
        }
    }
}
