//! `helina tls-certs`: a throwaway certificate authority with one server and one client
//! certificate (rcgen), for trying TLS, tests and `bench serve --tls`. Production
//! servers use certificates from their own CA (or an ACME client); these have a fresh
//! key each and are written with the CA's key discarded.

use std::path::{Path, PathBuf};

use clap::Args;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

#[derive(Args)]
pub struct TlsCertsArgs {
    /// Folder to write ca.pem, server.pem, server.key, client.pem, client.key into.
    #[arg(long)]
    out: PathBuf,
    /// Names (DNS names or IP addresses) the server certificate is valid for.
    #[arg(long = "name", default_values_t = ["localhost".to_string(), "127.0.0.1".to_string()])]
    names: Vec<String>,
}

/// The files of a development PKI.
pub struct DevPki {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

/// Writes a CA and a server and a client certificate signed by it into `dir`.
pub fn write_dev_pki(dir: &Path, names: &[String]) -> Res<DevPki> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "helina development CA");
    let ca_pem = ca.self_signed(&ca_key)?.pem();
    let issuer = Issuer::from_params(&ca, &ca_key);
    let leaf = |names: Vec<String>, cn: &str| -> Res<(String, String)> {
        let key = KeyPair::generate()?;
        let mut p = CertificateParams::new(names)?;
        p.distinguished_name.push(DnType::CommonName, cn);
        Ok((p.signed_by(&key, &issuer)?.pem(), key.serialize_pem()))
    };
    let (server_pem, server_key) = leaf(names.to_vec(), "helina server")?;
    let (client_pem, client_key) = leaf(vec!["helina-client".into()], "helina client")?;
    let pki = DevPki {
        ca: dir.join("ca.pem"),
        server_cert: dir.join("server.pem"),
        server_key: dir.join("server.key"),
        client_cert: dir.join("client.pem"),
        client_key: dir.join("client.key"),
    };
    for (path, text) in [
        (&pki.ca, &ca_pem),
        (&pki.server_cert, &server_pem),
        (&pki.server_key, &server_key),
        (&pki.client_cert, &client_pem),
        (&pki.client_key, &client_key),
    ] {
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(pki)
}

pub fn run(a: &TlsCertsArgs) -> Res<()> {
    let pki = write_dev_pki(&a.out, &a.names)?;
    eprintln!(
        "development certificates in {} (server valid for {}):\n  helina server ... --tls-cert {} --tls-key {} [--tls-client-ca {}]\n  helina client ... --tls-ca {} [--tls-cert {} --tls-key {}]",
        a.out.display(),
        a.names.join(", "),
        pki.server_cert.display(),
        pki.server_key.display(),
        pki.ca.display(),
        pki.ca.display(),
        pki.client_cert.display(),
        pki.client_key.display(),
    );
    Ok(())
}
