//! TLS for the native gRPC transport: rustls server configurations made from PEM, swapped on reload.
//!
//! Theory of operation. Python owns the certificate files (`rocketq.remoting.tls.ServerTls`: it
//! reads them, notices changes, and validates them with OpenSSL); it hands their PEM bytes here.
//! [`server_config`] turns them into a rustls `ServerConfig` (ring as the crypto provider, TLS 1.2
//! and 1.3, ALPN `h2` only) with the client-certificate policy RocketMQ names
//! `tls.server.need.client.auth`: `none` asks for no certificate, `optional` asks and verifies one
//! if given (with no trust PEM it asks for none), `require` refuses a client without one; both
//! verify against the trust PEM. [`Tls`]
//! holds the current configuration: every accepted connection takes the one current then (so a
//! reload reaches new handshakes, never the connections already open), and Python replaces it
//! when the files change. rustls parses every TLS byte; nothing here reads network data.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use std::sync::{Arc, Mutex};

/// The one application protocol the port speaks (gRPC clients refuse a TLS connection without it).
const ALPN_H2: &[u8] = b"h2";

/// The configuration new connections get; replaced on reload.
pub(crate) struct Tls {
    current: Mutex<Arc<ServerConfig>>,
}

impl Tls {
    pub(crate) fn new(config: Arc<ServerConfig>) -> Tls {
        Tls {
            current: Mutex::new(config),
        }
    }

    pub(crate) fn current(&self) -> Arc<ServerConfig> {
        self.current.lock().unwrap().clone()
    }

    pub(crate) fn replace(&self, config: Arc<ServerConfig>) {
        *self.current.lock().unwrap() = config;
    }
}

/// A server configuration from PEM: `cert` (the chain, leaf first), `key` (PKCS#8, PKCS#1 or SEC1),
/// `trust` (CA certificates for client certificates) and `client_auth` (`none`, `optional` or
/// `require`). The error says which part is wrong.
pub fn server_config(
    cert: &[u8],
    key: &[u8],
    trust: Option<&[u8]>,
    client_auth: &str,
) -> Result<Arc<ServerConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("certificate: not PEM certificates ({e})"))?;
    if chain.is_empty() {
        return Err("certificate: no CERTIFICATE section in the PEM".into());
    }
    let key = PrivateKeyDer::from_pem_slice(key)
        .map_err(|e| format!("key: no private key in the PEM ({e})"))?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS versions: {e}"))?;
    let builder = match client_auth {
        // optional with nothing to verify against: ask for nothing (as grpcio's port does)
        "none" => builder.with_no_client_auth(),
        "optional" if trust.is_none() => builder.with_no_client_auth(),
        "optional" | "require" => {
            let roots = trust_roots(trust, client_auth)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider);
            let verifier = if client_auth == "optional" {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| format!("trust certificates: {e}"))?;
            builder.with_client_cert_verifier(verifier)
        }
        other => {
            return Err(format!(
                "client auth {other:?} is not none, optional or require"
            ))
        }
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| format!("certificate and key: {e}"))?;
    config.alpn_protocols = vec![ALPN_H2.to_vec()];
    Ok(Arc::new(config))
}

/// The CA certificates client certificates are verified against (at least one is needed).
fn trust_roots(trust: Option<&[u8]>, client_auth: &str) -> Result<Arc<RootCertStore>, String> {
    let Some(pem) = trust else {
        return Err(format!(
            "client auth {client_auth} needs trust certificates (tls.server.trustCertPath)"
        ));
    };
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("trust certificates: not PEM certificates ({e})"))?;
    let mut roots = RootCertStore::empty();
    let (_, refused) = roots.add_parsable_certificates(certs);
    if roots.is_empty() {
        return Err(format!(
            "trust certificates: none usable as a CA ({refused} refused)"
        ));
    }
    Ok(Arc::new(roots))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_pem_is_named() {
        let e = server_config(b"nothing", b"", None, "none").unwrap_err();
        assert!(e.starts_with("certificate:"), "{e}");
        let cert = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let e = server_config(cert, b"no key", None, "none").unwrap_err();
        assert!(e.starts_with("key:"), "{e}");
    }

    #[test]
    fn require_without_trust_is_refused() {
        assert!(trust_roots(None, "require")
            .unwrap_err()
            .contains("trustCertPath"));
        assert!(trust_roots(Some(b"junk"), "require")
            .unwrap_err()
            .contains("none usable"));
    }
}
