//! Redis over TLS and with ACL users, on redis-servers of the test's own that listen on TLS
//! only, with certificates the test makes: a private CA lets vcode in, a certificate from an
//! unknown CA or for another host is refused, an ACL user with the documented minimal rule runs
//! every kind of request and a wrong password is refused; one node, a Cluster and Sentinel.
//! Passwords never show in the errors.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use vcode::settings::StoreSettings;
use vcode::store::redis::{RedisCredentials, RedisSettings, RedisTopology};

use crate::support::redis_tls::{
    ADMIN_PASSWORD, Authority, MASTER, SENTINEL_PASSWORD, TlsCluster, TlsRedis, TlsSentinel,
    VCODE_PASSWORD, VCODE_USER,
};
use crate::support::{Backend, TestApp, eventually, random_phone, spawn_app_with, wrong_code};

fn settings(topology: RedisTopology, ca_file: Option<&Path>) -> RedisSettings {
    RedisSettings {
        topology,
        connect_timeout: Duration::from_millis(1000),
        command_timeout: Duration::from_millis(1000),
        ca_file: ca_file.map(Path::to_path_buf),
        older_instances: false,
    }
}

fn single(url: String) -> RedisTopology {
    RedisTopology::Single { url }
}

/// vcode on these Redis settings (dev mode, the log sender).
async fn app_on(redis: RedisSettings) -> TestApp {
    spawn_app_with(Backend::Memory, |settings| {
        settings.store = StoreSettings::Redis(redis);
    })
    .await
}

fn vcode_login() -> String {
    format!("{VCODE_USER}:{VCODE_PASSWORD}")
}

fn admin_login() -> String {
    format!(":{ADMIN_PASSWORD}")
}

/// A send and its verify go through, and so do the other kinds of request vcode makes of Redis:
/// an idempotent send, a wrong code, a captcha, stats.
async fn runs_every_kind_of_request(app: &TestApp) {
    let ready = app.get("/readyz").await;
    assert_eq!(ready.status, 200, "{ready:?}");

    let number = random_phone();
    let send = || {
        app.request(
            app.client
                .post(app.url("/api/v1/otp/send"))
                .header("idempotency-key", format!("tls-{number}"))
                .json(&json!({ "phone": number })),
        )
    };
    let first = send().await;
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(
        send().await.body,
        first.body,
        "the repeat is answered from Redis"
    );
    let sent = first.verification_id();
    let code = app.last_code(&number).await;
    let wrong = wrong_code(&code);
    let mismatch = app.verify_id(&sent, wrong).await;
    assert_eq!(
        mismatch.body["data"]["remaining_attempts"], 4,
        "{mismatch:?}"
    );
    let verified = app.verify_id(&sent, &code).await;
    assert_eq!(verified.status, 200, "{verified:?}");

    let created = app.post_json("/api/v1/captcha", &Value::Null).await;
    assert_eq!(created.status, 200, "{created:?}");
    let id = created.body["data"]["captcha_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let image = app
        .client
        .get(app.url(&format!("/api/v1/captcha/{id}.png")));
    assert_eq!(image.send().await.unwrap().status(), 200);
    let answer = app.get(&format!("/api/v1/dev/captcha/{id}")).await;
    let answer = answer.body["data"]["answer"].as_str().unwrap().to_owned();
    let body = json!({ "captcha_id": id, "answer": answer });
    let solved = app.post_json("/api/v1/captcha/verify", &body).await;
    assert_eq!(solved.status, 200, "{solved:?}");

    let day = "2000-01-01".to_owned();
    app.store
        .stats
        .add_stats(&day, &[("sent", 1)])
        .await
        .unwrap();
    let stats = app.store.stats.stats(&[day]).await.unwrap();
    assert!(stats[0]["sent"] >= 1, "{stats:?}");
}

/// Redis is out of reach: `/readyz` and requests answer 503, and the store's error (what the
/// log shows) is returned, to be checked for what it says and what it must not say.
async fn refused(app: &TestApp) -> String {
    let ready = app.get("/readyz").await;
    assert_eq!((ready.status, ready.code()), (503, 50300), "{ready:?}");
    let send = app.send(&random_phone()).await;
    assert_eq!(send.status, 503, "{send:?}");
    let error = app.store.health.ping().await.expect_err("Redis refused");
    let error = error.to_string();
    for password in [
        ADMIN_PASSWORD,
        VCODE_PASSWORD,
        SENTINEL_PASSWORD,
        "wr0ng-s3cret",
    ] {
        assert!(!error.contains(password), "a password in {error}");
    }
    error
}

/// The commands and keys the server refused (`ACL LOG`). `CLIENT SETINFO` (Redis 7.2 on) is
/// left out: the redis crate names itself with it and carries on when refused.
fn refusals(server: &TlsRedis) -> Vec<String> {
    let log: Vec<HashMap<String, redis::Value>> = server.must(redis::cmd("ACL").arg("LOG"));
    log.iter()
        .map(|entry| format!("{:?}: {:?}", entry.get("reason"), entry.get("object")))
        .filter(|refusal| !refusal.contains("client|setinfo"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_private_ca_lets_vcode_use_a_tls_only_redis() {
    let authority = Authority::new("vcode test CA");
    let server = TlsRedis::data_node(&authority.identity(&["127.0.0.1"]), |_, _| Vec::new());
    let ca = authority.file();
    let url = server.url(&admin_login());
    let app = app_on(settings(single(url), Some(ca.path()))).await;
    runs_every_kind_of_request(&app).await;
    let port: (String, String) = server.must(redis::cmd("CONFIG").arg("GET").arg("port"));
    assert_eq!(port.1, "0", "the server has no plain-text port");
    let keys: u64 = server.must(&redis::cmd("DBSIZE"));
    assert!(keys > 0, "vcode's keys are on the TLS server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_certificate_from_another_ca_is_refused() {
    let trusted = Authority::new("vcode test CA");
    let rogue = Authority::new("someone else's CA");
    let server = TlsRedis::data_node(&rogue.identity(&["127.0.0.1"]), |_, _| Vec::new());
    let ca = trusted.file();
    let url = server.url(&admin_login());
    // Neither the private CA nor the public roots (no CA file) vouch for it.
    for ca_file in [Some(ca.path()), None] {
        let app = app_on(settings(single(url.clone()), ca_file)).await;
        let error = refused(&app).await;
        assert!(error.contains("UnknownIssuer"), "{error}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_certificate_for_another_host_is_refused() {
    let authority = Authority::new("vcode test CA");
    // Valid for the address only: `localhost` reaches the same server under another name.
    let server = TlsRedis::data_node(&authority.identity(&["127.0.0.1"]), |_, _| Vec::new());
    let ca = authority.file();
    let url = format!("rediss://:{ADMIN_PASSWORD}@localhost:{}", server.port());
    let app = app_on(settings(single(url), Some(ca.path()))).await;
    let error = refused(&app).await;
    assert!(error.contains("not valid for name"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_acl_user_with_the_documented_rule_gets_in_and_a_wrong_password_does_not() {
    let authority = Authority::new("vcode test CA");
    let server = TlsRedis::data_node(&authority.identity(&["127.0.0.1"]), |_, _| Vec::new());
    server.add_vcode_user(VCODE_PASSWORD);
    let ca = authority.file();
    let app = app_on(settings(
        single(server.url(&vcode_login())),
        Some(ca.path()),
    ))
    .await;
    runs_every_kind_of_request(&app).await;
    assert_eq!(
        refusals(&server),
        Vec::<String>::new(),
        "vcode was refused commands"
    );

    let wrong = server.url(&format!("{VCODE_USER}:wr0ng-s3cret"));
    let app = app_on(settings(single(wrong), Some(ca.path()))).await;
    let error = refused(&app).await;
    assert!(error.contains("uthentication"), "{error}");
    // Without a login, `default` (which has a password) lets nothing through either.
    let anonymous = format!("rediss://127.0.0.1:{}", server.port());
    let app = app_on(settings(single(anonymous), Some(ca.path()))).await;
    refused(&app).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_over_tls_with_an_acl_user() {
    let authority = Authority::new("vcode test CA");
    let cluster = TlsCluster::start(&authority.identity(&["127.0.0.1"]), 3);
    for node in &cluster.nodes {
        node.add_vcode_user(VCODE_PASSWORD);
    }
    let ca = authority.file();
    let topology = RedisTopology::Cluster {
        nodes: cluster.seeds(&vcode_login()),
    };
    let app = app_on(settings(topology.clone(), Some(ca.path()))).await;
    runs_every_kind_of_request(&app).await;
    for _ in 0..10 {
        let number = random_phone();
        assert_eq!(app.send(&number).await.status, 200);
        let code = app.last_code(&number).await;
        assert_eq!(app.verify(&number, &code).await.status, 200);
    }
    let holding_keys = cluster
        .nodes
        .iter()
        .filter(|node| node.must::<u64>(&redis::cmd("DBSIZE")) > 0)
        .count();
    assert!(holding_keys >= 2, "keys spread over the TLS nodes");

    // Without the private CA, no node is trusted; the error soon says so (the reason comes
    // from asking a seed in the background).
    let app = app_on(settings(topology, None)).await;
    refused(&app).await;
    let says_why = eventually(Duration::from_secs(3), || async {
        refused(&app).await.contains("UnknownIssuer")
    });
    assert!(says_why.await, "{}", refused(&app).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sentinel_over_tls_with_a_login_for_the_sentinel_and_one_for_the_primary() {
    let authority = Authority::new("vcode test CA");
    let deployment = TlsSentinel::start(&authority.identity(&["127.0.0.1"]));
    deployment.primary.add_vcode_user(VCODE_PASSWORD);
    let ca = authority.file();
    let topology = |password: &str| RedisTopology::Sentinel {
        sentinels: vec![deployment.sentinel_url()],
        master: MASTER.to_owned(),
        master_credentials: Some(RedisCredentials {
            username: Some(VCODE_USER.to_owned()),
            password: password.into(),
        }),
    };
    let app = app_on(settings(topology(VCODE_PASSWORD), Some(ca.path()))).await;
    runs_every_kind_of_request(&app).await;
    let keys: u64 = deployment.primary.must(&redis::cmd("DBSIZE"));
    assert!(keys > 0, "vcode's keys are on the primary");
    // The watch that follows failovers asks the sentinel over TLS too.
    let watching = eventually(Duration::from_secs(3), || async {
        let clients: String = deployment.sentinel.must(redis::cmd("CLIENT").arg("LIST"));
        clients.contains("cmd=sentinel|get-master-addr-by-name")
    });
    assert!(watching.await, "vcode's watch never asked the sentinel");

    let app = app_on(settings(topology("wr0ng-s3cret"), Some(ca.path()))).await;
    let error = refused(&app).await;
    assert!(error.contains("uthentication"), "{error}");
    let app = app_on(settings(topology(VCODE_PASSWORD), None)).await;
    let error = refused(&app).await;
    assert!(error.contains("UnknownIssuer"), "{error}");
}
