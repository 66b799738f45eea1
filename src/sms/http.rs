//! The HTTP client every provider sender uses: one `reqwest` client per provider with its own
//! timeout, no redirects followed, no proxy from the environment, and transport failures
//! classified by whether the request can have reached the provider.

use std::fmt;
use std::time::Duration;

use super::throttle::{self, ThrottleWindow};
use super::{SmsError, SmsErrorKind};

/// The largest provider answer read; theirs are a few hundred bytes.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// A request as signed: the senders build it as a pure function of the message, the clock and
/// a nonce, so that tests can compare it with the providers' own SDKs.
#[derive(Clone)]
pub struct PreparedRequest {
    pub method: reqwest::Method,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl PreparedRequest {
    /// The value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Header values are left out: `Authorization` holds a credential (Twilio's is the token).
impl fmt::Debug for PreparedRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("PreparedRequest")
            .field("method", &self.method)
            .field("url", &self.url)
            .field("headers", &names)
            .field("body_bytes", &self.body.len())
            .finish()
    }
}

/// What the provider answered.
#[derive(Clone, Debug)]
pub struct HttpAnswer {
    pub status: u16,
    pub body: String,
    /// The `Retry-After` header, in seconds, if the answer had one.
    pub retry_after: Option<Duration>,
}

pub struct ProviderClient {
    provider: &'static str,
    client: reqwest::Client,
    timeout: Duration,
}

impl ProviderClient {
    pub fn new(provider: &'static str, timeout: Duration) -> Result<Self, SmsError> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            // A redirect would resend a signed request (and Basic credentials) elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            // HTTP(S)_PROXY and ALL_PROXY are ignored: a variable left in a container's
            // environment must not route codes and credentials through a host nobody chose.
            .no_proxy()
            .user_agent(concat!("vcode/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| SmsError::misconfigured(provider, e.to_string()))?;
        Ok(Self {
            provider,
            client,
            timeout,
        })
    }

    /// Sends `request`; any HTTP answer is `Ok`, for the provider's own rules to classify.
    pub async fn execute(&self, request: PreparedRequest) -> Result<HttpAnswer, SmsError> {
        let mut builder = self
            .client
            .request(request.method, &request.url)
            .body(request.body);
        for (name, value) in &request.headers {
            builder = builder.header(name, value);
        }
        let response = builder.send().await.map_err(|e| self.transport_error(e))?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(throttle::parse_retry_after);
        let body = read_limited(response)
            .await
            .map_err(|e| self.transport_error(e))?;
        Ok(HttpAnswer {
            status,
            body,
            retry_after,
        })
    }

    /// A connection that never opened carried nothing: another provider may try. Anything
    /// later (a timeout, a cut connection) may have delivered the message.
    fn transport_error(&self, error: reqwest::Error) -> SmsError {
        let provider = self.provider;
        // Without the URL: a base URL may carry credentials of a proxy.
        let error = error.without_url();
        if error.is_builder() {
            SmsError::misconfigured(provider, error.to_string())
        } else if error.is_connect() {
            SmsError::new(
                provider,
                SmsErrorKind::Retryable,
                "connect",
                error.to_string(),
            )
        } else if error.is_timeout() {
            SmsError::timeout(provider, self.timeout)
        } else {
            SmsError::new(
                provider,
                SmsErrorKind::Unconfirmed,
                "transport",
                error.to_string(),
            )
        }
    }
}

async fn read_limited(mut response: reqwest::Response) -> Result<String, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = MAX_ANSWER_BYTES.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if room <= chunk.len() {
            break;
        }
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// The classification shared by every provider for answers their own codes do not cover: 429
/// is the provider's limit (final, for its `Retry-After` or a minute), 5xx did not take the
/// message, other non-2xx statuses are settings problems.
pub fn classify_status(provider: &'static str, answer: &HttpAnswer) -> SmsError {
    let code = format!("http_{}", answer.status);
    let kind = match answer.status {
        429 => {
            let detail = excerpt(&answer.body);
            return throttle::throttled(
                provider,
                answer.retry_after,
                code,
                detail,
                ThrottleWindow::Minute,
            );
        }
        500..=599 => SmsErrorKind::Retryable,
        _ => SmsErrorKind::Rejected,
    };
    SmsError::new(provider, kind, code, excerpt(&answer.body))
}

/// The first 200 characters of a provider's answer, for a log line.
pub fn excerpt(body: &str) -> String {
    let mut text: String = body.chars().take(200).collect();
    if text.len() < body.len() {
        text.push('…');
    }
    text
}
