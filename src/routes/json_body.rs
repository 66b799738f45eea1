//! A JSON body read in place: the bytes checked as `web::Json` checks them, then parsed by the
//! handler into fields that borrow from them. `web::Json` needs owned fields (a `String` each)
//! and boxes its reading future; on the verify path both showed in the profile.

use std::borrow::Cow;
use std::fmt;

use actix_web::dev::Payload;
use actix_web::error::{JsonPayloadError, PayloadError};
use actix_web::http::header::CONTENT_TYPE;
use actix_web::mime;
use actix_web::web::{Bytes, BytesMut};
use actix_web::{FromRequest, HttpMessage, HttpRequest};
use futures_util::future::{Either, LocalBoxFuture, Ready, ready};
use futures_util::{FutureExt, StreamExt};
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

use super::ApiError;

/// A body with a JSON content type, whole and unparsed. Its size is `hardening::bounded_body`'s to
/// limit, with the same limit as the app's `JsonConfig`.
pub struct JsonBytes(Bytes);

impl JsonBytes {
    /// The body as `T`, refused as `web::Json` refuses it.
    pub fn parse<'a, T: Deserialize<'a>>(&'a self) -> Result<T, ApiError> {
        serde_json::from_slice(&self.0)
            .map_err(|error| super::json_error(JsonPayloadError::Deserialize(error)))
    }
}

impl FromRequest for JsonBytes {
    type Error = ApiError;
    type Future =
        Either<Ready<Result<Self, ApiError>>, LocalBoxFuture<'static, Result<Self, ApiError>>>;

    fn from_request(request: &HttpRequest, payload: &mut Payload) -> Self::Future {
        if !is_json(request) {
            return Either::Left(ready(Err(super::json_error(JsonPayloadError::ContentType))));
        }
        let mut payload = payload.take();
        let mut body = Body::default();
        // `hardening::bounded_body` has read the body whole already: it is all here, and read without a
        // boxed future; only a body still arriving (no such route now) waits in one.
        loop {
            match payload.next().now_or_never() {
                Some(Some(chunk)) => {
                    if let Err(error) = body.push(chunk) {
                        return Either::Left(ready(Err(error)));
                    }
                }
                Some(None) => return Either::Left(ready(Ok(Self(body.finish())))),
                None => break,
            }
        }
        Either::Right(
            async move {
                while let Some(chunk) = payload.next().await {
                    body.push(chunk)?;
                }
                Ok(Self(body.finish()))
            }
            .boxed_local(),
        )
    }
}

/// A body's chunks; one chunk (the usual) is kept as it came, uncopied.
#[derive(Default)]
struct Body {
    first: Option<Bytes>,
    rest: BytesMut,
}

impl Body {
    fn push(&mut self, chunk: Result<Bytes, PayloadError>) -> Result<(), ApiError> {
        let chunk = chunk.map_err(|error| super::json_error(JsonPayloadError::Payload(error)))?;
        match self.first {
            None => self.first = Some(chunk),
            Some(_) => self.rest.extend_from_slice(&chunk),
        }
        Ok(())
    }

    fn finish(self) -> Bytes {
        match self.first {
            None => Bytes::new(),
            Some(first) if self.rest.is_empty() => first,
            Some(first) => [first, self.rest.freeze()].concat().into(),
        }
    }
}

/// `web::Json`'s test: a media type whose subtype or suffix is `json`; the common spelling
/// is taken without parsing it (the parse allocates).
fn is_json(request: &HttpRequest) -> bool {
    let exact = request
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"application/json"));
    exact
        || matches!(request.mime_type(), Ok(Some(mime))
            if mime.subtype() == mime::JSON || mime.suffix() == Some(mime::JSON))
}

/// A JSON string borrowed from the body, or owned where it held an escape (which serde must
/// unescape into a buffer of its own).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Text<'a>(Cow<'a, str>);

impl Text<'_> {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;

        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }

            fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(text)))
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(text.to_owned())))
            }

            fn visit_string<E: de::Error>(self, text: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(text)))
            }
        }

        deserializer.deserialize_str(TextVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Fields<'a> {
        #[serde(borrow)]
        plain: Text<'a>,
        #[serde(borrow)]
        escaped: Text<'a>,
        #[serde(default, borrow)]
        absent: Option<Text<'a>>,
    }

    #[test]
    fn borrows_plain_strings_and_unescapes_the_others() {
        let body = br#"{"plain": "+8613800138000", "escaped": "a\"b\u00e9"}"#;
        let fields: Fields<'_> = serde_json::from_slice(body).unwrap();
        assert!(matches!(fields.plain.0, Cow::Borrowed("+8613800138000")));
        assert_eq!(fields.escaped.as_str(), "a\"b\u{e9}");
        assert!(fields.absent.is_none());
    }

    #[test]
    fn refuses_what_is_no_string() {
        let error = serde_json::from_slice::<Fields<'_>>(br#"{"plain": 5, "escaped": ""}"#)
            .err()
            .unwrap();
        assert_eq!(error.classify(), serde_json::error::Category::Data);
    }
}
