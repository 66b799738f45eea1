use super::*;

fn line(name: &str, key: &str) -> String {
    format!("{name}:{}", hex::encode(Sha256::digest(key.as_bytes())))
}

#[test]
fn a_key_is_known_by_its_digest_and_answers_its_name() {
    let keys = ApiKeys::parse(&format!(
        "# billing first\n{}\n{}, {}",
        line("billing", "k1"),
        line("shop", "k2"),
        line("crm.eu-1", "k3")
    ))
    .unwrap();
    assert_eq!(keys.identify("k2").map(ApiKeyName::as_str), Some("shop"));
    assert_eq!(
        keys.identify("k3").map(ApiKeyName::as_str),
        Some("crm.eu-1")
    );
    assert_eq!(keys.identify("k4"), None);
    assert_eq!(keys.identify(""), None);
    assert!(
        !format!("{keys:?}").contains(&line("shop", "k2")[5..]),
        "Debug shows names only"
    );
}

#[test]
fn malformed_entries_are_refused_with_the_entry_named() {
    for (text, expected) in [
        ("", "at least one"),
        ("billing", "entry 1: expected name:sha256hex"),
        (
            "billing:abcd",
            "entry 1 (billing): expected the key's SHA-256",
        ),
        (&format!("bad name:{}", "0".repeat(64)), "entry 1: the name"),
        (&format!(":{}", "0".repeat(64)), "entry 1: the name"),
        (
            &format!("{},{}", line("a", "k"), line("a", "j")),
            "entry 2: the name a twice",
        ),
        (
            &format!("{},{}", line("a", "k"), line("b", "k")),
            "entry 2 (b): the same key",
        ),
    ] {
        let error = ApiKeys::parse(text).unwrap_err();
        assert!(error.contains(expected), "{text:?}: {error}");
    }
}

#[test]
fn only_required_operations_need_a_key() {
    let keys = ApiKeys::parse(&line("shop", "k2")).unwrap();
    let settings = ApiKeySettings {
        required: vec![Operation::Verify],
    };
    let gate = ApiKeyGate::new(&settings, keys);
    assert_eq!(gate.check(Operation::Send, None), Ok(None));
    assert_eq!(gate.check(Operation::Verify, None), Err(Unauthorized));
    assert_eq!(gate.check(Operation::Verify, Some("k1")), Err(Unauthorized));
    assert_eq!(
        gate.check(Operation::Verify, Some("k2"))
            .unwrap()
            .map(ApiKeyName::as_str),
        Some("shop")
    );
}

#[test]
fn a_generated_key_matches_its_line_and_never_repeats() {
    let (key, line) = generate("shop").unwrap();
    assert!(
        key.starts_with(KEY_PREFIX) && key.len() == KEY_PREFIX.len() + 43,
        "{key}"
    );
    let keys = ApiKeys::parse(&line).unwrap();
    assert_eq!(keys.identify(&key).map(ApiKeyName::as_str), Some("shop"));
    assert_ne!(generate("shop").unwrap().0, key);
    assert!(generate("bad name").is_err());
}
