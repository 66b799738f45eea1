//! The JSON envelope every API answer uses: `{"code", "message", "data"}`.

use actix_web::HttpResponse;
use serde::Serialize;

#[derive(Debug, Serialize)]
pub struct Envelope<T: Serialize> {
    pub code: u32,
    pub message: String,
    pub data: T,
}

/// A 200 answer carrying `data`.
pub fn ok<T: Serialize>(data: T) -> HttpResponse {
    HttpResponse::Ok().json(Envelope {
        code: 200,
        message: "ok".to_owned(),
        data,
    })
}
