//! How vcode reaches Redis, read from the `VCODE_REDIS_*` variables: one node, a Cluster or a
//! Sentinel-watched primary (exactly one of them; none is the embedded store), the timeouts and
//! a private CA for `rediss://`. `RedisVariables` is the variables as given, each field's serde
//! name its variable; `RedisVariables::settings` checks how they go together.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::tls::read_ca_file;
use crate::config::error::ConfigError;
use crate::config::redact::redact_url;
use crate::config::secret::{Secret, SecretVariable};
use crate::config::text::{Flag, Millis, OptionalText};

#[derive(Clone, Debug)]
pub struct RedisSettings {
    pub topology: RedisTopology,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    /// PEM certificates of the private CA that `rediss://` servers are verified against, in
    /// place of the public roots (`VCODE_REDIS_CA_FILE`).
    pub ca_file: Option<PathBuf>,
    /// Instances of a build from before 2026-12-07 share the Redis (a rolling upgrade:
    /// `VCODE_REDIS_OLDER_INSTANCES`): write every verification as they read it, under its
    /// name before (`…:verification:<id>`), bound by the code's whole digest, with a target key
    /// for every id (builds before 2026-12-06 find an id only by it).
    pub older_instances: bool,
}

/// Where the data lives; the store code and the scripts are the same on all three. `Debug`
/// hides the URLs' passwords, so settings can be printed and logged.
#[derive(Clone, PartialEq, Eq)]
pub enum RedisTopology {
    /// One node (`VCODE_REDIS_URL`).
    Single { url: String },
    /// A Redis Cluster, discovered from any of these seed nodes (`VCODE_REDIS_CLUSTER_NODES`).
    Cluster { nodes: Vec<String> },
    /// The primary that these sentinels name `master` (`VCODE_REDIS_SENTINELS`,
    /// `VCODE_REDIS_SENTINEL_MASTER`). The sentinel URLs' user and password log in to the
    /// sentinels; `master_credentials` to the data nodes, which use TLS if the sentinels do.
    Sentinel {
        sentinels: Vec<String>,
        master: String,
        master_credentials: Option<RedisCredentials>,
    },
}

/// A Redis login: an ACL user, or `default` (`requirepass`) without one. The password is a
/// [`Secret`]: `Debug` shows `***`.
#[derive(Clone, Debug)]
pub struct RedisCredentials {
    pub username: Option<String>,
    pub password: Secret,
}

impl PartialEq for RedisCredentials {
    /// For settings compared in tests; nothing compares a presented password with this.
    fn eq(&self, other: &Self) -> bool {
        use secrecy::ExposeSecret;
        self.username == other.username
            && self.password.expose_secret() == other.password.expose_secret()
    }
}

impl Eq for RedisCredentials {}

impl std::fmt::Debug for RedisTopology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let redacted =
            |urls: &[String]| -> Vec<String> { urls.iter().map(|u| redact_url(u)).collect() };
        match self {
            Self::Single { url } => f
                .debug_struct("Single")
                .field("url", &redact_url(url))
                .finish(),
            Self::Cluster { nodes } => f
                .debug_struct("Cluster")
                .field("nodes", &redacted(nodes))
                .finish(),
            Self::Sentinel {
                sentinels,
                master,
                master_credentials,
            } => f
                .debug_struct("Sentinel")
                .field("sentinels", &redacted(sentinels))
                .field("master", master)
                .field("master_credentials", master_credentials)
                .finish(),
        }
    }
}

/// The password of the data nodes behind Sentinel; the sentinels' own is in their URLs.
pub const SENTINEL_MASTER_PASSWORD: SecretVariable = SecretVariable::new(
    "VCODE_REDIS_SENTINEL_MASTER_PASSWORD",
    "VCODE_REDIS_SENTINEL_MASTER_PASSWORD_FILE",
);

/// The `VCODE_REDIS_*` variables as given (no `Debug`: the URLs hold passwords).
#[derive(Deserialize, Serialize)]
#[serde(default)]
pub struct RedisVariables {
    #[serde(rename = "VCODE_REDIS_URL", with = "OptionalText")]
    pub url: Option<String>,
    #[serde(rename = "VCODE_REDIS_CLUSTER_NODES", with = "OptionalText")]
    pub cluster_nodes: Option<String>,
    #[serde(rename = "VCODE_REDIS_SENTINELS", with = "OptionalText")]
    pub sentinels: Option<String>,
    #[serde(rename = "VCODE_REDIS_SENTINEL_MASTER", with = "OptionalText")]
    pub sentinel_master: Option<String>,
    #[serde(rename = "VCODE_REDIS_SENTINEL_MASTER_USERNAME", with = "OptionalText")]
    pub sentinel_master_username: Option<String>,
    #[serde(rename = "VCODE_REDIS_CA_FILE", with = "OptionalText")]
    pub ca_file: Option<String>,
    #[serde(
        rename = "VCODE_REDIS_CONNECT_TIMEOUT_MS",
        with = "Millis::<10, 60_000>"
    )]
    pub connect_timeout: Duration,
    #[serde(
        rename = "VCODE_REDIS_COMMAND_TIMEOUT_MS",
        with = "Millis::<10, 60_000>"
    )]
    pub command_timeout: Duration,
    #[serde(rename = "VCODE_REDIS_OLDER_INSTANCES", with = "Flag")]
    pub older_instances: bool,
}

impl Default for RedisVariables {
    fn default() -> Self {
        Self {
            url: None,
            cluster_nodes: None,
            sentinels: None,
            sentinel_master: None,
            sentinel_master_username: None,
            ca_file: None,
            connect_timeout: Duration::from_millis(1000),
            command_timeout: Duration::from_millis(500),
            older_instances: false,
        }
    }
}

impl RedisVariables {
    /// The Redis settings, or `None` for the embedded store; `master_password` is
    /// [`SENTINEL_MASTER_PASSWORD`]'s value.
    pub fn settings(
        self,
        master_password: Option<Secret>,
    ) -> Result<Option<RedisSettings>, ConfigError> {
        let ca_file = self.ca_file.clone();
        let (connect_timeout, command_timeout) = (self.connect_timeout, self.command_timeout);
        let older_instances = self.older_instances;
        let Some(topology) = self.topology(master_password)? else {
            return Ok(None);
        };
        Ok(Some(RedisSettings {
            ca_file: ca_file_for(ca_file, &topology)?,
            topology,
            connect_timeout,
            command_timeout,
            older_instances,
        }))
    }

    fn topology(
        self,
        master_password: Option<Secret>,
    ) -> Result<Option<RedisTopology>, ConfigError> {
        let set: Vec<&str> = [
            ("VCODE_REDIS_URL", self.url.is_some()),
            ("VCODE_REDIS_CLUSTER_NODES", self.cluster_nodes.is_some()),
            (
                "VCODE_REDIS_SENTINELS",
                self.sentinels.is_some() || self.sentinel_master.is_some(),
            ),
        ]
        .into_iter()
        .filter_map(|(var, is_set)| is_set.then_some(var))
        .collect();
        if set.len() > 1 {
            return Err(ConfigError::Inconsistent(format!(
                "set one of VCODE_REDIS_URL (one node), VCODE_REDIS_CLUSTER_NODES (Cluster) or \
                 VCODE_REDIS_SENTINELS with VCODE_REDIS_SENTINEL_MASTER (Sentinel), not {}",
                set.join(" and ")
            )));
        }
        let master_credentials = match (self.sentinel_master_username, master_password) {
            (None, None) => None,
            (username, Some(password)) => Some(RedisCredentials { username, password }),
            (Some(_), None) => {
                return Err(ConfigError::Inconsistent(
                    "VCODE_REDIS_SENTINEL_MASTER_USERNAME needs VCODE_REDIS_SENTINEL_MASTER_PASSWORD"
                        .to_owned(),
                ));
            }
        };
        if master_credentials.is_some() && self.sentinels.is_none() {
            return Err(ConfigError::Inconsistent(
                "VCODE_REDIS_SENTINEL_MASTER_USERNAME and VCODE_REDIS_SENTINEL_MASTER_PASSWORD log \
                 in to the primary that Sentinel names and need VCODE_REDIS_SENTINELS; for one node \
                 or a Cluster, put user and password in the URLs"
                    .to_owned(),
            ));
        }
        if let Some(url) = self.url {
            if !is_redis_url(&url) {
                return Err(ConfigError::invalid(
                    "VCODE_REDIS_URL",
                    redact_url(&url),
                    "expected redis://host:port[/db]",
                ));
            }
            refuse_insecure("VCODE_REDIS_URL", &url)?;
            return Ok(Some(RedisTopology::Single { url }));
        }
        if let Some(nodes) = self.cluster_nodes {
            let nodes = redis_urls("VCODE_REDIS_CLUSTER_NODES", &nodes)?;
            return Ok(Some(RedisTopology::Cluster { nodes }));
        }
        match (self.sentinels, self.sentinel_master) {
            (None, None) => Ok(None),
            (Some(sentinels), Some(master)) => {
                let sentinels = redis_urls("VCODE_REDIS_SENTINELS", &sentinels)?;
                let name_char = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
                if !master.chars().all(name_char) {
                    return Err(ConfigError::invalid(
                        "VCODE_REDIS_SENTINEL_MASTER",
                        master,
                        "expected the name the sentinels monitor, such as mymaster",
                    ));
                }
                Ok(Some(RedisTopology::Sentinel {
                    sentinels,
                    master,
                    master_credentials,
                }))
            }
            _ => Err(ConfigError::Inconsistent(
                "VCODE_REDIS_SENTINELS and VCODE_REDIS_SENTINEL_MASTER go together".to_owned(),
            )),
        }
    }
}

/// `VCODE_REDIS_CA_FILE`: a readable PEM file of CA certificates, for `rediss://` URLs only
/// (with `redis://` it would protect nothing).
fn ca_file_for(
    raw: Option<String>,
    topology: &RedisTopology,
) -> Result<Option<PathBuf>, ConfigError> {
    const VAR: &str = "VCODE_REDIS_CA_FILE";
    let Some(raw) = raw else {
        return Ok(None);
    };
    let first_url = match topology {
        RedisTopology::Single { url } => url,
        RedisTopology::Cluster { nodes } => &nodes[0],
        RedisTopology::Sentinel { sentinels, .. } => &sentinels[0],
    };
    if !first_url.starts_with("rediss://") {
        return Err(ConfigError::Inconsistent(format!(
            "{VAR} verifies rediss:// servers, but the Redis URLs are redis://"
        )));
    }
    let path = PathBuf::from(&raw);
    read_ca_file(&path).map_err(|reason| ConfigError::invalid(VAR, raw, reason))?;
    Ok(Some(path))
}

fn is_redis_url(url: &str) -> bool {
    url.starts_with("redis://") || url.starts_with("rediss://")
}

/// `#insecure` would make the redis crate accept any certificate: never honoured.
fn refuse_insecure(var: &str, url: &str) -> Result<(), ConfigError> {
    match url.split_once('#') {
        Some((_, "insecure")) => Err(ConfigError::invalid(
            var,
            redact_url(url),
            "#insecure would skip verifying the server's certificate; vcode always \
             verifies it (VCODE_REDIS_CA_FILE trusts a private CA)",
        )),
        _ => Ok(()),
    }
}

/// A comma-separated list of one or more `redis://` or `rediss://` URLs, all of one scheme:
/// the nodes found through them are reached the same way.
fn redis_urls(var: &str, raw: &str) -> Result<Vec<String>, ConfigError> {
    let urls: Vec<String> = raw.split(',').map(|url| url.trim().to_owned()).collect();
    let shown = || {
        urls.iter()
            .map(|url| redact_url(url))
            .collect::<Vec<_>>()
            .join(",")
    };
    if !urls.iter().all(|url| is_redis_url(url)) {
        return Err(ConfigError::invalid(
            var,
            shown(),
            "expected comma-separated redis://host:port URLs",
        ));
    }
    let tls = urls
        .iter()
        .filter(|url| url.starts_with("rediss://"))
        .count();
    if tls != 0 && tls != urls.len() {
        return Err(ConfigError::invalid(
            var,
            shown(),
            "mixes redis:// and rediss://; use one scheme for all",
        ));
    }
    for url in &urls {
        refuse_insecure(var, url)?;
    }
    Ok(urls)
}
