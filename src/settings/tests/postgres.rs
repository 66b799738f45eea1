//! The PostgreSQL store's variables: the URL selects it, alone; timeouts, pool, TLS's CA.

use super::redis::ca_pem;
use super::*;

fn postgres_of(s: &Settings) -> &crate::store::postgres::PostgresSettings {
    match &s.store {
        StoreSettings::Postgres(postgres) => postgres,
        _ => panic!("expected the PostgreSQL store"),
    }
}

#[test]
fn the_database_url_selects_postgres_with_bounded_defaults() {
    let s = settings(&[("VCODE_DATABASE_URL", "postgres://vcode:pw@db:5432/vcode")]).unwrap();
    let postgres = postgres_of(&s);
    assert_eq!(postgres.url, "postgres://vcode:pw@db:5432/vcode");
    assert!(postgres.connect_timeout <= Duration::from_secs(1));
    assert!(postgres.statement_timeout <= Duration::from_secs(1));
    assert_eq!(postgres.pool_size, 16);
    assert!(!postgres.uses_tls());

    let s = settings(&[
        (
            "VCODE_DATABASE_URL",
            "postgresql://db/vcode?sslmode=require",
        ),
        ("VCODE_DATABASE_STATEMENT_TIMEOUT_MS", "250"),
        ("VCODE_DATABASE_CONNECT_TIMEOUT_MS", "2000"),
        ("VCODE_DATABASE_POOL_SIZE", "4"),
    ])
    .unwrap();
    let postgres = postgres_of(&s);
    assert!(postgres.uses_tls());
    assert_eq!(postgres.statement_timeout, Duration::from_millis(250));
    assert_eq!(postgres.connect_timeout, Duration::from_secs(2));
    assert_eq!(postgres.pool_size, 4);
}

#[test]
fn exactly_one_store_may_be_set() {
    let error = settings(&[
        ("VCODE_DATABASE_URL", "postgres://db/vcode"),
        ("VCODE_REDIS_URL", "redis://127.0.0.1:6379"),
    ])
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("VCODE_DATABASE_URL") && error.contains("VCODE_REDIS_URL"),
        "{error}"
    );
}

#[test]
fn a_bad_url_is_refused_without_showing_its_password() {
    for url in [
        "mysql://vcode:hunter2@db/vcode",
        "postgres://vcode:hunter2@db/vcode?sslmode=verify-full",
    ] {
        let error = settings(&[("VCODE_DATABASE_URL", url)])
            .unwrap_err()
            .to_string();
        assert!(error.contains("VCODE_DATABASE_URL"), "{error}");
        assert!(!error.contains("hunter2"), "{error}");
    }
}

#[test]
fn the_password_is_hidden_from_debug() {
    let s = settings(&[("VCODE_DATABASE_URL", "postgres://vcode:hunter2@db/vcode")]).unwrap();
    assert_debug_hides(&s, &["hunter2"], &["postgres://vcode:***@db/vcode"]);
}

#[test]
fn a_private_ca_file_is_read_for_sslmode_require_only() {
    let ca = temp_file("pg-ca.pem", &ca_pem());
    let ca_var = ("VCODE_DATABASE_CA_FILE", ca.to_str().unwrap());
    let s = settings(&[
        ("VCODE_DATABASE_URL", "postgres://db/vcode?sslmode=require"),
        ca_var,
    ])
    .unwrap();
    assert_eq!(postgres_of(&s).ca_file.as_deref(), Some(ca.as_path()));
    for url in ["postgres://db/vcode", "postgres://db/vcode?sslmode=prefer"] {
        let error = settings(&[("VCODE_DATABASE_URL", url), ca_var])
            .unwrap_err()
            .to_string();
        assert!(error.contains("sslmode=require"), "{error}");
    }
    let alone = settings(&[ca_var]).unwrap_err().to_string();
    assert!(alone.contains("VCODE_DATABASE_URL"), "{alone}");
}

#[test]
fn a_url_with_a_password_may_come_from_a_file() {
    let path = temp_file("database-url", "postgres://vcode:fil3-s3cret@db/vcode\n");
    let file = ("VCODE_DATABASE_URL_FILE", path.to_str().unwrap());
    let s = settings(&[file]).unwrap();
    match &s.store {
        StoreSettings::Postgres(postgres) => {
            assert_eq!(postgres.url, "postgres://vcode:fil3-s3cret@db/vcode");
        }
        other => panic!("{other:?}"),
    }
    assert!(!format!("{s:?}").contains("fil3-s3cret"));
    let both = settings(&[file, ("VCODE_DATABASE_URL", "postgres://db/vcode")]).unwrap_err();
    assert!(both.to_string().contains("not both"), "{both}");
    std::fs::remove_file(path).unwrap();
}
