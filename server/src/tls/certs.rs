//! Loading `tls_cert` and `tls_key` at start, so a wrong file stops the
//! start with a line that names it, not the first handshake.

use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, bail};
use rustls::ServerConfig;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The TLS server configuration for `cert` (PEM, server certificate first)
/// and its private `key` (PEM): ring's algorithms, TLS 1.3 and 1.2, ALPN
/// `http/1.1` only (Cordon serves HTTP/1.1). Errors name the setting and
/// the file and say what is wrong with it.
pub fn server_config(cert: &Path, key: &Path) -> anyhow::Result<Arc<ServerConfig>> {
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| pem_error("tls_cert", cert, e, "certificate"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error("tls_cert", cert, e, "certificate"))?;
    if chain.is_empty() {
        bail!(
            "tls_cert: {} holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)",
            cert.display()
        );
    }
    let private = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| pem_error("tls_key", key, e, "private key"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow!("tls: cannot set up TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| match e {
            rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => anyhow!(
                "tls_key: {} does not match the certificate in {}",
                key.display(),
                cert.display()
            ),
            rustls::Error::InvalidCertificate(e) => anyhow!(
                "tls_cert: {}: the first certificate cannot be used: {e}",
                cert.display()
            ),
            other => anyhow!(
                "tls_key: {}: the private key cannot be used: {other}",
                key.display()
            ),
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// One line for a PEM file that could not be read or holds no `what`.
fn pem_error(setting: &str, path: &Path, err: pem::Error, what: &str) -> anyhow::Error {
    let path = path.display();
    let upper = setting.to_ascii_uppercase();
    let (e, fix) = match err {
        pem::Error::Io(e) if e.kind() == std::io::ErrorKind::NotFound => (
            anyhow!("{setting}: {path} does not exist"),
            format!(
                "set {setting} (CORDON_{upper}) to the {what}'s PEM file (Let's Encrypt: \
                 fullchain.pem and privkey.pem), or unset tls_cert and tls_key to serve plain \
                 HTTP on loopback"
            ),
        ),
        pem::Error::Io(e) => (
            anyhow!("{setting}: cannot read {path}: {e}"),
            "let the user Cordon runs as read the file (Let's Encrypt's keys are root's: copy \
             them with that user as owner, or give it a group that may read them)"
                .to_owned(),
        ),
        pem::Error::NoItemsFound => (
            anyhow!("{setting}: {path} holds no PEM {what}"),
            format!("point {setting} at the PEM file of the {what} (-----BEGIN …-----)"),
        ),
        other => (
            anyhow!("{setting}: {path} is not valid PEM: {other}"),
            format!("point {setting} at the PEM file of the {what}"),
        ),
    };
    crate::fix::Fixed::error(e, fix)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh self-signed certificate for `localhost` and its key, as PEM.
    fn self_signed() -> (String, String) {
        let c = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        (c.cert.pem(), c.signing_key.serialize_pem())
    }

    fn files(cert: &str, key: &str) -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let (c, k) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        std::fs::write(&c, cert).unwrap();
        std::fs::write(&k, key).unwrap();
        (dir, c, k)
    }

    fn err(cert: &Path, key: &Path) -> String {
        let e = server_config(cert, key).unwrap_err().to_string();
        assert!(!e.contains('\n'), "{e}");
        e
    }

    #[test]
    fn a_matching_certificate_and_key_load_with_http1_alpn() {
        let (cert, key) = self_signed();
        let (_dir, c, k) = files(&cert, &key);
        let config = server_config(&c, &k).unwrap();
        assert_eq!(config.alpn_protocols, [b"http/1.1".to_vec()]);
    }

    #[test]
    fn a_missing_file_is_named() {
        let (cert, key) = self_signed();
        let (dir, c, k) = files(&cert, &key);
        let gone = dir.path().join("nope.pem");
        let e = err(&gone, &k);
        assert!(
            e.starts_with("tls_cert:") && e.contains(&gone.display().to_string()),
            "{e}"
        );
        assert!(e.contains("does not exist"), "{e}");
        let e = err(&c, &gone);
        assert!(
            e.starts_with("tls_key:") && e.contains("does not exist"),
            "{e}"
        );
    }

    #[test]
    fn an_unreadable_file_says_so() {
        let (cert, key) = self_signed();
        let (dir, _c, k) = files(&cert, &key);
        // A directory opens but cannot be read as a file, even as root.
        let e = err(dir.path(), &k);
        assert!(e.starts_with("tls_cert: cannot read"), "{e}");
    }

    #[test]
    fn files_without_a_certificate_or_a_key_are_refused() {
        let (cert, key) = self_signed();
        let (_dir, c, k) = files(&key, &cert);
        let e = err(&c, &k);
        assert!(
            e.starts_with("tls_cert:") && e.contains("no PEM certificate"),
            "{e}"
        );
        let (_dir, c, k) = files(&cert, &cert);
        let e = err(&c, &k);
        assert!(
            e.starts_with("tls_key:") && e.contains("no PEM private key"),
            "{e}"
        );
        let (_dir, c, k) = files("not pem at all\n", &key);
        let e = err(&c, &k);
        assert!(
            e.starts_with("tls_cert:") && e.contains("no PEM certificate"),
            "{e}"
        );
    }

    #[test]
    fn a_key_of_another_certificate_is_refused() {
        let (cert, _) = self_signed();
        let (_, other_key) = self_signed();
        let (_dir, c, k) = files(&cert, &other_key);
        let e = err(&c, &k);
        assert!(
            e.starts_with("tls_key:") && e.contains("does not match"),
            "{e}"
        );
        assert!(e.contains(&c.display().to_string()), "{e}");
    }
}
