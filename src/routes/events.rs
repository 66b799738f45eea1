//! The event outbox's operator routes (the operator listener, behind the admin token): the
//! events given up after the retry period, and their replay. HTTP only: the use case answers,
//! mapped to the wire types here.

use actix_web::{HttpResponse, web};
use vcode_wire::{FailedEvents, FailedEventsQuery, ReplayRequest, Replayed, paths};

use super::openapi::Api;
use super::{ApiError, AppState, envelope};
use crate::store::FailedEntry;

const DEFAULT_LIMIT: usize = 100;

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(super::get_resource(paths::EVENTS_FAILED).route(super::get().to(failed)))
        .service(super::post_resource(paths::EVENTS_REPLAY).route(web::post().to(replay)));
}

pub fn describe(api: &mut Api) {
    use vcode_wire::ErrorCode::*;
    let failed = api.schema::<FailedEvents>();
    api.get(paths::EVENTS_FAILED, "events", "Events given up after the retry period")
        .describe(
            "Oldest first. Each keeps the webhook-id it was sent with, and its last failure \
             per endpoint. With VCODE_ADMIN_TOKEN set, every operator route needs it as a \
             bearer token.",
        )
        .parameter(
            "query",
            "limit",
            false,
            serde_json::json!({"type": "integer", "minimum": 0, "maximum": 1000, "default": DEFAULT_LIMIT}),
            "how many at most (1000 at most)",
        )
        .ok_envelope(failed)
        .errors(&[Malformed, Unauthorized, Internal, StoreUnavailable]);
    let body = api.schema::<ReplayRequest>();
    let replayed = api.schema::<Replayed>();
    api.post(paths::EVENTS_REPLAY, "events", "Replay failed events")
        .describe(
            "The events named by seq (none: every failed event) are due again at once, their \
             tries counted anew, with the same webhook-id.",
        )
        .body(body)
        .ok_envelope(replayed)
        .errors(&[Unauthorized, Internal, StoreUnavailable]);
}

async fn failed(
    state: web::Data<AppState>,
    query: web::Query<FailedEventsQuery>,
) -> Result<HttpResponse, ApiError> {
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    let events = state.events.failed(limit).await?;
    Ok(envelope::ok(FailedEvents {
        events: events.into_iter().map(wire).collect(),
    }))
}

async fn replay(
    state: web::Data<AppState>,
    request: web::Json<ReplayRequest>,
) -> Result<HttpResponse, ApiError> {
    let replayed = state.events.replay(&request.seqs).await?;
    Ok(envelope::ok(Replayed { replayed }))
}

fn wire(failed: FailedEntry) -> vcode_wire::FailedEvent {
    vcode_wire::FailedEvent {
        webhook_id: failed.event.webhook_id(),
        seq: failed.event.seq,
        // A failed expiry timer failed as the `expired` it was sent as.
        kind: crate::events::event_of(failed.event.fact)
            .unwrap_or(crate::events::EventKind::Expired)
            .as_str()
            .to_owned(),
        subject: failed.event.subject,
        occurred_at_ms: failed.event.at_ms,
        attempts: failed.attempts,
        error: failed.error,
        failed_at_ms: failed.failed_at_ms,
    }
}
