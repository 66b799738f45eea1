//! Passwords and tokens never show: not in `Debug` (logs, tests), not in errors.

use super::*;
use crate::config::redact::redact_url;

/// What the redis crate will connect with: `host:port` and the password.
fn connection_info(url: &str) -> (String, Option<String>) {
    let client = ::redis::Client::open(url).unwrap();
    let info = client.get_connection_info();
    (
        info.addr().to_string(),
        info.redis_settings().password().map(str::to_owned),
    )
}

#[test]
fn debug_hides_the_password_of_a_single_redis_url() {
    for (url, secrets, shown, host, password) in [
        (
            "redis://:s3cret@127.0.0.1:6390/0",
            &["s3cret"][..],
            &["redis://:***@127.0.0.1:6390/0"][..],
            "127.0.0.1:6390",
            "s3cret",
        ),
        (
            "redis://vcode:s3cret@redis.internal:6379/2",
            &["s3cret"],
            &["redis://vcode:***@redis.internal:6379/2"],
            "redis.internal:6379",
            "s3cret",
        ),
        (
            "rediss://default:s3cret@cache.example.com:6380",
            &["s3cret"],
            &["rediss://default:***@cache.example.com:6380"],
            "cache.example.com:6380",
            "s3cret",
        ),
        // `@` and `:` in the password: the host is after the last `@`.
        (
            "redis://vcode:p@ss:w0rd@10.1.2.3:6379/1",
            &["p@ss", "ss:w0rd", "w0rd", "p%40ss"],
            &["redis://vcode:***@10.1.2.3:6379/1"],
            "10.1.2.3:6379",
            "p@ss:w0rd",
        ),
        // Percent-encoded, hidden as written; the redis crate decodes it.
        (
            "redis://:s3cr%40t%3A1@10.1.2.3:6379",
            &["s3cr", "%40t", "t%3A1"],
            &["redis://:***@10.1.2.3:6379"],
            "10.1.2.3:6379",
            "s3cr@t:1",
        ),
    ] {
        let s = settings(&[("VCODE_REDIS_URL", url)]).unwrap();
        assert_debug_hides(&s, secrets, shown);
        // The connection still gets the real URL, password included.
        let real = RedisTopology::Single {
            url: url.to_owned(),
        };
        assert_eq!(redis_of(&s).topology, real);
        let (addr, real_password) = connection_info(url);
        assert_eq!(addr, host);
        assert_eq!(real_password.as_deref(), Some(password));
    }
}

#[test]
fn debug_hides_the_passwords_of_cluster_nodes() {
    let nodes = "rediss://:n0de-s3cret@10.0.0.1:7000, rediss://vcode:other-s3cret@10.0.0.2:7001";
    let s = settings(&[("VCODE_REDIS_CLUSTER_NODES", nodes)]).unwrap();
    assert_debug_hides(
        &s,
        &["n0de-s3cret", "other-s3cret"],
        &[
            "Cluster",
            "rediss://:***@10.0.0.1:7000",
            "rediss://vcode:***@10.0.0.2:7001",
        ],
    );
    let RedisTopology::Cluster { nodes } = &redis_of(&s).topology else {
        panic!("expected a Cluster")
    };
    assert_eq!(
        nodes,
        &[
            "rediss://:n0de-s3cret@10.0.0.1:7000",
            "rediss://vcode:other-s3cret@10.0.0.2:7001"
        ]
    );
    let real: Vec<Option<String>> = nodes.iter().map(|url| connection_info(url).1).collect();
    assert_eq!(
        real,
        [
            Some("n0de-s3cret".to_owned()),
            Some("other-s3cret".to_owned())
        ]
    );
}

#[test]
fn debug_hides_the_passwords_of_sentinels() {
    let sentinels = "redis://:sent1nel-s3cret@10.0.0.1:26379,redis://admin:a@b:c@sentinel-2.internal:26379,redis://10.0.0.3:26379";
    let s = settings(&[
        ("VCODE_REDIS_SENTINELS", sentinels),
        ("VCODE_REDIS_SENTINEL_MASTER", "vcode-main"),
    ])
    .unwrap();
    assert_debug_hides(
        &s,
        &["sent1nel-s3cret", "a@b", "b:c", "a%40b"],
        &[
            "redis://:***@10.0.0.1:26379",
            "redis://admin:***@sentinel-2.internal:26379",
            // No password: shown as it is.
            "redis://10.0.0.3:26379",
            "vcode-main",
        ],
    );
    let RedisTopology::Sentinel {
        sentinels, master, ..
    } = &redis_of(&s).topology
    else {
        panic!("expected Sentinel")
    };
    assert_eq!(master, "vcode-main");
    let real: Vec<(String, Option<String>)> =
        sentinels.iter().map(|url| connection_info(url)).collect();
    assert_eq!(
        real,
        [
            (
                "10.0.0.1:26379".to_owned(),
                Some("sent1nel-s3cret".to_owned())
            ),
            (
                "sentinel-2.internal:26379".to_owned(),
                Some("a@b:c".to_owned())
            ),
            ("10.0.0.3:26379".to_owned(), None),
        ]
    );
}

#[test]
fn invalid_urls_in_errors_do_not_show_their_passwords() {
    for (var, value, shown) in [
        (
            "VCODE_REDIS_URL",
            "http://:s3cret@10.0.0.1:6379",
            "http://:***@10.0.0.1:6379",
        ),
        (
            "VCODE_REDIS_URL",
            "redis:/vcode:s3cret@10.0.0.1:6379",
            "redis:***@10.0.0.1:6379",
        ),
        (
            "VCODE_REDIS_CLUSTER_NODES",
            "redis://:s3cret@10.0.0.1:7000, :s3cret@10.0.0.2:7000",
            "redis://:***@10.0.0.1:7000,:***@10.0.0.2:7000",
        ),
        (
            "VCODE_SMS_WEBHOOK_URL",
            "ftp://sms:s3cret@gateway.example/?token=s3cret",
            "ftp://sms:***@gateway.example/?token=***",
        ),
    ] {
        let mut vars = vec![(var, value)];
        if var == "VCODE_SMS_WEBHOOK_URL" {
            vars.push(("VCODE_SMS", "webhook"));
        }
        let error = settings(&vars).unwrap_err();
        for text in [error.to_string(), format!("{error:?}")] {
            assert!(!text.contains("s3cret"), "{text}");
            assert!(text.contains(var) || text.contains("Invalid"), "{text}");
            assert!(text.contains(shown), "{shown:?} missing from {text}");
        }
    }
}

#[test]
fn url_passwords_are_hidden_whatever_they_contain() {
    for (url, redacted) in [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://vcode@10.0.0.1", "redis://vcode@10.0.0.1"),
        ("redis://vcode:@10.0.0.1", "redis://vcode:@10.0.0.1"),
        ("redis://:a@b@10.0.0.1:6379", "redis://:***@10.0.0.1:6379"),
        (
            "redis://:a/b?c#d@10.0.0.1:6379/3",
            "redis://:***@10.0.0.1:6379/3",
        ),
        (
            "rediss://u:p@10.0.0.1:6380/#insecure",
            "rediss://u:***@10.0.0.1:6380/#insecure",
        ),
        ("redis://[::1]:6379", "redis://[::1]:6379"),
        ("redis://:p@[::1]:6379", "redis://:***@[::1]:6379"),
    ] {
        assert_eq!(redact_url(url), redacted, "{url}");
    }
}
