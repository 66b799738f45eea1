//! The private CA file both network stores may trust instead of the public roots
//! (`VCODE_REDIS_CA_FILE`, `VCODE_DATABASE_CA_FILE`): read and checked once, here.

use std::path::Path;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// The PEM text of a CA file, once it is known to hold at least one usable CA certificate:
/// a file that trusts nothing would fail every connection instead of start-up.
pub fn read_ca_file(path: &Path) -> Result<Vec<u8>, String> {
    ca_roots(path).map(|(pem, _)| pem)
}

/// The file's PEM text and the certificates in it as a rustls root store.
pub fn ca_roots(path: &Path) -> Result<(Vec<u8>, rustls::RootCertStore), String> {
    let shown = path.display();
    let pem = std::fs::read(path).map_err(|error| format!("cannot read {shown}: {error}"))?;
    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(&pem) {
        let certificate =
            certificate.map_err(|error| format!("{shown}: not a PEM certificate: {error}"))?;
        roots
            .add(certificate)
            .map_err(|error| format!("{shown}: not a CA certificate: {error}"))?;
    }
    if roots.is_empty() {
        return Err(format!("{shown} holds no PEM certificate"));
    }
    Ok((pem, roots))
}
