//! TLS for [`crate::TcpChannel`] (rustls, TLS 1.2 and 1.3 with the `ring` provider):
//! the server's certificate chain and key, the client's trusted CA, optional client
//! certificates, all read from PEM.
//!
//! helina's shares are uniformly random to anyone who is not a party, so TLS does not
//! protect the inference's privacy against the parties themselves; it protects the
//! session against everyone else: a byte changed on the path (which on plain TCP can
//! change the client's result silently), a third party reading the traffic, and a
//! server impersonated. A tampered record ends the session with [`NetError::Tls`].

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore, ServerConfig};

use crate::error::{NetError, Result};

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn config_error(what: &str, e: impl std::fmt::Display) -> NetError {
    NetError::TlsConfig {
        detail: format!("{what}: {e}"),
    }
}

fn certs(what: &str, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| config_error(what, e))?;
    if certs.is_empty() {
        return Err(config_error(what, "no CERTIFICATE in the PEM"));
    }
    Ok(certs)
}

fn key(what: &str, pem: &[u8]) -> Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| config_error(what, e))
}

fn roots(what: &str, pem: &[u8]) -> Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    for c in certs(what, pem)? {
        roots.add(c).map_err(|e| config_error(what, e))?;
    }
    Ok(roots)
}

fn read(what: &str, path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| config_error(&format!("{what} {}", path.display()), e))
}

/// A server's TLS configuration: its certificate chain and key, and the CA whose
/// client certificates it admits (none: any client).
#[derive(Clone, Debug)]
pub struct ServerTls {
    pub(crate) config: Arc<ServerConfig>,
    client_certificates: bool,
}

impl ServerTls {
    /// From PEM bytes: the chain (leaf first), its private key (PKCS#8, PKCS#1 or
    /// SEC1), and optionally the CA certificates client certificates must chain to.
    pub fn from_pem(cert: &[u8], key_pem: &[u8], client_ca: Option<&[u8]>) -> Result<Self> {
        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| config_error("TLS versions", e))?;
        let builder = match client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots("client CA", ca)?),
                    provider(),
                )
                .build()
                .map_err(|e| config_error("client CA", e))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder
            .with_single_cert(certs("certificate", cert)?, key("key", key_pem)?)
            .map_err(|e| config_error("certificate and key", e))?;
        Ok(Self {
            config: Arc::new(config),
            client_certificates: client_ca.is_some(),
        })
    }

    /// From PEM files (`--tls-cert`, `--tls-key`, `--tls-client-ca`).
    pub fn from_pem_files(cert: &Path, key: &Path, client_ca: Option<&Path>) -> Result<Self> {
        let ca = client_ca.map(|p| read("client CA", p)).transpose()?;
        Self::from_pem(
            &read("certificate", cert)?,
            &read("key", key)?,
            ca.as_deref(),
        )
    }

    /// Whether clients must present a certificate.
    pub fn requires_client_certificates(&self) -> bool {
        self.client_certificates
    }
}

/// A client's TLS configuration: the CA it trusts, the name the server's certificate
/// must carry (default: the host of the address connected to), and optionally its own
/// certificate for servers that admit only known clients.
#[derive(Clone, Debug)]
pub struct ClientTls {
    pub(crate) config: Arc<ClientConfig>,
    pub(crate) server_name: Option<String>,
}

impl ClientTls {
    /// From PEM bytes: the trusted CA certificates and an optional client identity
    /// (chain, key).
    pub fn from_pem(ca: &[u8], identity: Option<(&[u8], &[u8])>) -> Result<Self> {
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| config_error("TLS versions", e))?
            .with_root_certificates(roots("CA", ca)?);
        let config = match identity {
            None => builder.with_no_client_auth(),
            Some((cert, key_pem)) => builder
                .with_client_auth_cert(
                    certs("client certificate", cert)?,
                    key("client key", key_pem)?,
                )
                .map_err(|e| config_error("client certificate and key", e))?,
        };
        Ok(Self {
            config: Arc::new(config),
            server_name: None,
        })
    }

    /// From PEM files (`--tls-ca`, `--tls-cert`, `--tls-key`).
    pub fn from_pem_files(ca: &Path, identity: Option<(&Path, &Path)>) -> Result<Self> {
        let identity = identity
            .map(|(c, k)| Ok::<_, NetError>((read("certificate", c)?, read("key", k)?)))
            .transpose()?;
        Self::from_pem(
            &read("CA", ca)?,
            identity.as_ref().map(|(c, k)| (c.as_slice(), k.as_slice())),
        )
    }

    /// The name the server's certificate must carry (a DNS name or an IP address),
    /// instead of the host part of the address.
    pub fn with_server_name(mut self, name: &str) -> Self {
        self.server_name = Some(name.to_string());
        self
    }

    /// The name to verify for a connection to `addr` (`host:port`).
    pub(crate) fn name_for(&self, addr: &str) -> Result<ServerName<'static>> {
        let host = match &self.server_name {
            Some(n) => n.as_str(),
            None => {
                let h = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
                h.trim_start_matches('[').trim_end_matches(']')
            }
        };
        ServerName::try_from(host.to_string()).map_err(|e| NetError::TlsConfig {
            detail: format!("server name `{host}`: {e}"),
        })
    }
}
