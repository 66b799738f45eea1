//! What only the Redis store has: its scripts and its key layout (part of the contract).

use super::*;

/// verify.lua refuses arguments without the separator before the digests instead of looking
/// for it forever: a busy script blocks every client of the Redis.
#[tokio::test]
async fn the_verify_script_refuses_arguments_without_a_separator() {
    let server = RedisServer::start();
    let mut redis = server.connection().await;
    let script = [
        include_str!("../../../src/store/redis/events.lua"),
        include_str!("../../../src/store/redis/quota.lua"),
        include_str!("../../../src/store/redis/verify.lua"),
    ]
    .concat();
    let keys = [
        "verify_code:{+1}:login",
        "verify_code:{+1}:f",
        "verify_code:{+1}:c",
    ];
    let mut eval = ::redis::cmd("EVAL");
    eval.arg(&script).arg(keys.len()).arg(&keys).arg(&[5, 1, 1]);
    let call = eval.query_async::<::redis::Value>(&mut redis);
    let answer = tokio::time::timeout(Duration::from_secs(2), call).await;
    let error = answer.expect("the script returns").unwrap_err();
    assert!(error.to_string().contains("no |"), "{error}");
}

/// The Redis layout is part of the contract (DESIGN.md): other tools read these keys.
#[tokio::test]
async fn redis_keys_follow_the_documented_layout() {
    let t = open(Backend::Redis);
    let server = t.redis.as_ref().expect("a Redis backend");
    let phone = phone("13800138000");
    let sent = deliver(&*t.store, &phone, &standard()).await;
    let code = sent.code;
    let mut redis = server.connection().await;
    let key = "verify_code:{+8613800138000}:login";
    // One field holds the record: the digest, then the code sealed; the attempt and delivery
    // counts are left out at their defaults (0 and 1); the last send's verification id
    // follows (a verify by phone ends that verification).
    let fields: Vec<(String, Vec<u8>)> = ::redis::cmd("HGETALL")
        .arg(key)
        .query_async(&mut redis)
        .await
        .unwrap();
    let names: Vec<&str> = fields.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["h", "t", "v"]);
    assert_eq!(fields[2].1, sent.id.as_str().as_bytes());
    let (digest, sealed) = fields[0].1.split_at(16);
    assert_eq!(
        digest,
        codes::digests(&phone, &login(), &code)[0].as_bytes()
    );
    assert_eq!(sealed.len(), code.expose().len());
    assert_ne!(sealed, code.expose().as_bytes());
    let ttl: i64 = ::redis::cmd("TTL")
        .arg(key)
        .query_async(&mut redis)
        .await
        .unwrap();
    assert!((295..=300).contains(&ttl), "TTL {ttl}");
    let mut keys: Vec<String> = ::redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut redis)
        .await
        .unwrap();
    keys.sort();
    let id = sent.id.as_str();
    // The send's verification: its state under the phone's tag, its target under its own
    // (the store is handed an id that does not say where it leads).
    let state = format!("verify_code:{{+8613800138000}}:v:{id}");
    let target = format!("verify_code:verification:{{{id}}}");
    assert_eq!(
        keys,
        [target.clone(), key.to_owned(), state.clone()],
        "a pending code and its send's verification, nothing else"
    );
    let fields: Vec<String> = ::redis::cmd("HKEYS")
        .arg(&state)
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(
        fields,
        ["g", "c", "e"],
        "the code's digest, created, expires: no code"
    );
    let binding: Vec<u8> = ::redis::cmd("HGET")
        .arg(&state)
        .arg("g")
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(binding.len(), 8, "the first 8 bytes of the code's digest");
    let target: String = ::redis::cmd("GET")
        .arg(&target)
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(target, "+8613800138000 login");
}
