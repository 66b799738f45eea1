//! TLS to Redis: which certificates a `rediss://` connection trusts (a private CA from
//! `VCODE_REDIS_CA_FILE`, else the public roots), the refusal of `#insecure` and of mixed
//! schemes, and the client every topology connects with.

use redis::{ConnectionAddr, ErrorKind, IntoConnectionInfo, RedisError, TlsCertificates};

use super::{RedisSettings, RedisTopology};
pub use crate::store::tls::read_ca_file;

/// The private CA every `rediss://` connection trusts instead of the public roots, if one is
/// set. Refuses `#insecure` URLs, which would skip verifying the server's certificate.
pub(super) fn tls_certificates(
    settings: &RedisSettings,
) -> Result<Option<TlsCertificates>, RedisError> {
    let urls: Vec<&String> = match &settings.topology {
        RedisTopology::Single { url } => vec![url],
        RedisTopology::Cluster { nodes } => nodes.iter().collect(),
        RedisTopology::Sentinel { sentinels, .. } => sentinels.iter().collect(),
    };
    let (mut uses_tls, mut uses_plain) = (false, false);
    for url in urls {
        match url.as_str().into_connection_info()?.addr() {
            ConnectionAddr::TcpTls { insecure: true, .. } => {
                return Err(invalid(
                    "a rediss:// URL ends in #insecure, which would accept any certificate; \
                     vcode always verifies it (VCODE_REDIS_CA_FILE trusts a private CA)"
                        .to_owned(),
                ));
            }
            ConnectionAddr::TcpTls { .. } => uses_tls = true,
            _ => uses_plain = true,
        }
    }
    if uses_tls && uses_plain {
        // One scheme holds for the nodes discovered too: half a list in TLS protects nothing.
        return Err(invalid(
            "the Redis URLs mix redis:// and rediss://; use one scheme for all".to_owned(),
        ));
    }
    if uses_tls {
        install_crypto_provider();
    }
    match &settings.ca_file {
        None => Ok(None),
        Some(_) if !uses_tls => Err(invalid(
            "VCODE_REDIS_CA_FILE is set, but the Redis URLs are redis://, not rediss://".to_owned(),
        )),
        Some(path) => Ok(Some(TlsCertificates {
            client_tls: None,
            root_cert: Some(read_ca_file(path).map_err(invalid)?),
        })),
    }
}

/// The redis crate builds its TLS settings with the process's default rustls provider. Ring is
/// installed unless another one was: with none installed and two compiled in (a dependency
/// may add aws-lc-rs), rustls would panic instead of choosing.
fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn invalid(reason: String) -> RedisError {
    RedisError::from((
        ErrorKind::InvalidClientConfig,
        "bad Redis TLS settings",
        reason,
    ))
}

/// A client for `url`, trusting `certificates` if it is a `rediss://` one.
pub(super) fn client(
    url: &str,
    certificates: Option<&TlsCertificates>,
) -> Result<redis::Client, RedisError> {
    let info = url.into_connection_info()?;
    match (info.addr(), certificates) {
        (ConnectionAddr::TcpTls { .. }, Some(certificates)) => {
            redis::Client::build_with_tls(info, certificates.clone())
        }
        _ => redis::Client::open(info),
    }
}
