//! Redis key layout (DESIGN.md). Every key of one phone carries the hash tag `{<E.164>}` so a
//! script touching several of them stays on one Cluster slot.

use std::sync::LazyLock;

use crate::domain::{CaptchaId, Client, Destination, Purpose, VerificationId};
use crate::store::QuotaScope;

pub const PREFIX: &str = "verify_code:";

/// `parts` in one allocation of their length, without `format!`: the keys a send and a verify
/// name (formatting one cost more than the rest of building its call).
fn concat(parts: &[&str]) -> String {
    concat_with_room(parts, 0)
}

/// `concat`, with room for `room` more bytes after them.
fn concat_with_room(parts: &[&str], room: usize) -> String {
    let mut key = String::with_capacity(parts.iter().map(|part| part.len()).sum::<usize>() + room);
    for part in parts {
        key.push_str(part);
    }
    key
}

/// `verify_code:{+8613800138000}:login`: the pending code for (phone, purpose).
pub fn code(destination: &Destination, purpose: &Purpose) -> String {
    code_of(destination.key(), purpose.as_str())
}

/// `code`, from a stored E.164 and purpose (a verification's target).
pub fn code_of(phone_e164: &str, purpose: &str) -> String {
    concat(&[PREFIX, "{", phone_e164, "}:", purpose])
}

/// `verify_code:quota:{+8613800138000}:sends`: the phone's SMS log (sliding-window quota).
pub fn phone_sends(destination: &Destination) -> String {
    concat(&[PREFIX, "quota:{", destination.key(), "}:sends"])
}

/// `verify_code:quota:{+8613800138000}:fails`: the phone's failed-verify log.
pub fn destination_failures(destination: &Destination) -> String {
    concat(&[PREFIX, "quota:{", destination.key(), "}:fails"])
}

/// `verify_code:quota:{budgets}:ip:203.0.113.7`, `…:domain:<16 hex of the domain's SHA-256>`
/// or `verify_code:quota:{budgets}:global`: one
/// hash tag for all, so a send reserves its client and global budgets in one script. On a
/// Cluster they share a node, which every send visits for the global budget anyway.
pub fn quota(scope: QuotaScope) -> String {
    quota_key(scope).to_string()
}

/// A budget's key ([`quota`]) as a command's argument, written straight into the command (no
/// `String` of its own: a send names two budgets).
pub fn quota_key(scope: QuotaScope) -> QuotaKey {
    QuotaKey(scope)
}

#[derive(Clone, Copy)]
pub struct QuotaKey(QuotaScope);

impl std::fmt::Display for QuotaKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{PREFIX}quota:{{budgets}}:{}", self.0)
    }
}

impl redis::ToRedisArgs for QuotaKey {
    fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
        out.write_arg_fmt(self);
    }
}

/// `verify_code:idem:{<digest of the Idempotency-Key>}`.
pub fn idempotency(key: &str) -> String {
    format!("{PREFIX}idem:{{{key}}}")
}

/// `verify_code:pow:{<digest of a solved challenge>}`: a used proof-of-work challenge.
pub fn pow(digest: &str) -> String {
    format!("{PREFIX}pow:{{{digest}}}")
}

/// `verify_code:stats:2026-11-29`: one day's counters.
pub fn stats(date: &str) -> String {
    format!("{PREFIX}stats:{date}")
}

/// `verify_code:twilio:{AC…}:services`: the account's Twilio-compatible Services, a hash
/// by Service SID.
pub fn twilio_services(account: &str) -> String {
    format!("{PREFIX}twilio:{{{account}}}:services")
}

/// `verify_code:totp:{<scope>}:entities`: a scope's TOTP entities (a Twilio Service's, or an
/// API key's), a hash by identity; its identities' records are under the same hash tag.
pub fn totp_entities(scope: &str) -> String {
    format!("{PREFIX}totp:{{{scope}}}:entities")
}

/// `verify_code:totp:{<scope>}:records:<identity>`: one identity's factors and challenges, a
/// hash by SID, beside its entity (same hash tag: deleting an identity is one script).
pub fn totp_records(scope: &str, identity: &str) -> String {
    format!("{PREFIX}totp:{{{scope}}}:records:{identity}")
}

/// `verify_code:fraud:{safe}:list`: the fraud guard's safe list as operators and tenants
/// change it, a hash by `<tenant>/<digits>` (no tenant: `/<digits>`, an entry for every
/// send) of `<added at, unix ms>:<added by>`. One key: every write is one command on it, on a
/// Cluster's one slot.
pub const SAFE_LIST: &str = "verify_code:fraud:{safe}:list";

/// `verify_code:twilio:sends:{+8613800138000}:VA…` (or `…:{john@example.com}:VA…`): the send
/// log of a Twilio-compatible verification of one Service and destination, under the
/// destination's hash tag: a first start's issue creates it in its own script.
pub fn twilio_sends(service: &str, destination: &Destination) -> String {
    // Joined, not formatted: a first start builds it in the send's step.
    [PREFIX, "twilio:sends:{", destination.key(), "}:", service].concat()
}

/// `verify_code:{+8613800138000}:v:<id>`: one send's verification (its code's digest, times,
/// attempts, end), under the phone's tag so a verify updates it with the code. Short, so that
/// a pending verification stays within 300 bytes (issue 42: the name's allocation is 64 bytes
/// for every E.164, where `…:verification:<id>` took 80).
pub fn verification(phone_e164: &str, id: &VerificationId) -> String {
    concat(&[PREFIX, "{", phone_e164, "}:v:", id.as_str()])
}

/// `verify_code:{+8613800138000}:verification:<id>`: where builds before 2026-12-07 keep a
/// verification, and this one with `VCODE_REDIS_OLDER_INSTANCES` (they read nothing else).
/// Every script that reads a verification looks here when [`verification`] has none.
pub fn verification_before(phone_e164: &str, id: &VerificationId) -> String {
    concat(&[PREFIX, "{", phone_e164, "}:verification:", id.as_str()])
}

/// A verification's names as a reader passes them: today's, then the one before
/// (`verification_prelude.lua` looks under the second when the first has none).
pub fn verification_names(phone_e164: &str, id: &VerificationId) -> [String; 2] {
    [
        verification(phone_e164, id),
        verification_before(phone_e164, id),
    ]
}

/// `verify_code:{+8613800138000}:`: what both names of a phone's verification start with;
/// verify.lua reads the one the code's `v` names, under the code's hash tag.
pub fn verification_prefix(phone_e164: &str) -> String {
    concat(&[PREFIX, "{", phone_e164, "}:"])
}

/// `verify_code:verification:{<id>}`: where an id leads (`<E.164> <purpose>`), never changed
/// once written, so it is read on its own before the phone's script.
pub fn verification_target(id: &VerificationId) -> String {
    concat(&[PREFIX, "verification:{", id.as_str(), "}"])
}

/// The event outbox (one node: its keys share no tag with the phone's), `events.lua`: its
/// entries, its pending index, its failed index and the failures' errors, under `{events}`.
pub fn outbox_keys() -> [String; 4] {
    outbox_keys_tagged("events")
}

fn outbox_keys_tagged(tag: &str) -> [String; 4] {
    ["entries", "pending", "failed", "errors"]
        .map(|part| format!("{PREFIX}events:{{{tag}}}:{part}"))
}

/// How many slots a Redis Cluster hashes keys into.
pub const CLUSTER_SLOTS: u16 = 16384;

/// The Cluster slot of the keys whose hash tag is `tag` (CRC16/XMODEM modulo 16384, as Redis
/// Cluster computes it).
pub fn slot_of_tag(tag: &str) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(tag.as_bytes()) % CLUSTER_SLOTS
}

/// For each slot, a short tag that hashes to it (`o` and a base-36 number, the first that
/// does), found once: about 170,000 CRC16s of a few bytes, a few milliseconds.
static SLOT_TAGS: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut tags = vec![String::new(); usize::from(CLUSTER_SLOTS)];
    let mut missing = tags.len();
    let mut n: u64 = 0;
    while missing > 0 {
        let tag = format!("o{}", base36(n));
        let slot = &mut tags[usize::from(slot_of_tag(&tag))];
        if slot.is_empty() {
            *slot = tag;
            missing -= 1;
        }
        n += 1;
    }
    tags
});

fn base36(mut n: u64) -> String {
    let mut digits = Vec::new();
    loop {
        digits.push(b"0123456789abcdefghijklmnopqrstuvwxyz"[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    digits.reverse();
    String::from_utf8(digits).unwrap_or_default()
}

/// The tag of each Cluster slot's outbox, by slot (`outbox_keys_in`).
pub fn slot_tags() -> &'static [String] {
    &SLOT_TAGS
}

/// The event outbox of Cluster slot `slot` (`outbox_keys`' four, under a tag that hashes to
/// that slot, e.g. `verify_code:events:{o2x1}:pending`): a script appends to the outbox of
/// its own keys' slot, so the event is written in the step that makes the change.
pub fn outbox_keys_in(slot: u16) -> [String; 4] {
    outbox_keys_tagged(&SLOT_TAGS[usize::from(slot % CLUSTER_SLOTS)])
}

/// `verify_code:delivery:{delivery}:20424` (one node) or `verify_code:delivery:{o2x1}:20424`
/// (Cluster: the tag of the phone's slot, `slot`): one day's delivery counts, a hash of
/// `<unix hour> <provider> <country> d|x` → receipts, which `receipt.lua` counts in the step
/// that moves the delivery.
pub fn delivery_counts(slot: Option<u16>, day: u64) -> String {
    match slot {
        Some(slot) => format!(
            "{PREFIX}delivery:{{{}}}:{day}",
            SLOT_TAGS[usize::from(slot % CLUSTER_SLOTS)]
        ),
        None => format!("{PREFIX}delivery:{{delivery}}:{day}"),
    }
}

/// `verify_code:message:{twilio:SM…}`: which verification a provider's message carried
/// (`<E.164> <id>`), for its delivery receipts. Its own hash tag: a receipt names the message,
/// not the phone, so the key is read alone before the phone's script (`receipt.lua`).
pub fn message(provider: &str, message_id: &str) -> String {
    format!("{PREFIX}message:{{{provider}:{message_id}}}")
}

/// `KEYS` of `issue.lua` and `undo_issue.lua`: the code, the phone's SMS log and the send's
/// verification (one hash tag), under the name older instances read when `older` is set.
pub fn issue(
    destination: &Destination,
    purpose: &Purpose,
    id: &VerificationId,
    older: bool,
) -> [String; 3] {
    [
        code(destination, purpose),
        phone_sends(destination),
        if older {
            verification_before(destination.key(), id)
        } else {
            verification(destination.key(), id)
        },
    ]
}

/// `KEYS` of `verify_id.lua`: `verify`'s, and the id's verification under both its names (one
/// hash tag).
pub fn verify_id(
    destination: &Destination,
    purpose: &Purpose,
    client: Client,
    id: &VerificationId,
) -> [String; 5] {
    let [code, destination_failures, client_failures] = verify(destination, purpose, client);
    let [verification, before] = verification_names(destination.key(), id);
    [
        code,
        destination_failures,
        client_failures,
        verification,
        before,
    ]
}

/// Where the fraud guard's keys start: one hash tag for all of them, so that one script sees
/// a send's levels (a prefix's and the service's) and one flush adds every scope's minutes. On
/// a Cluster they share a node.
const FRAUD: &str = "verify_code:fraud:{guard}:";
/// The hash tag of the fraud guard's keys.
pub const FRAUD_TAG: &str = "guard";

/// `FRAUD` and `parts` in one allocation, without `format!`: a send names several of the
/// guard's keys (its levels'), and formatting them cost about as much as the rest of the script
/// call.
fn fraud_key(parts: &[&str]) -> String {
    let mut key = String::with_capacity(FRAUD.len() + parts.iter().map(|p| p.len()).sum::<usize>());
    push_fraud_key(&mut key, parts);
    key
}

/// `fraud_key`'s key, written at the end of `key`.
fn push_fraud_key(key: &mut String, parts: &[&str]) {
    key.push_str(FRAUD);
    for part in parts {
        key.push_str(part);
    }
}

/// `n` in decimal, into `buffer`.
fn decimal(mut n: u64, buffer: &mut [u8; 20]) -> &str {
    let mut at = buffer.len();
    loop {
        at -= 1;
        buffer[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // Only ASCII digits were written.
    std::str::from_utf8(&buffer[at..]).unwrap_or_default()
}

/// `verify_code:fraud:{guard}:blocks`: prefix → its block (JSON).
pub fn fraud_blocks() -> String {
    fraud_key(&["blocks"])
}

/// `verify_code:fraud:{guard}:prefixes`: prefix → its country, for the traffic report.
pub fn fraud_prefixes() -> String {
    fraud_key(&["prefixes"])
}

/// `verify_code:fraud:{guard}:countries`: the countries counted (a hash, country → 1: the
/// commands vcode's documented ACL rule allows).
pub fn fraud_countries() -> String {
    fraud_key(&["countries"])
}

/// `verify_code:fraud:{guard}:l:86138`: one scope of the guard's levels, eight packed doubles
/// `t rs rc ru hs hc hu e` (the last change in unix ms, the decayed recent and history counts,
/// when its expiry was last set).
pub fn fraud_level(scope: &str) -> String {
    fraud_key(&["l:", scope])
}

/// `verify_code:fraud:{guard}:r:<16 hex digits>`: a destination that verified, by keyed
/// digest, until the key expires.
pub fn fraud_returning(digest: u64) -> String {
    fraud_key(&["r:", &format!("{digest:016x}")])
}

/// One scope of the fraud guard's counts.
#[derive(Clone, Copy, Debug)]
pub enum FraudScope<'a> {
    Prefix(&'a str),
    Country(&'a str),
    Service,
}

/// `verify_code:fraud:{guard}:p:44770:482000` (prefix), `…:c:GB:482000` (country) or
/// `…:all:482000` (service): the scope's counters of one hour (unix hour), fields `s<minute>`
/// (sends not undelivered), `x<minute>` (undelivered), `c<minute>` (conversions) and
/// `r<minute>` (refusals, service only): the traffic report's (`fraud_traffic.lua`).
pub fn fraud_minutes(scope: FraudScope<'_>, hour: u64) -> String {
    let mut key = String::with_capacity(FRAUD.len() + 32);
    let mut buffer = [0; 20];
    let hour = decimal(hour, &mut buffer);
    match scope {
        FraudScope::Prefix(prefix) => push_fraud_key(&mut key, &["p:", prefix, ":", hour]),
        FraudScope::Country(country) => push_fraud_key(&mut key, &["c:", country, ":", hour]),
        FraudScope::Service => push_fraud_key(&mut key, &["all:", hour]),
    }
    key
}

/// `verify_code:{+8613800138000}:fails:203.0.113.7`: failed verifies of one (phone, client).
pub fn client_failures(destination: &Destination, client: Client) -> String {
    use std::fmt::Write as _;
    // Room for the longest client (an IPv6 address, 39 characters): one allocation.
    let mut key = concat_with_room(&[PREFIX, "{", destination.key(), "}:fails:"], 39);
    write!(key, "{client}").expect("a String takes any write");
    key
}

/// `KEYS` of `verify.lua`: the code and the phone's and the (phone, client)'s failed-verify
/// logs (one hash tag).
pub fn verify(destination: &Destination, purpose: &Purpose, client: Client) -> [String; 3] {
    [
        code(destination, purpose),
        destination_failures(destination),
        client_failures(destination, client),
    ]
}

/// `verify_code:dev-inbox:{+8613800138000}`: the dev inbox of one phone.
pub fn dev_inbox(phone_e164: &str) -> String {
    format!("{PREFIX}dev-inbox:{{{phone_e164}}}")
}

/// `verify_code:captcha:{<id>}`: a captcha's answer and picture seed.
pub fn captcha(id: &CaptchaId) -> String {
    format!("{PREFIX}captcha:{{{}}}", id.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Phone, Region};
    use crate::store::TrafficChange;

    #[test]
    fn keys_follow_the_documented_layout() {
        let destination =
            Destination::from(Phone::parse("13800138000", Region::default()).unwrap());
        let purpose = Purpose::default();
        assert_eq!(
            code(&destination, &purpose),
            "verify_code:{+8613800138000}:login"
        );
        assert_eq!(
            dev_inbox(destination.key()),
            "verify_code:dev-inbox:{+8613800138000}"
        );
        assert_eq!(
            phone_sends(&destination),
            "verify_code:quota:{+8613800138000}:sends"
        );
        assert_eq!(
            destination_failures(&destination),
            "verify_code:quota:{+8613800138000}:fails"
        );
        let ip = QuotaScope::ClientIp("203.0.113.7".parse().unwrap());
        assert_eq!(quota(ip), "verify_code:quota:{budgets}:ip:203.0.113.7");
        let mut written = redis::cmd("X");
        written.arg(quota_key(ip));
        assert_eq!(
            written.args_iter().nth(1),
            Some(redis::Arg::Simple(
                &b"verify_code:quota:{budgets}:ip:203.0.113.7"[..]
            ))
        );
        assert_eq!(
            quota(QuotaScope::Global),
            "verify_code:quota:{budgets}:global"
        );
        let id = CaptchaId::parse("0123456789abcdef0123456789abcdef").unwrap();
        assert_eq!(
            captcha(&id),
            "verify_code:captcha:{0123456789abcdef0123456789abcdef}"
        );
        assert_eq!(
            pow("5d41402abc4b2a76b9719d911017c592"),
            "verify_code:pow:{5d41402abc4b2a76b9719d911017c592}"
        );
    }

    /// The part of `key` that Redis Cluster hashes: the text between the first `{` and the next
    /// `}` when it is not empty, else the whole key.
    fn hash_tag(key: &str) -> &str {
        key.split_once('{')
            .and_then(|(_, rest)| rest.split_once('}'))
            .map(|(tag, _)| tag)
            .filter(|tag| !tag.is_empty())
            .unwrap_or(key)
    }

    fn sample_phone() -> Phone {
        Phone::parse("13800138000", Region::default()).unwrap()
    }

    fn sample_verification() -> VerificationId {
        VerificationId::parse("AAECAwQFBgcICQoLDA0ODw").unwrap()
    }

    fn sample_idempotency_key() -> String {
        "5d41402abc4b2a76b9719d911017c592".to_owned()
    }

    /// Every script, with the keys the store passes it (in `KEYS` order).
    fn script_calls() -> Vec<(&'static str, &'static str, Vec<String>)> {
        let phone = sample_phone();
        let destination = Destination::from(phone.clone());
        let purpose = Purpose::default();
        let idem = sample_idempotency_key();
        let ip = QuotaScope::ClientIp("203.0.113.7".parse().unwrap());
        let id = sample_verification();
        let client = Client::Address("203.0.113.7".parse().unwrap());
        vec![
            // As on a Cluster: the target (KEYS[4]) and budgets only on one node.
            (
                "issue",
                include_str!("issue.lua"),
                issue(&destination, &purpose, &id, false).to_vec(),
            ),
            // A Twilio-compatible first start's: its send log last (the issue's companion).
            (
                "issue with a send log",
                include_str!("issue.lua"),
                [
                    issue(&destination, &purpose, &id, true).to_vec(),
                    vec![twilio_sends(
                        "VA0123456789abcdef0123456789abcdef",
                        &destination,
                    )],
                ]
                .concat(),
            ),
            (
                "undo_issue",
                include_str!("undo_issue.lua"),
                issue(&destination, &purpose, &id, false).to_vec(),
            ),
            (
                "verify_id",
                include_str!("verify_id.lua"),
                verify_id(&destination, &purpose, client, &id).to_vec(),
            ),
            (
                "verification",
                include_str!("verification.lua"),
                vec![
                    code(&destination, &purpose),
                    verification(destination.key(), &id),
                    verification_before(destination.key(), &id),
                ],
            ),
            (
                "receipt",
                include_str!("receipt.lua"),
                vec![
                    verification(destination.key(), &id),
                    verification_before(destination.key(), &id),
                    delivery_counts(Some(slot_of_tag(destination.key())), 20_424),
                ],
            ),
            (
                "verify",
                include_str!("verify.lua"),
                verify(
                    &destination,
                    &purpose,
                    Client::Address("203.0.113.7".parse().unwrap()),
                )
                .to_vec(),
            ),
            (
                "reserve_quota",
                include_str!("reserve_quota.lua"),
                vec![quota(ip), quota(QuotaScope::Global)],
            ),
            (
                "abandon_idempotent",
                include_str!("abandon_idempotent.lua"),
                vec![idempotency(&idem)],
            ),
            (
                "fraud_traffic",
                include_str!("fraud_traffic.lua"),
                super::super::fraud::traffic_keys(&[
                    TrafficChange {
                        prefix: "44770".to_owned(),
                        country: "GB".to_owned(),
                        minute: 482_000,
                        sends: 1,
                        ..TrafficChange::default()
                    },
                    TrafficChange {
                        prefix: "33612".to_owned(),
                        country: "FR".to_owned(),
                        minute: 482_059,
                        conversions: -1,
                        ..TrafficChange::default()
                    },
                ]),
            ),
            (
                "fraud_block",
                include_str!("fraud_block.lua"),
                vec![fraud_blocks()],
            ),
            (
                "fraud_lift",
                include_str!("fraud_lift.lua"),
                vec![fraud_blocks()],
            ),
            (
                "twilio_put",
                include_str!("twilio_put.lua"),
                vec![twilio_sends(
                    "VA0123456789abcdef0123456789abcdef",
                    &destination,
                )],
            ),
        ]
    }

    /// The highest `KEYS[n]` a script reads, or `None` if it reads as many as it is given
    /// (`for i = 1, #KEYS`, or through the quota prelude's `quota_budgets`).
    fn keys_used(source: &str) -> Option<usize> {
        if ["#KEYS", "quota_budgets("]
            .iter()
            .any(|reads_all| source.contains(reads_all))
        {
            return None;
        }
        source
            .split("KEYS[")
            .skip(1)
            .map(|rest| rest.split(']').next().unwrap().parse::<usize>().unwrap())
            .max()
            .or(Some(0))
    }

    #[test]
    fn every_script_call_touches_keys_of_one_hash_tag() {
        for (name, source, keys) in script_calls() {
            if let Some(used) = keys_used(source) {
                assert_eq!(used, keys.len(), "{name}: KEYS passed vs read");
            }
            // One slot: one tag, or tags chosen to hash to the same slot (keys::SLOT_TAGS).
            let tags: Vec<&str> = keys.iter().map(|key| hash_tag(key)).collect();
            let slots: Vec<u16> = tags.iter().map(|tag| slot_of_tag(tag)).collect();
            assert!(
                slots.iter().all(|slot| *slot == slots[0]),
                "{name}: {keys:?}"
            );
            if keys.len() > 1 {
                assert_ne!(
                    tags[0], keys[0],
                    "{name}: several keys need an explicit tag"
                );
            }
        }
    }

    #[test]
    fn a_slot_s_outbox_hashes_to_that_slot() {
        // Redis Cluster's own examples (CLUSTER KEYSLOT): the crc16 is the one Redis uses.
        assert_eq!(slot_of_tag("somekey"), 11058);
        assert_eq!(slot_of_tag("user1000"), 3443);
        for slot in [0, 1, 5461, 11058, CLUSTER_SLOTS - 1] {
            for key in outbox_keys_in(slot) {
                assert_eq!(slot_of_tag(hash_tag(&key)), slot, "{key}");
            }
        }
        // A phone's script appends to the outbox of the phone's slot, the guard's to its own.
        let phone = sample_phone();
        let home = slot_of_tag(phone.as_e164());
        assert_eq!(
            slot_of_tag(hash_tag(&code(
                &Destination::Phone(phone),
                &Purpose::default()
            ))),
            home
        );
        assert_eq!(
            slot_of_tag(hash_tag(&fraud_blocks())),
            slot_of_tag(FRAUD_TAG)
        );
        // The sweep (events_sweep.lua) names a slot's outbox the same way.
        assert_eq!(
            outbox_keys_in(7)[1],
            format!("verify_code:events:{{{}}}:pending", slot_tags()[7])
        );
        let tags: std::collections::HashSet<&str> = SLOT_TAGS.iter().map(String::as_str).collect();
        assert_eq!(tags.len(), usize::from(CLUSTER_SLOTS));
    }

    #[test]
    fn every_key_builder_carries_one_hash_tag_or_none() {
        let phone = sample_phone();
        let destination = Destination::from(phone.clone());
        let e164 = destination.key();
        let id = CaptchaId::parse("0123456789abcdef0123456789abcdef").unwrap();
        let idem = sample_idempotency_key();
        let tagged = [
            (code(&destination, &Purpose::default()), e164.to_owned()),
            (phone_sends(&destination), e164.to_owned()),
            (destination_failures(&destination), e164.to_owned()),
            (
                client_failures(&destination, Client::Address("2001:db8::".parse().unwrap())),
                e164.to_owned(),
            ),
            (dev_inbox(e164), e164.to_owned()),
            (verification(e164, &sample_verification()), e164.to_owned()),
            (
                verification_target(&sample_verification()),
                sample_verification().as_str().to_owned(),
            ),
            (message("twilio", "SM0123"), "twilio:SM0123".to_owned()),
            (captcha(&id), id.as_str().to_owned()),
            (idempotency(&idem), idem.clone()),
            (pow(&idem), idem.clone()),
            (
                quota(QuotaScope::ClientIp("2001:db8::7".parse().unwrap())),
                "budgets".to_owned(),
            ),
            (quota(QuotaScope::Global), "budgets".to_owned()),
            (fraud_blocks(), "guard".to_owned()),
            (
                twilio_services("AC0123456789abcdef0123456789abcdef"),
                "AC0123456789abcdef0123456789abcdef".to_owned(),
            ),
            (
                twilio_sends("VA0123456789abcdef0123456789abcdef", &destination),
                e164.to_owned(),
            ),
            (fraud_prefixes(), "guard".to_owned()),
            (fraud_countries(), "guard".to_owned()),
            (
                fraud_minutes(FraudScope::Prefix("44770"), 482_000),
                "guard".to_owned(),
            ),
            (
                fraud_minutes(FraudScope::Country("GB"), 482_000),
                "guard".to_owned(),
            ),
            (
                fraud_minutes(FraudScope::Service, 482_000),
                "guard".to_owned(),
            ),
        ];
        assert_eq!(
            fraud_minutes(FraudScope::Prefix("44770"), 482_000),
            "verify_code:fraud:{guard}:p:44770:482000"
        );
        assert_eq!(
            fraud_minutes(FraudScope::Country("GB"), 0),
            "verify_code:fraud:{guard}:c:GB:0"
        );
        assert_eq!(
            fraud_minutes(FraudScope::Service, u64::MAX),
            format!("verify_code:fraud:{{guard}}:all:{}", u64::MAX)
        );
        for (key, entity) in tagged {
            assert_eq!(key.matches('{').count(), 1, "{key}");
            assert_eq!(key.matches('}').count(), 1, "{key}");
            assert_eq!(hash_tag(&key), entity, "{key}");
        }
        // Keys used alone (one command) hash whole.
        let stats_key = stats("2026-11-29");
        assert!(!stats_key.contains(['{', '}']), "{stats_key}");
    }

    /// The text between `open` (just after a `(`) and its matching `)`, split at top-level commas.
    fn call_arguments(open: &str) -> Vec<&str> {
        let (mut depth, mut start, mut arguments) = (0usize, 0, Vec::new());
        for (at, c) in open.char_indices() {
            match c {
                '(' | '{' | '[' => depth += 1,
                ')' | '}' | ']' if depth == 0 => {
                    arguments.push(open[start..at].trim());
                    return arguments;
                }
                ')' | '}' | ']' => depth -= 1,
                ',' if depth == 0 => {
                    arguments.push(open[start..at].trim());
                    start = at + 1;
                }
                _ => {}
            }
        }
        panic!("unclosed call: {open}")
    }

    /// `KEYS[2]`, or `KEYS[i]` in a loop over `#KEYS`.
    fn is_keys_element(argument: &str) -> bool {
        argument
            .strip_prefix("KEYS[")
            .and_then(|rest| rest.strip_suffix(']'))
            .is_some_and(|n| {
                // A number, `i`, or an offset plus one (`k + 1`, `k + scope` in
                // fraud_traffic.lua, issue.lua's `guard_keys + 1`).
                let offset = |n: &str| n.parse::<usize>().is_ok() || ["i", "scope"].contains(&n);
                offset(n)
                    || n.split_once(" + ").is_some_and(|(base, plus)| {
                        ["k", "guard_keys"].contains(&base) && offset(plus)
                    })
            })
    }

    /// The calls in `source` whose key is not a `KEYS` element passed in (or the quota
    /// helpers' `key` parameter, which their callers fill with one).
    fn keys_built_in(source: &str) -> Vec<String> {
        let mut built = Vec::new();
        if source.contains(PREFIX) {
            built.push(format!("names a key: {PREFIX}"));
        }
        let commands = ["redis.call(", "redis.pcall("]
            .into_iter()
            .flat_map(|call| {
                source.split(call).skip(1).filter_map(|rest| {
                    let arguments = call_arguments(rest);
                    // TIME is the only command without a key the scripts use.
                    (arguments[0] != "'TIME'").then(|| arguments.get(1).copied().unwrap_or(""))
                })
            });
        // Each helper with how many of its first arguments are keys.
        let helpers = [
            ("quota_wait(", 1),
            ("quota_record(", 1),
            ("add(", 1),
            ("find_verification(", 2),
        ]
        .into_iter()
        .flat_map(|(helper, keys)| {
            source
                .split(helper)
                .skip(1)
                .flat_map(move |rest| call_arguments(rest).into_iter().take(keys))
        });
        for key in commands.chain(helpers) {
            // `key`, `key_before` and `budget.key` are the preludes' parameters and
            // `quota_budgets`'s fields, `OUTBOX.*` the outbox's (`events.lua`),
            // `companion.key` issue.lua's companion record's, `verification_key` the one of
            // its two arguments `find_verification` found, each a `KEYS` element.
            let prelude_field = [
                "key",
                "key_before",
                "verification_key",
                "budget.key",
                "OUTBOX.entries",
                "OUTBOX.pending",
                "companion.key",
            ];
            if !(is_keys_element(key) || prelude_field.contains(&key)) {
                built.push(key.to_owned());
            }
        }
        built
    }

    #[test]
    fn no_script_builds_a_key() {
        let sources = script_calls()
            .into_iter()
            .map(|(name, source, _)| (name, source))
            .chain([
                ("quota prelude", include_str!("quota.lua")),
                ("events prelude", include_str!("events.lua")),
                (
                    "verification prelude",
                    include_str!("verification_prelude.lua"),
                ),
            ]);
        for (name, source) in sources {
            let mut built = keys_built_in(source);
            // The one exception: a verify by phone reads and ends the verification of the
            // code's latest send, whose id only the step knows (the code hash's `v`); its key
            // is under the code's own hash tag, so the script stays in KEYS[1]'s slot.
            if name == "verify" {
                built.retain(|key| {
                    key != "latest_key" && !key.starts_with("ARGV[separator + 1] .. ")
                });
            }
            assert_eq!(built, Vec::<String>::new(), "{name}");
        }
        // The check itself catches keys made in Lua.
        for script in [
            "return redis.call('GET', 'verify_code:' .. ARGV[1])",
            "return redis.call('DEL', KEYS[1] .. ':old')",
            "quota_record(ARGV[2], now, rules, ARGV[5])",
            "return redis.pcall('HGET', string.format('%s:x', KEYS[1]), 'c')",
        ] {
            assert!(!keys_built_in(script).is_empty(), "{script}");
        }
    }
}
