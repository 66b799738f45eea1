use base64::engine::general_purpose::STANDARD;
use jsonwebtoken::{DecodingKey, Validation, decode, decode_header};

use super::*;

/// A PEM PKCS#8 Ed25519 private key with this seed, as `openssl genpkey` writes one.
fn pem(seed: u8) -> String {
    let der = [
        &[
            0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22,
            0x04, 0x20,
        ][..],
        &[seed; 32][..],
    ]
    .concat();
    format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        STANDARD.encode(der)
    )
}

fn issuer(pem_text: &str) -> TokenIssuer {
    TokenIssuer::new(
        parse_pem_keys(pem_text).expect("valid keys"),
        TokenSettings {
            issuer: "https://vcode.example".to_owned(),
            ttl: Duration::from_secs(120),
        },
    )
}

/// Decodes `token` with the JWKS key its header names, checking `iss` and, if given, `aud`.
fn check(issuer: &TokenIssuer, token: &str, aud: Option<&str>) -> Result<Claims, String> {
    let header = decode_header(token).map_err(|e| e.to_string())?;
    let kid = header.kid.ok_or("no kid")?;
    let jwk = issuer.jwks().find(&kid).ok_or("kid not published")?;
    let key = DecodingKey::from_jwk(jwk).map_err(|e| e.to_string())?;
    let mut validation = Validation::new(Algorithm::EdDSA);
    validation.set_issuer(&["https://vcode.example"]);
    validation.set_required_spec_claims(&["exp", "iss", "sub"]);
    match aud {
        Some(aud) => validation.set_audience(&[aud]),
        None => validation.validate_aud = false,
    }
    decode::<Claims>(token, &key, &validation)
        .map(|data| data.claims)
        .map_err(|e| e.to_string())
}

#[test]
fn a_token_carries_the_claims_and_expires_after_the_ttl() {
    let issuer = issuer(&pem(1));
    let audience = Audience::parse("https://app.example/login").expect("valid");
    let token = issuer
        .issue("+8613800138000", "login", Some(&audience))
        .expect("signed");
    let claims = check(&issuer, &token, Some("https://app.example/login")).expect("valid");
    assert_eq!(claims.iss, "https://vcode.example");
    assert_eq!(claims.sub, "+8613800138000");
    assert_eq!(claims.purpose, "login");
    assert_eq!(claims.aud.as_deref(), Some("https://app.example/login"));
    assert_eq!(claims.exp - claims.iat, 120);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(claims.iat.abs_diff(now) <= 2);
    // 16 random bytes, and never twice the same.
    assert_eq!(URL_SAFE_NO_PAD.decode(&claims.jti).unwrap().len(), 16);
    let again = check(
        &issuer,
        &issuer.issue("+8613800138000", "login", None).unwrap(),
        None,
    )
    .unwrap();
    assert_ne!(again.jti, claims.jti);
    assert_eq!(again.aud, None);
    // Another audience is refused by a backend that checks its own.
    assert!(check(&issuer, &token, Some("https://other.example")).is_err());
}

#[test]
fn an_expired_token_is_refused() {
    let issuer = issuer(&pem(1));
    let mut claims = check(
        &issuer,
        &issuer.issue("+14155550100", "login", None).unwrap(),
        None,
    )
    .unwrap();
    claims.iat -= 1000;
    claims.exp = claims.iat + 120;
    let stale = jsonwebtoken::encode(&issuer.header, &claims, &issuer.keys[0].private).unwrap();
    let error = check(&issuer, &stale, None).expect_err("expired");
    assert!(error.contains("Expired"), "{error}");
}

#[test]
fn the_first_key_signs_and_every_key_is_published() {
    let rotated = issuer(&format!("{}\n{}", pem(2), pem(1)));
    let old = issuer(&pem(1));
    assert_eq!(rotated.jwks().keys.len(), 2);
    let kids: Vec<_> = rotated
        .jwks()
        .keys
        .iter()
        .map(|jwk| jwk.common.key_id.clone().unwrap())
        .collect();
    assert_eq!(kids[0], rotated.signing_kid());
    assert_eq!(kids[1], old.signing_kid(), "the old key is still published");
    assert_ne!(kids[0], kids[1]);
    let token = rotated.issue("+14155550100", "login", None).unwrap();
    assert_eq!(
        decode_header(&token).unwrap().kid.as_deref(),
        Some(&*kids[0])
    );
    // A token of the old key, issued before the rotation, still verifies.
    let before = old.issue("+14155550100", "login", None).unwrap();
    assert!(check(&rotated, &before, None).is_ok());
    // Each JWK says what it is for.
    let jwk = serde_json::to_value(&rotated.jwks().keys[0]).unwrap();
    assert_eq!(jwk["kty"], "OKP");
    assert_eq!(jwk["crv"], "Ed25519");
    assert_eq!(jwk["alg"], "EdDSA");
    assert_eq!(jwk["use"], "sig");
    assert!(jwk.get("d").is_none(), "no private part: {jwk}");
}

#[test]
fn a_tampered_token_or_one_of_another_key_is_refused() {
    let issuer = issuer(&pem(1));
    let token = issuer.issue("+14155550100", "login", None).unwrap();
    let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
    let mut claims: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&parts[1]).unwrap()).unwrap();
    claims["sub"] = "+14155550199".into();
    parts[1] = URL_SAFE_NO_PAD.encode(claims.to_string());
    assert!(check(&issuer, &parts.join("."), None).is_err());
    // Same kid, but signed by a key that is not the published one.
    let forger = self::issuer(&pem(9));
    let mut forged_header = forger.header.clone();
    forged_header.kid = Some(issuer.signing_kid().to_owned());
    let claims = check(&issuer, &token, None).unwrap();
    let forged = jsonwebtoken::encode(&forged_header, &claims, &forger.keys[0].private).unwrap();
    assert!(check(&issuer, &forged, None).is_err());
}

#[test]
fn key_files_are_pkcs8_ed25519_blocks_only() {
    assert!(parse_pem_keys("").is_err());
    assert!(parse_pem_keys("not a key").is_err());
    assert!(parse_pem_keys(&format!("{}{}", pem(1), pem(1))).is_err());
    let truncated = pem(1).replace("-----END PRIVATE KEY-----", "");
    assert!(parse_pem_keys(&truncated).is_err());
    let rsa_like = "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n";
    let error = parse_pem_keys(rsa_like).unwrap_err();
    assert!(error.contains("block 1"), "{error}");
    // Seeds are secret: the same seed gives the same kid on every instance.
    assert_eq!(
        SigningKey::from_seed(&[1; 32]).kid,
        parse_pem_keys(&pem(1)).unwrap()[0].kid
    );
}

#[test]
fn audiences_and_issuers_are_bounded_visible_ascii() {
    assert!(Audience::parse("https://app.example").is_some());
    assert!(Audience::parse(&"a".repeat(256)).is_some());
    assert!(Audience::parse(&"a".repeat(257)).is_none());
    assert!(Audience::parse("").is_none());
    assert!(Audience::parse("has space").is_none());
    assert!(Audience::parse("new\nline").is_none());
    assert!(Audience::parse("caf\u{e9}").is_none());
}

#[test]
fn the_token_is_byte_for_byte_what_jsonwebtoken_encodes() {
    // Ed25519 signatures are deterministic: the same claims give the same token both ways.
    let issuer = issuer(&format!("{}{}", pem(3), pem(4)));
    let audience = Audience::parse("shop").unwrap();
    let token = issuer
        .issue("+14155550100", "reset_password", Some(&audience))
        .unwrap();
    let claims = check(&issuer, &token, Some("shop")).unwrap();
    assert_eq!(issuer.issue_with_jsonwebtoken(&claims), token);
}
