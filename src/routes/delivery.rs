//! The delivery rate's operator route (the operator listener, behind the admin token): per
//! provider and country, from the receipts every instance counted in the store, which the
//! console charts. HTTP only: the receipts' use case answers, mapped to the wire types here.

use actix_web::{HttpResponse, web};
use vcode_wire::{DeliveryRate, DeliveryRateHour, DeliveryRates, DeliveryRatesQuery, paths};

use super::openapi::Api;
use super::{ApiError, AppState, envelope};
use crate::otp::{MAX_RATE_HOURS, ProviderCountryRate};

const DEFAULT_HOURS: u32 = 24;

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(super::get_resource(paths::DELIVERY_RATES).route(super::get().to(rates)));
}

pub fn describe(api: &mut Api) {
    use vcode_wire::ErrorCode::*;
    let rates = api.schema::<DeliveryRates>();
    api.get(
        paths::DELIVERY_RATES,
        "receipts",
        "Delivery rate per provider and country",
    )
    .describe(
        "From the providers' delivery receipts, counted in the store by every instance in the \
         step that moves a verification's delivery (a repeated receipt counts once). Kept \
         eight days.",
    )
    .parameter(
        "query",
        "hours",
        false,
        serde_json::json!({"type": "integer", "minimum": 1, "maximum": MAX_RATE_HOURS, "default": DEFAULT_HOURS}),
        "the last hours counted, this one included",
    )
    .ok_envelope(rates)
    .errors(&[Malformed, Unauthorized, Internal, StoreUnavailable]);
}

async fn rates(
    state: web::Data<AppState>,
    query: web::Query<DeliveryRatesQuery>,
) -> Result<HttpResponse, ApiError> {
    let hours = query.hours.unwrap_or(DEFAULT_HOURS);
    if !(1..=MAX_RATE_HOURS).contains(&hours) {
        return Err(ApiError::Malformed(format!(
            "hours must be from 1 to {MAX_RATE_HOURS}"
        )));
    }
    let rates = state.receipts.delivery_rates(hours).await?;
    Ok(envelope::ok(DeliveryRates {
        from_hour: rates.from_hour,
        to_hour: rates.to_hour,
        rates: rates.rates.into_iter().map(wire).collect(),
    }))
}

fn wire(rate: ProviderCountryRate) -> DeliveryRate {
    DeliveryRate {
        rate: rate.rate(),
        provider: rate.provider,
        country: rate.country,
        delivered: rate.delivered,
        undelivered: rate.undelivered,
        hours: rate
            .hours
            .into_iter()
            .map(|count| DeliveryRateHour {
                hour: count.hour,
                delivered: count.delivered,
                undelivered: count.undelivered,
            })
            .collect(),
    }
}
