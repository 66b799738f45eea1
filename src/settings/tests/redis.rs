//! The Redis store's variables: one node, a Cluster or Sentinel, timeouts, TLS and logins.

use super::*;

#[test]
fn redis_settings_have_timeouts_of_at_most_a_second_by_default() {
    let s = settings(&[("VCODE_REDIS_URL", "redis://127.0.0.1:6390")]).unwrap();
    let StoreSettings::Redis(redis) = s.store else {
        panic!("expected the Redis store")
    };
    assert!(redis.connect_timeout <= Duration::from_secs(1));
    assert!(redis.command_timeout <= Duration::from_secs(1));
}

#[test]
fn redis_is_one_node_a_cluster_or_sentinel() {
    let topology = |vars: &[(&str, &str)]| match settings(vars).unwrap().store {
        StoreSettings::Redis(redis) => redis.topology,
        _ => panic!("expected the Redis store"),
    };
    assert_eq!(
        topology(&[("VCODE_REDIS_URL", "redis://127.0.0.1:6390/2")]),
        RedisTopology::Single {
            url: "redis://127.0.0.1:6390/2".to_owned()
        }
    );
    assert_eq!(
        topology(&[(
            "VCODE_REDIS_CLUSTER_NODES",
            "redis://10.0.0.1:7000, redis://10.0.0.2:7000"
        )]),
        RedisTopology::Cluster {
            nodes: vec![
                "redis://10.0.0.1:7000".to_owned(),
                "redis://10.0.0.2:7000".to_owned()
            ]
        }
    );
    assert_eq!(
        topology(&[
            (
                "VCODE_REDIS_SENTINELS",
                "redis://10.0.0.1:26379,redis://10.0.0.2:26379"
            ),
            ("VCODE_REDIS_SENTINEL_MASTER", "vcode-main"),
        ]),
        RedisTopology::Sentinel {
            sentinels: vec![
                "redis://10.0.0.1:26379".to_owned(),
                "redis://10.0.0.2:26379".to_owned()
            ],
            master: "vcode-main".to_owned(),
            master_credentials: None,
        }
    );
}

#[test]
fn two_redis_topologies_or_half_a_sentinel_setting_are_refused() {
    let url = ("VCODE_REDIS_URL", "redis://127.0.0.1:6390");
    let nodes = ("VCODE_REDIS_CLUSTER_NODES", "redis://127.0.0.1:7000");
    let sentinels = ("VCODE_REDIS_SENTINELS", "redis://127.0.0.1:26379");
    let master = ("VCODE_REDIS_SENTINEL_MASTER", "mymaster");
    for vars in [
        vec![url, nodes],
        vec![url, sentinels, master],
        vec![nodes, sentinels, master],
        vec![url, master],
    ] {
        let error = settings(&vars).unwrap_err().to_string();
        for var in [url.0, nodes.0, sentinels.0, master.0] {
            assert!(error.contains(var), "{vars:?}: {error}");
        }
    }
    for half in [sentinels, master] {
        let error = settings(&[half]).unwrap_err().to_string();
        assert!(
            error.contains(sentinels.0) && error.contains(master.0),
            "{error}"
        );
    }
    let bad_sentinel = settings(&[(sentinels.0, "127.0.0.1:26379"), master]).unwrap_err();
    assert!(bad_sentinel.to_string().contains(sentinels.0));
    let bad_name = settings(&[sentinels, (master.0, "my master")]).unwrap_err();
    assert!(bad_name.to_string().contains(master.0));
}

pub(super) fn ca_pem() -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.self_signed(&key).unwrap().pem()
}

#[test]
fn a_private_ca_file_is_read_for_rediss_urls_only() {
    let ca = temp_file("ca.pem", &ca_pem());
    let ca_var = ("VCODE_REDIS_CA_FILE", ca.to_str().unwrap());
    let master = ("VCODE_REDIS_SENTINEL_MASTER", "m");
    for topology in [
        vec![("VCODE_REDIS_URL", "rediss://127.0.0.1:6390")],
        vec![(
            "VCODE_REDIS_CLUSTER_NODES",
            "rediss://10.0.0.1:7000,rediss://10.0.0.2:7000",
        )],
        vec![("VCODE_REDIS_SENTINELS", "rediss://10.0.0.1:26379"), master],
    ] {
        let s = settings(&[&topology[..], &[ca_var]].concat()).unwrap();
        assert_eq!(redis_of(&s).ca_file.as_deref(), Some(ca.as_path()));
        assert!(format!("{s:?}").contains(ca_var.1));
    }
    let plain = settings(&[("VCODE_REDIS_URL", "redis://127.0.0.1:6390"), ca_var]);
    assert!(plain.unwrap_err().to_string().contains(ca_var.0));

    let not_pem = temp_file("not-a-ca.pem", "not a certificate\n");
    let missing = ca.with_extension("missing");
    for (path, reason) in [(&not_pem, "no PEM certificate"), (&missing, "cannot read")] {
        let error = settings(&[
            ("VCODE_REDIS_URL", "rediss://127.0.0.1:6390"),
            (ca_var.0, path.to_str().unwrap()),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            error.contains(ca_var.0) && error.contains(reason),
            "{error}"
        );
    }
    let _ = std::fs::remove_file(ca);
    let _ = std::fs::remove_file(not_pem);
}

#[test]
fn insecure_tls_and_mixed_schemes_are_refused_without_showing_passwords() {
    let master = ("VCODE_REDIS_SENTINEL_MASTER", "m");
    for (vars, reason) in [
        (
            vec![(
                "VCODE_REDIS_URL",
                "rediss://:s3cret@127.0.0.1:6390/#insecure",
            )],
            "#insecure",
        ),
        (
            vec![(
                "VCODE_REDIS_CLUSTER_NODES",
                "rediss://:s3cret@10.0.0.1:7000/#insecure",
            )],
            "#insecure",
        ),
        (
            vec![
                (
                    "VCODE_REDIS_SENTINELS",
                    "rediss://:s3cret@10.0.0.1:26379/#insecure",
                ),
                master,
            ],
            "#insecure",
        ),
        (
            vec![(
                "VCODE_REDIS_CLUSTER_NODES",
                "rediss://:s3cret@10.0.0.1:7000,redis://:s3cret@10.0.0.2:7000",
            )],
            "mixes",
        ),
        (
            vec![
                (
                    "VCODE_REDIS_SENTINELS",
                    "redis://:s3cret@10.0.0.1:26379,rediss://:s3cret@10.0.0.2:26379",
                ),
                master,
            ],
            "mixes",
        ),
    ] {
        let error = settings(&vars).unwrap_err().to_string();
        assert!(
            error.contains(vars[0].0) && error.contains(reason),
            "{error}"
        );
        assert!(!error.contains("s3cret"), "{error}");
    }
}

#[test]
fn sentinel_master_credentials_log_in_to_the_primary_and_stay_hidden() {
    let sentinel = [
        ("VCODE_REDIS_SENTINELS", "rediss://:sent1nel@10.0.0.1:26379"),
        ("VCODE_REDIS_SENTINEL_MASTER", "vcode-main"),
    ];
    let user = ("VCODE_REDIS_SENTINEL_MASTER_USERNAME", "vcode");
    let password = ("VCODE_REDIS_SENTINEL_MASTER_PASSWORD", "d4ta-s3cret");
    let credentials = |vars: &[(&str, &str)]| {
        let s = settings(&[&sentinel[..], vars].concat()).unwrap();
        assert_debug_hides(&s, &["d4ta-s3cret", "sent1nel"], &["master_credentials"]);
        match &redis_of(&s).topology {
            RedisTopology::Sentinel {
                master_credentials, ..
            } => master_credentials.clone(),
            other => panic!("expected Sentinel, not {other:?}"),
        }
    };
    assert_eq!(credentials(&[]), None);
    let both = credentials(&[user, password]).unwrap();
    assert_eq!(both.username.as_deref(), Some("vcode"));
    assert_eq!(both.password.expose_secret(), "d4ta-s3cret");
    assert_eq!(credentials(&[password]).unwrap().username, None);

    let alone = settings(&[&sentinel[..], &[user]].concat()).unwrap_err();
    assert!(alone.to_string().contains(password.0), "{alone}");
    let not_sentinel =
        settings(&[("VCODE_REDIS_URL", "redis://127.0.0.1:6390"), password]).unwrap_err();
    assert!(not_sentinel.to_string().contains("VCODE_REDIS_SENTINELS"));
    assert!(!not_sentinel.to_string().contains(password.1));
}
