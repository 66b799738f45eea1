//! The OpenAPI 3.1 description of the public listener (`GET /api/v1/openapi.json`), built from
//! what each area declares beside its routes (`describe` next to `config`): paths from
//! `vcode_wire::paths`, bodies and answers from the wire types' own schemas (`ToSchema`), the
//! error codes each operation can answer from `vcode_wire::ErrorCode`, grouped by HTTP status
//! with `code` enumerated. The operator listener (`/metrics`, `/api/v1/stats`) is out of scope.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use utoipa::ToSchema;
use vcode_wire::{ErrorCode, OK, OK_MESSAGE, RetryAfterData, WrongCodeData};

/// The errors every operation that reads a JSON body can answer, besides its own.
pub const BODY_ERRORS: [ErrorCode; 3] = [
    ErrorCode::Malformed,
    ErrorCode::BodyTimeout,
    ErrorCode::PayloadTooLarge,
];

/// The description being assembled: operations in declaration order, schemas by name.
#[derive(Default)]
pub struct Api {
    operations: Vec<ApiOperation>,
    schemas: Map<String, Value>,
    security_schemes: Map<String, Value>,
}

/// One method on one path.
pub struct ApiOperation {
    method: &'static str,
    path: &'static str,
    tag: &'static str,
    summary: &'static str,
    description: Option<&'static str>,
    /// A GET route that answers HEAD too: a `head` operation is described beside it.
    head: bool,
    parameters: Vec<Value>,
    body: Option<Value>,
    ok: Value,
    errors: Vec<ErrorCode>,
    security: Option<Value>,
}

impl Api {
    /// A GET operation that also answers HEAD (`routes::get`).
    pub fn get(
        &mut self,
        path: &'static str,
        tag: &'static str,
        summary: &'static str,
    ) -> &mut ApiOperation {
        self.push("get", path, tag, summary);
        let operation = self.operations.last_mut().expect("just pushed");
        operation.head = true;
        operation
    }

    /// A GET operation that does not answer HEAD (`routes::get_only_resource`).
    pub fn get_without_head(
        &mut self,
        path: &'static str,
        tag: &'static str,
        summary: &'static str,
    ) -> &mut ApiOperation {
        self.push("get", path, tag, summary)
    }

    pub fn post(
        &mut self,
        path: &'static str,
        tag: &'static str,
        summary: &'static str,
    ) -> &mut ApiOperation {
        self.push("post", path, tag, summary)
    }

    pub fn delete(
        &mut self,
        path: &'static str,
        tag: &'static str,
        summary: &'static str,
    ) -> &mut ApiOperation {
        self.push("delete", path, tag, summary)
    }

    fn push(
        &mut self,
        method: &'static str,
        path: &'static str,
        tag: &'static str,
        summary: &'static str,
    ) -> &mut ApiOperation {
        self.operations.push(ApiOperation {
            method,
            path,
            tag,
            summary,
            description: None,
            head: false,
            parameters: Vec::new(),
            body: None,
            ok: json!({"description": "ok"}),
            errors: Vec::new(),
            security: None,
        });
        self.operations.last_mut().expect("just pushed")
    }

    /// The operation last declared on `path`.
    pub fn operation_mut(&mut self, path: &str) -> &mut ApiOperation {
        self.operations
            .iter_mut()
            .rev()
            .find(|operation| operation.path == path)
            .expect("declared before")
    }

    /// A reference to the schema of `T`, registering it and the schemas it refers to.
    pub fn schema<T: ToSchema>(&mut self) -> Value {
        let mut named = Vec::new();
        T::schemas(&mut named);
        named.push((T::name().into_owned(), T::schema()));
        for (name, schema) in named {
            let schema = serde_json::to_value(schema).expect("schemas serialise");
            self.schemas.insert(name, schema);
        }
        json!({"$ref": format!("#/components/schemas/{}", T::name())})
    }

    /// A security scheme operations may require (`ApiOperation::security`).
    pub fn security_scheme(&mut self, name: &str, scheme: Value) {
        self.security_schemes.insert(name.to_owned(), scheme);
    }

    /// The (method, path) pairs described, `head` included: what the coverage test compares
    /// with what the app serves.
    pub fn operations(&self) -> Vec<(&'static str, &'static str)> {
        self.operations
            .iter()
            .flat_map(|operation| {
                let head = operation.head.then_some(("head", operation.path));
                std::iter::once((operation.method, operation.path)).chain(head)
            })
            .collect()
    }

    /// The OpenAPI 3.1 document.
    pub fn document(&self) -> Value {
        let described: Vec<String> = self
            .operations()
            .into_iter()
            .map(|(method, path)| operation_id(method, path))
            .collect();
        let mut paths: BTreeMap<&str, Map<String, Value>> = BTreeMap::new();
        for operation in &self.operations {
            let item = paths.entry(operation.path).or_default();
            item.insert(
                operation.method.to_owned(),
                operation.to_json(false, &described),
            );
            if operation.head {
                item.insert("head".to_owned(), operation.to_json(true, &described));
            }
        }
        json!({
            "openapi": "3.1.0",
            "info": {
                "title": "vcode",
                "version": env!("CARGO_PKG_VERSION"),
                "description": "One-time codes by SMS and email, image captchas and an ALTCHA proof-of-work gate, verified atomically (the Twilio Verify-compatible API is under /v2, described by Twilio's own OpenAPI). API-key callers are tenants and may name their end users. Every JSON answer is the envelope {code, message, data}: `code` is 200 on success, otherwise a five-digit error code whose first three digits are the HTTP status.",
                "license": {"name": "MIT OR Apache-2.0", "identifier": "MIT OR Apache-2.0"},
            },
            "paths": paths,
            "components": {
                "schemas": self.schemas,
                "securitySchemes": self.security_schemes,
            },
        })
    }
}

impl ApiOperation {
    pub fn describe(&mut self, description: &'static str) -> &mut Self {
        self.description = Some(description);
        self
    }

    /// A JSON request body of type `T`.
    pub fn body(&mut self, schema: Value) -> &mut Self {
        self.body = Some(json!({
            "required": true,
            "content": {"application/json": {"schema": schema}},
        }));
        self.errors(&BODY_ERRORS)
    }

    pub fn parameter(
        &mut self,
        place: &str,
        name: &str,
        required: bool,
        schema: Value,
        description: &str,
    ) -> &mut Self {
        self.parameters.push(json!({
            "name": name,
            "in": place,
            "required": required,
            "description": description,
            "schema": schema,
        }));
        self
    }

    /// A 200 answer: the envelope carrying `data` (a schema reference).
    pub fn ok_envelope(&mut self, data: Value) -> &mut Self {
        let envelope = json!({
            "type": "object",
            "required": ["code", "message", "data"],
            "properties": {
                "code": {"const": OK},
                "message": {"const": OK_MESSAGE},
                "data": data,
            },
        });
        self.ok_content("application/json", envelope, "ok")
    }

    /// A 200 answer of another kind (a picture, a page, a script).
    pub fn ok_content(
        &mut self,
        content_type: &str,
        schema: Value,
        description: &str,
    ) -> &mut Self {
        self.ok = json!({
            "description": description,
            "content": {content_type: {"schema": schema}},
        });
        self
    }

    /// A 200 answer written out (several content types).
    pub fn ok_response(&mut self, response: Value) -> &mut Self {
        self.ok = response;
        self
    }

    /// An OpenAPI link from the 200 answer to the operation `method path`, whose parameter
    /// `parameter` is the answer's `data` field `field` (a fuzzer follows it to reach the
    /// operation with a real id).
    pub fn link(&mut self, method: &str, path: &str, parameter: &str, field: &str) -> &mut Self {
        let target = operation_id(method, path);
        self.ok["links"][target.clone()] = json!({
            "operationId": target,
            "parameters": {parameter: format!("$response.body#/data/{field}")},
        });
        self
    }

    /// Error codes this operation can answer (added to those already declared).
    pub fn errors(&mut self, codes: &[ErrorCode]) -> &mut Self {
        for code in codes {
            if !self.errors.contains(code) {
                self.errors.push(*code);
            }
        }
        self.errors.sort_by_key(|code| code.code());
        self
    }

    /// A security requirement (an OpenAPI security requirement array).
    pub fn security(&mut self, requirement: Value) -> &mut Self {
        self.security = Some(requirement);
        self
    }

    /// The operation; links to operations not `described` (dev routes outside dev mode) and
    /// a HEAD answer's body are left out.
    fn to_json(&self, head: bool, described: &[String]) -> Value {
        let mut ok = without_content(&self.ok, head);
        if let Some(links) = ok.get_mut("links").and_then(Value::as_object_mut) {
            links.retain(|target, _| !head && described.contains(target));
        }
        let mut responses = Map::new();
        responses.insert("200".to_owned(), ok);
        let mut by_status: BTreeMap<u16, Vec<ErrorCode>> = BTreeMap::new();
        for code in &self.errors {
            by_status.entry(code.http_status()).or_default().push(*code);
        }
        for (status, codes) in by_status {
            responses.insert(
                status.to_string(),
                without_content(&error_response(&codes), head),
            );
        }
        let mut operation = json!({
            "tags": [self.tag],
            "summary": self.summary,
            "operationId": operation_id(if head { "head" } else { self.method }, self.path),
            "responses": responses,
        });
        let fields = operation.as_object_mut().expect("an object");
        if let Some(description) = self.description {
            fields.insert("description".to_owned(), json!(description));
        }
        if let Some(security) = &self.security {
            fields.insert("security".to_owned(), security.clone());
        }
        if !self.parameters.is_empty() {
            fields.insert("parameters".to_owned(), json!(self.parameters));
        }
        if let Some(body) = &self.body {
            fields.insert("requestBody".to_owned(), body.clone());
        }
        operation
    }
}

/// A HEAD answer: the GET's headers, no body.
fn without_content(response: &Value, head: bool) -> Value {
    let mut response = response.clone();
    if head && let Some(fields) = response.as_object_mut() {
        fields.remove("content");
    }
    response
}

/// The answer for the error codes of one HTTP status: the envelope with `code` enumerated and
/// `data` as those codes carry it.
fn error_response(codes: &[ErrorCode]) -> Value {
    let mut data = vec![json!({"type": "null"})];
    if codes.contains(&ErrorCode::WrongCode) {
        data.push(json!({"$ref": format!("#/components/schemas/{}", WrongCodeData::name())}));
    }
    let retry_after = codes.iter().any(|code| {
        matches!(
            code,
            ErrorCode::ResendCooldown | ErrorCode::QuotaExceeded | ErrorCode::DestinationSuspended
        )
    });
    if retry_after {
        data.push(json!({"$ref": format!("#/components/schemas/{}", RetryAfterData::name())}));
    }
    let data = if data.len() == 1 {
        data.remove(0)
    } else {
        json!({"anyOf": data})
    };
    let listed: Vec<String> = codes
        .iter()
        .map(|code| format!("{code} {code:?}"))
        .collect();
    let mut response = json!({
        "description": listed.join("; "),
        "content": {"application/json": {"schema": {
            "type": "object",
            "required": ["code", "message", "data"],
            "properties": {
                "code": {"type": "integer", "enum": codes.iter().map(|code| code.code()).collect::<Vec<_>>()},
                "message": {"type": "string"},
                "data": data,
            },
        }}},
    });
    if codes.contains(&ErrorCode::Unauthorized) {
        response["headers"] = json!({"WWW-Authenticate": {
            "description": "`Bearer`",
            "schema": {"type": "string"},
        }});
    }
    if retry_after {
        response["headers"] = json!({"Retry-After": {
            "description": "Whole seconds to wait, rounded up (42900 and 42902 only; for an SMS provider's own limit, the wait it names)",
            "schema": {"type": "integer", "minimum": 1},
        }});
    }
    response
}

/// `post_api_v1_otp_send` and the like: unique per method and path (`link` targets them).
fn operation_id(method: &str, path: &str) -> String {
    let words: String = path
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let words: Vec<&str> = words.split('_').filter(|word| !word.is_empty()).collect();
    format!("{method}_{}", words.join("_"))
}

/// The WrongCodeData and RetryAfterData schemas the error answers refer to.
pub fn register_error_data(api: &mut Api) {
    api.schema::<WrongCodeData>();
    api.schema::<RetryAfterData>();
}
