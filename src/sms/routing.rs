//! Routing and failover: the route whose calling code (`+86`, `+1`) is the longest prefix of
//! the number picks an ordered list of providers, or the default route does. A retryable
//! failure (the provider did not take the message) tries the next provider with the same
//! code; a success, a final failure (a provider's throttling included) or an unconfirmed
//! attempt ends the send. Attempts run one
//! after another, so at most one provider ever accepts a given send.

use std::sync::Arc;

use async_trait::async_trait;

use super::{SmsError, SmsMessage, SmsReceipt, SmsSender};

/// A provider's name and its sender.
pub type Provider = (&'static str, Arc<dyn SmsSender>);

/// Providers in failover order; never empty.
pub type Providers = Vec<Provider>;

pub struct SmsRouter {
    /// (calling code with `+`, providers), longest code first.
    routes: Vec<(String, Providers)>,
    default_route: Providers,
}

impl SmsRouter {
    /// `routes` by calling code and the `default_route` for other numbers; every list is
    /// non-empty (the settings check it).
    pub fn new(mut routes: Vec<(String, Providers)>, default_route: Providers) -> Self {
        routes.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        Self {
            routes,
            default_route,
        }
    }

    /// The providers for `e164`, in failover order.
    pub fn providers_for(&self, e164: &str) -> &Providers {
        self.routes
            .iter()
            .find(|(code, _)| e164.starts_with(code.as_str()))
            .map_or(&self.default_route, |(_, providers)| providers)
    }
}

#[async_trait]
impl SmsSender for SmsRouter {
    async fn send(&self, message: &SmsMessage<'_>) -> Result<SmsReceipt, SmsError> {
        let providers = self.providers_for(message.phone.as_e164());
        let mut last_error = None;
        for (index, (name, sender)) in providers.iter().enumerate() {
            if let Some(previous) = &last_error {
                tracing::warn!(
                    phone = %message.phone, purpose = %message.purpose, provider = name,
                    error = %previous, "SMS failing over to the next provider with the same code"
                );
            }
            match sender.send(message).await {
                Ok(receipt) => return Ok(receipt),
                Err(error) if error.kind().allows_failover() && index + 1 < providers.len() => {
                    last_error = Some(error);
                }
                Err(error) => return Err(error),
            }
        }
        Err(last_error.expect("a route has at least one provider"))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;
    use crate::domain::{Code, CodeLength, Phone, Purpose, Region};
    use crate::sms::SmsErrorKind;

    /// Answers from a script, one per call, and records who was called.
    struct Scripted {
        name: &'static str,
        answers: Mutex<Vec<Result<(), SmsErrorKind>>>,
        calls: Arc<Mutex<Vec<&'static str>>>,
    }

    #[async_trait]
    impl SmsSender for Scripted {
        async fn send(&self, _message: &SmsMessage<'_>) -> Result<SmsReceipt, SmsError> {
            self.calls.lock().unwrap().push(self.name);
            match self.answers.lock().unwrap().remove(0) {
                Ok(()) => Ok(SmsReceipt {
                    provider: self.name,
                    message_id: Some(format!("{}-1", self.name)),
                }),
                Err(kind) => Err(SmsError::new(self.name, kind, "scripted", "scripted")),
            }
        }
    }

    fn provider(
        name: &'static str,
        answer: Result<(), SmsErrorKind>,
        calls: &Arc<Mutex<Vec<&'static str>>>,
    ) -> (&'static str, Arc<dyn SmsSender>) {
        let sender = Scripted {
            name,
            answers: Mutex::new(vec![answer]),
            calls: calls.clone(),
        };
        (name, Arc::new(sender))
    }

    async fn send(router: &SmsRouter, number: &str) -> Result<SmsReceipt, SmsError> {
        let phone = Phone::parse(number, Region::default()).unwrap();
        let code = Code::generate(CodeLength::default());
        let message = SmsMessage {
            phone: &phone,
            purpose: &Purpose::default(),
            code: &code,
            expires_in: Duration::from_secs(300),
            locale: None,
            tenant: None,
        };
        router.send(&message).await
    }

    #[tokio::test]
    async fn numbers_take_the_route_of_their_longest_calling_code() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let router = SmsRouter::new(
            vec![
                ("+1".to_owned(), vec![provider("us", Ok(()), &calls)]),
                ("+86".to_owned(), vec![provider("cn", Ok(()), &calls)]),
                ("+1876".to_owned(), vec![provider("jm", Ok(()), &calls)]),
            ],
            vec![provider("world", Ok(()), &calls)],
        );
        assert_eq!(
            send(&router, "+8613800138000").await.unwrap().provider,
            "cn"
        );
        assert_eq!(send(&router, "+18765550123").await.unwrap().provider, "jm");
        assert_eq!(send(&router, "+12025550123").await.unwrap().provider, "us");
        assert_eq!(
            send(&router, "+442071838750").await.unwrap().provider,
            "world"
        );
        assert_eq!(*calls.lock().unwrap(), ["cn", "jm", "us", "world"]);
    }

    #[tokio::test]
    async fn only_a_retryable_failure_fails_over() {
        use SmsErrorKind::*;
        for (first, expected_calls, delivered_by) in [
            (Err(Retryable), vec!["a", "b"], Some("b")),
            (Err(InvalidNumber), vec!["a"], None),
            (Err(Rejected), vec!["a"], None),
            (Err(Throttled), vec!["a"], None),
            (Err(Unconfirmed), vec!["a"], None),
            (Ok(()), vec!["a"], Some("a")),
        ] {
            let calls = Arc::new(Mutex::new(Vec::new()));
            let router = SmsRouter::new(
                Vec::new(),
                vec![provider("a", first, &calls), provider("b", Ok(()), &calls)],
            );
            let result = send(&router, "+8613800138000").await;
            assert_eq!(*calls.lock().unwrap(), expected_calls, "{first:?}");
            assert_eq!(result.ok().map(|r| r.provider), delivered_by, "{first:?}");
        }
    }

    #[tokio::test]
    async fn the_last_providers_error_is_returned_when_all_fail() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let router = SmsRouter::new(
            Vec::new(),
            vec![
                provider("a", Err(SmsErrorKind::Retryable), &calls),
                provider("b", Err(SmsErrorKind::Retryable), &calls),
                provider("c", Err(SmsErrorKind::Rejected), &calls),
            ],
        );
        let error = send(&router, "+8613800138000").await.unwrap_err();
        assert_eq!(
            (error.provider(), error.kind()),
            ("c", SmsErrorKind::Rejected)
        );
        assert_eq!(*calls.lock().unwrap(), ["a", "b", "c"]);
    }
}
