//! `/v2/SafeList/Numbers[/{PhoneNumber}]`: Twilio's Safe List over HTTP (add, check, remove an
//! account's numbers); what they mean is `twilio_compat::safe_list`.

use actix_web::HttpResponse;
use serde_json::{Value, json};

use super::Call;
use super::reply::Reply;
use crate::twilio_compat::SafeListNumber;

fn number_json(number: &SafeListNumber, base: &str) -> Value {
    json!({
        "sid": number.sid,
        "phone_number": number.phone_number,
        "url": format!("{base}/SafeList/Numbers/{}", number.phone_number),
    })
}

pub(super) async fn create(call: &Call<'_>) -> Reply {
    let number = call
        .twilio()
        .add_safe_number(call.account, call.form.get("PhoneNumber"))
        .await?;
    Ok(HttpResponse::Created().json(number_json(&number, &call.base_url())))
}

pub(super) async fn fetch(call: &Call<'_>, phone_number: &str) -> Reply {
    let number = call
        .twilio()
        .safe_number(call.account, phone_number)
        .await?;
    Ok(HttpResponse::Ok().json(number_json(&number, &call.base_url())))
}

pub(super) async fn delete(call: &Call<'_>, phone_number: &str) -> Reply {
    call.twilio()
        .remove_safe_number(call.account, phone_number)
        .await?;
    Ok(HttpResponse::NoContent().finish())
}
