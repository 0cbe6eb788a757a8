//! The internal hop's TLS client. Replicas of one deployment serve the same
//! `tls_cert` (they stand behind one public name), so a replica trusts a
//! peer that presents exactly that certificate and proves it holds its key,
//! whatever address the peer is reached at (`advertise_url` may be a pod's
//! IP, which the certificate does not name). Any other certificate, even
//! one a public CA signed, is refused: the hop carries operator identities
//! and session streams, and only this deployment's replicas may answer it.

use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, bail};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, Error, SignatureScheme};

/// The client configuration for hops to other replicas: TLS 1.3 and 1.2 with
/// ring, ALPN `http/1.1`, trusting only the first certificate of `cert` (a
/// PEM file, as `tls_cert`).
pub fn peer_client_config(cert: &Path) -> anyhow::Result<Arc<ClientConfig>> {
    let leaf = CertificateDer::pem_file_iter(cert)
        .map_err(|e| anyhow!("tls_cert: {}: {e}", cert.display()))?
        .next()
        .ok_or_else(|| anyhow!("tls_cert: {} holds no PEM certificate", cert.display()))?
        .map_err(|e| anyhow!("tls_cert: {}: {e}", cert.display()))?;
    Ok(Arc::new(pinned_config(leaf)?))
}

/// A client configuration that accepts exactly `leaf` as the server's certificate.
pub(crate) fn pinned_config(leaf: CertificateDer<'static>) -> anyhow::Result<ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(Pinned {
        leaf,
        algorithms: provider.signature_verification_algorithms,
    });
    let Ok(builder) =
        ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions()
    else {
        bail!("tls: cannot set up the internal hop's TLS client");
    };
    let mut config = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Accepts the one pinned certificate; the handshake's signature is checked
/// against it as usual, so a peer must hold its private key.
#[derive(Debug)]
struct Pinned {
    leaf: CertificateDer<'static>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        if end_entity.as_ref() == self.leaf.as_ref() {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(Error::InvalidCertificate(
                CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server on loopback with a fresh self-signed certificate for
    /// `localhost`; answers its certificate.
    async fn server() -> (std::net::SocketAddr, CertificateDer<'static>) {
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let der = made.cert.der().clone();
        let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(
            made.signing_key.serialize_pem().as_bytes(),
        )
        .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![der.clone()], key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    if let Ok(mut tls) = acceptor.accept(tcp).await {
                        let _ = tls.write_all(b"hello").await;
                        let _ = tls.shutdown().await;
                    }
                });
            }
        });
        (addr, der)
    }

    async fn handshake(
        addr: std::net::SocketAddr,
        pinned: CertificateDer<'static>,
        name: &str,
    ) -> Result<Vec<u8>, std::io::Error> {
        let connector = tokio_rustls::TlsConnector::from(Arc::new(pinned_config(pinned).unwrap()));
        let tcp = tokio::net::TcpStream::connect(addr).await?;
        let name = ServerName::try_from(name.to_owned()).unwrap();
        let mut tls = connector.connect(name, tcp).await?;
        let mut out = Vec::new();
        tls.read_to_end(&mut out).await?;
        Ok(out)
    }

    #[tokio::test]
    async fn the_pinned_certificate_is_trusted_under_any_name_the_peer_is_reached_by() {
        let (addr, der) = server().await;
        for name in ["localhost", "127.0.0.1", "replica-b.pods.internal"] {
            let got = handshake(addr, der.clone(), name).await;
            assert_eq!(got.as_deref().ok(), Some(&b"hello"[..]), "{name}: {got:?}");
        }
    }

    #[tokio::test]
    async fn any_other_certificate_is_refused_even_for_the_right_name() {
        let (addr, _) = server().await;
        let other = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let err = handshake(addr, other.cert.der().clone(), "localhost")
            .await
            .expect_err("another certificate must be refused");
        assert!(
            err.to_string().contains("invalid peer certificate"),
            "{err}"
        );
    }

    #[test]
    fn a_file_without_a_certificate_is_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cert.pem");
        std::fs::write(&path, "not pem").unwrap();
        let err = peer_client_config(&path).unwrap_err().to_string();
        assert!(
            err.starts_with("tls_cert:") && err.contains("cert.pem"),
            "{err}"
        );
    }
}
