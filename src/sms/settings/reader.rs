//! What every provider's reader shares: required values, secrets, and the templates (the
//! file's, overridden by the variables').

use secrecy::{ExposeSecret, SecretString};

use super::templates::{TemplateSet, resolve_templates};
use super::*;

/// `VCODE_ALIYUN_TEMPLATE_RESET_PASSWORD`: the template id for one purpose.
pub(super) fn purpose_variable(table: Table, purpose: &str) -> String {
    let purpose = purpose.to_ascii_uppercase().replace('-', "_");
    format!("{}TEMPLATE_{purpose}", table.prefix)
}

pub(super) struct ProviderReader<'a> {
    pub(super) sources: &'a Sources,
    pub(super) lookup: &'a dyn Fn(&str) -> Option<String>,
    pub(super) purposes: &'a [String],
}

impl ProviderReader<'_> {
    /// `name`'s value, required because a route names its provider.
    pub(super) fn required(
        &self,
        value: Option<String>,
        name: &str,
        what: &str,
    ) -> Result<String, ConfigError> {
        value.ok_or_else(|| {
            ConfigError::invalid(
                name,
                "",
                format!("{what} is required when a route names this provider"),
            )
        })
    }

    pub(super) fn secret(&self, secret: SecretVariable) -> Result<SecretString, ConfigError> {
        match secret.read(self.lookup)? {
            Some((value, _)) => Ok(SecretString::from(value.expose_secret().to_owned())),
            None => Err(ConfigError::invalid(
                secret.name,
                "",
                format!(
                    "required when a route names this provider (or {}: a file holding it)",
                    secret.file
                ),
            )),
        }
    }

    /// The provider's templates: the file's over the variables' (`…_TEMPLATE`,
    /// `…_SIGN_NAME`, `…_TEMPLATE_<PURPOSE>`), which override it.
    pub(super) fn templates(
        &self,
        table: Table,
        mut set: TemplateSet,
        default_params: &[(&str, TemplateValue)],
    ) -> Result<ProviderTemplates, ConfigError> {
        for purpose in self.purposes {
            let name = purpose_variable(table, purpose);
            if let Some(id) = (self.lookup)(&name).filter(|id| !id.trim().is_empty()) {
                set.templates.entry(purpose.clone()).or_default().template =
                    Some(id.trim().to_owned());
            }
        }
        let provider = &table.path["sms.".len()..];
        let sign_name_required = table.path == ALIYUN.path;
        let default_params: Vec<(String, TemplateValue)> = default_params
            .iter()
            .map(|(name, value)| ((*name).to_owned(), *value))
            .collect();
        resolve_templates(table.path, &set, sign_name_required, default_params).map_err(
            |reason| {
                ConfigError::Inconsistent(format!(
                    "{reason}: set {prefix}TEMPLATE (every purpose) or {prefix}TEMPLATE_<PURPOSE>, or sms.{provider}.templates in the config file",
                    prefix = table.prefix
                ))
            },
        )
    }
}
